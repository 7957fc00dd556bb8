"""Run: every loader, score order vs given order, ties, duplicates, int ids, and exports that keep the ranking."""

from __future__ import annotations

import gzip
import json
import math
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest

import rag_eval
from rag_eval import InputError, Run

# Rows in file order: queries interleaved, the rank column contradicting the scores, a three-way tie in q1 whose
# string order differs from natural order (d1 < d10 < d2), and numeric-looking doc ids with a leading zero in q2.
ROWS = [
    ("q1", "d1", 1, 1.5),
    ("q2", "00123", 1, 2.0),
    ("q1", "d3", 2, 2.5),
    ("q1", "d2", 3, 1.5),
    ("q2", "5", 2, 2.0),
    ("q1", "d10", 4, 1.5),
    ("q2", "0", 3, -1.0),
]
TOP = float(np.finfo(np.float64).max)  # the largest finite score

# by score, ties by doc id descending as strings (trec_eval)
EXPECTED = {
    "q1": [("d3", 2.5), ("d2", 1.5), ("d10", 1.5), ("d1", 1.5)],
    "q2": [("5", 2.0), ("00123", 2.0), ("0", -1.0)],
}


def trec_text(sep: str = " ", extra: str = "") -> str:
    return "".join(sep.join([q, "Q0", d, str(r), repr(s), "tag"]) + extra + "\n" for q, d, r, s in ROWS)


def write(tmp_path, name: str, content: str | bytes):
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


def rankings(run: Run, **kwargs) -> dict[str, list]:
    return {q: run.ranking(q, **kwargs) for q in run.query_ids}


def doc_order(run: Run) -> dict[str, list[str]]:
    return {q: [d for d, _ in run.ranking(q)] for q in run.query_ids}


def read_trec_lines(path) -> dict[str, list[tuple[str, int, float]]]:
    out: dict[str, list[tuple[str, int, float]]] = {}
    for line in path.read_text().splitlines():
        q, q0, d, rank, score, _tag = line.split()
        assert q0 == "Q0"
        out.setdefault(q, []).append((d, int(rank), float(score)))
    return out


def assert_strictly_decreasing_export(path, run: Run) -> None:
    """Every query's lines: ranks 1..n, scores finite and strictly decreasing, docs in the run's order."""
    lines = read_trec_lines(path)
    assert list(lines) == list(run.query_ids)
    for q, rows in lines.items():
        assert [d for d, _, _ in rows] == [d for d, _ in run.ranking(q)]
        assert [r for _, r, _ in rows] == list(range(1, len(rows) + 1))
        scores = [s for _, _, s in rows]
        assert all(math.isfinite(s) for s in scores), scores
        assert all(a > b for a, b in pairwise(scores)), scores


# ----- TREC run files -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(trec_text(), id="single-spaces"),
        pytest.param(trec_text("\t"), id="tabs"),
        pytest.param(trec_text(" \t  "), id="mixed-whitespace"),
        pytest.param(trec_text(" ", " extra fields 7 8"), id="extra-fields"),
        pytest.param(trec_text(" ").replace("\n", "\r\n") + "\n\n", id="crlf-and-blank-lines"),
    ],
)
def test_from_trec_ranks_by_score_with_trec_eval_ties(tmp_path, text):
    run = Run.from_trec(write(tmp_path, "bm25.trec", text))
    assert rankings(run) == EXPECTED
    assert run.query_ids == ("q1", "q2")  # order of first appearance
    assert len(run) == 2
    assert run.num_entries == 7
    assert run.ranked_by == "score"
    assert run.name == "bm25.trec"
    assert run.tag == "tag"
    assert all(type(d) is str for d in run.doc_ids)


def test_one_line_with_extra_fields_among_regular_lines(tmp_path):
    text = trec_text().replace("q1 Q0 d2 3 1.5 tag\n", "q1 Q0 d2 3 1.5 tag 99 more\n")
    run = Run.from_trec(write(tmp_path, "run.trec", text))
    assert rankings(run) == EXPECTED


def test_tab_inside_an_otherwise_space_separated_file(tmp_path):
    # "q1 Q0 d2 2 1.0 5 t" is a valid 7-field line (score 1.0); one tab instead of a space must not change that
    text = "q1 Q0 d1 1 2.0 t\nq1\tQ0 d2 2 1.0 5 t\n"
    run = Run.from_trec(write(tmp_path, "run.trec", text))
    assert run.query_ids == ("q1",)
    assert run.ranking("q1") == [("d1", 2.0), ("d2", 1.0)]


@pytest.mark.parametrize("sep", [" ", "\t", " \t "], ids=["spaces", "tabs", "mixed"])
def test_only_ascii_whitespace_separates_fields(tmp_path, sep):
    lines = [["q\u00a01", "Q0", "d\u20281", "1", "2.0", "t"], ["q\u00a01", "Q0", "d2", "2", "1.0", "t"]]
    run = Run.from_trec(write(tmp_path, "run.trec", "".join(sep.join(f) + "\n" for f in lines)))
    assert rankings(run) == {"q\u00a01": [("d\u20281", 2.0), ("d2", 1.0)]}


def test_from_trec_tie_rules(tmp_path):
    run = Run.from_trec(write(tmp_path, "run.trec", trec_text()))
    assert [d for d, _ in run.ranking("q1", ties="trec_eval")] == ["d3", "d2", "d10", "d1"]
    assert [d for d, _ in run.ranking("q1", ties="doc_id")] == ["d3", "d1", "d10", "d2"]
    assert [d for d, _ in run.ranking("q1", ties="input_order")] == ["d3", "d1", "d2", "d10"]
    assert [d for d, _ in run.ranking("q2", ties="doc_id")] == ["00123", "5", "0"]
    with pytest.raises(ValueError):
        run.ranking("q1", ties="random")


def test_from_trec_name_and_gz(tmp_path):
    plain = write(tmp_path, "bm25.trec", trec_text())
    packed = tmp_path / "bm25.trec.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = Run.from_trec(plain), Run.from_trec(packed)
    assert a == b
    assert rankings(b) == EXPECTED
    assert b.name == "bm25.trec"
    assert Run.from_trec(packed, name="mine").name == "mine"
    assert Run.load(packed) == a
    assert b.source.path == str(packed)


@pytest.mark.parametrize(
    "text, line",
    [
        pytest.param("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 0.5\n", 2, id="five-fields-late"),
        pytest.param("q1 Q0 d1 1 1.0\nq1 Q0 d2 2 0.5 t\n", 1, id="five-fields-first"),
        pytest.param("q1\tQ0\td1\t1\t1.0\tt\nq1\tQ0\td2\t2\t0.5\n", 2, id="five-fields-tabs"),
        pytest.param("q1 Q0 d1 1 1.0 t\n\nq1 Q0 d2 2 0.5 t\nq1 d3 3\n", 4, id="after-a-blank-line"),
    ],
)
def test_trec_line_with_too_few_fields_names_file_and_line(tmp_path, text, line):
    path = write(tmp_path, "run.trec", text)
    with pytest.raises(InputError) as info:
        Run.from_trec(path)
    assert f"{path}:{line}:" in str(info.value)


@pytest.mark.parametrize("score", ["abc", "1.0.0", "nan", "NaN", "-nan"])
def test_trec_bad_score_names_file_and_line(tmp_path, score):
    path = write(tmp_path, "run.trec", f"q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 0.5 t\nq1 Q0 d3 3 {score} t\n")
    with pytest.raises(InputError) as info:
        Run.from_trec(path)
    assert f"{path}:3:" in str(info.value)


def test_trec_errors_for_missing_empty_and_non_utf8_files(tmp_path):
    missing = tmp_path / "missing.trec"
    with pytest.raises(InputError, match=r"missing\.trec"):
        Run.from_trec(missing)
    empty = write(tmp_path, "empty.trec", "\n\n")
    with pytest.raises(InputError, match="empty"):
        Run.from_trec(empty)
    bad = write(tmp_path, "bad.trec", b"q1 Q0 d1 1 1.0 t\nq1 Q0 d\xff 2 0.5 t\n")
    with pytest.raises(InputError) as info:
        Run.from_trec(bad)
    assert f"{bad}:2:" in str(info.value)


# ----- JSONL and DataFrames -----------------------------------------------------------------------------------

JSONL_ROWS = [("q1", "a", 1.0), ("q1", "b", 3.0), ("00123", "5", 2.0), ("q1", "c", 2.0), ("00123", "007", 2.0)]


def jsonl_text(q_key: str = "query_id", d_key: str = "doc_id", with_scores: bool = True) -> str:
    lines = []
    for q, d, s in JSONL_ROWS:
        record = {q_key: q, d_key: d}
        if with_scores:
            record["score"] = s
        lines.append(json.dumps(record))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("keys", [("query_id", "doc_id"), ("qid", "docno")], ids=["ours", "pyterrier"])
def test_from_jsonl_order_score_and_given(tmp_path, keys):
    path = write(tmp_path, "run.jsonl", jsonl_text(*keys))
    by_score = Run.from_jsonl(path)
    assert by_score.ranked_by == "score"
    assert by_score.query_ids == ("q1", "00123")
    assert rankings(by_score) == {
        "q1": [("b", 3.0), ("c", 2.0), ("a", 1.0)],
        "00123": [("5", 2.0), ("007", 2.0)],
    }
    given = Run.from_jsonl(path, order="given")
    assert given.ranked_by == "given"
    assert rankings(given) == {
        "q1": [("a", 1.0), ("b", 3.0), ("c", 2.0)],
        "00123": [("5", 2.0), ("007", 2.0)],
    }
    assert Run.load(path) == by_score


def test_from_jsonl_given_without_scores(tmp_path):
    path = write(tmp_path, "run.jsonl", jsonl_text(with_scores=False))
    run = Run.from_jsonl(path, order="given")
    assert run.scores is None
    assert doc_order(run) == {"q1": ["a", "b", "c"], "00123": ["5", "007"]}
    with pytest.raises(InputError) as info:
        Run.from_jsonl(path, order="score")
    assert f"{path}:1:" in str(info.value)


@pytest.mark.parametrize(
    "line2",
    [
        '{"query_id": "q1", "doc_id": "b", "score": "high"}',
        '{"query_id": "q1", "doc_id": "b", "score": NaN}',
        '{"query_id": "q1", "doc_id": "b"}',
        '{"query_id": "q1", "score": 1.0}',
        "not json",
    ],
    ids=["str-score", "nan-score", "no-score", "no-doc", "bad-json"],
)
def test_jsonl_bad_line_names_file_and_line(tmp_path, line2):
    path = write(tmp_path, "run.jsonl", '{"query_id": "q1", "doc_id": "a", "score": 1.0}\n' + line2 + "\n")
    with pytest.raises(InputError) as info:
        Run.from_jsonl(path)
    assert f"{path}:2:" in str(info.value)


@pytest.mark.parametrize(
    "columns", [("query_id", "doc_id", "score"), ("qid", "docno", "score")], ids=["ours", "pyterrier"]
)
def test_from_frame_by_score_and_given(columns):
    frame = pd.DataFrame([(q, d, s) for q, d, _, s in ROWS], columns=list(columns))
    run = Run.from_frame(frame, name="pt")
    assert run.name == "pt"
    assert rankings(run) == EXPECTED
    given = Run.from_frame(frame, order="given")
    assert doc_order(given) == {"q1": ["d1", "d3", "d2", "d10"], "q2": ["00123", "5", "0"]}


def test_from_frame_ignores_a_rank_column():
    frame = pd.DataFrame(
        {"qid": ["q", "q", "q"], "docno": ["a", "b", "c"], "rank": [3, 2, 1], "score": [1.0, 2.0, 3.0]}
    )
    assert doc_order(Run.from_frame(frame, order="given")) == {"q": ["a", "b", "c"]}
    assert doc_order(Run.from_frame(frame)) == {"q": ["c", "b", "a"]}


def test_from_frame_errors():
    with pytest.raises(InputError, match="score"):
        Run.from_frame(pd.DataFrame({"qid": ["q"], "docno": ["a"]}))
    with pytest.raises(InputError, match="row 1"):
        Run.from_frame(pd.DataFrame({"qid": ["q", "q"], "docno": ["a", "b"], "score": [1.0, np.nan]}))
    with pytest.raises(InputError):
        Run.from_frame(pd.DataFrame({"query": ["q"], "docno": ["a"], "score": [1.0]}))


# ----- from_scores vs from_ranking ----------------------------------------------------------------------------


def test_from_scores_sorts_and_from_ranking_keeps_the_given_order():
    scores = {"q": {"a": 1.0, "b": 5.0, "c": 3.0, "d": 3.0}}
    by_score = Run.from_scores(scores)
    assert by_score.ranked_by == "score"
    assert by_score.ranking("q") == [("b", 5.0), ("d", 3.0), ("c", 3.0), ("a", 1.0)]

    pairs = Run.from_ranking({"q": [("a", 1.0), ("b", 5.0), ("c", 3.0), ("d", 3.0)]})
    assert pairs.ranked_by == "given"
    assert pairs.ranking("q") == [("a", 1.0), ("b", 5.0), ("c", 3.0), ("d", 3.0)]
    # tie rules never re-sort a given order
    assert pairs.ranking("q", ties="doc_id") == pairs.ranking("q")

    mapping = Run.from_ranking(scores)  # a {doc: score} mapping in ranked order
    assert mapping.ranking("q") == [("a", 1.0), ("b", 5.0), ("c", 3.0), ("d", 3.0)]

    bare = Run.from_ranking({"q": ["c", "a", "b"], "empty": []})
    assert bare.ranking("q") == [("c", None), ("a", None), ("b", None)]
    assert bare.ranking("empty") == []
    assert bare.scores is None


def test_from_ranking_rejects_bad_shapes():
    with pytest.raises(InputError):
        Run.from_ranking({"q": "abc"})
    with pytest.raises(InputError):
        Run.from_ranking({"q": ["a", ("b", 1.0)]})
    with pytest.raises(InputError):
        Run.from_ranking({"q": [("a", "high")]})
    with pytest.raises(InputError):
        Run.from_ranking({"q": [("a", float("nan"))]})
    with pytest.raises(TypeError):
        Run.from_ranking([("q", ["a"])])  # type: ignore[arg-type]


def test_from_scores_rejects_bad_scores():
    with pytest.raises(InputError):
        Run.from_scores({"q": {"a": float("nan")}})
    with pytest.raises(InputError, match="'b'"):
        Run.from_scores({"q": {"a": 1.0, "b": "high"}})


@pytest.mark.parametrize(
    ("score", "read"),
    [("1.5", 1.5), ("-1e3", -1000.0), (np.float32(2.5), 2.5), (np.int64(3), 3.0)],
    ids=["numeric-str", "exponent-str", "np-float32", "np-int64"],
)
def test_from_scores_and_from_ranking_read_scores_alike(score, read):
    # both read a score by the one number rule; what one accepts the other accepts, with the same value
    assert Run.from_ranking({"q": [("a", 2.0), ("b", score)]}).ranking("q")[1] == ("b", read)
    assert dict(Run.from_scores({"q": {"a": 2.0, "b": score}}).ranking("q"))["b"] == read


@pytest.mark.parametrize(
    "score",
    [None, "high", float("nan"), True, np.True_, "1_0", " 1", "\u0661", "nan"],
    ids=["None", "word", "nan", "bool", "np-bool", "underscore", "space", "arabic-digit", "nan-str"],
)
def test_from_scores_and_from_ranking_refuse_the_same_non_scores(score):
    with pytest.raises(InputError):
        Run.from_ranking({"q": [("a", 2.0), ("b", score)]})
    with pytest.raises(InputError):
        Run.from_scores({"q": {"a": 2.0, "b": score}})
    with pytest.raises(TypeError):
        Run.from_scores([("q", {"a": 1.0})])  # type: ignore[arg-type]


def test_run_cannot_be_built_directly():
    with pytest.raises(TypeError):
        Run()


# ----- duplicates and int ids ---------------------------------------------------------------------------------


def test_duplicate_in_a_given_ranking_is_kept_once_at_its_first_position():
    with pytest.warns(UserWarning, match="repeated") as caught:
        run = Run.from_ranking({"q": ["a", "b", "a", "c", "b"], "r": ["x"]}, name="dup")
    assert len(caught) == 1
    assert doc_order(run) == {"q": ["a", "b", "c"], "r": ["x"]}
    assert run.num_entries == 4
    assert len(run.notes) == 1
    assert "2 repeated" in run.notes[0]


def test_duplicate_in_a_trec_file_keeps_the_best_ranked_copy(tmp_path):
    text = "q1 Q0 a 1 1.0 t\nq1 Q0 b 2 3.0 t\nq1 Q0 a 3 2.0 t\nq2 Q0 a 1 1.0 t\n"
    path = write(tmp_path, "dup.trec", text)
    with pytest.warns(UserWarning) as caught:
        run = Run.from_trec(path)
    assert len(caught) == 1
    assert str(path) in str(caught[0].message)
    assert rankings(run) == {"q1": [("b", 3.0), ("a", 2.0)], "q2": [("a", 1.0)]}
    assert len(run.notes) == 1


def test_duplicate_in_a_given_order_jsonl_keeps_the_first_line(tmp_path):
    text = "\n".join(json.dumps({"qid": "q", "docno": d, "score": s}) for d, s in [("a", 1.0), ("b", 3.0), ("a", 5.0)])
    with pytest.warns(UserWarning):
        run = Run.from_jsonl(write(tmp_path, "dup.jsonl", text), order="given")
    assert run.ranking("q") == [("a", 1.0), ("b", 3.0)]
    assert len(run.notes) == 1


def test_no_notes_without_duplicates():
    assert Run.from_ranking({"q": ["a", "b"]}).notes == ()


INT_ID_CASES = {
    "query-ids": ({7: {"a": 1.0}, 8: {"b": 2.0}}, {"7": [("a", 1.0)], "8": [("b", 2.0)]}),
    "doc-ids": ({"q": {10: 1.0, 11: 2.0}}, {"q": [("11", 2.0), ("10", 1.0)]}),
    "both": ({7: {10: 1.0, 11: 2.0}}, {"7": [("11", 2.0), ("10", 1.0)]}),
}


@pytest.mark.parametrize("case", sorted(INT_ID_CASES))
def test_int_ids_in_from_scores_convert_with_exactly_one_warning(case):
    given, expected = INT_ID_CASES[case]
    with pytest.warns(UserWarning) as caught:
        run = Run.from_scores(given)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert rankings(run) == expected


@pytest.mark.parametrize("case", sorted(INT_ID_CASES))
def test_int_ids_in_from_ranking_convert_with_exactly_one_warning(case):
    given, expected = INT_ID_CASES[case]
    ranking = {q: sorted(docs.items(), key=lambda item: -item[1]) for q, docs in given.items()}
    with pytest.warns(UserWarning) as caught:
        run = Run.from_ranking(ranking)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert rankings(run) == expected


@pytest.mark.parametrize("case", sorted(INT_ID_CASES))
def test_int_ids_in_a_frame_convert_with_exactly_one_warning(case):
    given, expected = INT_ID_CASES[case]
    frame = pd.DataFrame(
        [(q, d, s) for q, docs in given.items() for d, s in docs.items()], columns=["qid", "docno", "score"]
    )
    with pytest.warns(UserWarning) as caught:
        run = Run.from_frame(frame)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert rankings(run) == expected


@pytest.mark.parametrize("bad", [{1.5: {"a": 1.0}}, {"q": {None: 1.0}}, {True: {"a": 1.0}}])
def test_other_id_types_are_input_errors(bad):
    with pytest.raises(InputError):
        Run.from_scores(bad)


# ----- exports ------------------------------------------------------------------------------------------------


def tied_run(value: float) -> Run:
    return Run.from_scores(
        {"q1": {"d1": value, "d2": value, "d10": value, "top": TOP}, "q2": {"x": value, "y": value}}, name="tied"
    )


@pytest.mark.parametrize("value", [1.5, 0.0, -0.0, -2.0, 5e-324, 1e-323, -5e-324, 1e-310, 1e308, -TOP])
def test_to_trec_scores_strictly_decrease_with_tied_scores(tmp_path, value):
    run = tied_run(value)
    assert doc_order(run) == {"q1": ["top", "d2", "d10", "d1"], "q2": ["y", "x"]}
    path = tmp_path / "out.trec"
    run.to_trec(path)
    assert_strictly_decreasing_export(path, run)
    assert doc_order(Run.from_trec(path)) == doc_order(run)


def test_to_trec_when_a_tie_sits_one_ulp_above_the_next_score(tmp_path):
    below = float(np.nextafter(1.0, 0.0))
    run = Run.from_scores({"q": {"a": 1.0, "b": 1.0, "c": 1.0, "d": below}})
    path = tmp_path / "out.trec"
    run.to_trec(path)
    assert_strictly_decreasing_export(path, run)
    assert doc_order(Run.from_trec(path)) == {"q": ["c", "b", "a", "d"]}


def test_to_trec_of_given_order_runs(tmp_path):
    for run in (
        Run.from_ranking({"q1": ["z", "a", "m"], "q2": ["only"], "q3": []}),  # no scores
        Run.from_ranking({"q1": [("z", 1.0), ("a", 5.0), ("m", 3.0)], "q2": [("only", 0.0)]}),  # scores disagree
        Run.from_ranking({"q1": [("z", 2.0), ("a", 2.0), ("m", 2.0)]}),  # a given order among ties
    ):
        path = tmp_path / "out.trec"
        run.to_trec(path, tag="given")
        lines = read_trec_lines(path)
        assert list(lines) == [q for q in run.query_ids if run.ranking(q)]
        assert_strictly_decreasing_export_for_nonempty(path, run)
        again = Run.from_trec(path)
        assert again.tag == "given"
        assert doc_order(again) == {q: d for q, d in doc_order(run).items() if d}


def assert_strictly_decreasing_export_for_nonempty(path, run: Run) -> None:
    lines = read_trec_lines(path)
    for q, rows in lines.items():
        assert [d for d, _, _ in rows] == [d for d, _ in run.ranking(q)]
        scores = [s for _, _, s in rows]
        assert all(a > b for a, b in pairwise(scores)), scores


def test_to_trec_keeps_scores_that_already_decrease(tmp_path):
    run = Run.from_scores({"q": {"a": 0.25, "b": 0.75, "c": -3.5}})
    path = tmp_path / "out.trec"
    run.to_trec(path)
    assert path.read_text().splitlines() == ["q Q0 b 1 0.75 run", "q Q0 a 2 0.25 run", "q Q0 c 3 -3.5 run"]


@pytest.mark.parametrize(
    "run",
    [
        tied_run(0.5),
        Run.from_ranking({"q": [("z", 1.0), ("a", 5.0), ("m", 3.0)]}),
        Run.from_ranking({"q": ["z", "a", "m", "b"]}),
    ],
    ids=["ties", "given-with-scores", "given-without-scores"],
)
def test_to_dict_keeps_the_order_for_a_score_sorting_reader(run):
    exported = run.to_dict()
    assert list(exported) == list(run.query_ids)
    for q, docs in exported.items():
        values = list(docs.values())
        assert len(set(values)) == len(values)  # no ties left to break
        assert [d for d, _ in sorted(docs.items(), key=lambda item: -item[1])] == [d for d, _ in run.ranking(q)]
    for ties in ("trec_eval", "doc_id", "input_order"):
        assert doc_order(Run.from_scores(exported)) == doc_order(run)
        assert [d for d, _ in Run.from_scores(exported).ranking(run.query_ids[0], ties=ties)] == [
            d for d, _ in run.ranking(run.query_ids[0])
        ]


def test_to_frame_columns_and_ranks(tmp_path):
    run = Run.from_trec(write(tmp_path, "run.trec", trec_text()))
    frame = run.to_frame()
    assert list(frame.columns) == ["query_id", "doc_id", "rank", "score"]
    assert list(frame.itertuples(index=False, name=None)) == [
        ("q1", "d3", 1, 2.5),
        ("q1", "d2", 2, 1.5),
        ("q1", "d10", 3, 1.5),
        ("q1", "d1", 4, 1.5),
        ("q2", "5", 1, 2.0),
        ("q2", "00123", 2, 2.0),
        ("q2", "0", 3, -1.0),
    ]
    assert frame["rank"].dtype.kind == "i"
    assert run.to_frame(ties="doc_id")["doc_id"].tolist()[:4] == ["d3", "d1", "d10", "d2"]
    assert doc_order(Run.from_frame(frame, order="given")) == doc_order(run)


def test_to_frame_of_a_run_without_scores():
    frame = Run.from_ranking({"q": ["b", "a"]}).to_frame()
    assert frame["rank"].tolist() == [1, 2]
    assert frame["doc_id"].tolist() == ["b", "a"]
    assert frame["score"].isna().all()


def test_read_only_views():
    run = Run.from_scores({"q": {"a": 1.0, "b": 2.0}})
    with pytest.raises(ValueError):
        run.scores[0] = 9.0
    with pytest.raises(ValueError):
        run.doc_ids[0] = "z"
    with pytest.raises(ValueError):
        run.offsets[0] = 1


# ----- evaluate does not mutate -------------------------------------------------------------------------------


def snapshot(run: Run):
    return (
        run.name,
        run.query_ids,
        run.ranked_by,
        run.notes,
        run.to_dict(),
        run.doc_ids.copy(),
        None if run.scores is None else run.scores.copy(),
        run.offsets.copy(),
    )


def assert_same_snapshot(a, b) -> None:
    assert a[:5] == b[:5]
    assert np.array_equal(a[5], b[5])
    assert (a[6] is None and b[6] is None) or np.array_equal(a[6], b[6])
    assert np.array_equal(a[7], b[7])


def test_evaluate_does_not_mutate_runs(tmp_path):
    qrels = rag_eval.Qrels.from_dict({"q1": {"d1": 1, "d10": 2, "d2": 0}, "q2": {"5": 1}, "q3": {"x": 1}})
    runs = [
        Run.from_trec(write(tmp_path, "a.trec", trec_text())),
        Run.from_ranking({"q1": [("d2", 1.0), ("d1", 9.0)], "q9": [("x", 0.5)]}, name="given"),
    ]
    before = [snapshot(r) for r in runs]
    for conventions in ("default", "trec_eval", rag_eval.Conventions(ties="doc_id", max_depth=2, unjudged="remove")):
        rag_eval.evaluate(qrels, runs, ["ndcg@10", "P@2", "ap"], conventions=conventions)
    for b, r in zip(before, runs):
        assert_same_snapshot(b, snapshot(r))
    assert rankings(runs[0]) == EXPECTED


# ----- a large-ish run ----------------------------------------------------------------------------------------


def test_large_run_from_dicts_equals_its_trec_file(tmp_path):
    rng = np.random.default_rng(7)
    n_queries, depth = 2000, 200
    scores: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        qid = f"{q:05d}" if q % 2 else f"q{q}"
        docs = rng.choice(1_000_000, depth, replace=False)
        values = np.round(rng.random(depth), 2)  # two decimals: many ties
        scores[qid] = {f"{d:07d}": float(v) for d, v in zip(docs, values)}
    path = tmp_path / "big.trec"
    lines = [
        f"{q} Q0 {d} {i} {s!r} a_longish_tag_name\n"
        for q, docs in scores.items()
        for i, (d, s) in enumerate(docs.items(), 1)
    ]
    order = rng.permutation(len(lines))  # queries interleaved throughout the file
    with open(path, "w") as out:
        out.writelines(lines[i] for i in order)
    assert path.stat().st_size > 16 << 20  # more than one block for the fast reader

    from_dicts = Run.from_scores(scores, name="big")
    from_file = Run.from_trec(path)
    assert from_file.num_entries == from_dicts.num_entries == n_queries * depth
    assert sorted(from_file.query_ids) == sorted(from_dicts.query_ids)
    a = from_dicts.to_frame().sort_values(["query_id", "rank"], kind="stable").reset_index(drop=True)
    b = from_file.to_frame().sort_values(["query_id", "rank"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    for q in ("q0", "00001", "q1998", "01999"):
        assert from_file.ranking(q) == from_dicts.ranking(q)
        assert all(type(d) is str and len(d) == 7 for d, _ in from_file.ranking(q))
