"""The C twins (rag_eval._speedups) give exactly what the pure-Python paths give, and decline what they can't do."""

from __future__ import annotations

import importlib.util
import itertools
import os
import warnings

import numpy as np
import pytest

import rag_eval
from rag_eval import _accel
from rag_eval.data.columns import read_table
from rag_eval.data.input_files import read_input
from rag_eval.metrics import _grades as grades_module

speedups = _accel.speedups


def test_extension_is_built_in_ci_and_the_switch_selects_the_pure_python_path():
    """Under CI the extension must be built, in every pass: the pure-Python pass (``RAG_EVAL_PURE_PYTHON=1``, run by
    .ci/run) turns a built extension off, so that the twins stay twins; it is not a way to pass without one."""
    built = importlib.util.find_spec("rag_eval._speedups") is not None
    if os.environ.get("CI") == "true":
        assert built, "rag_eval._speedups was not compiled: install with a C compiler"
    if os.environ.get("RAG_EVAL_PURE_PYTHON") == "1":
        assert speedups is None, "RAG_EVAL_PURE_PYTHON=1 must select the pure-Python paths"
    else:
        assert (speedups is not None) == built, "a built extension is used unless RAG_EVAL_PURE_PYTHON=1"


needs_c = pytest.mark.skipif(
    speedups is None, reason="rag_eval._speedups is not in use (not built, or RAG_EVAL_PURE_PYTHON=1)"
)


@pytest.fixture
def pure(monkeypatch):
    monkeypatch.setattr(_accel, "speedups", None)


def _random_scores(seed: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    return {
        f"q{q}": {f"d{d}": float(s) for d, s in zip(rng.choice(500, n, replace=False), np.round(rng.normal(size=n), 1))}
        for q, n in enumerate(rng.integers(0, 60, size=40))
    }


RUN_TEXT = (
    "q2 Q0 b 1 2.5 tagA\n"
    "\n"
    "q2\tQ0\ta  2  2.5 tagA extra fields ignored\r\n"
    "q10 Q0 c 1 -1e-3 x\n"
    "q10 Q0 c 2 7 x\n"  # a repeated doc within q10
    "q10 Q0 é 3 1.0000000000000002 x\n"  # UTF-8 id, and a score past the 15-digit fast path
    "q2 Q0 z 9 0.1 x\n"  # q2 again, after q10: interleaved
)
QRELS_TEXT = "q1 0 d1 1\nq1 0 d2 0\n\nq2 0 d1 -1\nq2 0 d3 2.0\n"


@needs_c
@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (RUN_TEXT, "run"),
        (QRELS_TEXT, "qrels"),
        (RUN_TEXT.replace("é", "e"), "run"),
        (RUN_TEXT.replace("\n", "\r"), "run"),
        (QRELS_TEXT.replace("\n", "\r"), "qrels"),
        (RUN_TEXT.replace("\n", "\r\r\n"), "run"),
        (QRELS_TEXT.replace("\n", "\r\n") + "q3 0 d 1\r", "qrels"),
    ],
    ids=["run", "qrels", "run-ascii", "run-cr", "qrels-cr", "run-cr-crlf", "qrels-crlf"],
)
def test_parse_columns_equals_the_line_reader(tmp_path, monkeypatch, text, kind):
    path = tmp_path / "input.txt"
    path.write_text(text, encoding="utf-8")
    fast = read_table(read_input(path), kind)
    monkeypatch.setattr(_accel, "speedups", None)
    slow = read_table(read_input(path), kind)
    assert fast.query_ids == slow.query_ids
    assert np.array_equal(fast.query_codes, slow.query_codes)
    assert fast.doc_ids.tolist() == slow.doc_ids.tolist()
    assert fast.values.dtype == slow.values.dtype and np.array_equal(fast.values, slow.values)
    assert fast.tag == slow.tag == ("x" if kind == "run" else None)  # the last line's tag, as trec_eval's runid
    if kind == "run":
        assert fast.repeats is None  # interleaved: every query must be checked
        assert len(fast) == 6  # every line, whatever its ending


@needs_c
@pytest.mark.parametrize(
    "text", [RUN_TEXT, RUN_TEXT.replace("é", "e"), "q1 Q0 a 1 3 t\nq1 Q0 b 2 3 t\nq2 Q0 é 1 1 t\n"]
)
def test_packed_ids_read_the_same_run(tmp_path, monkeypatch, text):
    path = tmp_path / "run.trec"
    path.write_text(text, encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RUN_TEXT repeats a doc id on purpose
        fast = rag_eval.Run.from_trec(path)
        monkeypatch.setattr(_accel, "speedups", None)
        slow = rag_eval.Run.from_trec(path)
    assert fast == slow and fast.to_dict() == slow.to_dict() and fast.tag == slow.tag


@needs_c
def test_packed_lookup_equals_lookup():
    from rag_eval.data.packed import PackedIds

    rng = np.random.default_rng(3)
    ids = [f"d{d}" if d % 5 else f"dé{d}" for d in rng.integers(0, 60, size=300)]
    blob = "".join(ids).encode()
    starts = np.zeros(301, np.int64)
    np.cumsum([len(i.encode()) for i in ids], out=starts[1:])
    packed = PackedIds(blob, starts)
    assert packed.to_objects().tolist() == ids and packed.take(np.array([4, 0])).tolist() == [ids[4], ids[0]]
    offsets = np.array([0, 100, 100, 250, 300], np.int64)
    judgements = [{f"d{d}": d % 3 for d in range(0, 60, 2)} | {"dé5": 7}, {}, {"d1": -1, "dé10": 2}]
    rows = np.array([0, 1, -1, 2], np.int64)  # query 2 has no judgements
    judged = np.array([d for j in judgements for d in j], dtype=object)
    values = np.array([g for j in judgements for g in j.values()], np.int64)
    judged_offsets = np.cumsum([0, *map(len, judgements)]).astype(np.int64)
    hashes = np.array(list(map(hash, judged)), np.int64)
    objects = np.array(ids, dtype=object)
    fast = speedups.lookup_packed(blob, starts, offsets, rows, judged, judged_offsets, values, grades_module.UNJUDGED)
    plain = speedups.lookup(objects, None, offsets, rows, judged, None, judged_offsets, values, grades_module.UNJUDGED)
    known = speedups.lookup(
        objects,
        np.array(list(map(hash, ids)), np.int64),
        offsets,
        rows,
        judged,
        hashes,
        judged_offsets,
        values,
        grades_module.UNJUDGED,
    )
    by_hand = [
        (judgements[rows[q]] if rows[q] >= 0 else {}).get(ids[j], grades_module.UNJUDGED)
        for q in range(4)
        for j in range(offsets[q], offsets[q + 1])
    ]
    assert np.array_equal(fast, plain) and np.array_equal(known, plain) and plain.tolist() == by_hand
    assert (fast != grades_module.UNJUDGED).sum() > 30
    assert fast.tolist()[:3] == [judgements[0].get(i, grades_module.UNJUDGED) for i in ids[:3]]
    wrong = np.full(len(ids), 7, np.int64)  # hashes that are not the ids': nothing matches, nothing is guessed
    assert (speedups.lookup(objects, wrong, offsets, rows, judged, hashes, judged_offsets, values, -1) == -1).all()
    with pytest.raises(ValueError):
        speedups.lookup_packed(blob, starts, np.array([0, 3], np.int64), rows[:1], judged, judged_offsets, values, -1)
    with pytest.raises(ValueError):  # a row beyond the judgements
        speedups.lookup(objects, None, offsets, np.array([0, 1, 3, 2]), judged, None, judged_offsets, values, -1)


@needs_c
def test_parse_columns_reports_repeats_when_queries_are_grouped(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 a 1 3 t\nq1 Q0 a 2 2 t\nq2 Q0 a 1 1 t\nq3 Q0 b 1 1 t\nq3 Q0 c 2 1 t\n")
    cols = read_table(read_input(path), "run")
    assert cols.repeats == [0]


@needs_c
@pytest.mark.parametrize(
    "text",
    [
        "q1 Q0 d1 1 0.5\n",
        "q1 Q0 d1 1 high t\n",
        "q1 Q0 d1 1 0x1p3 t\n",
        "q1 Q0 d1 1 1_0 t\n",
        "q1 Q0 d1 1 nan t\n",
        "q1 Q0 d1 1 \u0661 t\n",
        "q1 Q0 d1 1 1e t\n",
        "q1 Q0 d1 1 .e1 t\n",
        "q1 Q0 d1 1 infin t\n",
        "q1 Q0 d1 1 0.5 t\rq1 Q0 d2 2 0.4\r",
    ],
    ids=[
        "five-fields",
        "word-score",
        "hex-score",
        "underscore",
        "nan",
        "arabic-digit",
        "bare-exponent",
        "no-mantissa",
        "infin",
        "cr-then-five-fields",
    ],
)
def test_parse_columns_declines_bad_lines(text):
    assert speedups.parse_columns(text.encode(), 0, True, False) is None
    assert speedups.parse_columns(text.encode(), 0, True, True) is None


@needs_c
def test_parse_columns_declines_bad_qrels():
    for text in (
        "q1 0 d1\n",
        "q1 0 d1 1 extra\n",
        "q1 0 d1 1.5\n",
        "q1 0 d1 x\n",
        "q1 0 d1 1_0\n",
        "q1 0 d1 1e2\n",
        "q1 0 d1 \u0661\n",
        "q1 0 d1 1234567890123456789\n",
        "q1 0 d1 1\rq1 0 d2 1 x\r",
    ):
        assert speedups.parse_columns(text.encode(), 1, True, False) is None


def test_evaluation_is_the_same_without_the_extension(pure, tmp_path):
    scores = _random_scores(7)
    qrels = {q: {f"d{d}": int(d % 4) - 1 for d in range(0, 500, 7)} for q in scores}
    rag_eval.Run.from_scores(scores).to_trec(tmp_path / "run.trec")
    rag_eval.Qrels.from_dict(qrels).to_trec(tmp_path / "qrels.txt")

    def evaluate():
        run, judged = rag_eval.Run.from_trec(tmp_path / "run.trec"), rag_eval.Qrels.from_trec(tmp_path / "qrels.txt")
        return rag_eval.evaluate(judged, run, ["ap", "ndcg@10", "bpref", "P@5"])

    slow = evaluate()
    assert _accel.speedups is None
    assert len(slow.per_query) == 4 * len(scores)  # a judged query with no result counts (as 0)
    if speedups is not None:
        _accel.speedups = speedups
        fast = evaluate()
        assert fast.per_query.equals(slow.per_query)


@needs_c
@pytest.mark.parametrize(
    "text",
    ["q1 Q0 a 1 2 t\nq1 Q0 b 2 1 t", "q1 Q0 a 1 2 t\r\nq1 Q0 b 2 1 t\r", "q1 Q0 a 1 2 t", "\n\nq1 Q0 a 1 2 t\n  \n"],
    ids=["no-final-newline", "crlf-no-final-newline", "one-line", "blank-lines"],
)
def test_parse_columns_reads_an_unterminated_last_line(tmp_path, monkeypatch, text):
    path = tmp_path / "run.trec"
    path.write_bytes(text.encode())
    fast = read_table(read_input(path), "run")
    monkeypatch.setattr(_accel, "speedups", None)
    slow = read_table(read_input(path), "run")
    assert fast.doc_ids.tolist() == slow.doc_ids.tolist() and np.array_equal(fast.values, slow.values)
    assert fast.query_ids == slow.query_ids == ["q1"]


def test_search_rows_equals_searchsorted_per_segment():
    from rag_eval.data.ranking import search_rows

    rng = np.random.default_rng(5)
    values = np.round(rng.normal(size=400), 1)
    offsets = np.array([0, 0, 7, 100, 101, 400])
    for a, b in itertools.pairwise(offsets):
        values[a:b].sort()
    rows = rng.integers(0, 5, size=300)
    needles = np.round(rng.normal(size=300), 1)
    for side in ("left", "right"):
        got = search_rows(values, offsets[rows], offsets[rows + 1], needles, side)
        want = [
            offsets[r] + np.searchsorted(values[offsets[r] : offsets[r + 1]], x, side=side)
            for r, x in zip(rows, needles, strict=True)
        ]
        assert got.tolist() == want


def _dicts_with_edges(seed: int) -> tuple[dict, dict]:
    """Scores and judgements with ties, equal scores across queries, infinities, queries without results or
    judgements, ids outside ASCII, and judged docs the run does not return."""
    rng = np.random.default_rng(seed)
    scores = _random_scores(seed)
    scores["qé"] = {"b": 1.0, "a": 1.0, "é": 1.0, "c": float("inf"), "d": -float("inf"), "e": 2}
    scores["q-empty"] = {}
    qrels = {
        q: {d: int(g) for d, g in zip(list(docs)[::3], rng.integers(-1, 4, size=len(docs)), strict=False)}
        | {"never-returned": 1}
        for q, docs in scores.items()
    }
    qrels["q-only-in-qrels"] = {"d1": 2}
    qrels["q-empty"] = {}
    return scores, qrels


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dict_readers_and_the_grade_matrix_equal_their_twins(monkeypatch, seed):
    """score_columns, judgement_columns, lookup and rank_cells give exactly what their whole-column twins give: the
    same columns, the same grade matrix under every tie rule, the same values."""
    from rag_eval.metrics._grades import build_grade_matrix

    scores, judgements = _dicts_with_edges(seed)
    queries = sorted(judgements)

    def build():
        run, qrels = rag_eval.Run.from_scores(scores), rag_eval.Qrels.from_dict(judgements)
        matrices = [
            build_grade_matrix(run, qrels, queries, rag_eval.Conventions(ties=ties))
            for ties in ("trec_eval", "doc_id", "input_order")
        ]
        report = rag_eval.evaluate(qrels, run, ["ap", "ndcg@10", "P@5", "bpref"], conventions="trec_eval")
        return run, qrels, matrices, report

    native = _accel.speedups is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = build()
        monkeypatch.setattr(_accel, "speedups", None)
        slow = build()
    assert fast[0] == slow[0] and fast[1] == slow[1]
    assert fast[1].columns[0] == slow[1].columns[0]
    for a, b in zip(fast[1].columns[1:], slow[1].columns[1:], strict=True):
        assert np.array_equal(a, b) and not a.flags.writeable and not b.flags.writeable
    assert fast[1].doc_column.tolist() == slow[1].doc_column.tolist()
    if native:  # the str hashes kept on the way, for the C lookup; the twins keep none
        assert fast[1]._doc_hashes.tolist() == list(map(hash, fast[1].doc_column))
        assert fast[0]._memo["hashes"].tolist() == list(map(hash, fast[0].doc_ids))
    assert slow[1]._doc_hashes is None and "hashes" not in slow[0]._memo
    for a, b in zip(fast[2], slow[2], strict=True):
        for name in ("lengths", "rows", "ranks", "grades", "pooled_rows", "pooled_ranks", "pooled_grades"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert len(fast[2][0].rows) > 20
    assert fast[3].per_query.equals(slow[3].per_query)


@needs_c
def test_rank_cells_places_ties_by_each_rule():
    offsets = np.array([0, 4, 6], np.int64)
    scores = np.array([1.0, 2.0, 1.0, 1.0, 5.0, 5.0])
    ids = np.array(["b", "x", "c", "a", "p", "q"], dtype=object)
    cells = np.array([0, 2, 3, 5], np.int64)
    rows = np.array([0, 0, 0, 1], np.int64)
    packed = (b"bxcapq", np.arange(7, dtype=np.int64))
    assert speedups.rank_cells(offsets, scores, cells, rows, 0, None).tolist() == [1, 2, 3, 1]
    for given in (ids, packed):
        assert speedups.rank_cells(offsets, scores, cells, rows, 1, given).tolist() == [2, 1, 3, 0]  # id desc
        assert speedups.rank_cells(offsets, scores, cells, rows, 2, given).tolist() == [2, 3, 1, 1]  # id asc
    with pytest.raises(ValueError):
        speedups.rank_cells(offsets, scores, np.array([4], np.int64), np.array([0], np.int64), 0, None)


@needs_c
def test_dict_readers_decline_the_unusual():
    """What the C readers do not take is left to the Python path, which names the problem or converts."""
    for mapping in (
        {1: {"d": 1.0}},
        {"q": {2: 1.0}},
        {"q": {"d": True}},
        {"q": {"d": "1.5"}},
        {"q": {"d": 10**400}},
        {"q": [("d", 1.0)]},
        {"q": {np.str_("d"): 1.0}},
    ):
        assert speedups.score_columns(mapping) is None, mapping
    for mapping in ({"q": {"d": 1.0}}, {"q": {"d": True}}, {"q": {"d": 2**29}}, {"q": {"d": -(2**29)}}, {"q": {1: 1}}):
        assert speedups.judgement_columns(mapping) is None, mapping
    lengths, docs, grades, hashes = speedups.judgement_columns({"q": {"d": 2**29 - 1, "e": -1}, "r": {}})
    assert lengths.tolist() == [2, 0] and docs.tolist() == ["d", "e"] and grades.tolist() == [2**29 - 1, -1]
    assert hashes.tolist() == [hash("d"), hash("e")]


@pytest.mark.parametrize(
    ("ranking", "declined"),
    [
        ({"q1": ["a", "b", "a", "c"], "q2": [], "q3": ("z", "y"), "qé": ["é", "e", "é"]}, False),
        ({"q1": [("a", 2.0), ("b", 1), ("a", 3.5)], "q2": [("c", -float("inf"))]}, False),
        ({"q1": [], "q2": []}, False),
        ({"q1": ["a", 7], "q2": ["b"]}, True),  # an int id: the Python path converts it
        ({"q1": [("a", "1.5")], "q2": [("b", 1.0)]}, True),  # a score as text: the Python path reads it
        ({"q1": ["a", ("b", 1.0)]}, True),  # mixed: the Python path names it
    ],
    ids=["ids", "pairs", "empty", "int-id", "text-score", "mixed"],
)
def test_ranking_columns_equal_the_python_path(monkeypatch, ranking, declined):
    """Run.from_ranking reads the same run with and without the C reader (repeats dropped the same way)."""
    if speedups is not None:
        assert (speedups.ranking_columns(list(ranking.values())) is None) == declined
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fast = rag_eval.Run.from_ranking(ranking)
        except rag_eval.InputError as exc:
            fast = str(exc)
        monkeypatch.setattr(_accel, "speedups", None)
        try:
            slow = rag_eval.Run.from_ranking(ranking)
        except rag_eval.InputError as exc:
            slow = str(exc)
    assert fast == slow
    if not isinstance(fast, str):
        assert fast.notes == slow.notes and fast.to_dict() == slow.to_dict()


@needs_c
@pytest.mark.parametrize(("seed", "layout"), [(0, "shuffled"), (1, "shuffled"), (2, "grouped"), (3, "grouped, unique")])
def test_grouped_judgements_equal_their_twin(monkeypatch, tmp_path, seed, layout):
    """A qrels file's rows grouped in C (group_judgements) give the twin's dicts, columns and duplicate warning: the
    same first grade kept for a doc judged twice, the same count and the same first conflict named."""
    rng = np.random.default_rng(seed)
    n = 400
    qids = [f"q{i}" for i in rng.permutation(40)]
    rows = [(qids[rng.integers(40)], f"d{rng.integers(30)}", int(rng.integers(-1, 4))) for _ in range(n)]
    if layout != "shuffled":  # each query's lines together, as most files hold them
        rows.sort(key=lambda row: row[0])
    if layout == "grouped, unique":
        rows = list({row[:2]: row for row in rows}.values())
    lines = [f"{q} 0 {d} {g}" for q, d, g in rows] + ["q-extra 0 only 2"]

    def read(path):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            qrels = rag_eval.Qrels.from_trec(path)
        return qrels, [str(w.message) for w in caught]

    path = tmp_path / "a.qrels"
    path.write_text("\n".join(lines) + "\n")
    fast, fast_warned = read(path)
    monkeypatch.setattr(_accel, "speedups", None)
    slow, slow_warned = read(path)
    assert fast == slow and list(fast) == list(slow)
    assert [list(fast[q]) for q in fast] == [list(slow[q]) for q in slow]  # the same doc order within each query
    assert fast_warned == slow_warned
    assert ("with conflicting grades, e.g. query" in "".join(fast_warned)) == (layout != "grouped, unique")
    assert fast.columns[0] == slow.columns[0]
    for a, b in zip(fast.columns[1:], slow.columns[1:], strict=True):
        assert np.array_equal(a, b) and not a.flags.writeable and not b.flags.writeable
    assert fast.doc_column.tolist() == slow.doc_column.tolist() and not fast.doc_column.flags.writeable
    assert fast._doc_hashes.tolist() == list(map(hash, fast.doc_column)) and slow._doc_hashes is None
    assert (fast.num_judgements < len(lines)) == (layout != "grouped, unique")  # duplicates were dropped


def test_a_runs_grades_are_looked_up_once_per_qrels_and_never_reused_for_others():
    """The grade lookup is kept with the run for the last qrels asked, and a stage's ranking (its memo holds
    "matrices") keeps its last few grade matrices (its report asks them again): evaluating the same run against
    other qrels, then the first again, gives each its own values."""
    scores = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"d": 1.0, "e": 0.5}}
    first = rag_eval.Qrels.from_dict({"q1": {"a": 1, "c": 2}, "q2": {"e": 1}})
    second = rag_eval.Qrels.from_dict({"q1": {"b": 3}, "q2": {"d": 1, "e": 2}})
    run = rag_eval.Run.from_scores(scores)
    kept = rag_eval.Run.from_scores(scores)
    kept._memo["matrices"] = []

    def values(qrels, given):
        return rag_eval.evaluate(qrels, given, ["ndcg@3", "recall@1"]).per_query["value"].tolist()

    fresh = [values(q, rag_eval.Run.from_scores(scores)) for q in (first, second)]
    assert fresh[0] != fresh[1]
    for given in (run, kept):
        assert [values(first, given), values(second, given), values(first, given)] == [fresh[0], fresh[1], fresh[0]]
    held = run._memo["grades"]
    assert held[0] is first and not held[2].flags.writeable and "matrices" not in run._memo
    assert kept._memo["grades"][0] is second  # the third evaluation read its matrix, kept: no lookup
    matrices = kept._memo["matrices"]
    assert [entry[0] for entry in matrices] == [first, second]
    assert not any(entry[4].grades.flags.writeable or entry[4].rows.flags.writeable for entry in matrices)


@pytest.mark.parametrize("seed", [0, 1])
def test_entry_keys_equal_the_python_keys_and_the_documented_hash(monkeypatch, seed):
    """The stage cache's keys (``stages._batch.entry_hash``) are the same strs in C and in Python, over null rows,
    empty rows, non-ASCII texts and ids, a slice and a chunked column; one key is the sha256 its docstring names."""
    import hashlib
    import struct

    import pyarrow as pa

    from rag_eval.stages._batch import entry_hash

    rng = np.random.default_rng(seed)
    n = 300
    texts = [f"q{i} é" * int(rng.integers(0, 4)) for i in range(n)]
    rows = [
        None
        if rng.random() < 0.1
        else [{"doc_id": f"d{int(rng.integers(10**6))}€" * int(rng.integers(0, 3))} for _ in range(rng.integers(0, 9))]
        for _ in range(n)
    ]
    column = pa.array(rows)
    cases = [(texts, column), (texts[5:205], column.slice(5, 200)), (texts, pa.chunked_array([column[:9], column[9:]]))]
    fast = [entry_hash(t, c) for t, c in cases] + [entry_hash(texts)]
    monkeypatch.setattr(_accel, "speedups", None)
    slow = [entry_hash(t, c) for t, c in cases] + [entry_hash(texts)]
    assert fast == slow and fast[0][5:205] == fast[1] and fast[0] == fast[2]
    assert [k == "" for k in fast[0]] == [r is None for r in rows] and "" not in fast[3]
    i = next(i for i, r in enumerate(rows) if r and len(r) > 1)
    ids = [h["doc_id"].encode() for h in rows[i]]
    text = texts[i].encode()
    payload = b"rerank\x00" + struct.pack("<q", len(text)) + text + struct.pack("<q", len(ids))
    payload += b"".join(struct.pack("<q", len(d)) for d in ids) + b"".join(ids)
    assert fast[0][i] == hashlib.sha256(payload).hexdigest()[:16]
    assert fast[3][i] == hashlib.sha256(text).hexdigest()[:16]
