"""Retrieval against answers (issue 31): the predictor statistics against SciPy and scikit-learn, the context
conditions (no relevant chunk ever in a distractor slot), the gap split on data whose answer is known, and eRAG's
utility labels."""

from __future__ import annotations

import itertools
import re
import string
import warnings
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import roc_auc_score

import rag_eval
from rag_eval.errors import DegenerateInterval, FailedAnswers, FewDistractors, InputError
from rag_eval.ground_truth.utility import utility_labels
from rag_eval.stages import Hit, Pipeline, Retriever
from rag_eval.stages.contexts import (
    DELIVERED,
    DELIVERED_RELEVANT,
    NONE,
    ORACLE,
    answer_contexts,
    build_contexts,
    delivered_ids,
    distractor_condition,
    ranked_ids,
    sentence_reader,
)
from rag_eval.statistics.answer_conditions import condition_effects
from rag_eval.statistics.answer_prediction import (
    _bootstrap,
    answer_predictors,
    auc_rows,
    budget_curve,
    spearman_rows,
)
from rag_eval.statistics.paired import paired_bootstrap_ci


def _normalise(text: str) -> str:
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def squad_grade(answer: str, references) -> tuple[float, float]:
    """SQuAD v1.1's EM and token F1 (max over references), as its evaluation script computes them."""
    best_em = best_f1 = 0.0
    for ref in references:
        a, r = _normalise(answer).split(), _normalise(ref).split()
        best_em = max(best_em, float(a == r))
        common = sum((Counter(a) & Counter(r)).values())
        if common:
            p, q = common / len(a), common / len(r)
            best_f1 = max(best_f1, 2 * p * q / (p + q))
    return best_em, best_f1


# ----- the kernels against the oracles ----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_row_kernels_match_scipy_and_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, size=(30, 25)).astype(float)  # many ties, as a recall@k column has
    y = np.round(rng.random((30, 25)), 1)
    labels = (rng.random((30, 25)) < 0.4).astype(float)
    labels[:, 0], labels[:, 1] = 0.0, 1.0  # both classes in every row
    expected_rho = [spearmanr(a, b).statistic for a, b in zip(x, y, strict=True)]
    expected_auc = [roc_auc_score(b, a) for a, b in zip(x, labels, strict=True)]
    np.testing.assert_allclose(spearman_rows(x, y), expected_rho, rtol=0, atol=1e-12)
    np.testing.assert_allclose(auc_rows(x, labels), expected_auc, rtol=0, atol=1e-12)


def test_row_kernels_say_nan_where_undefined():
    x = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    y = np.array([[0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4]])
    rho = spearman_rows(x, y)
    assert np.isnan(rho[0]) and rho[1] == pytest.approx(1.0)
    auc = auc_rows(x, np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]))
    assert np.isnan(auc[0]) and auc[1] == pytest.approx(1.0)


def test_bootstrap_replicates_are_the_oracles_on_the_same_resamples():
    rng = np.random.default_rng(7)
    n = 40
    x = rng.integers(0, 3, n).astype(float)
    f1 = np.round(rng.random(n), 2)
    correct = (f1 >= 0.5).astype(float)
    rhos, aucs = _bootstrap(x, f1, correct, resamples=50, seed=3)
    idx = np.random.default_rng(3).integers(0, n, size=(50, n))  # one block at this n: the same stream
    for b in range(50):
        i = idx[b]
        assert rhos[b] == pytest.approx(spearmanr(x[i], f1[i]).statistic, abs=1e-12)
        assert aucs[b] == pytest.approx(roc_auc_score(correct[i], x[i]), abs=1e-12)


# ----- the predictor table on a real Report ---------------------------------------------------------------------


def _report_and_answers(n: int = 30):
    """n queries; q{i}'s relevant doc "r{i}" sits at rank (i % 3) + 1 of its ranking, or is missing for i % 5 == 4.
    The answer is right (F1 1) exactly when the relevant doc is at rank 1, half right (F1 0.4) at rank 2."""
    qrels, run, rank_of = {}, {}, {}
    for i in range(n):
        q = f"q{i:02d}"
        qrels[q] = {f"r{i}": 1, f"n{i}a": 0}
        others = [f"n{i}a", f"n{i}b", f"n{i}c"]
        rank = None if i % 5 == 4 else i % 3 + 1
        ranking = list(others)
        if rank is not None:
            ranking.insert(rank - 1, f"r{i}")
        run[q] = {d: float(10 - j) for j, d in enumerate(ranking)}
        rank_of[q] = rank
    report = rag_eval.evaluate(
        qrels, rag_eval.Run.from_scores(run, name="bm25"), ["recall@1", "recall@3", "ndcg@3", "mrr@3", "precision@3"]
    )
    f1 = {q: 1.0 if r == 1 else 0.4 if r == 2 else 0.0 for q, r in rank_of.items()}
    answers = pd.DataFrame(
        {
            "query_id": list(f1),
            "condition": DELIVERED,
            "answer": ["x"] * n,
            "em": [float(v == 1.0) for v in f1.values()],
            "f1": list(f1.values()),
            "correct": [v >= 0.5 for v in f1.values()],
        }
    )
    return report, answers, rank_of


def test_predictor_table_ranks_the_metric_that_decides_the_answer_first():
    report, answers, _ = _report_and_answers()
    found = answer_predictors(report, answers, resamples=300, seed=1)
    table = found.table.set_index("predictor")
    assert set(table.index) == {"recall@1", "recall@3", "ndcg@3", "mrr@3", "precision@3"}
    # correct exactly when the relevant doc is at rank 1: recall@1 separates them perfectly
    assert table.loc["recall@1", "auc"] == pytest.approx(1.0)
    # so do nDCG@3 and MRR@3 (monotone in that rank). recall@3 does not see the rank: 8 correct queries (recall 1)
    # against 22 wrong, 16 with recall 1 (ties count 1/2) and 6 with 0: AUC (8 x 6 + 8 x 16 / 2) / (8 x 22)
    assert set(found.table["predictor"].iloc[:3]) == {"recall@1", "mrr@3", "ndcg@3"}
    assert table.loc["recall@3", "auc"] == pytest.approx(112 / 176)
    assert table.loc["precision@3", "auc"] == pytest.approx(112 / 176)
    ranked = found.table[["auc", "spearman"]].to_numpy()
    assert all(tuple(a) >= tuple(b) for a, b in itertools.pairwise(ranked))  # best first
    for name in table.index:
        x = report.values("bm25", name).loc[answers["query_id"]].to_numpy()
        assert table.loc[name, "spearman"] == pytest.approx(spearmanr(x, answers["f1"]).statistic, abs=1e-12)
        assert table.loc[name, "auc"] == pytest.approx(roc_auc_score(answers["f1"] >= 0.5, x), abs=1e-12)
        assert table.loc[name, "n"] == 30 and table.loc[name, "n_nan"] == 0
        assert table.loc[name, "auc_low"] <= table.loc[name, "auc"] <= table.loc[name, "auc_high"]
    assert table.loc["recall@3", "n_correct"] == 8
    assert "bootstrap, min n 10" in found.describe() and "300 resamples" in found.describe()
    assert "| recall@1 | 30 | 0 | 8 |" in found.to_markdown()


def test_predictor_table_counts_what_it_leaves_out_and_refuses_below_min_n():
    report, answers, _ = _report_and_answers()
    answers = answers.copy()
    answers.loc[0, "f1"] = np.nan  # a failed answer
    answers = answers.iloc[:-1]  # q29 has no answer
    extra = pd.DataFrame([{"query_id": "zz", "condition": DELIVERED, "answer": "y", "em": 1.0, "f1": 1.0}])
    answers = pd.concat([answers, extra], ignore_index=True)
    found = answer_predictors(report, answers, resamples=100)
    assert found.left_out == {"failed answers": 1, "no answer": 1, "not in the report": 1}
    assert (found.table["n"] == 28).all()
    with pytest.raises(InputError, match="at least 10"):
        answer_predictors(report, answers.iloc[:9], resamples=100)


def test_an_extra_predictor_such_as_span_containment_enters_the_table():
    report, answers, rank_of = _report_and_answers()
    contained = pd.Series({q: float(r == 1) for q, r in rank_of.items()})
    contained.iloc[0] = np.nan
    found = answer_predictors(report, answers, metrics=["recall@3"], extra={"span hit@1": contained}, resamples=100)
    table = found.table.set_index("predictor")
    assert list(table.index) == ["span hit@1", "recall@3"]
    assert table.loc["span hit@1", "n"] == 29 and table.loc["span hit@1", "n_nan"] == 1


def test_a_constant_predictor_ranks_nothing_and_is_said_once():
    report, answers, rank_of = _report_and_answers()
    always = pd.Series(1.0, index=list(rank_of))
    with pytest.warns(DegenerateInterval, match=r"^1 predictor\(s\) of the answers \(always\)") as caught:
        found = answer_predictors(report, answers, metrics=["recall@1"], extra={"always": always}, resamples=100)
    assert len(caught) == 1
    row = found.table.set_index("predictor").loc["always"]
    assert row["auc"] == 0.5 and (row["auc_low"], row["auc_high"]) == (0.5, 0.5)  # every pair a tie
    assert np.isnan(row["spearman"]) and "constant" in row["note"]
    assert found.table["predictor"].tolist() == ["recall@1", "always"]


# ----- the budget curve ------------------------------------------------------------------------------------------


def test_budget_curve_is_the_accuracy_of_each_top_k_with_intervals():
    rows = []
    for k, right in ((1, 4), (2, 8), (3, 12)):
        for i in range(20):
            rows.append((f"q{i}", f"top {k}", 1.0 if i < right else 0.2))
    rows.append(("q0", "top 3", np.nan))
    answers = pd.DataFrame(rows, columns=["query_id", "condition", "f1"])
    answers = answers.drop_duplicates(["query_id", "condition"], keep="last")
    curve = budget_curve(answers, ks=(1, 2, 3), resamples=200)
    assert curve["accuracy"].tolist() == pytest.approx([0.2, 0.4, 11 / 19])
    assert curve["n"].tolist() == [20, 20, 19] and curve["n_failed"].tolist() == [0, 0, 1]
    f1 = answers[answers["condition"] == "top 2"]["f1"].to_numpy()
    assert (curve.loc[1, "f1_low"], curve.loc[1, "f1_high"]) == pytest.approx(
        paired_bootstrap_ci(f1, resamples=200, confidence=0.95, seed=0)
    )
    with pytest.raises(InputError, match="top 5"):
        budget_curve(answers, ks=(5,))
    few = budget_curve(answers[answers["query_id"].isin([f"q{i}" for i in range(9)])], ks=(1,), resamples=200)
    assert few.loc[0, "n"] == 9 and few.loc[0, "accuracy"] == pytest.approx(4 / 9)
    assert np.isnan(few.loc[0, "accuracy_low"]) and np.isnan(few.loc[0, "f1_high"])  # below min n 10: no interval


def test_correctness_may_come_from_the_table_instead_of_f1():
    """correct_at=None: another grade (a judge's) says what is correct; F1 still gives rho and the F1 means."""
    report, answers, _ = _report_and_answers()
    answers = answers.copy()
    answers["correct"] = answers["f1"] > 0  # the half-right answers (F1 0.4) count as correct here
    found = answer_predictors(report, answers, metrics=["recall@3"], correct_at=None, resamples=100)
    x = report.values("bm25", "recall@3").loc[answers["query_id"]].to_numpy()
    assert found.table.loc[0, "auc"] == pytest.approx(roc_auc_score(answers["correct"], x))
    assert found.table.loc[0, "n_correct"] == int(answers["correct"].sum())
    assert "the table's 'correct' column" in found.describe()
    both = pd.concat([answers, answers.assign(condition="oracle", f1=1.0, correct=True)], ignore_index=True)
    with pytest.warns(DegenerateInterval, match=r"\(oracle accuracy, oracle F1\)"):
        effects = condition_effects(both, correct_at=None, resamples=100)
    acc = effects.conditions.set_index("condition")["accuracy"]
    assert acc[DELIVERED] == pytest.approx(answers["correct"].mean()) and acc[ORACLE] == 1.0
    broken = answers.assign(correct=np.nan)
    with pytest.raises(InputError, match=r"without a 'correct' value, e.g. query 'q00'"):
        answer_predictors(report, broken, correct_at=None)
    with pytest.raises(InputError, match="has none"):
        condition_effects(answers.drop(columns="correct"), correct_at=None)


# ----- context conditions ----------------------------------------------------------------------------------------

QRELS = rag_eval.Qrels.from_dict(
    {
        # q1: two relevant chunks (one delivered), four judged irrelevant (one delivered), one partly relevant
        "q1": {"g1": 2, "g2": 1, "x1": 0, "x2": 0, "x3": 0, "x4": 0, "d1": 0},
        # q2: one relevant chunk, only one judged irrelevant that is not delivered
        "q2": {"g3": 1, "x5": 0, "x6": 0},
    }
)
DELIVERED_IDS = {"q1": ["g2", "u1", "d1"], "q2": ["g3", "x6"], "q3": ["u2"]}


def test_contexts_of_each_condition():
    with pytest.warns(FewDistractors, match=r"1 query\(ies\) for n = 3") as caught:
        ctx = build_contexts(DELIVERED_IDS, QRELS, distractors=(1, 3), seed=0)
    assert len(caught) == 1  # announced once, summarised
    assert ctx[NONE] == {"q1": (), "q2": (), "q3": ()}
    assert ctx[ORACLE] == {"q1": ("g1", "g2"), "q2": ("g3",)}  # highest grade first
    assert ctx[DELIVERED]["q1"] == ("g2", "u1", "d1")
    assert ctx[DELIVERED_RELEVANT] == {"q1": ("g2",), "q2": ("g3",)}
    first, last = ctx[distractor_condition(1, "first")]["q1"], ctx[distractor_condition(1, "last")]["q1"]
    assert first[1:] == ("g2", "u1", "d1") and last[:3] == ("g2", "u1", "d1") and first[0] == last[3]
    three = ctx[distractor_condition(3, "last")]["q1"][3:]
    assert first[0] in three  # the 1 distractor is among the 3
    # never g1 (relevant, not delivered), g2 (relevant, delivered), d1 (irrelevant but delivered) nor u1 (unjudged)
    assert set(three) <= {"x1", "x2", "x3", "x4"} and len(set(three)) == 3
    shuffled = ctx[distractor_condition(3, "shuffled")]["q1"]
    assert sorted(shuffled) == sorted(("g2", "u1", "d1", *three))
    # q2 has one candidate (x5): enough for n = 1, too few for 3; q3 has no judgement
    assert ctx[distractor_condition(1, "first")]["q2"] == ("x5", "g3", "x6")
    assert "q2" not in ctx[distractor_condition(3, "first")]
    left = ctx.left_out
    assert set(left[left["query_id"] == "q2"]["condition"]) == {
        distractor_condition(3, p) for p in ("first", "last", "shuffled")
    }
    assert set(left[left["query_id"] == "q3"]["reason"]) == {"no judgement"}


@pytest.mark.parametrize("seed", range(25))
def test_no_relevant_chunk_ever_leaks_into_a_distractor_slot(seed):
    rng = np.random.default_rng(seed)
    judgements, delivered = {}, {}
    for i in range(15):
        docs = [f"q{i}d{j}" for j in range(12)]
        grades = rng.integers(-1, 3, size=12)  # -1 (pooled, not judged), 0, 1, 2
        judgements[f"q{i}"] = {d: int(g) for d, g in zip(docs, grades, strict=True)}
        # delivered: some relevant and some irrelevant chunks already in it, and an unjudged one
        delivered[f"q{i}"] = list(rng.choice(docs, size=4, replace=False)) + [f"q{i}unjudged"]
    qrels = rag_eval.Qrels.from_dict(judgements)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewDistractors)
        ctx = build_contexts(delivered, qrels, distractors=(1, 3, 5), seed=seed)
    for n in (1, 3, 5):
        for position in ("first", "last", "shuffled"):
            for q, context in ctx[distractor_condition(n, position)].items():
                added = [c for c in context if c not in delivered[q]]
                assert len(added) == n and len(context) == len(delivered[q]) + n
                assert all(judgements[q][c] == 0 for c in added), (q, added)
                assert len(set(context)) == len(context)


def test_answers_of_each_condition_share_calls_and_keep_failures():
    texts = {
        "g1": "The capital of Freedonia is Zenda.",
        "g2": "Zenda lies on a river.",
        "g3": "The Blue River flows north.",
        "x1": "Bananas are yellow.",
        "x2": "Cats purr.",
        "x3": "Rain is wet.",
        "x4": "Snow is cold.",
        "x5": "Dogs bark.",
        "x6": "Owls hoot.",
        "d1": "Iron rusts.",
        "u1": "Salt is salty.",
        "u2": "Glass breaks.",
    }
    questions = {"q1": "What is the capital of Freedonia?", "q2": "Which way does the Blue River flow?", "q3": "Why?"}
    references = {"q1": ["Zenda"], "q2": ["north"], "q3": ["because"]}
    calls = []

    def generate(question, chunks):
        calls.append((question, tuple(chunks)))
        if question == "Why?":
            raise RuntimeError("model down")
        return sentence_reader(question, chunks)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewDistractors)
        ctx = build_contexts(DELIVERED_IDS, QRELS, distractors=(1,))
    with pytest.warns(FailedAnswers, match="failed on 2 of"):
        table = answer_contexts(ctx, questions, texts, generate, squad_grade, references)
    by = table.set_index(["query_id", "condition"])
    assert by.loc[("q1", ORACLE), "answer"] == "Zenda" and by.loc[("q1", ORACLE), "em"] == 1.0
    assert by.loc[("q1", ORACLE), "correct"] is True
    assert by.loc[("q2", DELIVERED), "answer"] == "flows north"
    assert by.loc[("q2", DELIVERED), "f1"] == pytest.approx(2 / 3) and by.loc[("q2", DELIVERED), "correct"] is True
    assert by.loc[("q1", NONE), "answer"] == "" and by.loc[("q1", NONE), "correct"] is False
    assert np.isnan(by.loc[("q3", DELIVERED), "f1"]) and "model down" in by.loc[("q3", DELIVERED), "error"]
    # q2's oracle and delivered relevant contexts are the same ("g3"): one call answers both
    assert len(calls) == len(set(calls))
    with pytest.raises(InputError, match="no text"):
        answer_contexts(ctx, questions, {}, generate, squad_grade, references)


# ----- the gap split on data whose answer is known ---------------------------------------------------------------


def test_gap_split_on_a_generator_whose_behaviour_is_known():
    """30 queries; the generator answers right iff its context holds the gold chunk and at most one other chunk.
    Delivered: 10 queries get the gold chunk alone (right everywhere), 10 the gold chunk and two irrelevant chunks
    (noise costs them), 10 two irrelevant chunks only (retrieval costs them). So: oracle 1.0, delivered relevant
    2/3, delivered 1/3; gap 2/3 = retrieval 1/3 + noise 1/3."""
    judgements, delivered, texts, questions, references = {}, {}, {}, {}, {}
    for i in range(30):
        q = f"q{i}"
        judgements[q] = {f"{q}-gold": 1, f"{q}-a": 0, f"{q}-b": 0, f"{q}-c": 0}
        texts.update({f"{q}-gold": f"GOLD {q}", f"{q}-a": "noise", f"{q}-b": "noise", f"{q}-c": "noise"})
        questions[q], references[q] = q, [f"answer {q}"]
        delivered[q] = (
            [f"{q}-gold"] if i < 10 else [f"{q}-gold", f"{q}-a", f"{q}-b"] if i < 20 else [f"{q}-a", f"{q}-b"]
        )

    def generate(question, chunks):
        return f"answer {question}" if f"GOLD {question}" in chunks and len(chunks) <= 2 else "no idea"

    ctx = build_contexts(delivered, rag_eval.Qrels.from_dict(judgements), distractors=(1,), seed=0)
    table = answer_contexts(ctx, questions, texts, generate, squad_grade, references)
    with pytest.warns(
        DegenerateInterval, match=r"^10 interval\(s\) of the answer conditions \(none accuracy"
    ) as caught:
        effects = condition_effects(table, resamples=500)
    assert len(caught) == 1  # said once, summarised
    acc = effects.conditions.set_index("condition")["accuracy"]
    assert acc[ORACLE] == 1.0 and acc[DELIVERED_RELEVANT] == pytest.approx(2 / 3)
    assert acc[DELIVERED] == pytest.approx(1 / 3) and acc[NONE] == 0.0
    # one distractor more: the 10 gold-only queries now hold 2 chunks (still right); the others were wrong already
    assert acc[distractor_condition(1, "last")] == pytest.approx(1 / 3)
    gap = effects.gap.set_index("part")
    assert effects.gap_n == 30
    assert gap.loc["gap", "accuracy"] == pytest.approx(2 / 3)
    assert gap.loc["retrieval", "accuracy"] == pytest.approx(1 / 3)
    assert gap.loc["noise", "accuracy"] == pytest.approx(1 / 3)
    # the three share one resample of the queries, so the split adds up in every resample: the bounds are ordered
    assert gap.loc["noise", "accuracy_low"] < 1 / 3 < gap.loc["noise", "accuracy_high"]
    diff = effects.differences.set_index("condition")
    assert diff.loc[ORACLE, "accuracy_diff"] == pytest.approx(2 / 3) and diff.loc[ORACLE, "n"] == 30
    oracle = table[table["condition"] == ORACLE].set_index("query_id")["f1"].sort_index()  # pivot order
    base = table[table["condition"] == DELIVERED].set_index("query_id")["f1"]
    d = (oracle - base.loc[oracle.index]).to_numpy()
    assert (diff.loc[ORACLE, "f1_low"], diff.loc[ORACLE, "f1_high"]) == pytest.approx(
        paired_bootstrap_ci(d, resamples=500, confidence=0.95, seed=0)
    )
    assert "| answer gap (n 30) |" in effects.to_markdown()


# ----- utility labels (eRAG) -------------------------------------------------------------------------------------


def test_utility_labels_evaluate_like_qrels_and_agree_with_people():
    ranked = {"q1": ["a", "b", "c"], "q2": ["d", "e"]}
    texts = {
        "a": "Zenda is the capital of Freedonia.",
        "b": "Freedonia borders Sylvania.",
        "c": "The capital city Zenda has a castle.",  # judged irrelevant by people, yet it answers
        "d": "The river flows north.",
        "e": "Rivers are wet.",
    }
    questions = {"q1": "What is the capital of Freedonia?", "q2": "Which way does the river flow?"}
    references = {"q1": ["Zenda"], "q2": ["north"]}
    labels = utility_labels(ranked, questions, texts, sentence_reader, squad_grade, references)
    assert labels.qrels.to_dict() == {"q1": {"a": 1, "b": 0, "c": 1}, "q2": {"d": 1, "e": 0}}
    human = rag_eval.Qrels.from_dict({"q1": {"a": 2, "b": 0, "c": 0}, "q2": {"d": 1, "e": 0, "z": 1}})
    agreement = labels.agreement(human, warn=False)
    assert agreement.n == 5 and agreement.counts == ((2, 1), (0, 2))
    cut = agreement.cuts[0]
    assert (cut.precision, cut.recall) == (pytest.approx(2 / 3), 1.0)
    report = rag_eval.evaluate(labels.qrels, rag_eval.Run.from_ranking(ranked, name="r"), ["recall@2"])
    assert report.values("r", "recall@2").to_dict() == {"q1": 0.5, "q2": 1.0}


def test_utility_labels_leave_a_failed_call_unjudged():
    def generate(question, chunks):
        if "b" in chunks[0]:
            raise TimeoutError("slow")
        return "x"

    with pytest.warns(FailedAnswers, match="failed on 1 of 2"):
        labels = utility_labels(
            {"q": ["a", "b"]}, {"q": "?"}, {"a": "a", "b": "b"}, generate, squad_grade, {"q": ["x"]}
        )
    assert labels.qrels.to_dict() == {"q": {"a": 1}} and labels.n_failed == 1


# ----- from a pipeline's result ----------------------------------------------------------------------------------


class _Fixed(Retriever):
    def __init__(self, rankings):
        super().__init__("fixed")
        self.rankings = rankings

    def config(self):
        return {"rankings": {k: list(v) for k, v in self.rankings.items()}}

    def search(self, query, k):
        return [Hit(d, float(10 - i)) for i, d in enumerate(self.rankings[query][:k])]


def test_delivered_and_ranked_ids_of_a_pipeline_result():
    result = Pipeline(_Fixed({"alpha": ["a", "b", "c"], "beta": ["d"]}), depth=10, budget=2).run(
        {"q1": "alpha", "q2": "beta"}
    )
    assert delivered_ids(result) == {"q1": ("a", "b"), "q2": ("d",)}
    assert ranked_ids(result) == {"q1": ("a", "b", "c"), "q2": ("d",)}
