"""evaluate's contract: one return type, the tidy per-query table, the summary with spread, the card, persistence."""

from __future__ import annotations

import copy
import gzip
import hashlib
import itertools

import numpy as np
import pandas as pd
import pydantic
import pytest

import rag_eval
from rag_eval import Conventions, Qrels, Report, Run, evaluate, parse_metric

PER_QUERY_COLUMNS = ["run", "query_id", "metric", "value"]
SUMMARY_COLUMNS = ["run", "metric", "mean", "sum", "std", "median", "ci_low", "ci_high", "n", "n_nan"]

# 30 judged queries, each with one relevant ("r", grade 1) and one non-relevant ("n") doc; the run puts "r" at
# rank i % 5 + 1 of q{i} among unjudged fillers, so mrr = 1 / (i % 5 + 1) and P@1 = [i % 5 == 0]. q29 is missing
# from the run and "zz" is in the run only.
N = 30
QIDS = [f"q{i:02d}" for i in range(N)]


def make_qrels() -> Qrels:
    return Qrels.from_dict({q: {"r": 1, "n": 0} for q in QIDS})


def make_run(name: str = "bm25") -> Run:
    ranking = {}
    for i, q in enumerate(QIDS[:-1]):
        docs = ["f1", "f2", "f3", "f4"]
        docs.insert(i % 5, "r")
        ranking[q] = docs
    ranking["zz"] = ["r", "f1"]
    return Run.from_ranking(ranking, name=name)


def expected_mrr(trec_eval: bool = False) -> dict[str, float]:
    values = {q: 1 / (i % 5 + 1) for i, q in enumerate(QIDS[:-1])}
    if not trec_eval:
        values["q29"] = 0.0
    return values


METRICS = ["mrr@10", "P@1", "ndcg@3"]


@pytest.fixture(scope="module")
def report() -> Report:
    return evaluate(make_qrels(), make_run(), METRICS)


# ----- return type and inputs ---------------------------------------------------------------------------------


def test_evaluate_returns_a_report_for_a_run_a_list_and_a_mapping():
    qrels, a, b = make_qrels(), make_run("a"), make_run("b")
    single = evaluate(qrels, a, ["P@1"])
    listed = evaluate(qrels, [a, b], ["P@1"])
    mapped = evaluate(qrels, {"first": a, "second": a}, ["P@1"])
    for r in (single, listed, mapped):
        assert isinstance(r, Report)
    assert single.runs == ["a"]
    assert listed.runs == ["a", "b"]
    assert mapped.runs == ["first", "second"]
    assert mapped.per_query["run"].unique().tolist() == ["first", "second"]
    assert [q.run for q in mapped.card.queries] == ["first", "second"]
    assert [i.name for i in mapped.card.inputs] == ["qrels", "first", "second"]
    pd.testing.assert_series_equal(single.values("a", "P@1"), listed.values("b", "precision@1"))


def test_evaluate_accepts_qrels_as_a_dict():
    r = evaluate({q: {"r": 1, "n": 0} for q in QIDS}, make_run(), ["mrr@10"])
    assert r.values("bm25", "mrr@10").to_dict() == expected_mrr()


def test_two_runs_with_the_same_name_in_a_list_is_a_value_error():
    with pytest.raises(ValueError, match="bm25"):
        evaluate(make_qrels(), [make_run(), make_run()], ["P@1"])


@pytest.mark.parametrize(
    "runs",
    [
        "bm25",
        3,
        None,
        [],
        {},
        {"a": 3},
        {"a": {"q00": {"r": 1.0}}},
        [{"q00": {"r": 1.0}}],
        [make_run(), "not a run"],
        [make_run("a"), make_run("b"), 3],
        (make_run(), None),
    ],
    ids=[
        "str",
        "int",
        "None",
        "empty-list",
        "empty-dict",
        "dict-of-int",
        "dict-of-dict",
        "list-of-dict",
        "run-then-str",
        "runs-then-int",
        "tuple-run-None",
    ],
)
def test_non_run_input_is_a_type_error(runs):
    with pytest.raises(TypeError):
        evaluate(make_qrels(), runs, ["P@1"])


def test_run_names_in_a_mapping_must_be_str():
    with pytest.raises(TypeError):
        evaluate(make_qrels(), {1: make_run()}, ["P@1"])


def test_bad_qrels_is_a_type_error():
    with pytest.raises(TypeError):
        evaluate([("q00", "r", 1)], make_run(), ["P@1"])


def test_no_metrics_and_unknown_metrics():
    with pytest.raises(ValueError):
        evaluate(make_qrels(), make_run(), [])
    with pytest.raises(rag_eval.InputError, match="did you mean"):
        evaluate(make_qrels(), make_run(), ["ndgc@10"])


def test_default_metrics_are_canonical():
    r = evaluate(make_qrels(), make_run())
    assert r.metrics == ["ndcg@10", "recall@10", "recall@100", "precision@10", "mrr@10", "ap", "judged@10"]
    assert r.card.metrics == r.metrics


# ----- per_query ----------------------------------------------------------------------------------------------


def test_per_query_columns_and_values(report):
    pq = report.per_query
    assert list(pq.columns) == PER_QUERY_COLUMNS
    assert len(pq) == N * len(METRICS)
    assert pq["metric"].unique().tolist() == ["mrr@10", "precision@1", "ndcg@3"]
    assert pq["query_id"].unique().tolist() == QIDS  # qrels queries, sorted; run-only "zz" left out
    mrr = pq[pq["metric"] == "mrr@10"].set_index("query_id")["value"].to_dict()
    assert mrr == pytest.approx(expected_mrr())
    p1 = pq[pq["metric"] == "precision@1"].set_index("query_id")["value"].to_dict()
    assert p1 == {q: (1.0 if i % 5 == 0 and q != "q29" else 0.0) for i, q in enumerate(QIDS)}
    ndcg3 = report.values("bm25", "ndcg@3")
    # one relevant of gain 1 at rank p: 1 / log2(p + 1) when p <= 3
    assert ndcg3["q01"] == pytest.approx(1 / np.log2(3))
    assert ndcg3["q02"] == pytest.approx(0.5)
    assert ndcg3["q03"] == 0.0
    assert ndcg3["q29"] == 0.0


def test_per_query_is_a_copy(report):
    pq = report.per_query
    pq["value"] = -1.0
    assert (report.per_query["value"] >= 0).all()


def test_queries_sorted_as_strings():
    qrels = Qrels.from_dict({"9": {"a": 1}, "10": {"a": 1}, "q1": {"a": 1}, "0010": {"a": 1}})
    run = Run.from_scores({"9": {"a": 1.0}, "10": {"b": 1.0}, "q1": {"a": 1.0}, "0010": {"a": 2.0}})
    r = evaluate(qrels, run, ["P@1"])
    assert r.per_query["query_id"].tolist() == ["0010", "10", "9", "q1"]
    assert r.per_query["value"].tolist() == [1.0, 0.0, 1.0, 1.0]


def test_values_and_mean(report):
    series = report.values("bm25", "recip_rank@10")
    assert series.index.name == "query_id"
    assert series.name == "mrr@10"
    assert series.index.tolist() == QIDS
    assert report.mean("bm25", "mrr@10") == pytest.approx(sum(expected_mrr().values()) / N)
    with pytest.raises(KeyError, match="not measured"):
        report.values("bm25", "ap")
    with pytest.raises(KeyError):
        report.values("nope", "mrr@10")


# ----- summary ------------------------------------------------------------------------------------------------


def test_summary_columns_and_statistics(report):
    summary = report.summary
    assert list(summary.columns) == SUMMARY_COLUMNS
    assert summary["metric"].tolist() == ["mrr@10", "precision@1", "ndcg@3"]
    assert (summary["run"] == "bm25").all()
    pq = report.per_query
    for row in summary.itertuples(index=False):
        values = pq.loc[(pq["run"] == row.run) & (pq["metric"] == row.metric), "value"].to_numpy()
        assert row.n == N == len(values)
        assert row.mean == pytest.approx(values.mean())
        assert row.sum == pytest.approx(values.sum())
        assert row.std == pytest.approx(np.std(values, ddof=1))
        assert row.median == pytest.approx(np.median(values))
        assert row.ci_low <= row.mean <= row.ci_high
        assert row.ci_low < row.ci_high
    mrr = summary.set_index("metric").loc["mrr@10"]
    assert mrr["mean"] == pytest.approx(sum(expected_mrr().values()) / N)
    assert mrr["median"] == pytest.approx(1 / 3)
    assert summary["n"].dtype == np.int64


def test_summary_is_seeded_and_repeatable(report):
    first = report.summary
    pd.testing.assert_frame_equal(first, report.summary)
    pd.testing.assert_frame_equal(first, report.summarize())
    pd.testing.assert_frame_equal(report.summarize(seed=3), report.summarize(seed=3))
    again = evaluate(make_qrels(), make_run(), METRICS)
    pd.testing.assert_frame_equal(first, again.summary)


def test_summary_ci_changes_with_seed_and_resamples(report):
    base = report.summarize()[["ci_low", "ci_high"]].to_numpy()
    other_seed = report.summarize(seed=1)
    fewer = report.summarize(resamples=50)
    assert not np.array_equal(base, other_seed[["ci_low", "ci_high"]].to_numpy())
    assert not np.array_equal(base, fewer[["ci_low", "ci_high"]].to_numpy())
    # everything but the interval stays put
    for frame in (other_seed, fewer):
        pd.testing.assert_frame_equal(
            frame.drop(columns=["ci_low", "ci_high"]), report.summary.drop(columns=["ci_low", "ci_high"])
        )


def test_higher_confidence_widens_the_interval(report):
    widths = []
    for confidence in (0.5, 0.8, 0.95, 0.99):
        s = report.summarize(confidence=confidence)
        assert (s["ci_low"] <= s["mean"]).all() and (s["mean"] <= s["ci_high"]).all()
        widths.append((s["ci_high"] - s["ci_low"]).to_numpy())
    for narrow, wide in itertools.pairwise(widths):
        assert (wide >= narrow).all()
    assert (widths[-1] > widths[0]).all()


@pytest.mark.parametrize("kwargs", [{"confidence": 0}, {"confidence": 1}, {"confidence": 1.5}, {"resamples": 0}])
def test_bad_summary_options_are_value_errors(report, kwargs):
    with pytest.raises(ValueError):
        report.summarize(**kwargs)


def test_summary_of_a_single_query_has_no_std():
    r = evaluate(Qrels.from_dict({"q": {"a": 1}}), Run.from_ranking({"q": ["b", "a"]}), ["mrr"])
    row = r.summary.iloc[0]
    assert row["mean"] == 0.5 and row["median"] == 0.5 and row["n"] == 1 and row["sum"] == 0.5
    assert np.isnan(row["std"])
    assert row["ci_low"] == row["ci_high"] == 0.5


# ----- the card -----------------------------------------------------------------------------------------------


def test_card_of_in_memory_inputs(report):
    card = report.card
    assert card.preset == "default"
    assert card.conventions == Conventions()
    assert card.metrics == ["mrr@10", "precision@1", "ndcg@3"]
    assert card.rag_eval_version == rag_eval.__version__
    qrels_record, run_record = card.inputs
    assert (qrels_record.role, qrels_record.name, qrels_record.path, qrels_record.sha256) == (
        "qrels",
        "qrels",
        None,
        None,
    )
    assert (run_record.role, run_record.name, run_record.path, run_record.sha256) == ("run", "bm25", None, None)
    assert run_record.ranked_by == "given"
    assert run_record.notes == []
    (queries,) = card.queries
    assert queries.run == "bm25"
    assert queries.counted == N
    assert queries.left_out == {"run_only": ["zz"]}
    assert queries.counted_as_zero == {"missing_run": ["q29"]}  # default: counted as an empty ranking
    text = card.render()
    assert "bm25" in text and "zz" in text and "q29" in text


def test_card_under_the_trec_eval_preset_lists_missing_queries():
    r = evaluate(make_qrels(), make_run(), ["mrr@10"], conventions="trec_eval")
    assert r.card.preset == "trec_eval"
    assert r.card.conventions == rag_eval.metrics.PRESETS["trec_eval"]
    (queries,) = r.card.queries
    assert queries.counted == N - 1
    assert queries.left_out == {"run_only": ["zz"], "missing_run": ["q29"]}
    assert queries.counted_as_zero == {}
    assert r.values("bm25", "mrr@10").to_dict() == pytest.approx(expected_mrr(trec_eval=True))
    assert r.summary["n"].tolist() == [N - 1]


def test_card_of_file_inputs_records_path_and_sha256(tmp_path):
    qrels_path = tmp_path / "qrels.txt"
    make_qrels().to_trec(qrels_path)
    run_path = tmp_path / "bm25.trec.gz"
    plain = tmp_path / "bm25.trec"
    make_run().to_trec(plain)
    run_path.write_bytes(gzip.compress(plain.read_bytes()))
    dup_path = tmp_path / "dup.trec"
    dup_path.write_text("q00 Q0 r 1 2.0 t\nq00 Q0 r 2 1.0 t\nq01 Q0 f1 1 1.0 t\n")

    with pytest.warns(UserWarning):
        dup = Run.from_trec(dup_path)
    with pytest.warns(rag_eval.errors.LowQueryOverlap, match="run 'dup.trec' holds only 2 of the qrels' 30"):
        r = evaluate(Qrels.from_trec(qrels_path), [Run.from_trec(run_path), dup, make_run("mem")], ["P@1"])
    qrels_record, gz_record, dup_record, mem_record = r.card.inputs
    assert (qrels_record.role, qrels_record.name) == ("qrels", "qrels.txt")
    assert qrels_record.path == str(qrels_path)
    assert qrels_record.sha256 == hashlib.sha256(qrels_path.read_bytes()).hexdigest()
    assert gz_record.name == "bm25.trec"
    assert gz_record.path == str(run_path)
    assert gz_record.sha256 == hashlib.sha256(run_path.read_bytes()).hexdigest()  # the compressed bytes
    assert gz_record.sha256 != hashlib.sha256(plain.read_bytes()).hexdigest()
    assert gz_record.ranked_by == "score"
    assert dup_record.sha256 == hashlib.sha256(dup_path.read_bytes()).hexdigest()
    assert len(dup_record.notes) == 1 and "repeated" in dup_record.notes[0]
    assert (mem_record.path, mem_record.sha256, mem_record.ranked_by) == (None, None, "given")
    counted = {q.run: q.counted for q in r.card.queries}
    assert counted == {"bm25.trec": N, "dup.trec": N, "mem": N}
    assert r.values("dup.trec", "P@1")[["q00", "q01", "q02"]].tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "no_relevant, counted, left_out, counted_as_zero",
    [
        ("zero", ["a", "b", "c"], {}, {"no_relevant": ["b", "c"]}),
        ("skip", ["a"], {"no_relevant": ["b", "c"]}, {}),
    ],
)
def test_queries_without_relevant_judgements(no_relevant, counted, left_out, counted_as_zero):
    qrels = Qrels.from_dict({"a": {"x": 1}, "b": {"x": 0}, "c": {"x": -1, "y": 0}})
    run = Run.from_ranking({"a": ["x"], "b": ["x"], "c": ["y", "x"]})
    r = evaluate(qrels, run, ["P@1", "recall@5"], conventions=Conventions(no_relevant=no_relevant))
    (queries,) = r.card.queries
    assert r.per_query["query_id"].unique().tolist() == counted
    assert queries.counted == len(counted)
    assert queries.left_out == left_out
    assert queries.counted_as_zero == counted_as_zero
    assert r.values("run", "recall@5").tolist() == [1.0] + [0.0] * (len(counted) - 1)


@pytest.mark.parametrize(
    "conventions, preset",
    [
        ("default", "default"),
        ("trec_eval", "trec_eval"),
        (Conventions(), "default"),
        (Conventions(gain="linear", missing_run="skip", negative_grades="unjudged"), "trec_eval"),
        (Conventions(ties="doc_id"), None),
        (Conventions().replace(relevance_threshold=2), None),
    ],
)
def test_conventions_as_preset_or_object(conventions, preset):
    r = evaluate(make_qrels(), make_run(), ["P@1"], conventions=conventions)
    assert r.card.preset == preset
    expected = conventions if isinstance(conventions, Conventions) else rag_eval.metrics.PRESETS[conventions]
    assert r.card.conventions == expected


@pytest.mark.parametrize("conventions", ["nope", "TREC_EVAL", "", None, {"gain": "linear"}])
def test_unknown_preset_is_a_value_error(conventions):
    with pytest.raises(ValueError):
        evaluate(make_qrels(), make_run(), ["P@1"], conventions=conventions)


def test_conventions_change_values():
    qrels = Qrels.from_dict({"q": {"a": 2, "b": 1}})
    run = Run.from_scores({"q": {"a": 1.0, "b": 1.0}})  # tie: trec_eval order b, a; doc_id order a, b
    default = evaluate(qrels, run, ["P@1", "ndcg"]).values("run", "ndcg")["q"]
    by_doc = evaluate(qrels, run, ["ndcg"], conventions=Conventions(ties="doc_id")).values("run", "ndcg")["q"]
    assert by_doc == pytest.approx(1.0)
    assert default == pytest.approx((1 + 3 / np.log2(3)) / (3 + 1 / np.log2(3)))
    p1_strict = evaluate(qrels, run, ["P@1"], conventions=Conventions(relevance_threshold=2))
    assert p1_strict.values("run", "P@1")["q"] == 0.0


# ----- nothing is mutated -------------------------------------------------------------------------------------


def test_evaluate_does_not_mutate_its_inputs():
    qrels = Qrels.from_dict({"q1": {"a": 2, "b": 0, "c": -1}, "q2": {"x": 1}})
    run = Run.from_scores({"q1": {"a": 1.0, "b": 1.0, "c": 0.5, "u": 2.0}, "q3": {"x": 1.0}}, name="r")
    given = Run.from_ranking({"q1": [("c", 0.1), ("a", 0.9)]}, name="g")
    metrics = ["P@1", parse_metric("ndcg@10"), "P_1", "bpref"]
    metrics_before = list(metrics)
    mapping = {"r": run, "g": given}
    qrels_before, run_before, given_before = qrels.to_dict(), run.to_dict(), given.to_dict()
    rankings_before = (run.ranking("q1"), given.ranking("q1"))
    for conventions in ("default", "trec_eval", Conventions(unjudged="remove", max_depth=1, ties="input_order")):
        r = evaluate(qrels, mapping, metrics, conventions=conventions)
        assert r.metrics == ["precision@1", "ndcg@10", "bpref"]
    assert metrics == metrics_before
    assert [type(m) for m in metrics] == [str, rag_eval.Metric, str, str]
    assert list(mapping) == ["r", "g"] and mapping["r"] is run
    assert qrels.to_dict() == qrels_before
    assert run.to_dict() == run_before
    assert given.to_dict() == given_before
    assert (run.ranking("q1"), given.ranking("q1")) == rankings_before
    tupled = ("P@1", "map")
    evaluate(qrels, run, tupled)
    assert tupled == ("P@1", "map")


# ----- save and load ------------------------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    qrels_path = tmp_path / "qrels.txt"
    make_qrels().to_trec(qrels_path)
    original = evaluate(
        Qrels.from_trec(qrels_path), {"bm25": make_run(), "other": make_run("x")}, METRICS, conventions="trec_eval"
    )
    path = tmp_path / "report.parquet"
    original.save(path)
    loaded = Report.load(path)
    pd.testing.assert_frame_equal(loaded.per_query, original.per_query)
    assert loaded.card == original.card
    assert loaded.card.inputs[0].sha256 == hashlib.sha256(qrels_path.read_bytes()).hexdigest()
    assert loaded.runs == ["bm25", "other"]
    assert loaded.metrics == original.metrics
    pd.testing.assert_frame_equal(loaded.summary, original.summary)
    pd.testing.assert_series_equal(loaded.values("other", "mrr@10"), original.values("other", "mrr@10"))


def test_load_refuses_a_parquet_file_without_a_card(tmp_path):
    path = tmp_path / "plain.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(path)
    with pytest.raises(ValueError, match="not a rag_eval report"):
        Report.load(path)


def test_report_repr_names_runs_and_metrics(report):
    assert repr(report) == "Report(runs=['bm25'], metrics=['mrr@10', 'precision@1', 'ndcg@3'], queries=30)"


def test_card_is_a_value(report):
    clone = copy.deepcopy(report.card)
    assert clone == report.card
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        report.card.preset = "trec_eval"  # type: ignore[misc]


# ----- every summary counts every query: a property ----------------------------------------------------------
from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from . import strategies  # noqa: E402

PROPERTY_QUERIES = ["q1", "q2", "q10", "q3"]
PROPERTY_METRICS = ["judged@1", "judged@3", "ndcg@3", "P@2", "recall@3", "ap", "mrr", "bpref"]


@settings(max_examples=60, deadline=None)
@given(
    qrels=strategies.qrels_dicts(PROPERTY_QUERIES),
    first=strategies.score_dicts(PROPERTY_QUERIES, [0.0, 1.0, 2.5]),
    second=strategies.score_dicts(PROPERTY_QUERIES, [0.0, 1.0]),
    conventions=st.sampled_from(strategies.CONVENTIONS),
    order=st.randoms(use_true_random=False),
)
def test_every_summary_counts_what_the_card_counts(qrels, first, second, conventions, order):
    """On any accepted input: n + n_nan of every summary row (report, saved and reloaded with its rows shuffled,
    comparison systems and pairs) is the number of queries the card counted, and judged@k's mean and n are the
    card's judged share."""
    import tempfile
    import warnings

    import pyarrow as pa
    import pyarrow.parquet as pq

    from rag_eval.reports.report import counted_of

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            report = evaluate(
                qrels,
                {"a": Run.from_scores(first, name="a"), "b": Run.from_scores(second, name="b")},
                PROPERTY_METRICS,
                conventions=conventions,
            )
        except rag_eval.InputError:
            assume(False)
        summary = report.summary
        for row in summary.itertuples(index=False):
            assert row.n + row.n_nan == counted_of(report.card, row.run)
        means = summary.set_index(["run", "metric"])
        for share in report.judged.itertuples(index=False):
            if share.metric not in PROPERTY_METRICS:
                continue  # a share at a cutoff of another metric (P@2): not in the table
            assert share.n == means.loc[(share.run, share.metric), "n"]
            assert share.share == pytest.approx(means.loc[(share.run, share.metric), "mean"], nan_ok=True)
        with tempfile.TemporaryDirectory() as folder:
            path = f"{folder}/r.parquet"
            report.save(path)
            table = pq.read_table(path)
            shuffled = table.take(pa.array(order.sample(range(table.num_rows), table.num_rows), type=pa.int64()))
            pq.write_table(shuffled.replace_schema_metadata(table.schema.metadata), path)
            loaded = Report.load(path)
        pd.testing.assert_frame_equal(loaded.per_query, report.per_query)
        if report.card.queries[0].counted and report.card.queries[1].counted:
            result = rag_eval.compare(report, baseline="b", resamples=20, permutations=50)
            for row in result.systems.itertuples(index=False):
                assert row.n + row.n_nan == counted_of(report.card, row.system)
            both = len(set(report.values("a", "P@2").index) & set(report.values("b", "P@2").index))
            for row in result.table.itertuples(index=False):
                assert row.n + row.n_nan == both
