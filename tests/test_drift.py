"""Drift between two snapshots (rag_eval.statistics.snapshot_drift, `rag-eval drift`): each cause on hand-built
snapshots, the undetermined cases with their reason, the paired change in recall@budget, result folders read back as
pipeline results, and the command end to end."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html.parser import HTMLParser

import numpy as np
import pytest

from rag_eval.cli import main
from rag_eval.data import Qrels
from rag_eval.data.spans import ChunkRef
from rag_eval.data.traces import content_id
from rag_eval.renderers.result_folder import load_results
from rag_eval.reports import evaluate
from rag_eval.stages import Hit, Pipeline, Reranker, Retriever
from rag_eval.statistics.snapshot_drift import Drift, drift


class Table(Retriever):
    """Answers each query with the ranking given for it, each hit with its text from ``corpus``."""

    def __init__(self, rankings: Mapping[str, Sequence[str]], corpus: Mapping[str, str], version: str) -> None:
        super().__init__("ret", version=version)
        self.rankings, self.corpus = rankings, corpus

    def search(self, query: str, k: int) -> list[Hit]:
        docs = self.rankings[query][:k]
        return [Hit(d, float(len(docs) - i), text=self.corpus.get(d)) for i, d in enumerate(docs)]


class Keep(Reranker):
    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        return list(hits)


def snapshot(rankings, corpus, version="v1", budget=2, depth=10):
    return Pipeline(Table(rankings, corpus, version), depth=depth, budget=budget).run({q: q for q in rankings})


BEFORE = {"a": "alpha", "b": "beta", "c": "gamma", "d": "delta", "e": "epsilon"}
AFTER = {**{k: v for k, v in BEFORE.items() if k != "d"}, "b": "beta, rewritten", "n1": "new one", "n2": "new two"}
QRELS = {"q1": {"a": 1}, "q2": {"b": 2}, "q3": {"d": 1}, "q4": {"c": 1}, "q5": {"e": 1, "x": 0}}
RANK_BEFORE = {"q1": ["a", "b", "c"], "q2": ["b", "c"], "q3": ["d", "a"], "q4": ["c", "a"], "q5": ["a", "b", "e"]}
RANK_AFTER = {"q1": ["n1", "n2", "a"], "q2": ["c", "a", "b"], "q3": ["c", "a"], "q4": ["a", "e", "c"], "q5": ["e"]}


@pytest.fixture(scope="module")
def found() -> Drift:
    before = snapshot(RANK_BEFORE, BEFORE)
    after = snapshot(RANK_AFTER, AFTER, version="v2")
    return drift(before, after, QRELS, corpus_before=BEFORE, corpus_after=AFTER)


def _row(found: Drift, query: str) -> dict:
    (row,) = found.items[found.items["query_id"] == query].to_dict("records")
    return row


def test_each_cause_of_a_lost_item_on_hand_built_snapshots(found):
    crowded = _row(found, "q1")
    assert (crowded["direction"], crowded["doc_id"], crowded["stage"], crowded["cause"]) == (
        "lost",
        "a",
        "ret",
        "crowded_out",
    )
    assert crowded["detail"] == (
        "2 new document(s) (absent from the corpus before) above it, now at rank 3, cut 2: n1, n2"
    )
    changed = _row(found, "q2")
    assert (changed["cause"], changed["grade"]) == ("content_changed", 2)
    assert changed["detail"] == f"content {content_id('beta')} -> {content_id('beta, rewritten')}"
    assert _row(found, "q3")["cause"] == "removed"
    stage = _row(found, "q4")
    assert stage["cause"] == "stage_changed"
    assert stage["detail"].endswith("now at rank 3, cut 2")
    gained = _row(found, "q5")  # e: at rank 3 before (cut 2), first after; the stage changed
    assert (gained["direction"], gained["cause"]) == ("gained", "stage_changed")


def test_counts_per_cause_stage_and_query(found):
    causes = found.by_cause()
    assert dict(zip(zip(causes["direction"], causes["cause"]), causes["items"])) == {
        ("lost", "crowded_out"): 1,
        ("lost", "content_changed"): 1,
        ("lost", "removed"): 1,
        ("lost", "stage_changed"): 1,
        ("gained", "stage_changed"): 1,
    }
    stages = found.by_stage()
    assert stages.loc[stages["cause"] == "removed", "stage"].tolist() == ["(none)"]  # an item's own cause: no stage
    top = found.queries(2)
    assert top["query_id"].tolist() == ["q1", "q2"]
    assert top[["lost", "gained", "net"]].to_numpy().tolist() == [[1, 0, 1], [1, 0, 1]]
    assert found.queries()["net"].tolist() == [1, 1, 1, 1, -1]


def test_the_paired_change_in_recall_at_budget_rests_on_the_queries_paired(found):
    # before: q1-q4 delivered (1 each), q5 0 of 1; after: q5 only
    assert (found.recall_before, found.recall_after, found.diff) == (0.8, 0.2, pytest.approx(-0.6))
    assert found.n == 5
    assert found.left_out == "n 5 paired; none left out; fewer than 6: no interval"
    assert np.isnan(found.ci[0]) and np.isnan(found.p)
    assert found.method == "randomization, min n 6"
    assert found.verdict().startswith("recall@budget 0.8000 -> 0.2000 (-0.6000, no interval, p n/a;")
    # the same values as the reports' recall@budget of each side
    before = evaluate(QRELS, snapshot(RANK_BEFORE, BEFORE)).mean("ret %10 %budget(2)", "recall@budget", "ret")
    assert before == pytest.approx(0.8)


def test_the_interval_and_test_when_enough_queries_are_paired():
    queries = [f"q{i}" for i in range(8)]
    corpus = {"a": "a", "b": "b", "c": "c"}
    qrels = {q: {"a": 1} for q in queries}
    before = snapshot({q: ["a", "b", "c"] for q in queries}, corpus)
    after = snapshot({q: (["b", "c", "a"] if i < 6 else ["a", "b"]) for i, q in enumerate(queries)}, corpus, "v2")
    found = drift(before, after, qrels, corpus_before=corpus, corpus_after=corpus, test="t")
    assert found.diff == pytest.approx(-0.75)
    assert found.n == 8 and found.method == "t, min n 2"
    assert found.p < 0.01 and found.ci[1] < 0  # every query lost or kept: the interval lies below 0
    assert found.by_cause()["items"].tolist() == [6]


def test_chunking_changed_names_the_chunks_its_span_now_falls_in():
    before_corpus = {"doc#0-10": "0123456789", "other": "x"}
    after_corpus = {"doc#0-5": "01234", "doc#5-20": "56789 and more", "other": "x"}
    chunks_before = {"doc#0-10": ChunkRef("doc", 0, 10), "other": ChunkRef("other", 0, 1)}
    chunks_after = {
        "doc#0-5": ChunkRef("doc", 0, 5),
        "doc#5-20": ChunkRef("doc", 5, 20),
        "other": ChunkRef("other", 0, 1),
    }
    before = snapshot({"q": ["doc#0-10", "other"]}, before_corpus)
    after = snapshot({"q": ["doc#0-5", "other"]}, after_corpus)
    qrels = {"q": {"doc#0-10": 1}}
    found = drift(
        before,
        after,
        qrels,
        corpus_before=before_corpus,
        corpus_after=after_corpus,
        chunks_before=chunks_before,
        chunks_after=chunks_after,
    )
    row = _row(found, "q")
    assert row["cause"] == "chunking_changed"
    assert row["detail"] == "its span [0, 10) of 'doc' now falls in 2 other chunk(s): doc#0-5, doc#5-20"
    # without chunk maps the same item is removed, and the detail says why it cannot tell re-chunking apart
    plain = _row(drift(before, after, qrels, corpus_before=before_corpus, corpus_after=after_corpus), "q")
    assert plain["cause"] == "removed" and "no chunk maps given" in plain["detail"]
    # its source document gone too: removed
    gone = {"other2": ChunkRef("other", 0, 1)}
    kept = {"other2": "x"}
    row = _row(
        drift(
            before,
            snapshot({"q": ["other2"]}, kept),
            qrels,
            corpus_before=before_corpus,
            corpus_after=kept,
            chunks_before=chunks_before,
            chunks_after=gone,
        ),
        "q",
    )
    assert row["cause"] == "removed" and row["detail"].endswith("so is its source document 'doc'")


def test_undetermined_says_why_and_never_guesses():
    corpus = {"a": "a", "b": "b", "c": "c"}
    before = snapshot({"q1": ["a", "b"], "q2": ["a", "b", "c"]}, corpus)
    # no corpus given, and a is in no ranking after: removed, or past the depth?
    after = snapshot({"q1": ["b", "c"], "q2": ["b", "c", "a"]}, corpus)
    found = drift(before, after, {"q1": {"a": 1}, "q2": {"a": 1}})
    assert _row(found, "q1")["cause"] == "undetermined"
    assert _row(found, "q1")["detail"] == (
        "in no ranking of the query and no corpus given: removed or fallen past the depth"
    )
    # q2: the same fingerprint (version v1 both sides), the same content, no new document: nothing explains it
    row = _row(found, "q2")
    assert (row["cause"], row["stage"]) == ("undetermined", "ret")
    assert row["detail"].startswith("moved at stage 'ret' (same fingerprint, same content), now at rank 3, cut 2")
    # hits without text and no corpus: the content cannot be compared
    bare = {}
    found = drift(snapshot({"q": ["a", "b"]}, bare), snapshot({"q": ["b", "c", "a"]}, bare), {"q": {"a": 1}})
    assert _row(found, "q")["detail"] == "its content before is unknown (no corpus given, no text in the hits)"


def test_crowded_out_from_the_rankings_alone_says_so():
    corpus = {"a": "a", "b": "b", "n": "n"}
    before = snapshot({"q": ["a", "b"]}, corpus)
    after = snapshot({"q": ["n", "b", "a"]}, corpus)  # n in no ranking before; the same stage (v1)
    row = _row(drift(before, after, {"q": {"a": 1}}), "q")
    assert row["cause"] == "crowded_out"
    assert row["detail"] == "1 new document(s) (in no ranking before) above it, now at rank 3, cut 2: n"


def test_a_gained_item_reads_the_causes_the_other_way_round():
    before_corpus = {"a": "a", "b": "b"}
    after_corpus = {"a": "a", "b": "b", "r": "r"}
    before = snapshot({"q": ["a", "b"]}, before_corpus)
    after = snapshot({"q": ["r", "a"]}, after_corpus)
    found = drift(before, after, {"q": {"r": 1}}, corpus_before=before_corpus, corpus_after=after_corpus)
    assert found.items[["direction", "doc_id", "cause"]].to_numpy().tolist() == [["gained", "r", "added"]]


def test_refusals():
    one = snapshot({"q": ["a"]}, {})
    with pytest.raises(TypeError, match="PipelineResult"):
        drift(one, {"q": ["a"]}, {"q": {"a": 1}})  # type: ignore[arg-type]
    two = Pipeline(Table({"q": ["a"]}, {}, "v1"), Keep("keep"), depth=3, budget=1)
    with pytest.raises(Exception, match="drift pairs stages by position"):
        drift(one, two.run({"q": "q"}), {"q": {"a": 1}})


def test_the_stage_where_an_item_fell_out_of_a_two_stage_pipeline():
    corpus = {d: d for d in "abcd"}
    grown = {**corpus, "n1": "n1", "n2": "n2"}

    def two(rankings, version):
        return Pipeline(Table(rankings, grown, version), Keep("keep"), depth=3, budget=3).run({"q": "q"})

    before = two({"q": ["b", "a", "c"]}, "v1")
    after = two({"q": ["n1", "n2", "b", "a"]}, "v2")  # a: past the first stage's depth 3, two new documents above
    row = _row(drift(before, after, {"q": {"a": 1}}, corpus_before=corpus, corpus_after=grown), "q")
    assert (row["stage"], row["cause"]) == ("ret", "crowded_out")
    assert (
        row["detail"]
        == "2 new document(s) (absent from the corpus before) above it, now past its output of 3, cut 3: n1, n2"
    )


def _folder(tmp_path, name, rankings, corpus, version):
    result = snapshot(rankings, corpus, version)
    report = evaluate(QRELS, result)
    report.save_folder(tmp_path / name, qrels=QRELS, runs=result, plots=False)
    return result, tmp_path / name


def test_a_result_folder_reads_back_as_the_pipeline_result(tmp_path):
    result, folder = _folder(tmp_path, "before", RANK_BEFORE, BEFORE, "v1")
    (loaded,) = load_results(folder).values()
    stage = loaded.stages["ret"]
    assert stage.fingerprint == result.stages["ret"].fingerprint
    assert (
        stage.run()
        .to_frame()[["query_id", "doc_id", "rank"]]
        .equals(result.stages["ret"].run().to_frame()[["query_id", "doc_id", "rank"]])
    )
    assert str(loaded.pipeline.budget) == "budget(2)" and loaded.pipeline.depth == 10
    # the drift of two folders is the drift of the two results (texts from the corpora: TREC runs keep none)
    after, later = _folder(tmp_path, "after", RANK_AFTER, AFTER, "v2")
    (back,) = load_results(later).values()
    direct = drift(result, after, QRELS, corpus_before=BEFORE, corpus_after=AFTER)
    read = drift(loaded, back, QRELS, corpus_before=BEFORE, corpus_after=AFTER)
    columns = ["direction", "query_id", "doc_id", "cause"]
    assert read.items[columns].equals(direct.items[columns])
    assert (read.recall_before, read.recall_after) == (direct.recall_before, direct.recall_after)


def _corpus_file(path, corpus):
    path.write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in corpus.items()))
    return path


def test_the_command_end_to_end(tmp_path, capsys):
    _, before = _folder(tmp_path, "before", RANK_BEFORE, BEFORE, "v1")
    _, after = _folder(tmp_path, "after", RANK_AFTER, AFTER, "v2")
    qrels = tmp_path / "qrels.txt"
    Qrels.from_dict(QRELS).to_trec(qrels)
    corpora = ["--corpus-before", str(_corpus_file(tmp_path / "b.jsonl", BEFORE))]
    corpora += ["--corpus-after", str(_corpus_file(tmp_path / "a.jsonl", AFTER))]
    argv = ["drift", str(before), str(after), "--qrels", str(qrels), *corpora]
    assert main([*argv, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert {(r["direction"], r["cause"]): r["items"] for r in document["by_cause"]} == {
        ("lost", "crowded_out"): 1,
        ("lost", "content_changed"): 1,
        ("lost", "removed"): 1,
        ("lost", "stage_changed"): 1,
        ("gained", "stage_changed"): 1,
    }
    assert (document["recall_before"], document["recall_after"], document["n"]) == (0.8, 0.2, 5)
    assert err.startswith("rag-eval: 4 relevant item(s) lost, 1 gained: recall@budget 0.8000 -> 0.2000")
    assert main([*argv, "--format", "markdown", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "| lost | crowded_out | 1 |" in out and "| q1 | 1 | 0 | +1 |" in out and "| q2 |" not in out
    # without the corpora: presence and content from the hits the stages returned (TREC runs keep no text)
    assert main(["drift", str(before), str(after), "--qrels", str(qrels), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert out.count("undetermined") == 5
    # bad input: one line, exit 2
    assert main(["drift", str(tmp_path / "nowhere"), str(after), "--qrels", str(qrels)]) == 2
    assert "no such folder or file" in capsys.readouterr().err


def test_the_gate_names_the_drift_as_the_reason_of_a_failed_rule():
    from rag_eval.drivers.gating import gate

    queries = [f"q{i}" for i in range(12)]
    corpus = {"a": "a", "b": "b", "c": "c"}
    qrels = {q: {"a": 1} for q in queries}
    before = snapshot({q: ["a", "b", "c"] for q in queries}, corpus, depth=3)
    after = snapshot({q: ["b", "c", "a"] if i < 10 else ["a"] for i, q in enumerate(queries)}, corpus, "v2", depth=3)
    moved = drift(before, after, qrels, corpus_before=corpus, corpus_after=corpus)
    assert moved.causes() == "10 relevant item(s) lost (stage_changed 10), 0 gained"
    reports = [evaluate(qrels, r) for r in (before, after)]
    result = gate(*reports, ["recall@budget:0.1"], test="t", drift=moved)
    (rule,) = result.rules
    assert rule.verdict == "regression"
    assert rule.reason().endswith(
        "; drift between the snapshots: 10 relevant item(s) lost (stage_changed 10), 0 gained"
    )
    # a rule that passes names none
    better = gate(reports[1], reports[0], ["recall@budget:0.1"], test="t", drift=moved)
    assert better.rules[0].verdict == "pass" and "drift" not in better.rules[0].reason()
    with pytest.raises(TypeError, match="drift must be"):
        gate(*reports, ["recall@budget:0.1"], drift="much")


def test_the_command_tells_a_re_chunked_item_by_its_chunk_maps(tmp_path, capsys):
    before_corpus = {"doc#0-10": "0123456789", "other": "x"}
    after_corpus = {"doc#0-5": "01234", "doc#5-20": "56789 and more", "other": "x"}
    qrels = {"q": {"doc#0-10": 1}}
    folders = []
    for name, rankings, corpus in (
        ("before", {"q": ["doc#0-10", "other"]}, before_corpus),
        ("after", {"q": ["doc#0-5", "other"]}, after_corpus),
    ):
        result = snapshot(rankings, corpus)
        evaluate(qrels, result).save_folder(tmp_path / name, qrels=qrels, runs=result, plots=False)
        folders.append(str(tmp_path / name))
    Qrels.from_dict(qrels).to_trec(tmp_path / "qrels.txt")
    maps = {
        "b.jsonl": [("doc#0-10", "doc", 0, 10), ("other", "other", None, None)],
        "a.jsonl": [("doc#0-5", "doc", 0, 5), ("doc#5-20", "doc", 5, 20), ("other", "other", None, None)],
    }
    for file, rows in maps.items():
        lines = [json.dumps({"chunk_id": c, "doc_id": d, "start": s, "end": e}) for c, d, s, e in rows]
        (tmp_path / file).write_text("\n".join(lines) + "\n")
    argv = ["drift", *folders, "--qrels", str(tmp_path / "qrels.txt")]
    argv += ["--corpus-before", str(_corpus_file(tmp_path / "cb.jsonl", before_corpus))]
    argv += ["--corpus-after", str(_corpus_file(tmp_path / "ca.jsonl", after_corpus))]
    chunks = ["--chunks-before", str(tmp_path / "b.jsonl"), "--chunks-after", str(tmp_path / "a.jsonl")]
    assert main([*argv, *chunks, "--format", "json"]) == 0
    (item,) = json.loads(capsys.readouterr().out)["items"]
    assert item["cause"] == "chunking_changed"
    assert item["detail"] == "its span [0, 10) of 'doc' now falls in 2 other chunk(s): doc#0-5, doc#5-20"
    # a bad chunk map: one line naming the file and line, exit 2
    (tmp_path / "bad.jsonl").write_text(json.dumps({"chunk_id": "c", "doc_id": "d", "start": 3}) + "\n")
    assert main([*argv, "--chunks-before", str(tmp_path / "bad.jsonl")]) == 2
    assert "bad.jsonl:1: document 'd': give both start and end, or neither" in capsys.readouterr().err


class _Cells(HTMLParser):
    """Each ``<tr>`` of the page: the class of its table, its attributes and its cells' text."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, dict[str, str], list[str]]] = []
        self._table = ""
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = dict(attrs).get("class") or ""
        elif tag == "tr":
            self.rows.append((self._table, {k: v or "" for k, v in attrs}, []))
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1][2].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _table(page: str, name: str) -> list[list[str]]:
    """The body rows' cells of the table of class ``name`` (its header row left out)."""
    parser = _Cells()
    parser.feed(page)
    rows = [cells for table, _, cells in parser.rows if table == name]
    return rows[1:]


def test_the_command_writes_the_drift_as_an_html_page(tmp_path, capsys):
    pytest.importorskip("jinja2", reason="the HTML page needs the html extra (jinja2)")
    result_b, before = _folder(tmp_path, "before", RANK_BEFORE, BEFORE, "v1")
    result_a, after = _folder(tmp_path, "after", RANK_AFTER, AFTER, "v2")
    Qrels.from_dict(QRELS).to_trec(tmp_path / "qrels.txt")
    argv = ["drift", str(before), str(after), "--qrels", str(tmp_path / "qrels.txt"), "--top", "3"]
    argv += ["--corpus-before", str(_corpus_file(tmp_path / "b.jsonl", BEFORE))]
    argv += ["--corpus-after", str(_corpus_file(tmp_path / "a.jsonl", AFTER))]
    assert main([*argv, "-o", str(tmp_path / "out" / "drift.html")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("recall@budget 0.8000 -> 0.2000")  # stdout keeps the table
    assert f"drift page -> {tmp_path / 'out' / 'drift.html'}" in err
    page = (tmp_path / "out" / "drift.html").read_text("utf-8")
    found = drift(result_b, result_a, QRELS, corpus_before=BEFORE, corpus_after=AFTER)
    causes = {(d, c): int(n) for d, c, n in _table(page, "drift-causes")}
    assert causes == {(r["direction"], r["cause"]): r["items"] for r in found.by_cause().to_dict("records")}
    assert causes == {
        ("lost", "crowded_out"): 1,
        ("lost", "content_changed"): 1,
        ("lost", "removed"): 1,
        ("lost", "stage_changed"): 1,
        ("gained", "stage_changed"): 1,
    }
    stages = [(d, s, c, int(n)) for d, s, c, n in _table(page, "drift-stages")]
    assert stages == [tuple(r.values()) for r in found.by_stage().to_dict("records")]
    assert ("lost", "(none)", "removed", 1) in stages
    queries = [[q, int(lost), int(gained), int(net)] for q, lost, gained, net in _table(page, "drift-queries")]
    assert queries == found.queries(3).to_numpy().tolist()
    assert [q for q, *_ in queries] == ["q1", "q2", "q3"]
    (test,) = _table(page, "drift-test")
    assert test == ["0.8000", "0.2000", "-0.6000", "no interval", "n/a", "5", "randomization, min n 6",
                    "n 5 paired; none left out; fewer than 6: no interval"]  # fmt: skip
    items = _table(page, "drift-items")
    assert [(r[0], r[1], r[2], r[5]) for r in items] == [
        (r["direction"], r["query_id"], r["doc_id"], r["cause"]) for r in found.to_frame().to_dict("records")
    ]
    assert items[0][6] == "2 new document(s) (absent from the corpus before) above it, now at rank 3, cut 2: n1, n2"
    assert "<script" not in page and "http" not in page.split("</style>")[1]  # nothing to run, nothing fetched
    # a folder as the page: one line, exit 2, nothing else written
    assert main([*argv, "-o", str(tmp_path)]) == 2
    assert "is a folder: give the HTML file to write" in capsys.readouterr().err


def test_the_page_escapes_ids_from_the_data():
    pytest.importorskip("jinja2", reason="the HTML page needs the html extra (jinja2)")
    from rag_eval.renderers.drift_html import render_drift

    odd = "<b>&'x"
    corpus = {odd: "a", "b": "b"}
    found = drift(snapshot({"q<1>": [odd, "b"]}, corpus), snapshot({"q<1>": ["b"]}, {"b": "b"}, "v2"),
                  {"q<1>": {odd: 1}}, corpus_before=corpus, corpus_after={"b": "b"})  # fmt: skip
    page = render_drift(found)
    assert "<b>&" not in page and "&lt;b&gt;&amp;" in page
    (row,) = _table(page, "drift-items")
    assert row[:3] == ["lost", "q<1>", odd] and row[5] == "removed"


def test_the_gate_command_names_the_drift_of_two_folders(tmp_path, capsys):
    queries = [f"q{i}" for i in range(12)]
    corpus = {"a": "a", "b": "b", "c": "c"}
    grown = {**corpus, "n": "new"}
    qrels = {q: {"a": 1} for q in queries}
    folders = {}
    for name, rankings, docs, version in (
        ("base", {q: ["a", "b", "c"] for q in queries}, corpus, "v1"),
        # q0-q5: a crowded out by the new n; q6-q9: moved by the changed stage; q10, q11 kept
        (
            "cand",
            {q: ["n", "b", "a"] if i < 6 else ["b", "c", "a"] if i < 10 else ["a"] for i, q in enumerate(queries)},
            grown,
            "v2",
        ),
    ):
        result = snapshot(rankings, docs, version, depth=3)
        evaluate(qrels, result).save_folder(tmp_path / name, qrels=qrels, runs=result, plots=False)
        folders[name] = result
    Qrels.from_dict(qrels).to_trec(tmp_path / "qrels.txt")
    corpora = ["--corpus-before", str(_corpus_file(tmp_path / "b.jsonl", corpus))]
    corpora += ["--corpus-after", str(_corpus_file(tmp_path / "a.jsonl", grown))]
    base, cand = str(tmp_path / "base"), str(tmp_path / "cand")
    rule = ["--rule", "recall@budget:0.1", "--test", "t", "--allow-different", "corpus"]  # the corpus grew
    argv = ["gate", base, cand, *rule, "--drift", str(tmp_path / "qrels.txt")]
    assert main([*argv, *corpora]) == 1  # a regression
    out, err = capsys.readouterr()
    named = "10 relevant item(s) lost (crowded_out 6, stage_changed 4), 0 gained"
    direct = drift(folders["base"], folders["cand"], qrels, corpus_before=corpus, corpus_after=grown, test="t")
    assert direct.causes() == named
    assert f"drift between the snapshots: {named}" in out
    assert f"rag-eval: drift between the folders: {named}; {direct.verdict()}" in err
    # the reverse passes: no drift named in the verdict
    assert main(["gate", cand, base, *rule, "--drift", str(tmp_path / "qrels.txt")]) == 0
    assert "drift between the snapshots" not in capsys.readouterr().out
    # without corpora: the folders' TREC runs keep no text to compare, so no cause is guessed
    assert main(argv) == 1
    assert (
        "drift between the snapshots: 10 relevant item(s) lost (undetermined 10), 0 gained" in capsys.readouterr().out
    )
    # refusals: corpora without --drift, a saved report for --drift; one line, exit 2
    assert main(argv[:-2] + corpora) == 2
    assert "--corpus-before/--corpus-after and --chunks-before/--chunks-after go with --drift QRELS" in (
        capsys.readouterr().err
    )
    evaluate(qrels, folders["base"]).save(tmp_path / "base.parquet")
    assert main(["gate", str(tmp_path / "base.parquet"), *argv[2:]]) == 2
    assert "--drift compares result folders: BASELINE is not one" in capsys.readouterr().err
