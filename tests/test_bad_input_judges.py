"""Bad input to the model-judge tools (docs/bad-input/ground-truth.md, "Model judges, agreement and estimates"): a
model's answer without a grade or off the scale is that item's failure, never a guess; what cannot be estimated or
measured is an InputError naming the queries or the field; a record that no longer fits its qrels is said and
ignored."""

from __future__ import annotations

import math

import pytest

import rag_eval
from rag_eval.adapters import functions
from rag_eval.errors import InputError, LowAgreement, StaleGradedBy
from rag_eval.ground_truth import JudgementLog, Pool, PoolItem, impact_order, merge, write_qrels
from rag_eval.stages.judges import parse_grade


def _pool(*, texts: bool = True, systems: tuple[str, ...] = ("a", "b")) -> Pool:
    items = tuple(
        PoolItem(
            "q1",
            d,
            {s: r for s in systems},
            len(systems) / (60 + r),
            "how do I walk a folder tree?" if texts else None,
            f"chunk {d} about os.walk" if texts else None,
        )
        for r, d in enumerate(("d1", "d2", "d3"), start=1)
    )
    return Pool(items, 3, "depth", systems)


def test_a_model_answer_without_a_grade_is_the_items_failure():
    with pytest.raises(InputError, match=r"no '##final score: N' and not a lone integer in the answer: 'relevant, I"):
        parse_grade("relevant, I think", (0, 3))

    def says(query, text):  # a judge that answers in words for d2
        return "relevant, I think" if "d2" in text else 1

    answers = functions.judge(says, name="words").grade(
        [rag_eval.stages.JudgeItem("q1", d, "q", f"chunk {d}") for d in ("d1", "d2")], scale=(0, 3)
    )
    assert answers[0].grade == 1 and answers[1].grade is None and "relevant, I think" in answers[1].error


def test_a_model_grade_off_the_scale_is_the_items_failure(tmp_path):
    with pytest.raises(InputError, match=r"grade 7 is off the scale 0\.\.3: '##final score: 7'"):
        parse_grade("##final score: 7", (0, 3))
    run = rag_eval.judge(
        _pool(),
        functions.judge(lambda q, t: 7 if "d3" in t else 2, name="big"),
        log=tmp_path / "j.jsonl",
        progress=False,
    )
    assert (run.graded, run.failed) == (2, 1)
    assert list(run.failures.doc_id) == ["d3"] and "off the scale" in run.failures.error[0]
    assert {j.doc_id for j in JudgementLog.load(tmp_path / "j.jsonl")} == {"d1", "d2"}  # no grade for d3


def test_a_pool_item_without_texts_cannot_be_judged(tmp_path):
    with pytest.raises(InputError, match=r"pool item query 'q1', doc 'd1' has no query text and no chunk text"):
        rag_eval.judge(_pool(texts=False), functions.judge(lambda q, t: 1, name="f"), log=tmp_path / "j.jsonl")
    assert not (tmp_path / "j.jsonl").exists()  # refused before anything was asked or written


def test_a_changed_judge_under_the_same_name_in_one_log(tmp_path):
    log = tmp_path / "j.jsonl"
    rag_eval.judge(_pool(), functions.judge(lambda q, t: 1, name="j", version="1"), log=log, progress=False)
    with pytest.raises(InputError, match="'j'") as caught:
        rag_eval.judge(_pool(), functions.judge(lambda q, t: 2, name="j", version="2"), log=log, progress=False)
    assert "fingerprint" in str(caught.value)


def test_ppi_human_queries_the_judge_did_not_grade():
    with pytest.raises(InputError, match=r"queries 'q2' have a human value but no judge value"):
        rag_eval.ppi_interval({"q1": 0.5, "q3": 0.2}, {"q2": 0.4, "q1": 0.3})


def test_ppi_a_value_that_is_not_finite():
    with pytest.raises(InputError, match=r"judge: queries 'q2': the value is not finite"):
        rag_eval.ppi_interval({"q1": 0.5, "q2": math.nan, "q3": 0.1}, {"q1": 0.4, "q3": 0.2})


def test_ppi_fewer_than_ten_human_queries():
    # a normal interval's minimum n is 10 (issue 27; it was 2, and two agreeing values printed [1.0, 1.0])
    with pytest.raises(InputError, match="needs at least 10 human-graded queries, not 1: a normal interval's"):
        rag_eval.ppi_interval({"q1": 0.5, "q2": 0.3, "q3": 0.1}, {"q1": 0.4})
    judge = {f"q{i}": i / 20 for i in range(20)}
    with pytest.raises(InputError, match="needs at least 10 human-graded queries, not 9"):
        rag_eval.ppi_interval(judge, {f"q{i}": i / 25 for i in range(9)})


def test_agreement_a_grade_off_the_scale():
    with pytest.raises(InputError, match=r"judge: query 'q', doc 'd': grade 5 is outside the scale 0\.\.3"):
        rag_eval.judge_agreement({"q": {"d": 1}}, {"q": {"d": 5}})


def test_agreement_with_no_item_in_common():
    with pytest.warns(LowAgreement, match="cannot be measured"):
        found = rag_eval.judge_agreement({"q": {"d": 1}}, {"q": {"e": 1}})
    assert found.n == 0 and found.kappa is None and found.weighted_kappa is None
    assert found.reasons["kappa"] == "people and judge graded no item in common"


def test_impact_order_of_a_pool_of_one_system():
    with pytest.raises(InputError, match=r"has 1 to compare \(\['a'\]\): pool two systems or more"):
        impact_order(_pool(systems=("a",)))


def test_a_graded_by_record_that_no_longer_fits_its_qrels(tmp_path):
    log = JudgementLog.open(tmp_path / "j.jsonl")
    log.append("q1", "d1", 2, assessor="umbrela", judge={"fingerprint": "fp"})
    out = tmp_path / "qrels.txt"
    write_qrels(merge(None, log).qrels, out)
    out.write_text("q1 0 d1 3\n")  # edited by hand since
    with pytest.warns(StaleGradedBy, match="written for other qrels than .* holds now"):
        read = rag_eval.Qrels.from_trec(out)
    assert read.graded_by is None and read.to_dict() == {"q1": {"d1": 3}}
