"""The Report's public API that the renderers read (blocks, block, column, tables, recall_curves, with_card): the
values it holds, and the recall curves measured once, at evaluation (the renderers compute no metric)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from rag_eval import Hit, Pipeline, Report, Run, evaluate
from rag_eval.adapters import functions

CORPUS = {f"d{i:02d}": f"chunk {i}" for i in range(40)}
QUERIES = {f"q{i}": f"question {i}" for i in range(6)}
QRELS = {f"q{i}": {f"d{i:02d}": 2, f"d{i + 7:02d}": 1, f"d{i + 20:02d}": 1} for i in range(6)}
DEPTH, BUDGET = 30, 3


def search(query, k):
    n = int(query.split()[1])
    order = sorted(CORPUS, key=lambda d: ((int(d[1:]) - n) % 40, d))
    return [Hit(d, float(40 - j), CORPUS[d]) for j, d in enumerate(order)]


def shuffle(query, hits):
    """A reranker that moves the third chunk first: recall at small k changes, at the depth it cannot."""
    ids = [h.doc_id for h in hits]
    return [ids[2], *ids[:2], *ids[3:]]


@pytest.fixture(scope="module")
def made():
    pipeline = Pipeline(
        functions.retriever(search, name="first"),
        functions.reranker(shuffle, name="rerank"),
        depth=DEPTH,
        budget=BUDGET,
    )
    result = pipeline.run(QUERIES, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a small hand-made set: the judged-share warning is expected
        report = evaluate(QRELS, {"p": result}, ["recall@depth", "ndcg@budget"])
    return report, result


def test_recall_curves_are_the_recall_of_each_stage_s_ranking_at_each_k(made):
    report, _ = made
    curves = report.recall_curves
    assert list(curves.columns) == ["run", "stage", "k", "recall"]
    assert set(curves["stage"]) == {"first", "rerank"} and set(curves["run"]) == {"p"}
    ks = sorted(set(curves["k"]))
    assert ks[0] == 1 and ks[-1] == DEPTH and len(ks) > 10
    first = {q: [h.doc_id for h in search(QUERIES[q], DEPTH)][:DEPTH] for q in QUERIES}
    rankings = {"first": first, "rerank": {q: shuffle(QUERIES[q], search(QUERIES[q], DEPTH)[:DEPTH]) for q in QUERIES}}
    for stage, ranking in rankings.items():
        for k in ks:
            # by hand: the share of a query's relevant chunks (grade > 0) in its top k, averaged over the queries
            shares = [len({d for d, g in QRELS[q].items() if g > 0} & set(ranking[q][:k])) / 3 for q in QUERIES]
            got = curves[(curves["stage"] == stage) & (curves["k"] == k)]["recall"]
            assert got.tolist() == pytest.approx([np.mean(shares)], abs=1e-12), (stage, k)
    at_1 = curves[curves["k"] == 1].set_index("stage")["recall"]
    # each query's own chunk (grade 2) is first in the first stage; the reranker puts the third chunk first
    assert at_1["first"] == pytest.approx(1 / 3) and at_1["rerank"] == pytest.approx(0.0)


def test_the_curve_meets_the_table_s_recall_at_depth(made):
    report, _ = made
    curves = report.recall_curves
    for stage in ("first", "rerank"):
        at_depth = curves[(curves["stage"] == stage) & (curves["k"] == DEPTH)]["recall"].item()
        assert at_depth == pytest.approx(report.mean("p", "recall@depth", stage))


def test_recall_curves_survive_save_and_load(made, tmp_path):
    report, _ = made
    report.save(tmp_path / "r.parquet")
    again = Report.load(tmp_path / "r.parquet")
    assert again.recall_curves.to_dict("list") == report.recall_curves.to_dict("list")


def test_a_report_of_runs_has_no_curve_but_the_columns():
    run = Run.from_scores({"q0": {"d00": 2.0, "d01": 1.0}})
    report = evaluate({"q0": {"d00": 1}}, run, ["recall@2"])
    assert report.recall_curves.empty and list(report.recall_curves.columns) == ["run", "stage", "k", "recall"]
    assert set(report.tables) <= {"judged", "issues"}


def test_blocks_block_and_column_give_what_values_gives(made):
    report, _ = made
    assert [(b.run, b.stage) for b in report.blocks] == [("p", "first"), ("p", "rerank")]
    block = report.block("p", "rerank")
    assert block.metrics == report.blocks[1].metrics and block.query_ids == report.query_ids("p", "rerank")
    column = report.column("p", "ndcg@budget", "rerank")
    values = report.values("p", "ndcg@budget", "rerank")
    assert np.array_equal(column, values.to_numpy(), equal_nan=True)
    with pytest.raises(KeyError, match="this report has stages"):
        report.block("p")
    with pytest.raises(KeyError, match="no stage named 'x'"):
        report.block("p", "x")
    with pytest.raises(KeyError, match="was not measured"):
        report.column("p", "P@5", "first")


def test_tables_are_copies(made):
    report, _ = made
    tables = report.tables
    assert {"latency", "failures", "issues", "loss_items", "judged", "recall_curves"} <= set(tables)
    tables["recall_curves"].loc[:, "recall"] = -1.0
    assert (report.recall_curves["recall"] >= 0).all()
    report.blocks.clear()
    assert len(report.blocks) == 2


def test_with_card_keeps_the_values(made):
    report, _ = made
    card = report.card.model_copy(update={"notes": [*report.card.notes, "a note"]})
    other = report.with_card(card)
    assert other.card.notes[-1] == "a note" and report.card.notes[-1:] != ["a note"]
    assert other.per_query.equals(report.per_query)


def test_the_html_plot_reads_the_stored_curve_without_the_metric_engine(made, tmp_path, monkeypatch):
    pytest.importorskip("jinja2")
    pytest.importorskip("matplotlib")
    report, result = made
    import rag_eval.metrics._engine as engine

    def refuse(*args, **kwargs):
        raise AssertionError("a renderer called the metric engine")

    monkeypatch.setattr(engine, "evaluate_run", refuse)
    # no qrels given: the plot of recall@k still comes, from the report itself
    path = report.to_html(tmp_path / "r.html", results=result)
    page = path.read_text("utf-8")
    assert "recall@k" in page
