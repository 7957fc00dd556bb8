"""Fuzzing the readers: whatever bytes a file holds, reading it gives a result or an InputError naming the file.

Each test feeds a bounded number of generated files (``EXAMPLES`` each, fixed by hypothesis' database-free
settings) to one reader, with the C reader and again with the pure-Python one (``rag_eval._accel.speedups`` set
to None), and checks that:

- nothing but an InputError escapes (no IndexError, UnicodeDecodeError, OverflowError, StopIteration, ...);
- the error names the file it is about;
- the two paths agree: both fail with the same message, or both give equal results (and the same run tag);
- a result can be evaluated (it is a well-formed Qrels or Run, not one that breaks the engine later).

The files are mostly near-valid (lines of plausible fields, separators, numbers and junk mixed), because a fully
random file fails on its first line and tests only that line's check.
"""

from __future__ import annotations

import json
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import rag_eval
from rag_eval import _accel
from rag_eval.data.collection import Collection
from rag_eval.errors import InputError

EXAMPLES = 300
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
C_READER = _accel.speedups
METRICS = ["ndcg@10", "recall@5", "P@3", "mrr", "ap", "judged@5"]

# ----- generated content ------------------------------------------------------------------------------------------

IDS = st.sampled_from(["q1", "q2", "Q0", "d1", "d01", "doc-7", "é", "中文", "0", "-1", "x" * 5000])  # a very long line
GOOD = {  # fields a valid line holds, by kind
    "grade": st.sampled_from(["0", "1", "2", "3", "-1", "+2", "007", "1.0", "2."]),
    "score": st.sampled_from(
        ["0", "1.5", "-2", "1e3", "1e-300", "3.0", "inf", "-inf", "7", ".5", "1.", "INFINITY", "1234567890123456789"]
    ),
    "rank": st.sampled_from(["1", "2", "0", "10"]),
    "q0": st.sampled_from(["0", "Q0", "iter"]),
    "id": IDS,
    "tag": st.sampled_from(["run", "bm25", "t"]),
}
JUNK = st.one_of(
    st.sampled_from(
        [
            "1e400",
            "-1e400",
            "nan",
            "NaN",
            "Infinity",
            "0x10",
            "536870911",
            "536870912",
            "-536870912",
            "99999999999999999999",
            "1_000",
            "1_0",
            "",
            "١",
            "١٢",
            "٣.٥",
            "abc",
            "1,5",
            "--1",
            ".",
            "e5",
            "#",
            "\x00",
            "1e2",
            "1.5e",
            "+.e1",
            "0x1p3",
            "infinit",
            "nan(1)",
            "\u00bd",
            "\uff11",
        ]
    ),
    st.text(max_size=5),
)
SEPARATORS = st.sampled_from([" "] * 6 + ["\t"] * 3 + ["  ", " \t", "\u00a0", ",", "\x0b"])
ENDINGS = st.sampled_from(
    ["\n"] * 12 + ["\r\n"] * 3 + ["\r"] * 3 + ["\r\r\n", ""]
)  # CR and CRLF end a line; "" joins two


@st.composite
def trec_lines(draw, layout: tuple[str, ...], between: str = " ") -> str:
    """A line of the fields in ``layout``; one in eight has a junk field, a field too many or too few, or another
    separator."""
    values = [draw(GOOD[kind]) for kind in layout]
    mutation = draw(st.integers(0, 47))
    if mutation in (0, 1, 2):
        values[draw(st.integers(0, len(values) - 1))] = draw(JUNK)
    elif mutation == 3:
        values.pop(draw(st.integers(0, len(values) - 1)))
    elif mutation == 4:
        values.insert(draw(st.integers(0, len(values))), draw(JUNK))
    separator = draw(SEPARATORS) if mutation == 5 else between
    return separator.join(values) + draw(ENDINGS)


@st.composite
def near_valid_text(draw, layout: tuple[str, ...], between: str = " ") -> bytes:
    """Lines of ``layout`` with junk mixed in now and then: comments, blank lines, a BOM, raw bytes."""
    lines = draw(
        st.lists(
            st.one_of(
                *[trec_lines(layout, between)] * 6,
                st.sampled_from(["\n", "# a comment\n", "   \n", "\t\n", "\r\n", "\r", "# a comment\r", " \r\n"]),
            ),
            max_size=12,
        )
    )
    data = "".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 5)) == 0:
        data = b"\xef\xbb\xbf" + data
    if draw(st.integers(0, 9)) == 0:  # now and then a byte that is not UTF-8, or a NUL, at a random place
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\x00", b"\xed\xa0\x80"])) + data[at:]
    return data


QRELS_LINE = ("id", "q0", "id", "grade")
RUN_LINE = ("id", "q0", "id", "rank", "score", "tag")
BEIR_LINE = ("id", "id", "grade")


def mostly(strategy: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """``strategy`` three times in four, arbitrary bytes otherwise."""
    return st.one_of(strategy, strategy, strategy, st.binary(max_size=200))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
JSON_IDS = IDS | st.sampled_from([7, "7", 1, "1", 0, "0", -1, "-1"])  # ids that collide by type now and then
JSON_GOOD = {
    "query_id": JSON_IDS,
    "doc_id": JSON_IDS,
    "_id": JSON_IDS,
    "title": st.text(max_size=8),
    "text": st.text(max_size=20),
    "relevance": st.integers(-1, 3) | st.sampled_from(["1", "1_0", "١", 1.0, True]),
    "score": st.floats(-10, 10) | st.integers(-5, 5) | st.sampled_from(["0.5", "1_0", "١", " 1", False]),
}


@st.composite
def jsonl_records(draw, keys: list[str]) -> bytes:
    """JSON records with ``keys``; one in eight lacks a key, has a value of another JSON type, or is broken."""
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        record = {key: draw(JSON_GOOD[key]) for key in keys}
        mutation = draw(st.integers(0, 47))
        if mutation == 0:
            lines.append(draw(st.sampled_from(["{", "[1, 2]", "null", '"text"', "{'a': 1}", "", "# note", "{}"])))
            continue
        if mutation == 1:
            del record[draw(st.sampled_from(keys))]
        elif mutation in (2, 3):
            record[draw(st.sampled_from(keys))] = draw(JSON_VALUES)
        elif mutation == 4:
            record[draw(st.sampled_from(keys))] = draw(st.sampled_from([float("nan"), float("inf"), 2**40, True]))
        elif mutation == 5:
            record[draw(st.text(max_size=4))] = draw(JSON_VALUES)
        lines.append(json.dumps(record, allow_nan=True))
    separator = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    data = separator.join(lines).encode("utf-8", "surrogatepass") + draw(st.sampled_from([b"", b"\n", b"\r\n", b"\r"]))
    if draw(st.integers(0, 9)) == 0:  # a torn last line
        data = data[: draw(st.integers(0, len(data)))]
    return data


# ----- the checks ----------------------------------------------------------------------------------------------


@contextmanager
def _reader(kind: str):
    saved = _accel.speedups
    _accel.speedups = C_READER if kind == "c" else None
    try:
        yield
    finally:
        _accel.speedups = saved


def _read(read, path: Path, kind: str):
    """The reader's result, or the InputError it raised (anything else fails the test)."""
    with _reader(kind), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warned handling is allowed; test_bad_input.py pins each warning down
        try:
            return read(path)
        except InputError as error:
            assert path.name in str(error) or str(path.parent) in str(error), f"error does not name the file: {error}"  # noqa: PT017 (either outcome is allowed: a value or an InputError naming the file)
            return error


def _same(a, b) -> bool:
    if isinstance(a, InputError) or isinstance(b, InputError):
        return isinstance(a, InputError) and isinstance(b, InputError) and str(a) == str(b)
    return a == b and getattr(a, "tag", None) == getattr(b, "tag", None)


def _usable(result) -> None:
    """A parsed Qrels or Run works in the engine (an InputError there, e.g. empty qrels, is a clear answer too)."""
    if isinstance(result, InputError):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if isinstance(result, rag_eval.Qrels):
                run = rag_eval.Run.from_ranking({q: list(result[q])[::-1] for q in result.query_ids} or {"q": []})
                report = rag_eval.evaluate(result, run, METRICS)
            else:
                qrels = {q: {d: 1 for d in result.to_dict().get(q, {})} or {"none": 1} for q in result.query_ids}
                report = rag_eval.evaluate(qrels or {"q": {"d": 1}}, result, METRICS)
        except InputError:
            return
    values = report.per_query["value"].dropna()
    assert ((values >= 0) & (values <= 1)).all(), report.per_query


def _check(read, path: Path) -> None:
    results = {kind: _read(read, path, kind) for kind in (["c", "python"] if C_READER else ["python"])}
    if len(results) == 2:
        assert _same(results["c"], results["python"]), results
    event("InputError" if isinstance(results["python"], InputError) else "a result")
    _usable(results["python"])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def _check_endings(read, folder: Path, name: str, data: bytes) -> None:
    """CR and CRLF endings read exactly as LF endings do: the same result, or the same error on the same line."""
    if b"\r" not in data:
        return
    as_lf = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    kind = "c" if C_READER else "python"
    first = _read(read, _write(folder, name, data), kind)
    second = _read(read, _write(folder, name, as_lf), kind)
    if isinstance(first, InputError) and isinstance(second, InputError):
        assert (first.problem, first.line) == (second.problem, second.line)
    else:
        assert _same(first, second), (first, second)


@pytest.mark.parametrize("read", [rag_eval.Qrels.from_trec, rag_eval.Qrels.load], ids=["from_trec", "load"])
@SETTINGS
@given(data=mostly(near_valid_text(QRELS_LINE)))
def test_trec_qrels(folder, read, data):
    _check(read, _write(folder, "fuzz.qrels", data))
    _check_endings(read, folder, "fuzz-lf.qrels", data)


@pytest.mark.parametrize("read", [rag_eval.Run.from_trec, rag_eval.Run.load], ids=["from_trec", "load"])
@SETTINGS
@given(data=mostly(near_valid_text(RUN_LINE)))
def test_trec_run(folder, read, data):
    _check(read, _write(folder, "fuzz.run", data))
    _check_endings(read, folder, "fuzz-lf.run", data)


DICT_IDS = st.sampled_from(["q", "d", "7", 7, "1", 1, "007", 0, "0"])
DICT_SCORES = st.one_of(
    st.floats(allow_nan=True),
    st.integers(-(2**70), 2**70),
    st.sampled_from(["0.5", "1_0", "١", " 1", "inf", "nan", True, np.True_, np.float32(1.5), None]),
)
DICT_GRADES = st.one_of(st.integers(-3, 5), st.sampled_from(["1", "1_0", "1e2", 1.0, 1.5, True, None, np.int64(2)]))


def _build(build, value):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return build(value)
        except InputError as error:
            return error


@SETTINGS
@given(
    scores=st.dictionaries(DICT_IDS, st.dictionaries(DICT_IDS, DICT_SCORES, max_size=5), max_size=4),
    grades=st.dictionaries(DICT_IDS, st.dictionaries(DICT_IDS, DICT_GRADES, max_size=5), max_size=4),
)
def test_dict_constructors(scores, grades):
    """Dicts with ids that collide by type and numbers of every spelling: the C and Python paths agree, and what is
    accepted evaluates within bounds."""
    for build, value in (
        (rag_eval.Run.from_scores, scores),
        (rag_eval.Qrels.from_dict, grades),
        (lambda v: rag_eval.Run.from_ranking({q: list(d.items()) for q, d in v.items()}), scores),
    ):
        results = {}
        for kind in ["c", "python"] if C_READER else ["python"]:
            with _reader(kind):
                results[kind] = _build(build, value)
        if len(results) == 2:
            assert _same(results["c"], results["python"]), results
        _usable(results["python"])


@SETTINGS
@given(
    header=st.sampled_from(["query-id\tcorpus-id\tscore\n", "query_id\tdoc_id\trelevance\n", "", "a\tb\n"]),
    body=mostly(near_valid_text(BEIR_LINE, "\t")),
)
def test_beir_qrels(folder, header, body):
    _check(rag_eval.Qrels.from_beir, _write(folder, "fuzz.tsv", header.encode() + body))


@SETTINGS
@given(data=mostly(jsonl_records(["query_id", "doc_id", "relevance"])))
def test_jsonl_qrels(folder, data):
    _check(rag_eval.Qrels.from_jsonl, _write(folder, "fuzz-qrels.jsonl", data))


@SETTINGS
@given(data=mostly(jsonl_records(["query_id", "doc_id", "score"])))
def test_jsonl_run(folder, data):
    path = _write(folder, "fuzz-run.jsonl", data)
    _check(rag_eval.Run.from_jsonl, path)
    _check(lambda p: rag_eval.Run.from_jsonl(p, order="given"), path)


@SETTINGS
@given(
    corpus=jsonl_records(["_id", "title", "text"]),
    queries=jsonl_records(["_id", "text"]),
    qrels=mostly(near_valid_text(BEIR_LINE, "\t")),
    texts=st.integers(0, 3),
)
def test_beir_folder(folder, corpus, queries, qrels, texts):
    root = folder / "beir"
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    _write(root, "corpus.jsonl", corpus)
    if texts:  # most of the time every id has a query text, so that reading can go past that check
        queries += "".join(json.dumps({"_id": q, "text": "?"}) + "\n" for q in IDS.elements).encode()
    _write(root, "queries.jsonl", queries)
    _write(root / "qrels", "test.tsv", b"query-id\tcorpus-id\tscore\n" + qrels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            collection = Collection.from_beir(root)
        except InputError as error:
            assert str(root) in str(error), f"error does not name the file: {error}"  # noqa: PT017 (either outcome is allowed)
            event("InputError")
            return
    event("a result")
    assert set(collection.queries) == set(collection.qrels.query_ids)
    assert all(isinstance(text, str) for text in collection.queries.values())


@SETTINGS
@given(
    rows=st.lists(st.tuples(DICT_IDS, DICT_IDS, DICT_SCORES, DICT_GRADES), max_size=8),
    names=st.sampled_from([("query_id", "doc_id"), ("qid", "docno"), ("query_id", "query_id"), ("qid", "doc_id")]),
    typed=st.booleans(),
)
def test_frame_constructors(rows, names, typed):
    """DataFrames with ids that collide by type, odd numbers, object or typed columns, and a column named twice: an
    InputError or a result that evaluates within bounds (never a TypeError from the C code)."""
    import pandas as pd

    columns = [*names, "score", "grade"]
    frame = pd.DataFrame(rows, columns=columns, dtype=object)
    if typed and rows:  # typed columns where pandas can infer them
        frame = frame.infer_objects()
    for build in (
        rag_eval.Run.from_frame,
        lambda f: rag_eval.Qrels.from_frame(f.drop(columns="score")),
        lambda f: rag_eval.Run.from_frame(f.drop(columns="score"), order="given"),
    ):
        _usable(_build(build, frame))
