"""Issue 27, class 11 and 12 (b)-(e), and the HTML diff's part of classes 1 and 12(a): joins of user inputs say how
many keys matched of how many (nothing matched, where the output would be empty, is an error); the HTML diff pairs
blocks named differently by role and position and says so, counts wins by each metric's direction, in words, and
counts the queries on one side only; a fate names what cut the chunk; the judged-share ceiling is never below the
share measured, and the demo's warning is said once; rerank_gain says it is a gain in recall; the labelling page
reads and writes the qrels formats the pool reads, or says which it cannot."""

from __future__ import annotations

import json
import re
import unicodedata
import warnings
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval import Hit, InputError, Pipeline, Qrels, Run, evaluate, pool
from rag_eval.adapters import functions
from rag_eval.cli import main
from rag_eval.data.joins import join
from rag_eval.errors import LowJoinMatch, LowJudgedShare, NearMissIds
from rag_eval.metrics.conventions import Conventions
from rag_eval.renderers.html_report import render_html, side_of
from rag_eval.renderers.stage_pairs import pair_blocks
from rag_eval.reports._judged import judged_share

TINY_BEIR = Path(__file__).resolve().parents[1] / "rag_eval" / "examples" / "tiny-beir"
CORPUS = {f"d{i:02d}": f"chunk {i}" for i in range(30)}
QUERIES = {f"q{i}": f"question {i}" for i in range(8)}
QRELS = {f"q{i}": {f"d{i:02d}": 2, f"d{i + 4:02d}": 1, f"d{i + 1:02d}": 0} for i in range(8)}


def _order(query: str) -> list[str]:
    n = int(query.split()[1])
    return sorted(CORPUS, key=lambda d: ((int(d[1:]) - n) % 30, d))


def search(query, k):
    return [Hit(d, float(30 - j), CORPUS[d]) for j, d in enumerate(_order(query))]


def short_search(query, k):
    """Only the first three chunks: the grade-1 chunk four places away is never retrieved."""
    return search(query, k)[:3]


def keep(query, hits):
    return [h.doc_id for h in hits]


def reverse_top(query, hits):
    ids = [h.doc_id for h in hits]
    return ids[:5][::-1] + ids[5:]


def _quiet_evaluate(qrels, results, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a small hand-made set: the judged-share and capped warnings are expected
        return evaluate(qrels, results, **kw)


def _pipeline(first="keyword", second="rerank", rerank=keep, retrieve=search, budget=3):
    stages = [functions.retriever(retrieve, name=first)]
    if second is not None:
        stages.append(functions.reranker(rerank, name=second))
    return Pipeline(*stages, depth=20, budget=budget)


def _side(name, results, **kw):
    report = _quiet_evaluate(QRELS, results, **kw)
    return side_of(report, results=results, qrels=QRELS, name=name)


class _Rows(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[dict[str, str], list[str]]] = []
        self.notes: list[str] = []
        self.table: list[str] = []
        self._cell: list[str] | None = None
        self._note: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.table.append(attrs.get("class", ""))
        elif tag == "tr":
            self.rows.append(({**attrs, "table": self.table[-1] if self.table else ""}, []))
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "p" and "note" in (attrs.get("class") or ""):
            self._note = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1][1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table" and self.table:
            self.table.pop()
        elif tag == "p" and self._note is not None:
            self.notes.append(" ".join("".join(self._note).split()))
            self._note = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._note is not None:
            self._note.append(data)


def _parsed(page: str) -> _Rows:
    rows = _Rows()
    rows.feed(page)
    return rows


def _diff_rows(page: str) -> dict[tuple[str, str, str], dict[str, str]]:
    parsed = _parsed(page)
    head = next(cells for attrs, cells in parsed.rows if attrs["table"] == "diff-stages")
    out = {}
    for attrs, cells in parsed.rows:
        if attrs["table"] == "diff-stages" and "data-metric" in attrs:
            out[(cells[0], cells[1], cells[2])] = dict(zip(head, cells, strict=True)) | {"tone": attrs.get("class")}
    return out


# ----- the join helper ------------------------------------------------------------------------------------------


def test_a_short_join_says_matched_k_of_n_once_with_examples():
    left = [f"d{i}" for i in range(10)] + ["d0", "d1"]  # a repeated key counts once
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = join(left, {"d0", "d1", "d2", "x"}, what="run doc ids", where="the corpus", consequence="no text")
    said = [str(w.message) for w in caught if issubclass(w.category, LowJoinMatch)]
    assert (got.matched, got.total) == (3, 10)
    assert said == ["run doc ids: matched 3 of 10 in the corpus (not matched, e.g. 'd3', 'd4', 'd5', ...): no text"]
    assert caught[0].filename == __file__  # pointed at the caller, not at rag_eval


@pytest.mark.parametrize(
    "left, right, near",
    [
        (["constructor", "__proto__", "toString"], {"Constructor", "__PROTO__"}, "case"),  # not merged
        ([unicodedata.normalize("NFD", "café"), "naïve"], {"café", unicodedata.normalize("NFD", "naïve")}, "Unicode"),
        ([" d1", "d1 ", "007"], {"d1", "7"}, "whitespace"),  # and leading zeros: different ids
        (["'; DROP TABLE x; --", "<script>", "a\tb"], {"x"}, None),
    ],
)
def test_a_join_of_hostile_ids_matches_nothing_and_is_refused_when_required(left, right, near):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(InputError, match=rf"matched 0 of {len(left)} in the corpus .*nothing to join on"):
            join(left, right, what="pooled doc ids", where="the corpus", required=True)
        assert join(left, right, what="pooled doc ids", where="the corpus").matched == 0
    said = {w.category: str(w.message) for w in caught}
    assert f"matched 0 of {len(left)}" in said[LowJoinMatch]
    if NearMissIds in said:  # near twins said apart (rag_eval.data.near_miss), never merged
        assert near is not None and near in said[NearMissIds]


def test_a_full_or_empty_join_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert join(["a", "b"], {"a", "b", "c"}, what="x", where="y", required=True).share == 1.0
        assert join([], set(), what="x", where="y", required=True).total == 0
        assert join(["a", "b"], {"a"}, what="x", where="y").matched == 1  # half: not "little"


# ----- pool and corpus -----------------------------------------------------------------------------------------


def test_pool_refuses_a_corpus_that_holds_none_of_its_docs_and_says_a_short_one():
    run = Run.from_ranking({"q1": ["a", "b", "c"], "q2": ["d"]}, name="r")
    with pytest.raises(InputError, match=r"pooled doc ids: matched 0 of 4 in the corpus given .*no text to label"):
        pool([run], depth=3, texts={"zz": "another corpus", "x": "other"})
    with pytest.warns(LowJoinMatch, match=r"pooled doc ids: matched 1 of 4 .*'b', 'c', 'd'"):
        made = pool([run], depth=3, texts={"a": "one"})
    assert [i.text for i in made] == ["one", None, None, None]
    with pytest.raises(InputError, match=r"pooled query ids: matched 0 of 2"):
        pool([run], depth=3, queries={"other": "?"})


def test_cli_pool_with_a_beir_folder_holding_no_run_doc_exits_2_and_writes_nothing(tmp_path, capsys):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 doc-1 1 9.0 r\nq1 Q0 doc-2 2 8.0 r\nq2 Q0 doc-3 1 7.0 r\n")
    out = tmp_path / "pool.jsonl"
    code = main(["pool", str(run), "--depth", "2", "--beir", str(TINY_BEIR), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "pooled doc ids: matched 0 of 3 in the corpus given" in err and "Traceback" not in err


# ----- the HTML diff: pairing, direction, one-sided queries ----------------------------------------------------


def test_the_html_diff_pairs_pipelines_named_differently_and_their_stages_by_role():
    base = _pipeline().run(QUERIES, progress=False)
    cand = _pipeline("bm25", "cross-encoder", reverse_top).run(QUERIES, progress=False)
    a, b = _side("A", {"kw": base}), _side("B", {"other": cand})
    page = render_html([a, b], plots=False)
    notes = _parsed(page).notes
    assert "pipelines named differently, paired by position: 'kw' (A) with 'other' (B)" in notes
    assert any(
        "paired by role and position: 'keyword' with 'bm25' (first stage); 'rerank' with 'cross-encoder'" in n
        for n in notes
    )
    rows = _diff_rows(page)
    ndcg = rows[("kw → other", "rerank → cross-encoder", "ndcg@budget")]
    change = b.report.values("other", "ndcg@budget", "cross-encoder") - a.report.values("kw", "ndcg@budget", "rerank")
    assert ndcg["A"] == f"{a.report.mean('kw', 'ndcg@budget', 'rerank'):.3f}"
    assert (int(ndcg["wins"]), int(ndcg["losses"])) == (int((change > 0).sum()), int((change < 0).sum()))
    assert int(ndcg["losses"]) > 0 and rows[("kw → other", "keyword → bm25", "recall@depth")]["ties"] == "8"


def test_the_html_diff_names_a_pipeline_in_one_folder_only_and_compares_what_is_delivered():
    one = _pipeline().run(QUERIES, progress=False)
    plain = _pipeline("keyword", None).run(QUERIES, progress=False)  # no reranker: the budget cuts
    a = _side("A", {"kw": one, "extra": one})
    b = _side("B", {"kw": plain})
    page = render_html([a, b], plots=False)
    notes = _parsed(page).notes
    assert "pipeline 'extra' is in A only: not compared" in notes
    assert any("no counterpart for stage(s) 'rerank' (A)" in n for n in notes)
    assert any("between the final stages 'rerank' (A) and 'keyword' (B)" in n for n in notes)
    rows = _diff_rows(page)
    delivered = {m for (run, stage, m) in rows if stage.startswith("delivered")}
    assert "recall@budget" in delivered and "recall@depth" not in delivered and "loss.delivered" in delivered
    assert not any(run == "extra" for run, _, _ in rows)
    # the per-query tables compare what is delivered (the plain pipeline has no nDCG: recall@budget)
    assert "recall@budget of kw / delivered (rerank → keyword) got worse (higher is better)" in page


def test_html_diff_counts_wins_by_each_metrics_direction_in_words():
    worse = _pipeline(retrieve=short_search).run(QUERIES, progress=False)  # never retrieves the grade-1 chunks
    better = _pipeline().run(QUERIES, progress=False)
    a, b = _side("A", {"kw": worse}), _side("B", {"kw": better})
    rows = _diff_rows(render_html([a, b], plots=False))
    never = rows[("kw", "rerank", "loss.never_retrieved")]
    before = a.report.mean("kw", "loss.never_retrieved", "rerank")
    after = b.report.mean("kw", "loss.never_retrieved", "rerank")
    assert before > after  # fewer relevant chunks never retrieved: better
    assert int(never["wins"]) == 8 and never["losses"] == "0"
    assert never["which way"] == "lower is better" and never["verdict"] == "better" and never["tone"] == "better"
    recall = rows[("kw", "keyword", "recall@depth")]
    assert int(recall["wins"]) == 8 and recall["which way"] == "higher is better" and recall["verdict"] == "better"
    # the other way round: the same numbers are losses, and the words say worse
    back = _diff_rows(render_html([b, a], plots=False))[("kw", "rerank", "loss.never_retrieved")]
    assert (back["wins"], int(back["losses"]), back["verdict"], back["tone"]) == ("0", 8, "worse", "worse")


def test_html_diff_counts_the_queries_on_one_side_only():
    base = _pipeline().run(QUERIES, progress=False)
    fewer = _pipeline().run({q: t for q, t in QUERIES.items() if q not in ("q6", "q7")}, progress=False)
    # under trec_eval's conventions a query the run lacks is left out (not scored 0): on one side only
    a, b = _side("A", {"kw": base}, conventions="trec_eval"), _side("B", {"kw": fewer}, conventions="trec_eval")
    row = _diff_rows(render_html([a, b], plots=False))[("kw", "keyword", "recall@depth")]
    assert (row["paired"], row["only in A"], row["only in B"]) == ("6", "2", "0")


def test_pair_blocks_pairs_rerankers_by_position_and_says_what_is_left():
    two = Pipeline(
        functions.retriever(search, name="first"),
        functions.reranker(keep, name="r1"),
        functions.reranker(reverse_top, name="r2"),
        depth=20,
        budget=3,
    ).run(QUERIES, progress=False)
    one = _pipeline("bm25", "ce").run(QUERIES, progress=False)
    a = _quiet_evaluate(QRELS, {"p": two})
    b = _quiet_evaluate(QRELS, {"p": one})
    pairing = pair_blocks(a, b, names=("A", "B"))
    assert [(p.a, p.b, p.how) for p in pairing.pairs] == [
        (("p", "first"), ("p", "bm25"), "role"),
        (("p", "r1"), ("p", "ce"), "role"),
        (("p", "r2"), ("p", "ce"), "delivered"),
    ]
    assert "pipeline 'p': no counterpart for stage(s) 'r2' (A): not compared" in pairing.notes


# ----- 12(b): a fate names what cut the chunk ------------------------------------------------------------------


def test_a_pipeline_without_reranker_says_the_budget_cut_the_chunks(tmp_path):
    result = _pipeline("keyword", None, budget=1).run(QUERIES, progress=False)
    report = _quiet_evaluate(QRELS, {"kw": result})
    assert "loss.cut_by_budget" in report.metrics and "loss.reranked_out" not in report.metrics
    items = report.loss_items
    cut = items[items.fate == "cut_by_budget"]
    assert len(cut) == 8 and set(cut.cut_by) == {"budget"} and "reranked_out" not in set(items.fate)
    assert report.mean("kw", "loss.cut_by_budget", "keyword") == pytest.approx(0.5)  # d{i+4} at rank 5 > budget 1
    report.save_folder(tmp_path / "f", qrels=QRELS, runs={"kw": result}, plots=False)
    text = (tmp_path / "f" / "report.md").read_text()
    assert "cut by the budget 50.0%" in text and "reranked out" not in text


def test_each_reranked_out_chunk_names_the_reranker_that_cut_it():
    def truncate(query, hits):  # the first reranker keeps four candidates: the grade-1 chunk (5th) is cut here
        return [h.doc_id for h in hits][:4]

    result = Pipeline(
        functions.retriever(search, name="first"),
        functions.reranker(truncate, name="cheap"),
        functions.reranker(reverse_top, name="ce"),
        depth=20,
        budget=1,
    ).run(QUERIES, progress=False)
    report = _quiet_evaluate(QRELS, {"p": result})
    items = report.loss_items.set_index(["query_id", "doc_id"])
    assert items.loc[("q0", "d04"), "fate"] == "reranked_out" and items.loc[("q0", "d04"), "cut_by"] == "cheap"
    # "ce" reversed the four: the grade-2 chunk d00 went from 1st to 4th, below the budget of 1
    assert items.loc[("q0", "d00"), "fate"] == "reranked_out" and items.loc[("q0", "d00"), "cut_by"] == "ce"
    assert "loss.cut_by_budget" not in report.metrics


# ----- 12(c): the judged-share ceiling --------------------------------------------------------------------------


@st.composite
def _qrels_and_run(draw):
    docs = [f"d{i}" for i in range(12)]
    queries = [f"q{i}" for i in range(draw(st.integers(1, 6)))]
    judged = {
        q: {d: draw(st.integers(0, 2)) for d in draw(st.lists(st.sampled_from(docs), max_size=6, unique=True))}
        for q in queries
        if draw(st.booleans())
    }
    judged = {q: j for q, j in judged.items() if j} or {queries[0]: {"d0": 1}}
    ranking = {q: draw(st.lists(st.sampled_from(docs), max_size=10, unique=True)) for q in queries}
    k = draw(st.integers(1, 12))
    per_query = draw(st.booleans())
    cutoff = {q: draw(st.integers(0, 12)) for q in queries} if per_query else k
    return Qrels.from_dict(judged), Run.from_ranking(ranking, name="r"), cutoff


@settings(max_examples=150, deadline=None)
@given(_qrels_and_run())
def test_the_judged_ceiling_is_never_below_the_share_measured(case):
    qrels, run, cutoff = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        share, n, ceiling = judged_share(qrels, run, cutoff, Conventions())
    if n:
        assert ceiling >= share - 1e-12
    else:
        assert np.isnan(share)


def test_the_low_judged_share_warning_never_puts_the_ceiling_below_the_share():
    # the demo's shape: queries the qrels do not judge, rankings shorter than the depth, one judgement a query
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(4)}
    ranking = {f"q{i}": [f"d{i}", f"x{i}"] for i in range(8)}
    for runs in ({"r": Run.from_ranking(ranking, name="r")},):
        with pytest.warns(LowJudgedShare) as caught:
            evaluate(qrels, runs, ["recall@10"])
        said = [str(w.message) for w in caught if issubclass(w.category, LowJudgedShare)]
        assert len(said) == 1  # once per report
        share = float(re.search(r"judged@10 is ([0-9.]+)", said[0]).group(1))
        assert share == 0.5
        ceiling = re.search(r"at most ([0-9.]+)", said[0])
        assert ceiling is None or float(ceiling.group(1)) >= share  # 1 of 2 returned judged: 0.5 is the ceiling


# ----- 12(d): rerank_gain says what it is a gain of -------------------------------------------------------------


def test_rerank_gain_says_it_is_a_gain_in_recall(tmp_path):
    result = _pipeline().run(QUERIES, progress=False)
    report = _quiet_evaluate(QRELS, {"kw": result})
    notes = report.card.metric_notes
    assert any(n.startswith("rerank_gain@budget: a gain in recall") and "after − before" in n for n in notes)
    assert "rerank_gain@budget: a gain in recall" in report.card.render()
    report.save_folder(tmp_path / "f", qrels=QRELS, runs={"kw": result}, plots=False)
    assert "| rerank_gain@budget (recall@budget after − before) |" in (tmp_path / "f" / "report.md").read_text()


# ----- 12(e): the labelling page reads the qrels formats the pool reads ---------------------------------------


def _small_pool():
    return pool([Run.from_ranking({"q1": ["a", "b"], "q2": ["c"]}, name="r")], depth=2)


@pytest.mark.parametrize("header", ["query-id\tcorpus-id\tscore", "query_id\tdoc_id\tgrade"])
def test_label_reads_a_beir_qrels_out_and_keeps_its_format(tmp_path, header):
    from rag_eval.labelling.session import LabellingSession

    out = tmp_path / "test.tsv"
    out.write_text(f"{header}\nq1\ta\t2\nq9\tz\t1\n")
    assert Qrels.load(out).to_dict() == {"q1": {"a": 2}, "q9": {"z": 1}}  # what rag-eval pool --qrels reads
    session = LabellingSession(_small_pool(), out, assessor="alice")
    session.judge({"index": session.index[("q1", "b")], "grade": 1})
    lines = out.read_text().splitlines()
    assert lines[0] == "query-id\tcorpus-id\tscore"
    assert Qrels.load(out).to_dict() == {"q1": {"a": 2, "b": 1}, "q9": {"z": 1}}


def test_label_writes_trec_to_a_trec_or_new_out(tmp_path):
    from rag_eval.labelling.session import LabellingSession

    out = tmp_path / "new.qrels"
    session = LabellingSession(_small_pool(), out, assessor="alice")
    session.judge({"index": 0, "grade": 3})
    assert out.read_text() == "q1 0 a 3\n"


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_label_refuses_an_out_it_cannot_write_back_naming_the_formats(tmp_path, kind):
    from rag_eval.labelling.session import LabellingSession

    out = tmp_path / f"qrels.{kind}"
    if kind == "jsonl":
        out.write_text(json.dumps({"query_id": "q1", "doc_id": "a", "grade": 1}) + "\n")
    else:
        Qrels.from_dict({"q1": {"a": 1}}).to_frame().to_parquet(out)
    before = out.read_bytes()
    with pytest.raises(InputError, match="must be TREC qrels or a BEIR TSV with a header"):
        LabellingSession(_small_pool(), out, assessor="alice")
    assert out.read_bytes() == before


# ----- more joins: a query set and the queries evaluated, a judge's log and the pool ----------------------------


def test_a_query_set_that_the_report_covers_little_of_is_said():
    from rag_eval import QuerySet

    run = Run.from_ranking({"q0": ["d00"], "q1": ["d01"]}, name="r")
    qrels = {"q0": {"d00": 1}, "q1": {"d01": 1}}
    wide = QuerySet.from_dict(QUERIES)  # eight queries, two evaluated
    report = evaluate(qrels, {"r": run}, ["recall@10"])
    with pytest.warns(LowJoinMatch, match=r"the query set's queries: matched 2 of 8 in the queries evaluated"):
        weighted = report.with_query_set(wide)
    assert weighted.card.query_set is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a set the report covers whole: silent
        report.with_query_set(QuerySet.from_dict({"q0": "a", "q1": "b"}))


def test_a_judge_log_of_another_pool_is_said(tmp_path):
    from rag_eval import judge

    texts = {f"d{i}": f"text {i}" for i in range(8)}
    first = pool(
        [Run.from_ranking({"q1": ["d0", "d1", "d2", "d3"]}, name="a")], depth=4, queries={"q1": "?"}, texts=texts
    )
    other = pool([Run.from_ranking({"q2": ["d4", "d5"]}, name="b")], depth=2, queries={"q2": "?"}, texts=texts)
    grader = functions.judge(lambda q, t: 1, name="ones")
    log = tmp_path / "j.jsonl"
    judge(first, grader, log=log, progress=False)
    with pytest.warns(LowJoinMatch, match=r"judge 'ones''s graded \(query, doc\) pairs in .*: matched 0 of 4 in pool"):
        run = judge(other, grader, log=log, progress=False)
    assert (run.graded, run.from_log) == (2, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same pool again: every logged pair is in it
        assert judge(first, grader, log=log, progress=False).from_log == 4


def test_cli_report_of_folders_named_differently_says_how_it_paired_them(tmp_path, capsys):
    for folder, name, stages in (("a", "kw", ("keyword", "rerank")), ("b", "other", ("bm25", "ce"))):
        result = _pipeline(*stages).run(QUERIES, progress=False)
        report = _quiet_evaluate(QRELS, {name: result})
        report.save_folder(tmp_path / folder, qrels=QRELS, runs={name: result}, plots=False)
    out = tmp_path / "diff.html"
    code = main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(out), "--no-plots"])
    err = capsys.readouterr().err
    assert code == 0
    assert "diff of b against a: pipelines named differently, paired by position: 'kw' (a) with 'other' (b)" in err
    assert "'keyword' with 'bm25' (first stage); 'rerank' with 'ce' (reranker)" in err
    rows = _diff_rows(out.read_text())
    assert rows[("kw → other", "rerank → ce", "ndcg@budget")]["paired"] == "8"  # not an empty table


def test_a_projection_of_a_ranking_whose_queries_the_labels_lack():
    from rag_eval.data.spans import SpanLabels
    from rag_eval.ground_truth.projection import project

    labels = SpanLabels.from_qrels(Qrels.from_dict({"q1": {"c1": 1}, "q2": {"c2": 1}}), level="chunk")
    with (
        pytest.warns(NearMissIds, match="'Q1' vs 'q1'"),  # said apart, never merged
        pytest.raises(InputError, match=r"the ranking's query ids: matched 0 of 2 in the span labels \(2 queries\)"),
    ):
        project({"Q1": ["c1"], "other": ["c2"]}, None, labels)  # ids spelled another way: nothing to project
    ranking = {"q1": ["c1"], "x1": ["c1"], "x2": ["c2"], "x3": ["c2"]}
    with pytest.warns(LowJoinMatch, match=r"matched 1 of 4 .*'x1', 'x2', 'x3'.*count as unjudged"):
        projected = project(ranking, None, labels)
    assert projected.counts["q1"].covered == 1 and projected.counts["x1"].units == 0  # x1 has no label
