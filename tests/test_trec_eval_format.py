"""rag_eval's trec_eval printout (rag_eval/reports/trec_eval.py) on hand-made reports: which measures print per
query and in the summary, their order, integers and quoted strings, the geometric mean, ``metrics=``, and the
text metrics and geometric means a Report keeps (summary, save/load).

The numbers are hand-worked; tests/test_conformance_trec_eval.py checks the whole printout against trec_eval's
golden files, tests/test_trec_eval_oracle.py against the binary on random data.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rag_eval.metrics.conventions import PRESETS
from rag_eval.metrics.grammar import Metric, parse_metric
from rag_eval.renderers.trec_eval import format_trec_eval, trec_eval_geometric_mean, trec_eval_lines, trec_eval_mean
from rag_eval.reports.card import MetricCard, QueryRecord
from rag_eval.reports.report import Report, RunScores
from rag_eval.reports.summary import summarize_geometric


def _report(
    numbers: dict[str, list[float]],
    texts: dict[str, list[str]] | None = None,
    *,
    queries=("q1", "q2", "q3"),
    conventions="trec_eval",
    run="sys",
) -> Report:
    """A report of one run whose values are given by metric (numbers) and its text metrics (texts)."""
    texts = texts or {}
    names = list(numbers) + list(texts)
    values = np.array([numbers[m] for m in numbers], dtype=np.float64).T.reshape(len(queries), len(numbers))
    card = MetricCard.build(PRESETS[conventions], names, [], [QueryRecord(run=run, counted=len(queries))])
    block = RunScores(list(queries), values, run, None, list(numbers), texts=dict(texts))
    return Report([block], names, card)


def _lines(text: str) -> list[tuple[str, str, str]]:
    return [tuple(part.strip() for part in line.split("\t")) for line in text.splitlines()]


MIXED = {
    "precision@10": [0.1, 0.2, 0.3],
    "ap": [0.5, 0.0, 0.2],
    "precision@5": [0.2, 0.4, 0.0],
    "num_ret": [10.0, 5.0, 0.0],
    "iprec_at_recall(level=0.5)": [0.5, 0.25, 0.0],
    "iprec_at_recall(level=0.1)": [1.0, 0.5, 0.0],
    "judged@10": [1.0, 0.5, 0.25],
    "gm_map": [0.5, 0.0, 0.2],
}
RELSTRING = {"relstring@20": ["10-.", "", ">0<"]}


def test_measures_print_in_trec_eval_s_table_order_with_cutoffs_ascending():
    report = _report(MIXED, RELSTRING)
    printed = format_trec_eval(report, per_query=True)
    names = [name for name, qid, _ in _lines(printed) if qid == "q1"]
    # num_ret, map, iprec_at_recall (0.10 before 0.50), P (5 before 10), relstring; judged@10 is not trec_eval's
    assert names == [
        "num_ret",
        "map",
        "iprec_at_recall_0.10",
        "iprec_at_recall_0.50",
        "P_5",
        "P_10",
        "relstring_20",
        "judged@10",
    ]
    summary = [name for name, qid, _ in _lines(printed) if qid == "all"]
    # runid and num_q first (no metrics= given: printed as always), gm_map after map, relstring not at all
    assert summary == [
        "runid",
        "num_q",
        "num_ret",
        "map",
        "gm_map",
        "iprec_at_recall_0.10",
        "iprec_at_recall_0.50",
        "P_5",
        "P_10",
        "judged@10",
    ]


def test_per_query_and_all_lines_print_as_trec_eval_prints_them():
    report = _report(MIXED, RELSTRING)
    printed = format_trec_eval(report, per_query=True)
    assert printed.splitlines()[:8] == [
        "num_ret               \tq1\t10",
        "map                   \tq1\t0.5000",
        "iprec_at_recall_0.10  \tq1\t1.0000",
        "iprec_at_recall_0.50  \tq1\t0.5000",
        "P_5                   \tq1\t0.2000",
        "P_10                  \tq1\t0.1000",
        "relstring_20          \tq1\t'10-.'",
        "judged@10             \tq1\t1.0000",
    ]
    assert "relstring_20          \tq2\t''" in printed.splitlines()  # an empty ranking: an empty quoted string
    assert printed.splitlines()[-10:] == [
        "runid                 \tall\tsys",
        "num_q                 \tall\t3",
        "num_ret               \tall\t15",  # a count: the sum, as an integer
        "map                   \tall\t0.2333",
        "gm_map                \tall\t0.0100",  # (0.5 x 1e-5 x 0.2)^(1/3): 0 floored at 1e-5
        "iprec_at_recall_0.10  \tall\t0.5000",
        "iprec_at_recall_0.50  \tall\t0.2500",
        "P_5                   \tall\t0.2000",
        "P_10                  \tall\t0.2000",
        "judged@10             \tall\t0.5833",
    ]
    # gm_map, num_q and runid print in the summary only
    assert not [line for line in _lines(printed) if line[0] in ("gm_map", "num_q", "runid") and line[1] != "all"]


def test_lines_carry_the_values_at_full_precision_in_the_printed_order():
    report = _report(MIXED, RELSTRING)
    lines = trec_eval_lines(report, per_query=True)
    printed = format_trec_eval(report, per_query=True).splitlines()
    assert [(line.measure, line.query_id) for line in lines] == [
        (name.strip(), qid) for name, qid, _ in (p.split("\t") for p in printed)
    ]
    gm = next(line for line in lines if line.measure == "gm_map")
    assert gm.value == pytest.approx(0.01, rel=1e-12)
    assert next(line for line in lines if line.measure == "relstring_20" and line.query_id == "q3").value == "'>0<'"


def test_the_geometric_mean_is_trec_eval_s():
    assert trec_eval_geometric_mean(np.array([0.5, 0.0, 0.2])) == pytest.approx(0.01, rel=1e-12)
    assert trec_eval_geometric_mean(np.array([])) == 0.0
    assert trec_eval_geometric_mean(np.array([1.0, 1.0])) == 1.0
    # the logs are added one by one, then divided, then exponentiated: as trec_eval does
    values = np.array([0.3, 1e-7, 0.9, 0.05])
    total = 0.0
    for v in values:
        total += math.log(max(v, 1e-5))
    assert trec_eval_geometric_mean(values) == math.exp(total / 4)
    assert trec_eval_mean(np.array([0.1, 0.2, 0.3])) == ((0.1 + 0.2) + 0.3) / 3


def test_metrics_given_are_printed_with_their_spelling_and_runid_num_q_only_when_asked():
    numbers = {"precision@5": [0.2, 0.4, 0.0], "utility(weights=2;-1;0;0)": [-3.0, 1.0, 0.0], "ap": [0.5, 0.0, 0.2]}
    report = _report(numbers)
    p5 = parse_metric("precision@5")
    utility = Metric("utility", None, (("weights", "2;-1;0;0"),), spelling="2,-1,0,0")
    assert format_trec_eval(report, metrics=[p5]) == "P_5                   \tall\t0.2000\n"
    assert format_trec_eval(report, metrics=[utility, p5]).splitlines() == [
        "P_5                   \tall\t0.2000",
        "utility_2,-1,0,0      \tall\t-0.6667",
    ]
    asked = [p5, Metric("num_q"), Metric("runid")]
    assert format_trec_eval(report, metrics=asked).splitlines() == [
        "runid                 \tall\tsys",
        "num_q                 \tall\t3",
        "P_5                   \tall\t0.2000",
    ]


def test_a_metric_given_that_the_report_lacks_is_refused():
    report = _report({"precision@5": [0.2, 0.4, 0.0]})
    with pytest.raises(ValueError, match=r"'precision@10' is not in the report"):
        format_trec_eval(report, metrics=[parse_metric("precision@10")])
    with pytest.raises(TypeError, match="Metric objects"):
        format_trec_eval(report, metrics=["precision@5"])


def test_the_runid_is_the_run_s_tag_or_the_report_s_runid_column():
    report = _report({"precision@5": [0.2, 0.4, 0.0]}, {"runid": ["tagA", "tagA", "tagB"]})
    assert format_trec_eval(report).splitlines()[0] == "runid                 \tall\ttagB"  # the last line's tag
    assert format_trec_eval(report, metrics=[parse_metric("runid")]) == "runid                 \tall\ttagB\n"


def test_under_other_conventions_all_lines_are_the_summary_s_mean():
    report = _report(MIXED, RELSTRING, conventions="default")
    summary = report.summary.set_index("metric")
    printed = {name: value for name, qid, value in _lines(format_trec_eval(report)) if qid == "all"}
    assert printed["gm_map"] == f"{summary.loc['gm_map', 'mean']:6.4f}" == "0.0100"
    assert printed["P_10"] == f"{summary.loc['precision@10', 'mean']:6.4f}"


def test_the_summary_of_a_geometric_family_is_its_geometric_mean():
    report = _report(MIXED, RELSTRING)
    row = report.summary.set_index("metric").loc["gm_map"]
    assert row["mean"] == pytest.approx(0.01, rel=1e-12)
    assert math.isnan(row["sum"])  # no sum is what a geometric mean summarises
    assert row["median"] == pytest.approx(0.2)
    assert row["n"] == 3 and row["n_nan"] == 0
    assert row["ci_low"] <= row["mean"] <= row["ci_high"]
    assert report.mean("sys", "gm_map") == pytest.approx(0.01, rel=1e-12)
    ap = report.summary.set_index("metric").loc["ap"]  # the same values, averaged arithmetically
    assert ap["mean"] == pytest.approx(0.7 / 3)
    # the interval is that of the mean log, exponentiated; NaN left out and counted
    out = summarize_geometric(np.array([[0.5], [np.nan], [0.2]]), resamples=200, confidence=0.9, seed=1)
    assert out["mean"][0] == pytest.approx(math.sqrt(0.1)) and out["n"][0] == 2 and out["n_nan"][0] == 1
    assert 0.2 <= out["ci_low"][0] <= out["ci_high"][0] <= 0.5


def test_text_metrics_are_kept_apart_from_the_float_tables():
    report = _report({"precision@5": [0.2, 0.4, 0.0]}, RELSTRING)
    assert report.metrics == ["precision@5", "relstring@20"]
    assert report.text_metrics == ["relstring@20"]
    assert set(report.per_query["metric"]) == {"precision@5"}
    assert report.per_query["value"].dtype == np.float64
    assert list(report.summary["metric"]) == ["precision@5"]
    assert report.texts("sys", "relstring@20").tolist() == ["10-.", "", ">0<"]
    assert report.per_query_text.to_dict("records")[0] == {
        "run": "sys",
        "query_id": "q1",
        "metric": "relstring@20",
        "text": "10-.",
    }
    with pytest.raises(KeyError, match=r"Report\.texts"):
        report.values("sys", "relstring@20")


def test_text_metrics_survive_save_and_load(tmp_path):
    report = _report({"precision@5": [0.2, 0.4, 0.0]}, RELSTRING | {"runid": ["a", "a", "b"]})
    report.save(tmp_path / "r.parquet")
    loaded = Report.load(tmp_path / "r.parquet")
    assert loaded.metrics == report.metrics
    assert loaded.texts("sys", "relstring@20").tolist() == ["10-.", "", ">0<"]
    assert loaded.texts("sys", "runid").tolist() == ["a", "a", "b"]
    assert format_trec_eval(loaded, per_query=True) == format_trec_eval(report, per_query=True)


def test_evaluate_keeps_a_text_kernel_s_strings_out_of_the_values(monkeypatch):
    """evaluate() puts what a kernel of kind "text" returns in the report's texts (a kernel stands in here)."""
    import rag_eval
    from rag_eval.metrics import _registry as registry

    registry.load_kernels()
    monkeypatch.setitem(
        registry.KERNELS,
        "relstring",
        lambda inputs: np.array([f"<{n}>" for n in inputs.matrix.lengths.tolist()], dtype=object),
    )
    qrels = rag_eval.Qrels.from_dict({"q1": {"a": 1}, "q2": {"b": 0}})
    run = rag_eval.Run.from_scores({"q1": {"a": 2.0, "c": 1.0}, "q2": {"b": 1.0}}, name="r")
    report = rag_eval.evaluate(qrels, run, ["precision@1", "relstring@3"], conventions="trec_eval")
    assert report.texts("r", "relstring@3").tolist() == ["<2>", "<1>"]
    assert report.values("r", "precision@1").tolist() == [1.0, 0.0]
    assert format_trec_eval(report, per_query=True, runs={"r": run}).splitlines()[:2] == [
        "P_1                   \tq1\t1.0000",
        "relstring_3           \tq1\t'<2>'",
    ]


def test_compare_treats_a_geometric_family_as_a_geometric_mean():
    from rag_eval.statistics.comparison import compare

    a = _report({"gm_map": [0.5, 0.0, 0.2], "ap": [0.5, 0.0, 0.2]}, run="a", conventions="default")
    b = _report({"gm_map": [0.25, 0.1, 0.1], "ap": [0.25, 0.1, 0.1]}, run="b", conventions="default")
    result = compare([a, b], baseline="b", resamples=200, permutations=100)
    row = result.table.set_index("metric").loc["gm_map"]
    assert row["mean"] == pytest.approx(0.01, rel=1e-12)  # (0.5 x 1e-5 x 0.2)^(1/3)
    assert row["baseline_mean"] == pytest.approx(0.0025 ** (1 / 3), rel=1e-12)
    assert row["diff"] == pytest.approx(0.01 - 0.0025 ** (1 / 3), rel=1e-12)
    assert (row["wins"], row["ties"], row["losses"]) == (2, 0, 1)
    assert np.isnan(row["ci_low"]) and np.isnan(row["ci_high"])  # 3 queries: below the bootstrap's minimum n (10)
    twelve = [f"q{i}" for i in range(1, 13)]
    a12 = _report({"gm_map": [0.5, 0.0, 0.2] * 4}, run="a", conventions="default", queries=twelve)
    b12 = _report({"gm_map": [0.25, 0.1, 0.1] * 4}, run="b", conventions="default", queries=twelve)
    row12 = compare([a12, b12], baseline="b", resamples=200, permutations=100).table.set_index("metric").loc["gm_map"]
    assert row12["diff"] == pytest.approx(row["diff"], rel=1e-12)  # the same geometric means, repeated
    assert row12["ci_low"] <= row12["diff"] <= row12["ci_high"]
    plain = result.table.set_index("metric").loc["ap"]
    assert plain["mean"] == pytest.approx(0.7 / 3) and plain["diff"] == pytest.approx(0.7 / 3 - 0.45 / 3)
    systems = result.systems.set_index(["system", "metric"])
    assert systems.loc[("a", "gm_map"), "mean"] == pytest.approx(0.01, rel=1e-12)
    assert result.card.comparison["geometric"] == ["gm_map"]


def test_the_card_says_how_geometric_text_and_err_metrics_are_made():
    import rag_eval

    qrels = rag_eval.Qrels.from_dict({"q1": {"a": 3, "b": 1}, "q2": {"c": 2}})
    run = rag_eval.Run.from_scores({"q1": {"a": 1.0}, "q2": {"c": 1.0}}, name="r")
    card = rag_eval.evaluate(qrels, run, ["ap"]).card
    assert card.metric_notes == []
    from rag_eval.reports.card import metric_notes_of

    notes = metric_notes_of(["gm_map", "relstring@20", "err@10", "err(max_grade=2)@10"], max_grade=3)
    assert notes[0].startswith("gm_map: averaged over queries by the geometric mean") and "1e-5" in notes[0]
    assert notes[1] == "relstring@20: one string per query (Report.texts), not averaged"
    assert notes[2] == "err@10: max_grade not given: the qrels' largest grade, 3"
    assert len(notes) == 3  # err with its max_grade needs no note
    shown = MetricCard.build(PRESETS["default"], ["gm_map"], [], []).render()
    assert "  metric gm_map: averaged over queries by the geometric mean" in shown


def test_the_cli_shows_text_metrics_beside_the_numbers(monkeypatch, tmp_path, capsys):
    """The table (-q) and JSON formats carry a text metric's strings (a stand-in kernel here); they used to fail on
    a column the float table does not have."""
    import json

    from rag_eval.cli import main
    from rag_eval.metrics import _registry as registry

    registry.load_kernels()
    monkeypatch.setitem(
        registry.KERNELS,
        "relstring",
        lambda inputs: np.array([f"<{n}>" for n in inputs.matrix.lengths.tolist()], dtype=object),
    )
    (tmp_path / "q").write_text("q1 0 a 1\nq2 0 b 1\n")
    (tmp_path / "r").write_text("q1 Q0 a 1 2.0 t\nq1 Q0 c 2 1.0 t\nq2 Q0 b 1 1.0 t\n")
    argv = [
        "evaluate",
        str(tmp_path / "q"),
        str(tmp_path / "r"),
        "-m",
        "P_1",
        "-m",
        "relstring@3",
        "-q",
        "--no-card",
        "--judged-threshold",
        "0",
    ]
    assert main(argv + ["--format", "table"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["metric", "precision@1", "relstring@3"]
    assert table[2].split() == ["r", "q1", "1.0000", "<2>"] and table[3].split() == ["q2", "1.0000", "<1>"]
    assert main(argv + ["--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["per_query_text"][0] == {"run": "r", "query_id": "q1", "metric": "relstring@3", "text": "<2>"}
    assert [r["metric"] for r in payload["summary"]] == ["precision@1"]


def test_the_card_states_err_s_max_grade_taken_from_the_qrels():
    import warnings

    import rag_eval

    qrels = rag_eval.Qrels.from_dict({"q1": {"a": 3, "b": 1}, "q2": {"c": 2}})
    run = rag_eval.Run.from_scores({"q1": {"a": 1.0}, "q2": {"c": 1.0}}, name="r")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rag_eval.errors.RagEvalWarning)
        card = rag_eval.evaluate(qrels, run, ["err@10", "nerr(max_grade=4)@10", "gm_map"]).card
    assert card.metric_notes[0] == "err@10: max_grade not given: the qrels' largest grade, 3"
    assert card.metric_notes[1].startswith("gm_map: averaged over queries by the geometric mean")
    assert len(card.metric_notes) == 2
    assert "  metric err@10: max_grade not given: the qrels' largest grade, 3" in card.render()


def test_a_nan_of_trec_eval_prints_as_trec_eval_prints_it(tmp_path, trec_eval_binary, capsys):
    """-J empties q1's ranking (nothing in it is judged): trec_eval's interpolated precision there is 0/0, printed
    '  -nan' by printf, and its mean over queries is NaN too; a NaN of a metric trec_eval lacks stays 'nan'."""
    import subprocess
    import warnings

    from rag_eval.cli import main

    (tmp_path / "qrels").write_text("q1 0 a 1\nq1 0 b 0\nq2 0 c 1\n")
    (tmp_path / "run").write_text("q1 Q0 x 1 3 t\nq1 Q0 y 2 2 t\nq2 Q0 c 1 1 t\n")
    flags = ["-q", "-J", "-m", "iprec_at_recall..0,.5", "-m", "P.5", "-m", "gm_map", "-m", "11pt_avg"]
    expected = subprocess.run(
        [str(trec_eval_binary), *flags, str(tmp_path / "qrels"), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert (
            main(
                [
                    "evaluate",
                    str(tmp_path / "qrels"),
                    str(tmp_path / "run"),
                    "--format",
                    "trec_eval",
                    "--conventions",
                    "trec_eval",
                    "--no-card",
                    *flags,
                ]
            )
            == 0
        )
    printed = capsys.readouterr().out
    assert printed == expected
    assert "iprec_at_recall_0.00  \tq1\t  -nan" in printed.splitlines()
    assert "iprec_at_recall_0.00  \tall\t  -nan" in printed.splitlines()
    report = _report({"judged@10": [1.0, np.nan, 0.5]})
    assert format_trec_eval(report, metrics=[parse_metric("judged@10")], per_query=True).splitlines() == [
        "judged@10             \tq1\t1.0000",
        "judged@10             \tq2\tnan",
        "judged@10             \tq3\t0.5000",
        "judged@10             \tall\t0.7500",
    ]
