"""Bad input for summaries, saved reports and the metric card (docs/bad-input/reports.md, "Summaries, saved reports and
the card"): a NaN (0/0) value is counted in ``n_nan`` in every summary and printed table, so that ``n + n_nan`` is what
the card says was counted; judged@k of an empty ranking is NaN in the table and on the card alike; a saved report is
read by its keys, or refused naming the file; the card lists every pipeline. Values are computed by hand."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rag_eval
from rag_eval import Conventions, Hit, InputError, Pipeline, Qrels, Report, Run, SpanLabels, evaluate, project
from rag_eval.adapters.functions import reranker, retriever
from rag_eval.builtin.outputs import write_report_folder
from rag_eval.cli import main
from rag_eval.data import Span
from rag_eval.reports.report import counted_of

# q1: d1 d5 -> judged@2 1/2; q2: d9 -> 0/1; q3: an empty ranking -> 0/0; q4: not in the run (counted, default
# missing_run="zero", as an empty ranking) -> 0/0. P@2: .5, 0, 0, 0.
QRELS = Qrels.from_dict({"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 1}, "q3": {"d4": 1}, "q4": {"d6": 1}})
SPARSE = Run.from_ranking({"q1": ["d1", "d5"], "q2": ["d9"], "q3": []}, name="sparse")
FULL = Run.from_ranking({"q1": ["d1", "d2"], "q2": ["d3"], "q3": ["d4", "d7"]}, name="full")  # judged@2: 1, 1, 1/2


def quiet(*args, **kwargs) -> Report:
    """evaluate() without the judged-share warning (these fixtures leave items unjudged on purpose)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rag_eval.errors.RagEvalWarning)
        return evaluate(*args, **kwargs)


def rows(summary, *keys):
    return summary.set_index(list(keys))


def assert_counts_add_up(report: Report) -> None:
    """n + n_nan of every summary row is what the card says that run (stage) counted."""
    summary = report.summary
    assert len(summary)
    for row in summary.itertuples(index=False):
        stage = getattr(row, "stage", None)
        counted = counted_of(report.card, row.run, stage)
        assert counted is not None and row.n + row.n_nan == counted == report.counted(row.run, stage), row


def test_nan_value_in_a_plain_run_summary(capsys, tmp_path):
    report = quiet(QRELS, SPARSE, ["judged@2", "P@2"])
    assert report.values("sparse", "judged@2").to_dict() == pytest.approx(
        {"q1": 0.5, "q2": 0.0, "q3": np.nan, "q4": np.nan}, nan_ok=True
    )
    summary = rows(report.summary, "metric")
    assert list(report.summary.columns)[-2:] == ["n", "n_nan"]
    assert (summary.loc["judged@2", "mean"], summary.loc["judged@2", "n"], summary.loc["judged@2", "n_nan"]) == (
        0.25,
        2,
        2,
    )
    assert (
        summary.loc["precision@2", "mean"],
        summary.loc["precision@2", "n"],
        summary.loc["precision@2", "n_nan"],
    ) == (0.125, 4, 0)
    assert report.card.queries[0].counted == 4
    assert_counts_add_up(report)
    # the CLI's table and CSV show n and n_nan as the summary does
    QRELS.to_trec(tmp_path / "qrels.txt")
    SPARSE.to_trec(tmp_path / "sparse.trec", tag="sparse")
    args = [
        "evaluate",
        str(tmp_path / "qrels.txt"),
        str(tmp_path / "sparse.trec"),
        "-m",
        "judged@2",
        "-m",
        "P@2",
        "--no-card",
        "--judged-threshold",
        "0",
    ]
    assert main(args) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[-2:] == ["n", "n_nan"]
    assert table[1].split()[-2:] == ["2", "2"] and table[1].split()[2] == "0.2500"  # only q1 is in the file's q3
    assert main([*args, "--format", "csv"]) == 0
    csv = capsys.readouterr().out.splitlines()
    assert csv[0].endswith(",n,n_nan") and csv[1].startswith("sparse,judged@2,0.25,") and csv[1].endswith(",2,2")


def test_judged_of_an_empty_ranking_is_nan_in_the_table_and_on_the_card():
    report = quiet(QRELS, SPARSE, ["judged@2"])
    share = report.judged.iloc[0]
    mean = rows(report.summary, "metric").loc["judged@2"]
    # the card's share is the table's mean over the same two queries (it was 25% against a table's 0.125)
    assert (share["share"], share["n"]) == (mean["mean"], mean["n"]) == (0.25, 2)
    assert "sparse judged@2 25.0% (n=2, below threshold: lower bound)" in report.card.render()

    # failed queries of a pipeline (failed="zero": scored as an empty ranking) are 0/0 too
    def search(query, k):
        if query == "fails":  # the query's text
            raise RuntimeError("down")
        return [Hit("d1", 1.0), Hit("d5", 0.5)][:k]

    result = Pipeline(retriever(search, name="first"), depth=2, budget=2).run({"q1": "x", "boom": "fails"})
    staged = quiet({"q1": {"d1": 1}, "boom": {"d1": 1}}, result, ["judged@budget"])
    assert staged.values(staged.runs[0], "judged@budget", stage="first").to_dict() == pytest.approx(
        {"boom": np.nan, "q1": 0.5}, nan_ok=True
    )
    row = staged.summary.iloc[0]
    assert (row["mean"], row["n"], row["n_nan"], row["n_failed"]) == (0.5, 1, 1, 1)
    first = staged.judged.set_index("metric").loc["judged@budget"]
    assert (first["share"], first["n"]) == (0.5, 1)


def test_judged_under_condensed_lists_is_measured_as_given():
    report = quiet(QRELS, SPARSE, ["judged@2", "P@2"], conventions=Conventions(unjudged="remove"))
    # condensed, q1 is d1 alone: P@2 = 1/2; judged@2 stays the share of the list as given (1/2), not 1
    assert report.values("sparse", "judged@2")["q1"] == 0.5 and report.values("sparse", "P@2")["q1"] == 0.5
    share = report.judged.iloc[0]
    assert (
        (share["share"], share["n"])
        == tuple(rows(report.summary, "metric").loc["judged@2", ["mean", "n"]])
        == (0.25, 2)
    )


def _pipeline(name: str, order):
    def search(query, k):
        return [] if query == "none" else [Hit(d, float(-i)) for i, d in enumerate(["c1", "c2", "c3"][:k])]

    return Pipeline(retriever(search, name="first"), reranker(order, name=name), depth=3, budget=2)


PIPE_QRELS = {"q1": {"c1": 1, "c3": 2}, "q2": {"c2": 0}, "none": {"c1": 1}}  # q2: no relevant item


def test_nan_values_in_a_pipeline_summary(tmp_path):
    flip = _pipeline("flip", lambda q, hits: list(reversed(hits))).run({q: q for q in PIPE_QRELS}, cache=tmp_path / "a")
    keep = _pipeline("keep", lambda q, hits: list(hits)).run({q: q for q in PIPE_QRELS}, cache=tmp_path / "b")
    report = quiet(PIPE_QRELS, {"flip": flip, "keep": keep})
    assert_counts_add_up(report)
    summary = rows(report.summary, "run", "stage", "metric")
    # loss shares are 0/0 for q2 (no relevant item); cand_ndcg also for "none" (no candidate at all)
    assert tuple(summary.loc[("flip", "flip", "loss.delivered"), ["n", "n_nan"]]) == (2, 1)
    assert tuple(summary.loc[("flip", "flip", "cand_ndcg@budget"), ["n", "n_nan"]]) == (1, 2)
    # flip delivers c3 c2 for q1: DCG 3 against the candidates' best 3 + 1/log2(3)
    assert summary.loc[("flip", "flip", "cand_ndcg@budget"), "mean"] == pytest.approx(3 / (3 + 1 / np.log2(3)))
    assert {q.run: q.counted for q in report.card.queries} == {
        "flip / first": 3,
        "flip / flip": 3,
        "keep / first": 3,
        "keep / keep": 3,
    }


def test_nan_values_in_a_projection_summary():
    labels = SpanLabels([Span("d1", 0, 10, 1, "q1"), Span("d2", 0, 10, 1, "q2")])
    chunks = {"a": ("d1", 0, 10), "b": ("d2", 0, 10), "x": ("d3", 0, 10)}
    small = project({"q1": ["a", "x"], "q2": []}, chunks, labels, name="small")
    large = project({"q1": ["x", "a"], "q2": ["b"]}, chunks, labels, name="large")
    report = quiet(labels, {"small": small, "large": large}, ["judged@2", "recall@2"])
    summary = rows(report.summary, "run", "metric")
    # small: q1 judges a (1/2), q2's ranking is empty (0/0); large: q1 1/2, q2 1/1
    assert tuple(summary.loc[("small", "judged@2"), ["mean", "n", "n_nan"]]) == (0.5, 1, 1)
    assert tuple(summary.loc[("large", "judged@2"), ["mean", "n", "n_nan"]]) == (0.75, 2, 0)
    assert_counts_add_up(report)


def test_nan_values_in_a_comparison():
    report = quiet(QRELS, [SPARSE, FULL], ["judged@2", "P@2"])
    result = rag_eval.compare(report, baseline="full", test="t")
    systems = rows(result.systems, "system", "metric")
    assert list(result.systems.columns)[-2:] == ["n", "n_nan"]
    # full: judged@2 1, 1, 1/2 and q4 (not in the run) 0/0
    assert tuple(systems.loc[("full", "judged@2"), ["mean", "n", "n_nan"]]) == (2.5 / 3, 3, 1)
    assert tuple(systems.loc[("sparse", "judged@2"), ["mean", "n", "n_nan"]]) == (0.25, 2, 2)
    for (system, _), row in systems.iterrows():
        assert row["n"] + row["n_nan"] == counted_of(report.card, system) == 4
    pair = rows(result.table, "system", "metric").loc[("sparse", "judged@2")]
    # paired on q1 and q2 only (q3: 0/0 for sparse, q4: for both): diffs -1/2 and -1
    assert (pair["n"], pair["n_nan"], pair["n_unpaired"], pair["diff"]) == (2, 2, 0, -0.75)
    assert "n_nan" in str(result).splitlines()[1]
    # a query counted by one system only is unpaired, not NaN
    skip = quiet(QRELS, [SPARSE, FULL], ["judged@2"], conventions=Conventions(missing_run="skip"))
    pair = rag_eval.compare(skip, baseline="full").table.iloc[0]
    assert (pair["n"], pair["n_nan"], pair["n_unpaired"]) == (2, 1, 0)  # q4 is left out of both; q3 0/0 for sparse


def test_two_reports_name_a_system_alike_in_a_comparison(tmp_path):
    first = quiet(QRELS, {"bm25": FULL}, ["P@2"])
    second = quiet(QRELS, {"bm25": SPARSE, "other": FULL}, ["P@2"])
    with pytest.raises(ValueError, match=r"system 'bm25' has two values of 'precision@2' for query 'q1'"):
        rag_eval.compare([first, second])


def _saved(tmp_path) -> tuple[Report, str]:
    flip = _pipeline("flip", lambda q, hits: list(reversed(hits))).run({q: q for q in PIPE_QRELS}, cache=tmp_path / "c")
    report = quiet(PIPE_QRELS, flip)
    path = str(tmp_path / "report.parquet")
    report.save(path)
    return report, path


def _rewrite(path: str, change) -> None:
    table = pq.read_table(path)
    meta = table.schema.metadata
    table = change(table)
    pq.write_table(table.replace_schema_metadata(meta), path)


def test_reordered_rows_of_a_saved_report_load_by_key(tmp_path):
    report, path = _saved(tmp_path)
    order = np.random.default_rng(0).permutation(report.per_query.shape[0])
    _rewrite(path, lambda t: t.take(pa.array(order)))
    assert pq.read_table(path).column("query_id").to_pylist() != report.per_query["query_id"].tolist()
    loaded = Report.load(path)
    keys = ["run", "stage", "query_id", "metric"]
    mine = report.per_query.set_index(keys)["value"]
    theirs = loaded.per_query.set_index(keys)["value"]
    assert len(theirs) == len(mine) and theirs.index.equals(mine.index)
    np.testing.assert_array_equal(theirs.to_numpy(), mine.to_numpy())  # every value, NaN where NaN
    assert loaded.summary.equals(report.summary)
    # a plain report too, and rows written back as a dictionary-encoded key column
    plain = quiet(QRELS, [SPARSE, FULL], ["judged@2", "P@2"])
    plain.save(tmp_path / "plain.parquet")
    _rewrite(
        str(tmp_path / "plain.parquet"),
        lambda t: t.take(pa.array(np.arange(t.num_rows)[::-1])).set_column(
            1, "query_id", t.take(pa.array(np.arange(t.num_rows)[::-1])).column("query_id").dictionary_encode()
        ),
    )
    again = Report.load(tmp_path / "plain.parquet")
    assert again.summary.equals(plain.summary)
    np.testing.assert_array_equal(
        again.values("sparse", "judged@2").to_numpy(), plain.values("sparse", "judged@2").to_numpy()
    )


def test_saved_report_with_a_missing_row(tmp_path):
    _, path = _saved(tmp_path)
    _rewrite(path, lambda t: t.slice(1))
    with pytest.raises(
        InputError,
        match=re.escape(path) + r": no row for run .*stage 'first', query 'none', metric "
        r"'recall@depth', which its metadata lists",
    ):
        Report.load(path)


def test_saved_report_with_a_repeated_key(tmp_path):
    _, path = _saved(tmp_path)
    # the first row's key given to the second row (of another metric): one key twice, another missing
    _rewrite(
        path,
        lambda t: t.set_column(
            3, "metric", pa.array([t.column("metric")[0].as_py()] * 2 + t.column("metric").to_pylist()[2:])
        ),
    )
    with pytest.raises(
        InputError,
        match=re.escape(path) + r": two rows have the same key \(run .*, stage 'first', "
        r"query 'none', metric 'recall@depth'\)",
    ):
        Report.load(path)


def test_saved_report_with_an_unknown_metric(tmp_path):
    _, path = _saved(tmp_path)
    extra = pa.table({"run": ["x"], "stage": ["first"], "query_id": ["q1"], "metric": ["P@7"], "value": [1.0]})

    def add(t):
        runs = t.column("run")[0].as_py()
        return pa.concat_tables([t, extra.set_column(0, "run", pa.array([runs])).cast(t.schema)])

    _rewrite(path, add)
    with pytest.raises(
        InputError,
        match=re.escape(path) + r": a row of an unknown metric \(run .*, stage 'first', "
        r"query 'q1', metric 'P@7'\)",
    ):
        Report.load(path)


def test_saved_report_with_keys_of_another_type(tmp_path):
    report = quiet(Qrels.from_dict({"7": {"d": 1}, "10": {"d": 1}}), Run.from_ranking({"7": ["d"]}, name="r"), ["P@1"])
    path = str(tmp_path / "r.parquet")
    report.save(path)
    _rewrite(path, lambda t: t.set_column(1, "query_id", t.column("query_id").cast(pa.int64())))
    with pytest.raises(InputError, match=re.escape(path) + r": column 'query_id' holds int64, not strings"):
        Report.load(path)


def test_saved_report_that_is_not_a_report(tmp_path):
    (tmp_path / "text.parquet").write_text("run,query_id\n")
    with pytest.raises(InputError, match=re.escape(str(tmp_path / "text.parquet")) + r": not a Parquet file"):
        Report.load(tmp_path / "text.parquet")
    pq.write_table(pa.table({"value": [1.0]}), tmp_path / "plain.parquet")
    with pytest.raises(InputError, match=r"plain\.parquet: not a rag_eval report \(no metric card in its metadata\)"):
        Report.load(tmp_path / "plain.parquet")
    _, path = _saved(tmp_path)
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    pq.write_table(table.replace_schema_metadata(meta | {b"rag_eval.card": b'{"conventions": 1}'}), path)
    with pytest.raises(InputError, match=re.escape(path) + r": its metric card does not parse"):
        Report.load(path)
    pq.write_table(table.replace_schema_metadata(meta | {b"rag_eval.blocks": b'[{"run": 1}]'}), path)
    with pytest.raises(
        InputError, match=re.escape(path) + r": block 0 of its metadata \(rag_eval.blocks\) is malformed"
    ):
        Report.load(path)


def test_saved_report_whose_card_counts_other_queries(tmp_path):
    report, path = _saved(tmp_path)
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    card = report.card.model_copy(
        update={"queries": [q.model_copy(update={"counted": 2}) for q in report.card.queries]}
    )
    pq.write_table(table.replace_schema_metadata(meta | {b"rag_eval.card": card.model_dump_json().encode()}), path)
    with pytest.raises(
        InputError,
        match=re.escape(path) + r": run .*, stage 'first' holds 3 queries but its metric "
        r"card says 2 were counted",
    ):
        Report.load(path)


def test_several_pipelines_all_on_the_card(tmp_path):
    flip = _pipeline("flip", lambda q, hits: list(reversed(hits))).run({"q1": "q1"}, cache=tmp_path / "a")
    keep = Pipeline(retriever(lambda q, k: [Hit("c1", 1.0)], name="only"), depth=5, budget=1).run({"q1": "q1"})
    report = quiet({"q1": {"c1": 1}}, {"flip": flip, "keep": keep})
    text = report.card.render()
    assert "  pipeline 'flip': first %3 >> flip %budget(2) (depth 3, budget(2))" in text
    assert "  pipeline 'keep': only %5 %budget(1) (depth 5, budget(1))" in text
    # each stage's input record and query count name its pipeline
    assert [(i.role, i.name) for i in report.card.inputs][1:] == [
        ("stage", "flip / first"),
        ("stage", "flip / flip"),
        ("stage", "keep / only"),
    ]
    assert "  stage 'keep / only': 1 queries counted" in text
    assert [p["run"] for p in report.card.pipeline["all"]] == ["flip", "keep"]
    assert [p["depth"] for p in report.card.pipeline["all"]] == [3, 5]
    assert text.count("  pipeline ") == 2


def test_report_md_shows_n_and_n_nan_as_the_summary_does(tmp_path):
    flip = _pipeline("flip", lambda q, hits: list(reversed(hits))).run({q: q for q in PIPE_QRELS}, cache=tmp_path / "c")
    report = quiet(PIPE_QRELS, {"flip": flip})
    md = write_report_folder(
        tmp_path / "out", report, {"flip": flip}, Qrels.from_dict(PIPE_QRELS), title="t", facts={}, plots=False
    ).read_text()
    assert "| stage | metric | mean [95% CI] | n | n_nan | n_failed |" in md
    summary = report.summary
    shown = 0
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        cells[1:2] = [c.split(" (")[0] for c in cells[1:2]]  # "rerank_gain@budget (recall@budget after − before)"
        if (len(cells) == 6 and cells[0] in ("first", "flip") and "@" in cells[1]) or cells[1:2] == ["loss.delivered"]:
            row = summary[(summary.stage == cells[0]) & (summary.metric == cells[1])].iloc[0]
            assert [int(c) for c in cells[3:]] == [row.n, row.n_nan, row.n_failed], line
            shown += 1
    assert shown >= 8
    assert "| flip | cand_ndcg@budget | " in md and "| 1 | 2 | 0 |" in md
    assert "over the 2 queries with a relevant item; 1 without one left out" in md


def test_cand_ndcg_is_ndcg_against_the_candidates_alone():
    """One definition of DCG: cand_ndcg@budget equals, to the last bit, the engine's ndcg@budget of the same stage
    against qrels restricted to the candidates it was given (it was computed apart, multiplying by 1/log2, and came
    out one bit lower here)."""
    ranked = ["c1", "c2", "c3", "c4", "c5", "c6"]
    grades = {"c1": 0, "c2": 0, "c3": 0, "c4": 2, "c5": 0, "c6": 3}  # c6: relevant, below the depth

    def search(query, k):
        return [Hit(d, float(-i)) for i, d in enumerate(ranked[:k])]

    result = Pipeline(
        retriever(search, name="first"), reranker(lambda q, hits: list(reversed(hits)), name="rev"), depth=5, budget=3
    ).run({"q": "q"})
    report = quiet({"q": grades}, result)
    cand = report.values(report.runs[0], "cand_ndcg@budget", stage="rev")["q"]
    # rev delivers c5 c4 c3: DCG 3 / log2(3); the best the candidates allow puts c4 first: 3
    plain = quiet(
        {"q": {d: grades[d] for d in ranked[:5]}}, Run.from_ranking({"q": ["c5", "c4", "c3"]}, name="r"), ["ndcg@3"]
    )
    assert cand == plain.values("r", "ndcg@3")["q"] == (3 / np.log2(3)) / 3
