"""Answer grading (rag_eval.metrics.answers) against the SQuAD v1.1 evaluation script's own functions, on random
strings and on the real SQuAD dev questions; containment; and the reference-answer readers (a column, a JSONL field,
SQuAD's folder and official JSON), every bad input naming its file and line or row."""

from __future__ import annotations

import json
import math
import re
import string
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from rag_eval import InputError
from rag_eval.data.answers import ReferenceAnswers
from rag_eval.metrics.answers import (
    AnswerGrades,
    contains_answer,
    exact_match,
    grade_answers,
    normalize_answer,
    token_f1,
)

from .conftest import DATASETS, need_shared

# ----- the oracle: the functions of the official SQuAD v1.1 evaluation script, verbatim ----------------------------
# From "evaluate-v1.1.py", the official evaluation script for v1.1 of the SQuAD dataset (Rajpurkar et al. 2016;
# https://rajpurkar.github.io/SQuAD-explorer/, the script linked there as "Evaluation Script v1.1"), also
# redistributed under Apache-2.0 in huggingface/datasets (metrics/squad/evaluate.py). Only these four functions are
# used; their names carry a leading "squad_" here.


def squad_normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""

    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def squad_f1_score(prediction, ground_truth):
    prediction_tokens = squad_normalize_answer(prediction).split()
    ground_truth_tokens = squad_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def squad_exact_match_score(prediction, ground_truth):
    return squad_normalize_answer(prediction) == squad_normalize_answer(ground_truth)


def squad_metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


# ----- the grades against the oracle ------------------------------------------------------------------------------

_PIECES = [
    "the", "The", "THE", "a", "A", "an", "An", "theater", "another", "apple", "Denver", "Broncos", "1847", "naïve",
    "Ünïcode", "état", "İstanbul", "ß", "日本", "x", "x-ray", "U.S.", "don't", "an.", "(the)", "—", "–", "‘", "’",
    "“", "”", ",", ".", "!", "?", ";", ":", "'", '"', "-", "_", "$", "%", "&", "#",
]  # fmt: skip
_SPACES = [" ", " ", " ", "  ", "\t", "\n", "\u00a0", "\u2009", "\u3000", ""]


def _random_text(rng: np.random.Generator) -> str:
    n = int(rng.integers(0, 8))
    return "".join(str(rng.choice(_PIECES)) + str(rng.choice(_SPACES)) for _ in range(n))


def test_normalisation_em_and_f1_equal_the_scripts_on_random_strings():
    rng = np.random.default_rng(31)
    for _ in range(4000):
        prediction = _random_text(rng)
        references = [_random_text(rng) for _ in range(int(rng.integers(1, 4)))]
        assert normalize_answer(prediction) == squad_normalize_answer(prediction)
        em = squad_metric_max_over_ground_truths(squad_exact_match_score, prediction, references)
        f1 = squad_metric_max_over_ground_truths(squad_f1_score, prediction, references)
        assert exact_match(prediction, references) == float(em)
        assert token_f1(prediction, references) == f1  # the same arithmetic: equal, not close
        grades = grade_answers({"q": prediction}, {"q": references})
        assert (grades.exact_match[0], grades.f1[0]) == (float(em), f1)


def test_the_scripts_own_cases_and_v1_1_edge_conventions():
    assert normalize_answer("  The  Denver\tBroncos! ") == "denver broncos"
    assert exact_match("the Denver Broncos.", ["Denver Broncos"]) == 1.0
    assert token_f1("Denver Broncos won", ["Denver Broncos"]) == pytest.approx(0.8)  # P 2/3, R 1
    assert token_f1("Broncos", ["Denver Broncos", "Broncos"]) == 1.0  # the best reference
    assert token_f1("", ["the"]) == 0.0 == squad_f1_score("", "the")  # v1.1: both empty is 0, not 1
    assert exact_match("", ["the"]) == 1.0 == float(squad_exact_match_score("", "the"))
    assert token_f1("a a b", ["a b b"]) == squad_f1_score("a a b", "a b b")
    with pytest.raises(InputError, match="no reference"):
        token_f1("x", [])


def test_containment_is_whole_tokens_after_normalisation():
    assert contains_answer("It was won by the Denver Broncos, in 2016.", ["Denver Broncos"]) == 1.0
    assert contains_answer("a category", ["cat"]) == 0.0
    assert contains_answer("In 1847.", ["1847", "nothing"]) == 1.0
    assert contains_answer("the", ["the"]) == 0.0  # a reference that normalises to nothing is contained in nothing
    assert contains_answer("Broncos Denver", ["Denver Broncos"]) == 0.0
    rng = np.random.default_rng(5)
    for _ in range(2000):  # containment is implied by exact match of a non-empty normalised answer
        prediction = _random_text(rng)
        references = [_random_text(rng), prediction + " " + _random_text(rng)]
        got = contains_answer(prediction, references)
        if exact_match(prediction, references) and normalize_answer(prediction):
            assert got == 1.0
        # and the grade_answers column is the function's
        assert grade_answers({"q": prediction}, {"q": references}).contains[0] == got


def test_grade_answers_keeps_failures_nan_and_refuses_a_missing_reference():
    grades = grade_answers({"q1": "Denver Broncos", "q2": None, "q3": "Panthers"}, {
        "q1": ["Denver Broncos"], "q2": ["x"], "q3": ("Carolina Panthers",)})  # fmt: skip
    assert isinstance(grades, AnswerGrades)
    assert grades.query_ids == ("q1", "q2", "q3")
    np.testing.assert_array_equal(grades.exact_match, [1.0, np.nan, 0.0])
    np.testing.assert_allclose(grades.f1, [1.0, np.nan, 2 / 3])
    np.testing.assert_array_equal(grades.contains, [1.0, np.nan, 0.0])
    assert grades.failed == 1
    assert grades.mean() == pytest.approx({"exact_match": 0.5, "f1": (1 + 2 / 3) / 2, "contains": 0.5})
    frame = grades.to_frame()
    assert list(frame.columns) == ["query_id", "exact_match", "f1", "contains"]
    assert math.isnan(frame.loc[1, "f1"])
    with pytest.raises(InputError, match=r"query 'q9' and 1 more has an answer but no reference"):
        grade_answers({"q9": "a", "q8": "b"}, {"q1": ["x"]})
    with pytest.raises(InputError, match="must be a str or None"):
        grade_answers({"q1": 3}, {"q1": ["x"]})  # type: ignore[dict-item]
    assert all(math.isnan(v) for v in grade_answers({"q": None}, {"q": "x"}).mean().values())


def test_real_squad_dev_questions_graded_as_the_script_does():
    folder = need_shared(DATASETS / "squad-dev-v1.1")
    references = ReferenceAnswers.from_squad(folder)
    assert len(references) == 10_570
    assert sum(len(a) for a in references.values()) == 34_726
    corpus = {}
    with open(folder / "corpus.jsonl", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            corpus[record["_id"]] = record["text"]
    paragraphs = {}
    with open(folder / "answers.jsonl", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            paragraphs[record["query_id"]] = record["paragraph_id"]
    rng = np.random.default_rng(11)
    ids = list(references)
    chosen = [ids[i] for i in rng.choice(len(ids), 600, replace=False)]
    answers = {}
    for n, qid in enumerate(chosen):  # plausible answers: a reference, a reference padded, a window of the paragraph
        gold = references[qid][0]
        words = corpus[paragraphs[qid]].split()
        start = int(rng.integers(0, max(1, len(words) - 6)))
        answers[qid] = [gold, f"The answer is {gold}.", " ".join(words[start : start + int(rng.integers(1, 7))])][n % 3]
    grades = grade_answers(answers, references)
    for i, qid in enumerate(chosen):
        refs = references[qid]
        assert grades.exact_match[i] == float(
            squad_metric_max_over_ground_truths(squad_exact_match_score, answers[qid], refs)
        )
        assert grades.f1[i] == squad_metric_max_over_ground_truths(squad_f1_score, answers[qid], refs)
    assert grades.exact_match[0::3].tolist() == [1.0] * 200  # a reference itself
    assert (grades.contains[1::3] == 1.0).all()  # padded: contained, seldom exact


# ----- reading reference answers --------------------------------------------------------------------------------


def _write(path, *records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), "utf-8")
    return path


def test_jsonl_field_str_list_and_squad_objects(tmp_path):
    path = _write(
        tmp_path / "refs.jsonl",
        {"id": "q1", "gold": "Paris"},
        {"id": "q2", "gold": ["1847", "in 1847"]},
        "# a comment",
        {"id": "q3", "gold": [{"text": "Denver Broncos", "answer_start": 3}]},
    )
    refs = ReferenceAnswers.from_jsonl(path, field="gold", id_field="id")
    assert dict(refs) == {"q1": ("Paris",), "q2": ("1847", "in 1847"), "q3": ("Denver Broncos",)}
    assert refs.source is not None and refs.source.path == str(path)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"id": "q2", "gold": "x"}, r"refs.jsonl:2: query 'q2' is on two lines"),
        ({"id": "q3"}, r"refs.jsonl:2: missing key 'gold'"),
        ({"gold": "x"}, r"refs.jsonl:2: missing key 'id'"),
        ({"id": "q3", "gold": []}, r"refs.jsonl:2: query 'q3': the answers must be a str or a non-empty list"),
        ({"id": "q3", "gold": ["ok", " "]}, r"refs.jsonl:2: query 'q3': an answer must be a non-empty str"),
        ({"id": "q3", "gold": [{"start": 1}]}, r"refs.jsonl:2: query 'q3': an answer must be a non-empty str"),
        ({"id": 3, "gold": "x"}, r"refs.jsonl:2: a query id must be a non-empty str, not 3"),
    ],
)
def test_jsonl_errors_name_the_file_and_line(tmp_path, record, message):
    path = _write(tmp_path / "refs.jsonl", {"id": "q2", "gold": "y"}, record)
    with pytest.raises(InputError, match=message):
        ReferenceAnswers.from_jsonl(path, field="gold", id_field="id")


def test_squad_folder_file_and_official_json_agree(tmp_path):
    official = {
        "version": "1.1",
        "data": [
            {
                "title": "T",
                "paragraphs": [
                    {
                        "context": "Denver Broncos won.",
                        "qas": [
                            {"id": "q1", "question": "Who?", "answers": [{"text": "Denver Broncos", "answer_start": 0},
                                                                       {"text": "Broncos", "answer_start": 7}]},
                        ],
                    }
                ],
            }
        ],
    }  # fmt: skip
    (tmp_path / "dev.json").write_text(json.dumps(official), "utf-8")
    folder = tmp_path / "squad"
    folder.mkdir()
    _write(folder / "answers.jsonl", {"query_id": "q1", "answers": [{"text": "Denver Broncos"}, {"text": "Broncos"}]})
    expected = {"q1": ("Denver Broncos", "Broncos")}
    assert dict(ReferenceAnswers.from_squad(tmp_path / "dev.json")) == expected
    assert dict(ReferenceAnswers.from_squad(folder)) == expected
    assert dict(ReferenceAnswers.from_squad(folder / "answers.jsonl")) == expected
    official["data"][0]["paragraphs"][0]["qas"].append({"id": "q1", "answers": [{"text": "x"}]})
    (tmp_path / "dev.json").write_text(json.dumps(official), "utf-8")
    with pytest.raises(
        InputError, match=r"dev.json: data\[0\].paragraphs\[0\].qas\[1\]: question id 'q1' appears twice"
    ):
        ReferenceAnswers.from_squad(tmp_path / "dev.json")
    (tmp_path / "other.json").write_text('{"rows": []}', "utf-8")
    with pytest.raises(InputError, match="not SQuAD's JSON"):
        ReferenceAnswers.from_squad(tmp_path / "other.json")
    with pytest.raises(InputError, match="no such file"):
        ReferenceAnswers.from_squad(tmp_path)  # a folder without answers.jsonl


def test_a_column_long_or_as_lists(tmp_path):
    long = pd.DataFrame({"query_id": ["q1", "q2", "q1"], "answer": ["a1", "b", "a2"]})
    assert dict(ReferenceAnswers.from_frame(long)) == {"q1": ("a1", "a2"), "q2": ("b",)}
    lists = pd.DataFrame({"qid": ["q1"], "gold": [np.array(["x", "y"], dtype=object)]})
    assert dict(ReferenceAnswers.from_frame(lists, column="gold", id_column="qid")) == {"q1": ("x", "y")}
    with pytest.raises(InputError, match="no column 'query_id'"):
        ReferenceAnswers.from_frame(lists)
    with pytest.raises(InputError, match=r"row 1: query 'q2': the answers must be a str or a non-empty list"):
        ReferenceAnswers.from_frame(pd.DataFrame({"query_id": ["q1", "q2"], "answer": ["a", None]}))
    assert dict(ReferenceAnswers({"q": "only"})) == {"q": ("only",)}
    with pytest.raises(InputError, match="no reference answers"):
        ReferenceAnswers({})
