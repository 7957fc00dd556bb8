"""Bad input for the gain and pool kernels (rag_eval/metrics/_kernels_gain.py): metric parameters that the qrels
contradict, found when a run is evaluated. Each kind is a row of docs/bad-input/values.md (section "Gain tables and
ERR's max_grade"); each refusal is an InputError naming the metric and the query, and the CLI turns it into one
line ``rag-eval: error: ...`` and exit status 2.
"""

from __future__ import annotations

import pytest

from rag_eval import InputError, Qrels, Run, evaluate
from rag_eval.cli import main

QRELS = {"q1": {"a": 3, "b": 1, "c": 0}, "q2": {"d": 1}}
RUN = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"d": 1.0}}


def error_of(metric: str, qrels: dict = QRELS, conventions: str = "trec_eval") -> str:
    with pytest.raises(InputError) as info:
        evaluate(Qrels.from_dict(qrels), {"run": Run.from_scores(RUN)}, [metric], conventions=conventions)
    return str(info.value)


def cli_error(capsys, tmp_path, metric: str, qrels: dict = QRELS) -> str:
    qrels_file, run_file = tmp_path / "qrels.txt", tmp_path / "run.trec"
    qrels_file.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()))
    run_file.write_text("".join(f"{q} Q0 {d} 1 {s} tag\n" for q, docs in RUN.items() for d, s in docs.items()))
    code = main(["evaluate", str(qrels_file), str(run_file), "-m", metric, "--no-card"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rag-eval: error: "), err
    return lines[0].removeprefix("rag-eval: error: ")


def test_err_max_grade_below_a_judged_grade(capsys, tmp_path):
    """A stopping probability (2^g - 1) / 2^max_grade above 1 would be a silent wrong ERR: refused, naming the
    query and the grade; without max_grade= the qrels' largest grade is taken, which nothing exceeds."""
    message = (
        "metric 'err(max_grade=2)@10': query 'q1' has a judgement of grade 3, above max_grade=2: its stopping "
        "probability (2^g - 1) / 2^max_grade would exceed 1; raise max_grade or leave it out (it then "
        "defaults to the qrels' largest grade)"
    )
    assert error_of("err(max_grade=2)@10") == message
    assert error_of("nerr(max_grade=2)").startswith("metric 'nerr(max_grade=2)': query 'q1' has a judgement of grade 3")
    assert error_of("err(max_grade=2)", conventions="default").startswith("metric 'err(max_grade=2)': query 'q1'")
    assert cli_error(capsys, tmp_path, "err(max_grade=2)@10") == message
    # max_grade=3 (the largest grade) and the default are accepted
    evaluate(
        Qrels.from_dict(QRELS),
        {"run": Run.from_scores(RUN)},
        ["err(max_grade=3)@10", "err@10"],
        conventions="trec_eval",
    )


@pytest.mark.parametrize("family", ["g", "ndcg_rel", "rndcg", "rbp"])
def test_trec_gain_table_refuses_a_negative_grade(family, capsys, tmp_path):
    """trec_eval's gain table (gain_init.c) has levels 0 and above; a gain for grade -1 would go, in trec_eval, to
    every document outside the pool (its relevance value there is -1). Refused for the families that follow it."""
    metric = f"{family}(gains=-1:2;1:3)"
    message = (
        f"metric '{metric}': gains= gives grade -1 a gain; trec_eval's gain table has levels 0 and above only, "
        "and would give that gain to documents outside the pool: map grades 0 and above"
    )
    assert error_of(metric) == message
    assert error_of(metric, conventions="default") == message
    if family == "g":
        assert cli_error(capsys, tmp_path, metric) == message


def test_fractional_gain_table_beyond_grade_4095(capsys, tmp_path):
    """trec_eval sorts its gain table with a comparator that truncates differences to an int; rag_eval replays that
    sort level by level up to grade 4095, and beyond it only where every gain is a whole number (then the order is
    the gains' own). A fractional gain with a larger grade is refused rather than ordered otherwise."""
    qrels = {"q1": {"a": 3, "b": 1}, "q2": {"c": 5000, "d": 2}}
    message = (
        "metric 'g(gains=1:0.5)': query 'q2' is judged up to grade 5000; with a gain in gains= that is not a "
        "whole number below 2^31, trec_eval sorts a gain table of that many levels in an order rag_eval "
        "reproduces only up to grade 4095: use whole-number gains, or grades below 4096"
    )
    assert error_of("g(gains=1:0.5)", qrels) == message
    assert "query 'q2' is judged up to grade 5000" in error_of("rbp(gains=1:3e9)", qrels)
    assert cli_error(capsys, tmp_path, "g(gains=1:0.5)", qrels) == message
    # whole-number gains beyond grade 4095, and fractional gains below it, are evaluated
    evaluate(Qrels.from_dict(qrels), {"run": Run.from_scores(RUN)}, ["g(gains=1:3)"], conventions="trec_eval")
    evaluate(Qrels.from_dict(QRELS), {"run": Run.from_scores(RUN)}, ["g(gains=1:0.5)"], conventions="trec_eval")
