"""Result folders as a public format (docs/result-folders.md): Report.save_folder / Report.load_folder round trips,
the manifest's SHA-256 of every file, and the content hashes on the card (rag_eval.reports.hashes) with
comparable(a, b), the primitive the CI gate refuses to compare folders by."""

from __future__ import annotations

import hashlib
import json
import random
import re
import warnings

import pandas as pd
import pytest

import rag_eval
from rag_eval import Collection, Conventions, Hit, InputError, Pipeline, Qrels, Report, Run, evaluate
from rag_eval.builtin.outputs import write_report_folder
from rag_eval.renderers.result_folder import MANIFEST, comparable, load_manifest
from rag_eval.reports.hashes import content_hashes, corpus_sha256, qrels_sha256, queries_sha256
from rag_eval.stages import Retriever

JUDGED = {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d4": 1}, "q10": {"d1": 1, "d9": 3}}
RUN = Run.from_ranking({"q1": ["d3", "d1", "d7"], "q2": ["d5", "d4"], "q10": ["d9"]}, name="bm25")
OTHER = Run.from_ranking({"q1": ["d1", "d2"], "q2": ["d4"], "q10": ["d2", "d9"]}, name="dense")
METRICS = ["ndcg@3", "recall@2", "P@1"]


def quiet(*args, **kwargs) -> Report:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rag_eval.RagEvalWarning)
        return evaluate(*args, **kwargs)


# ----- the qrels hash ------------------------------------------------------------------------------------------


def test_qrels_hash_is_sha256_of_the_documented_canonical_lines():
    # sorted by query id then doc id as strings ("q1" < "q10" < "q2"), one compact JSON array per line
    canonical = (
        'rag_eval qrels v1\n["q1","d1",2]\n["q1","d2",0]\n["q1","d3",1]\n["q10","d1",1]\n["q10","d9",3]\n'
        '["q2","d4",1]\n'
    )
    assert qrels_sha256(Qrels.from_dict(JUDGED)) == hashlib.sha256(canonical.encode()).hexdigest()


def test_qrels_hash_is_stable_across_input_order_and_format(tmp_path):
    lines = [f"{q} 0 {d} {g}" for q, docs in JUDGED.items() for d, g in docs.items()]
    random.Random(3).shuffle(lines)
    (tmp_path / "qrels.txt").write_text("\n".join(lines) + "\n")
    beir = ["query-id\tcorpus-id\tscore"] + [
        f"{q}\t{d}\t{g}" for q, docs in reversed(JUDGED.items()) for d, g in docs.items()
    ]
    (tmp_path / "qrels.tsv").write_text("\n".join(beir) + "\n")
    reordered = {q: dict(reversed(list(JUDGED[q].items()))) for q in reversed(list(JUDGED))}
    hashes = {
        qrels_sha256(JUDGED),  # a plain dict
        qrels_sha256(Qrels.from_dict(reordered)),
        qrels_sha256(Qrels.from_trec(tmp_path / "qrels.txt")),
        qrels_sha256(Qrels.from_beir(tmp_path / "qrels.tsv")),
    }
    assert len(hashes) == 1
    # and on the card: a report of TREC-file qrels carries the hash of one built in memory
    from_file = quiet(Qrels.from_trec(tmp_path / "qrels.txt"), RUN, METRICS)
    in_memory = quiet(JUDGED, RUN, METRICS)
    assert from_file.card.hashes == in_memory.card.hashes
    assert from_file.card.hashes.qrels == hashes.pop()
    assert comparable(from_file, in_memory) == []


def test_qrels_hash_changes_when_one_grade_changes():
    changed = {q: dict(d) for q, d in JUDGED.items()}
    changed["q10"]["d9"] = 2
    a, b = quiet(JUDGED, RUN, METRICS), quiet(changed, RUN, METRICS)
    assert a.card.hashes.qrels != b.card.hashes.qrels
    differences = comparable(a, b)
    assert len(differences) == 1 and differences[0].startswith("qrels: sha256:")
    # a judgement of grade 0 is a judgement: dropping it changes the hash too
    dropped = {q: {d: g for d, g in docs.items() if g} for q, docs in JUDGED.items()}
    assert qrels_sha256(dropped) != qrels_sha256(JUDGED)


# ----- queries, corpus, conventions, budget ------------------------------------------------------------------------


def test_query_set_hash_uses_texts_where_known():
    ids, basis = queries_sha256(["q2", "q1"])
    assert basis == "ids" and ids == queries_sha256(["q1", "q2", "q1"])[0]
    with_text, basis = queries_sha256({"q1": "what is x", "q2": "why"})
    assert basis == "ids and texts" and with_text != ids
    assert with_text == queries_sha256({"q2": "why", "q1": "what is x"})[0]
    assert with_text != queries_sha256({"q1": "what is y", "q2": "why"})[0]
    # plain runs: the query set is the qrels' queries
    card = quiet(JUDGED, RUN, METRICS).card
    assert (card.hashes.queries, card.hashes.queries_basis) == queries_sha256(list(JUDGED))
    assert card.hashes.corpus is None and card.hashes.budget is None


def test_conventions_are_hashed_and_comparable_names_the_field():
    a = quiet(JUDGED, RUN, METRICS)
    b = quiet(JUDGED, RUN, METRICS, conventions=Conventions(relevance_threshold=2))
    differences = comparable(a, b)
    assert differences[0].startswith("conventions: sha256:")
    assert differences[1] == "conventions differ in relevance_threshold (1 vs 2)"
    assert content_hashes(JUDGED, conventions=a.card.conventions) == a.card.hashes


class Fixed(Retriever):
    """Three hits per query, with their texts; ``text`` rewrites chunk d1's."""

    def __init__(self, name="fixed", text="alpha", **kw):
        super().__init__(name, **kw)
        self.text = text

    def config(self):
        return {"text": self.text}

    def search(self, query, k):
        return [Hit("d1", 3.0, text=self.text), Hit("d3", 2.0, text="gamma"), Hit("d4", 1.0, text="delta")]


QUERIES = {"q1": "first question", "q2": "second question", "q10": "tenth question"}


def _pipeline_report(budget=2, text="alpha"):
    result = Pipeline(Fixed(text=text), depth=3, budget=budget).run(QUERIES, progress=False)
    return quiet(JUDGED, {"fixed": result}), result


def test_pipeline_reports_hash_queries_chunks_and_budget():
    report, result = _pipeline_report()
    hashes = report.card.hashes
    assert (hashes.queries, hashes.queries_basis) == queries_sha256(QUERIES)
    assert (hashes.corpus, hashes.corpus_basis) == corpus_sha256(result)
    assert hashes.budget == "budget(2)" == report.card.budget
    # the chunks fingerprint: the distinct (id, text) pairs returned, sorted
    canonical = 'rag_eval chunks v1\n["d1","alpha"]\n["d3","gamma"]\n["d4","delta"]\n'
    assert hashes.corpus == hashlib.sha256(canonical.encode()).hexdigest()
    assert f"content hashes: qrels sha256:{hashes.qrels[:12]}" in report.card.render()
    assert "budget budget(2)" in report.card.render()
    other_budget, _ = _pipeline_report(budget="4tok")
    assert comparable(report, other_budget) == ["budget: budget(2) in a, budget(4tok) in b"]
    other_text, _ = _pipeline_report(text="ALPHA")
    assert [d.split(":")[0] for d in comparable(report, other_text)] == ["corpus"]


def _beir(folder, text="alpha"):
    folder.mkdir()
    chunks = {"d1": text, "d2": "beta", "d3": "gamma", "d4": "delta", "d9": "iota"}
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, t in chunks.items())
    )
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    (folder / "qrels").mkdir()
    rows = [f"{q}\t{d}\t{g}" for q, docs in JUDGED.items() for d, g in docs.items()]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    return Collection.from_beir(folder)


def test_a_collection_fingerprints_the_whole_corpus(tmp_path):
    collection = _beir(tmp_path / "beir")
    fingerprint, basis = corpus_sha256(collection)
    canonical = 'rag_eval corpus v1\n["d1","alpha"]\n["d2","beta"]\n["d3","gamma"]\n["d4","delta"]\n["d9","iota"]\n'
    assert basis == "collection" and fingerprint == hashlib.sha256(canonical.encode()).hexdigest()
    assert corpus_sha256(_beir(tmp_path / "changed", text="ALPHA"))[0] != fingerprint
    report, result = _pipeline_report()
    report.save_folder(tmp_path / "out", runs={"fixed": result}, collection=collection, plots=False)
    manifest = load_manifest(tmp_path / "out")
    assert (manifest.hashes.corpus, manifest.hashes.corpus_basis) == (fingerprint, "collection")
    loaded = Report.load_folder(tmp_path / "out")
    assert loaded.card.hashes == manifest.hashes
    # two reports over the same collection are comparable by its fingerprint, whatever chunks each returned
    second, result2 = _pipeline_report(budget=2)
    second.save_folder(tmp_path / "out2", runs={"fixed": result2}, collection=collection, plots=False)
    assert comparable(tmp_path / "out", tmp_path / "out2") == []
    assert comparable(tmp_path / "out", report) == ["corpus: hashed from collection in a, from hits in b"]


# ----- folders ---------------------------------------------------------------------------------------------------


def test_plain_runs_round_trip_through_a_folder(tmp_path):
    report = quiet(JUDGED, [RUN, OTHER], METRICS)
    md = report.save_folder(tmp_path / "f", qrels=JUDGED, runs={"bm25": RUN, "dense": OTHER}, title="two runs")
    assert md == tmp_path / "f" / "report.md"
    loaded = Report.load_folder(tmp_path / "f")
    pd.testing.assert_frame_equal(loaded.per_query, report.per_query)
    pd.testing.assert_frame_equal(loaded.summary, report.summary)
    assert loaded.card == report.card and loaded.card.hashes is not None
    manifest = json.loads((tmp_path / "f" / MANIFEST).read_text())
    assert manifest["format"] == "rag_eval result folder" and manifest["format_version"] == 1
    assert manifest["rag_eval_version"] == rag_eval.__version__
    assert manifest["hashes"] == report.card.hashes.model_dump()
    listed = set(manifest["files"])
    assert listed == {
        "card.json", "per_query.csv", "per_query.parquet", "qrels.txt", "report.md", "report.parquet",
        "runs/bm25.trec", "runs/dense.trec", "summary.csv", "summary.parquet",
    }  # fmt: skip
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((tmp_path / "f" / name).read_bytes()).hexdigest() == digest, name
    assert Qrels.from_trec(tmp_path / "f" / "qrels.txt") == Qrels.from_dict(JUDGED)
    assert Run.from_trec(tmp_path / "f" / "runs" / "dense.trec").to_dict() == OTHER.to_dict()
    text = md.read_text()
    assert text.startswith("# two runs\n") and "| bm25 | ndcg@3 |" in text and "content hashes: qrels sha256:" in text
    # what the folder holds recomputes the report
    again = quiet(
        Qrels.from_trec(tmp_path / "f" / "qrels.txt"),
        [Run.from_trec(tmp_path / "f" / "runs" / f"{n}.trec", name=n) for n in ("bm25", "dense")],
        METRICS,
    )
    pd.testing.assert_frame_equal(again.per_query, report.per_query)
    assert comparable(tmp_path / "f", again) == []


def test_saved_report_carries_the_hashes(tmp_path):
    report = quiet(JUDGED, RUN, METRICS)
    report.save(tmp_path / "r.parquet")
    assert Report.load(tmp_path / "r.parquet").card.hashes == report.card.hashes
    assert comparable(tmp_path / "r.parquet", report) == []


def test_pipeline_folder_written_by_the_benchmark_writer(tmp_path):
    report, result = _pipeline_report()
    md = write_report_folder(
        tmp_path / "b",
        report,
        {"fixed": result},
        Qrels.from_dict(JUDGED),
        title="t",
        facts={"date": "today"},
        plots=False,
    )
    manifest = load_manifest(tmp_path / "b")
    assert {"runs/fixed.fixed.trec", "loss_items.csv", "report.md", "qrels.txt"} <= set(manifest.files)
    assert manifest.hashes == report.card.hashes and manifest.hashes.budget == "budget(2)"
    assert "- date: today" in md.read_text() and "| fixed | recall@depth |" in md.read_text()
    loaded = Report.load_folder(tmp_path / "b")
    pd.testing.assert_frame_equal(loaded.summary, report.summary)
    pd.testing.assert_frame_equal(loaded.loss_items, report.loss_items)


def test_writing_again_removes_the_files_the_old_manifest_listed(tmp_path):
    report = quiet(JUDGED, [RUN, OTHER], METRICS)
    report.save_folder(tmp_path / "f", qrels=JUDGED, runs={"bm25": RUN, "dense": OTHER}, plots=False)
    (tmp_path / "f" / "cache").mkdir()
    (tmp_path / "f" / "cache" / "kept.bin").write_bytes(b"x")  # not listed: left alone, ignored when loading
    quiet(JUDGED, RUN, METRICS).save_folder(tmp_path / "f", runs={"bm25": RUN}, plots=False)
    assert not (tmp_path / "f" / "runs" / "dense.trec").exists() and not (tmp_path / "f" / "qrels.txt").exists()
    assert (tmp_path / "f" / "cache" / "kept.bin").exists()
    assert Report.load_folder(tmp_path / "f").runs == ["bm25"]


def test_a_tampered_file_is_refused_by_load_folder_and_comparable(tmp_path):
    report = quiet(JUDGED, RUN, METRICS)
    report.save_folder(tmp_path / "f", qrels=JUDGED, runs={"bm25": RUN}, plots=False)
    qrels = tmp_path / "f" / "qrels.txt"
    qrels.write_text(qrels.read_text().replace("q10 0 d9 3", "q10 0 d9 2"))
    with pytest.raises(InputError, match=r"qrels\.txt: its SHA-256 is [0-9a-f]{12}\.\.\., not [0-9a-f]{12}\.\.\."):
        Report.load_folder(tmp_path / "f")
    with pytest.raises(InputError, match=r"qrels\.txt"):
        comparable(tmp_path / "f", report)


def test_a_stage_run_is_tagged_with_its_stage_even_with_a_dot_in_its_name(tmp_path):
    result = Pipeline(Fixed("fixed.v2"), depth=3, budget=2).run(QUERIES, progress=False)
    report = quiet(JUDGED, {"my pipe": result})
    report.save_folder(tmp_path / "f", runs={"my pipe": result}, plots=False)
    lines = (tmp_path / "f" / "runs" / "my_pipe.fixed.v2.trec").read_text().splitlines()
    assert len(lines) == 9 and {line.split()[5] for line in lines} == {"fixed.v2"}


def test_report_md_says_n_a_for_the_latency_of_a_stage_served_from_the_cache(tmp_path):
    """A stage served from the cache has no time measured: report.md says n/a, as the HTML page does, not nan."""
    pipeline = Pipeline(Fixed(text="alpha"), depth=3, budget=2)
    computed = pipeline.run(QUERIES, progress=False, cache=tmp_path / "cache")
    cached = pipeline.run(QUERIES, progress=False, cache=tmp_path / "cache")
    row = cached.latency.to_dict("records")[0]
    assert (row["n"], row["cache_hits"]) == (0, len(QUERIES)) and pd.isna(row["p50"])
    for name, result in (("computed", computed), ("cached", cached)):
        write_report_folder(
            tmp_path / name,
            quiet(JUDGED, {"fixed": result}),
            {"fixed": result},
            Qrels.from_dict(JUDGED),
            title="t",
            facts={},
            plots=False,
        )
    lines = (tmp_path / "cached" / "report.md").read_text().splitlines()
    assert f"| fixed | n/a | n/a | 0 | {len(QUERIES)} | 0 |" in lines
    assert not [line for line in lines if re.search(r"\bnan\b", line)]
    timed = computed.latency.to_dict("records")[0]
    assert f"| fixed | {timed['p50']:.4f} | {timed['p95']:.4f} | {len(QUERIES)} | 0 | 0 |" in (
        (tmp_path / "computed" / "report.md").read_text().splitlines()
    )


def test_report_md_and_the_terminal_open_with_the_funnel_then_the_detail(tmp_path):
    """A pipeline's report.md, and its summary as `rag-eval evaluate` and `format_report` print it, open with where
    its relevant items went (rag_eval.reports.funnel), each stage's headline number, then the detail."""
    from rag_eval.renderers.formats import format_report, format_summary_table
    from rag_eval.reports.funnel import funnel

    report, result = _pipeline_report()
    found = funnel(report)
    steps = found.steps_of("fixed")
    relevant, delivered = int(steps[0]["items"]), int(steps[-1]["items"])
    assert relevant == sum(1 for grades in JUDGED.values() for g in grades.values() if g > 0)
    write_report_folder(
        tmp_path / "b",
        report,
        {"fixed": result},
        Qrels.from_dict(JUDGED),
        title="t",
        facts={"date": "today"},
        plots=False,
    )
    lines = (tmp_path / "b" / "report.md").read_text().splitlines()
    assert lines[:3] == ["# t", "", "## Where the relevant items went: fixed"]
    share = f"{delivered / relevant:.1%}"
    said = f"{delivered} of {relevant} relevant items ({share}) reached the model, summed over the queries"
    assert lines[4] == said + "; each loss named by its cause."
    assert f"| {steps[1]['step']} | {int(steps[1]['items'])} |" in "\n".join(lines).replace("&#x27;", "'")
    recall = report.summary.set_index(["stage", "metric"]).loc[("fixed", "recall@depth")]
    interval = f"[{recall['ci_low']:.3f}, {recall['ci_high']:.3f}]"
    headline = f"| fixed | recall@depth | {recall['mean']:.3f} {interval} (n={int(recall['n'])}) |"
    assert headline in lines
    assert lines.index(headline) < lines.index("## Detail") < lines.index("- date: today") < lines.index("## fixed")
    # the terminal: the funnel, then the summary table
    text = format_report(report, "table")
    assert text.startswith(f"Where the relevant items went: fixed: {delivered} of {relevant} relevant items ({share})")
    assert text.index("headline numbers") < text.index(" run stage ")
    assert format_summary_table(report) == text
    assert format_report(report, "markdown").startswith("## Where the relevant items went: fixed\n")
    # plain runs: no funnel, the table first as before
    assert format_report(quiet(JUDGED, RUN, METRICS), "table").startswith(" run ")
