"""SpanLabels: answer spans, answer strings located in the text, document- and chunk-level labels; the JSONL and
SQuAD readers, and every bad input naming its file and line (or its query and string)."""

from __future__ import annotations

import json

import pytest

from rag_eval import InputError, SpanLabels
from rag_eval.data import Span

from .conftest import DATASETS, need_shared


def write(tmp_path, *records, name="labels.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_jsonl_reads_spans_answers_doc_and_chunk_labels(tmp_path):
    path = write(
        tmp_path,
        {"query_id": "q1", "doc_id": "d1", "start": 4, "end": 9, "grade": 2},
        {"query_id": "q1", "doc_id": "d1", "answer": "brown", "grade": 1},
        {"query_id": "q1", "doc_id": "d2", "grade": 0},
        "# a comment line",
        {"query_id": "q2", "chunk_id": "d3#c1", "grade": 3},
        {"query_id": "q2", "doc_id": "d1", "start": 0, "end": 3, "answer": "the", "grade": 1, "unit": "u"},
        {"query_id": "q2", "doc_id": "d1", "start": 0, "end": 9, "grade": 1, "unit": "u"},
    )
    labels = SpanLabels.from_jsonl(path)
    assert labels.query_ids == ("q1", "q2")
    assert labels.spans("q1")[0] == Span("d1", 4, 9, 2, "q1")
    assert labels.spans("q1")[1] == Span("d1", None, None, 1, "q1", answer="brown")
    assert labels.docs("q1") == {"d2": 0} and labels.chunks("q2") == {"d3#c1": 3}
    assert list(labels.units("q2")) == ["u"] and len(labels.units("q2")["u"]) == 2
    assert not labels.located
    assert labels.source.path == str(path) and len(labels.source.sha256) == 64
    located = labels.locate({"d1": "the quick brown fox"})
    assert located.located and labels.spans("q1")[1].start is None  # locate returns new labels
    assert located.spans("q1")[1] == Span("d1", 10, 15, 1, "q1", answer="brown")
    assert (
        located.describe() == "2 queries: 4 answer spans in 3 answer units, 1 document-level and 1 chunk-level labels"
    )


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ({"query_id": "q", "doc_id": "d", "start": -1, "end": 3, "grade": 1}, "start -1 is negative"),
        ({"query_id": "q", "doc_id": "d", "start": 5, "end": 5, "grade": 1}, "end 5 is not after start 5"),
        ({"query_id": "q", "doc_id": "d", "start": 7, "end": 2, "grade": 1}, "end 2 is not after start 7"),
        ({"query_id": "q", "doc_id": "d", "start": 1.5, "end": 3, "grade": 1}, "start 1.5 is not an integer"),
        ({"query_id": "q", "doc_id": "d", "start": "1", "end": 3, "grade": 1}, "start '1' is not an integer"),
        ({"query_id": "q", "doc_id": "d", "start": 1, "end": True, "grade": 1}, "end True is not an integer"),
        ({"query_id": "q", "doc_id": "d", "start": 1, "grade": 1}, "missing key 'end'"),
        ({"query_id": "q", "doc_id": "d", "start": 1, "end": 3}, "missing key 'grade'"),
        ({"doc_id": "d", "grade": 1}, "missing key 'query_id'"),
        ({"query_id": "q", "grade": 1}, "missing key 'doc_id'"),
        ({"query_id": "q", "doc_id": "d", "start": 1, "end": 3, "grade": 0}, "a span's grade must be 1 or more"),
        ({"query_id": "q", "doc_id": "d", "start": 1, "end": 3, "grade": "high"}, "grade 'high' is not an integer"),
        ({"query_id": "q", "doc_id": "d", "grade": 1.5}, "grade 1.5 is not an integer"),
        ({"query_id": "q", "doc_id": "d", "answer": "", "grade": 1}, "answer '' is not a non-empty str"),
        (
            {"query_id": "q", "doc_id": "d", "start": 0, "end": 3, "answer": "ab", "grade": 1},
            "'ab' has 2 characters but [0, 3) spans 3",
        ),
        ({"query_id": 7, "doc_id": "d", "start": 0, "end": 3, "grade": 1}, "query id 7 is not a non-empty str"),
        ({"query_id": "q", "chunk_id": 3, "grade": 1}, "chunk id 3 is not a non-empty str"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, line, problem):
    path = write(tmp_path, {"query_id": "ok", "doc_id": "d", "grade": 1}, line)
    with pytest.raises(InputError) as caught:
        SpanLabels.from_jsonl(path)
    assert str(caught.value).startswith(f"{path}:2: ")
    assert problem in str(caught.value)


def test_integral_floats_are_integers(tmp_path):
    path = write(tmp_path, {"query_id": "q", "doc_id": "d", "start": 1.0, "end": 3.0, "grade": 2.0})
    assert SpanLabels.from_jsonl(path).spans("q") == (Span("d", 1, 3, 2, "q"),)


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InputError, match="empty file"):
        SpanLabels.from_jsonl(tmp_path / "empty.jsonl")
    with pytest.raises(InputError, match="no such file"):
        SpanLabels.from_jsonl(tmp_path / "absent.jsonl")


def test_repeats_kept_once_and_conflicts_warned(tmp_path):
    span = {"query_id": "q", "doc_id": "d", "start": 0, "end": 4, "grade": 1}
    labels = SpanLabels.from_jsonl(write(tmp_path, span, span, {"query_id": "q", "doc_id": "e", "grade": 1}))
    assert len(labels.spans("q")) == 1 and labels.num_units == 1
    with pytest.warns(UserWarning, match=r"2 repeated label\(s\) with another grade or unit; kept the first"):
        labels = SpanLabels.from_jsonl(
            write(
                tmp_path,
                span,
                {**span, "grade": 2},
                {"query_id": "q", "doc_id": "e", "grade": 1},
                {"query_id": "q", "doc_id": "e", "grade": 0},
                name="conflict.jsonl",
            )
        )
    assert labels.spans("q")[0].grade == 1 and labels.docs("q") == {"e": 1}


def test_alternatives_of_one_unit_share_a_grade(tmp_path):
    path = write(
        tmp_path,
        {"query_id": "q", "doc_id": "d", "start": 0, "end": 4, "grade": 1, "unit": "u"},
        {"query_id": "q", "doc_id": "d", "start": 0, "end": 6, "grade": 2, "unit": "u"},
    )
    with pytest.raises(InputError, match=r":2: query 'q': the spans of unit 'u' have grades 1 and 2"):
        SpanLabels.from_jsonl(path)


def test_locate_not_found_names_query_and_string():
    labels = SpanLabels([Span("d1", None, None, 1, "q7", answer="purple")])
    with pytest.raises(InputError, match="query 'q7': answer 'purple' not found in document 'd1'"):
        labels.locate({"d1": "red green blue"})
    with pytest.raises(InputError, match="query 'q7': document 'd1' is not among the texts given"):
        labels.locate({"d2": "purple"})


def test_locate_takes_the_first_of_several_occurrences_with_a_warning():
    labels = SpanLabels([Span("d1", None, None, 1, "q", answer="cat"), Span("d1", None, None, 1, "q", answer="dog")])
    with pytest.warns(UserWarning, match=r"1 answer string\(s\) occur more than once.*'cat' occurs 2 times in 'd1'"):
        located = labels.locate({"d1": "a cat, a dog, a cat"})
    assert [(s.start, s.end) for s in located.spans("q")] == [(2, 5), (9, 12)]


def test_locate_checks_spans_given_with_their_answer():
    labels = SpanLabels([Span("d1", 2, 5, 1, "q", answer="cat")])
    assert labels.located
    assert labels.locate({"d1": "a cat"}) == labels
    with pytest.raises(InputError, match=r"answer 'cat' is not at \[2, 5\) of document 'd1' \(found 'dog'\)"):
        labels.locate({"d1": "a dog"})


def test_span_checks_itself():
    for args, problem in [
        (("d", -2, 3, 1, "q"), "start -2 is negative"),
        (("d", 3, 3, 1, "q"), "end 3 is not after start 3"),
        (("d", 0, None, 1, "q"), "end is missing"),
        (("d", None, None, 1, "q"), "needs start and end, or an answer"),
        (("d", 0, 2, True, "q"), "grade True is not an integer"),
        (("", 0, 2, 1, "q"), "doc id '' is not a non-empty str"),
    ]:
        with pytest.raises(InputError, match=problem.replace("(", r"\(")):
            Span(*args)
    assert Span("d", 3, 8, 1, "q").length == 5 and Span("d", 3, 8, 1, "q").unit_id == "d[3:8]"
    with pytest.raises(TypeError, match="Span objects"):
        SpanLabels([("d", 0, 1)])


def test_squad_answers_become_one_unit_per_question():
    folder = need_shared(DATASETS / "squad-dev-v1.1")
    labels = SpanLabels.from_squad(folder)
    assert len(labels) == 10_570
    assert labels.num_units == 10_570  # a question's answers are alternatives of one unit
    assert labels.num_spans == 18_216  # 34,726 gold answers, identical ones kept once
    first = labels.spans("56be4db0acb8001400a502ec")  # three annotators, all "Denver Broncos" at 177
    assert first == (Span("a00", 177, 191, 1, "56be4db0acb8001400a502ec", "Denver Broncos", "a00[177:191]"),)
    assert labels.source.path.endswith("answers.jsonl")
    articles = {}
    with open(folder / "articles.jsonl") as f:
        for line in f:
            record = json.loads(line)
            articles[record["_id"]] = record["text"]
    checked = labels.locate(articles)  # every answer is checked against its article's text
    assert checked == labels


def test_squad_reader_errors_name_line(tmp_path):
    (tmp_path / "answers.jsonl").write_text(
        json.dumps({"query_id": "q", "article_id": "a", "answers": [{"text": "x", "article_start": 0}]})
        + "\n"
        + json.dumps({"query_id": "q2", "article_id": "a", "answers": [{"text": "x", "article_start": -4}]})
        + "\n"
    )
    with pytest.raises(InputError, match=r"answers.jsonl:2: query 'q2', doc 'a': start -4 is negative"):
        SpanLabels.from_squad(tmp_path)
    (tmp_path / "answers.jsonl").write_text(json.dumps({"query_id": "q", "answers": []}) + "\n")
    with pytest.raises(InputError, match=r"answers.jsonl:1: missing key 'article_id'"):
        SpanLabels.from_squad(tmp_path)
