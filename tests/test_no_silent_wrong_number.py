"""No silent wrong number: a seeded property over every public constructor and reader (hypothesis).

The same generated judgements and results are handed to rag_eval through each way in: dicts
(``Qrels.from_dict``, ``Run.from_scores``, ``Run.from_ranking``), DataFrames, JSONL, TREC and BEIR files (read by
the C reader and by the pure-Python one, with LF, CRLF or CR line endings, through ``from_*`` and ``load``),
Parquet, and a pipeline of function stages returning :class:`~rag_eval.Hit` records. Ids are drawn so that they
collide once converted to str (``7`` and ``"7"``), look like comments, hold whitespace or differ by leading
zeros; numbers are spelled as trec_eval would read them and as it would not (``1_0``, non-ASCII digits, booleans,
``inf``, ``1e400``).

Whatever the way in, an input is either refused with an :class:`~rag_eval.InputError` (a clear error, never
another exception) or accepted; and an accepted input, under every convention tried, evaluates with every
bounded metric inside its bounds (or NaN for a 0/0, which the summary counts), every count a non-negative
integer, and ``n + n_nan`` in every summary row equal to the number of queries the card says were counted.
"""

from __future__ import annotations

import json
import math
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rag_eval
from rag_eval import _accel
from rag_eval.errors import InputError, RagEvalWarning
from rag_eval.metrics import PRESETS

SETTINGS = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# bounded in [0, 1]; the counts must be non-negative integers
BOUNDED = [
    "recall@1",
    "recall@3",
    "precision@2",
    "P(rel=2)@3",
    "hit@2",
    "mrr",
    "mrr@2",
    "ndcg",
    "ndcg@3",
    "ndcg(gain=linear)@2",
    "ndcg(rel=2)",
    "ndcg(gains=1:3;2:9)@3",
    "ndcg(gains=1:1e308;2:1e308)@5",
    "ap",
    "ap@3",
    "r_precision",
    "bpref",
    "judged@1",
    "judged@3",
    "recall_ceiling@2",
]
COUNTS = ["num_rel", "num_ret", "num_rel_ret"]
CONVENTIONS = [
    PRESETS["default"],
    PRESETS["trec_eval"],
    PRESETS["trec_eval"].replace(missing_run="zero", unjudged="remove", relevance_threshold=2),
    PRESETS["default"].replace(max_depth=2, ties="doc_id", no_relevant="skip", negative_grades="unjudged"),
]

# ids: ones that collide once converted to str, look like comments, hold whitespace, or differ by leading zeros
QUERY_TOKENS = ["q1", "q2", "10", "9", 7, "7", "007", "#q", "q 3", "é"]
DOC_TOKENS = ["a", "b", "d10", "d9", 3, "3", "03", "#d", "d e", "中"]
# numbers as a file would spell them: what trec_eval reads alike, and what it reads otherwise
SCORE_TEXTS = [
    "1",
    "0.5",
    "-2.5",
    "1e-3",
    "1E2",
    "-0",
    ".5",
    "5.",
    "inf",
    "-inf",
    "1e400",
    "+3",
    "1_0",
    "\u0663",
    "0x10",
    "nan",
    "1,5",
    "true",
]
GRADE_TEXTS = ["0", "1", "2", "3", "-1", "-2", "1.0", "+1", "1_0", "\u0662", "true", "1.5", "4"]
# numbers as Python objects (dicts, frames, JSONL)
SCORE_VALUES = [
    1.0,
    0.5,
    -2.5,
    0,
    3,
    1e300,
    -1e300,
    math.inf,
    -math.inf,
    True,
    np.float32(0.25),
    np.int64(2),
    "0.5",
    "1_0",
    None,
    math.nan,
]
GRADE_VALUES = [0, 1, 2, 3, -1, -2, 2.0, np.int64(1), True, "1", 1.5, None]

# mostly a few ids (so that runs and qrels overlap, and keys collide), sometimes any of them
queries = st.one_of(st.sampled_from(["q1", 7, "7"]), st.sampled_from(QUERY_TOKENS))
docs = st.one_of(st.sampled_from(["a", 3, "3"]), st.sampled_from(DOC_TOKENS))
qrels_rows = st.lists(st.tuples(queries, docs, st.integers(0, len(GRADE_TEXTS) - 1)), min_size=1, max_size=14)
run_rows = st.lists(st.tuples(queries, docs, st.integers(0, len(SCORE_TEXTS) - 1)), max_size=16)
endings = st.sampled_from(["\n", "\r\n", "\r"])

QRELS_WAYS = ["dict", "frame", "jsonl", "trec", "trec_load", "beir"] + (
    ["parquet"] if hasattr(rag_eval.Qrels, "from_parquet") else []
)
RUN_WAYS = ["scores", "ranking", "ranking_pairs", "frame", "frame_given", "jsonl", "trec", "trec_load"] + (
    ["parquet"] if hasattr(rag_eval.Run, "from_parquet") else []
)


@contextmanager
def pure_python(on: bool):
    saved = _accel.speedups
    if on:
        _accel.speedups = None
    try:
        yield
    finally:
        _accel.speedups = saved


def _grade_value(i: int):
    return GRADE_VALUES[i % len(GRADE_VALUES)]


def _score_value(i: int):
    return SCORE_VALUES[i % len(SCORE_VALUES)]


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    return value


def _write(path: Path, lines: list[str], ending: str) -> Path:
    path.write_bytes(ending.join(lines).encode("utf-8") + ending.encode())
    return path


def make_qrels(way: str, rows, ending: str, folder: Path) -> rag_eval.Qrels:
    if way == "dict":
        judged: dict = {}
        for q, d, g in rows:
            judged.setdefault(q, {})[d] = _grade_value(g)
        return rag_eval.Qrels.from_dict(judged)
    if way == "frame":
        frame = pd.DataFrame(
            {
                "query_id": [r[0] for r in rows],
                "doc_id": [r[1] for r in rows],
                "grade": [_grade_value(r[2]) for r in rows],
            }
        )
        return rag_eval.Qrels.from_frame(frame)
    if way == "parquet":
        frame = pd.DataFrame(
            {
                "query_id": [str(r[0]) for r in rows],
                "doc_id": [str(r[1]) for r in rows],
                "grade": [GRADE_TEXTS[r[2]] for r in rows],
            }
        )
        path = folder / "qrels.parquet"
        frame.to_parquet(path)
        return rag_eval.Qrels.from_parquet(path)
    if way == "jsonl":
        lines = [
            json.dumps({"query_id": _jsonable(q), "doc_id": _jsonable(d), "grade": _jsonable(_grade_value(g))})
            for q, d, g in rows
        ]
        return rag_eval.Qrels.from_jsonl(_write(folder / "qrels.jsonl", lines, ending))
    if way == "beir":
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{GRADE_TEXTS[g]}" for q, d, g in rows]
        return rag_eval.Qrels.from_beir(_write(folder / "qrels.tsv", lines, ending))
    lines = [f"{q} 0 {d} {GRADE_TEXTS[g]}" for q, d, g in rows]
    path = _write(folder / "qrels.txt", lines, ending)
    return rag_eval.Qrels.load(path) if way == "trec_load" else rag_eval.Qrels.from_trec(path)


def make_run(way: str, rows, ending: str, folder: Path) -> rag_eval.Run:
    if way == "scores":
        scores: dict = {}
        for q, d, s in rows:
            scores.setdefault(q, {})[d] = _score_value(s)
        return rag_eval.Run.from_scores(scores, name="run")
    if way in ("ranking", "ranking_pairs"):
        ranking: dict = {}
        for q, d, s in rows:
            ranking.setdefault(q, []).append((d, _score_value(s)) if way == "ranking_pairs" else d)
        return rag_eval.Run.from_ranking(ranking, name="run")
    if way in ("frame", "frame_given"):
        frame = pd.DataFrame(
            {
                "query_id": [r[0] for r in rows],
                "doc_id": [r[1] for r in rows],
                "score": [_score_value(r[2]) for r in rows],
            }
        )
        return rag_eval.Run.from_frame(frame, name="run", order="given" if way == "frame_given" else "score")
    if way == "parquet":
        frame = pd.DataFrame(
            {
                "query_id": [str(r[0]) for r in rows],
                "doc_id": [str(r[1]) for r in rows],
                "score": [SCORE_TEXTS[r[2]] for r in rows],
            }
        )
        path = folder / "run.parquet"
        frame.to_parquet(path)
        return rag_eval.Run.from_parquet(path, name="run")
    if way == "jsonl":
        lines = [
            json.dumps({"query_id": _jsonable(q), "doc_id": _jsonable(d), "score": _jsonable(_score_value(s))})
            for q, d, s in rows
        ]
        return rag_eval.Run.from_jsonl(_write(folder / "run.jsonl", lines, ending), name="run")
    lines = [f"{q} Q0 {d} {i + 1} {SCORE_TEXTS[s]} tag" for i, (q, d, s) in enumerate(rows)]
    path = _write(folder / "run.trec", lines, ending)
    return rag_eval.Run.load(path, name="run") if way == "trec_load" else rag_eval.Run.from_trec(path, name="run")


def check_report(report: rag_eval.Report, counted: dict[str, int]) -> None:
    """Every bounded value in [0, 1] (a difference of two, rerank_gain, in [-1, 1]) or NaN, counts non-negative
    integers, and ``n + n_nan`` = counted."""
    per_query = report.per_query
    values = per_query.set_index("metric")["value"]
    for metric in per_query["metric"].unique():
        column = values.loc[[metric]].to_numpy(dtype=float)
        finite = column[~np.isnan(column)]
        if metric.startswith("num_"):
            assert not np.isnan(column).any(), metric
            assert (finite >= 0).all() and (finite == np.round(finite)).all(), (metric, column)
        elif metric.startswith("rerank_gain"):  # a stage's recall@budget minus the previous stage's: in [-1, 1]
            assert ((finite >= -1) & (finite <= 1)).all(), (metric, column)
        else:
            assert ((finite >= 0) & (finite <= 1)).all(), (metric, column)
    summary = report.summary
    assert "n_nan" in summary.columns, "every summary counts its NaN values"
    for _, row in summary.iterrows():
        key = row["run"] if "stage" not in summary.columns else row["stage"]
        assert row["n"] + row["n_nan"] == counted[key], (row.to_dict(), counted)


def _counted(report: rag_eval.Report) -> dict[str, int]:
    return {q.run: q.counted for q in report.card.queries}


def _accepted(make, *args, **kwargs):
    """What ``make`` returns, or None when it refuses the input with an InputError (any other error fails)."""
    try:
        return make(*args, **kwargs)
    except InputError as exc:
        assert str(exc), "an InputError says what is wrong"  # noqa: PT017 (a refusal is allowed; it must say why)
        return None


@SETTINGS
@given(qrels_rows, run_rows, st.sampled_from(QRELS_WAYS), st.sampled_from(RUN_WAYS), endings, st.booleans())
def test_every_accepted_input_is_measured_within_bounds(tmp_path_factory, qrows, rrows, qway, rway, ending, pure):
    folder = tmp_path_factory.mktemp("inputs")
    with warnings.catch_warnings(), pure_python(pure):
        warnings.simplefilter("ignore", RagEvalWarning)  # warned handling is allowed: the bad-input tests pin each
        qrels = _accepted(make_qrels, qway, qrows, ending, folder)
        run = _accepted(make_run, rway, rrows, ending, folder)
        if qrels is None or run is None:
            return
        for conventions in CONVENTIONS:
            report = _accepted(rag_eval.evaluate, qrels, run, BOUNDED + COUNTS, conventions=conventions)
            if report is not None:
                check_report(report, _counted(report))


TOKEN_VALUES = [None, 0, 1, 5, 40, -100, math.nan, math.inf, True, 2.5]


@settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    qrels_rows,
    run_rows,
    st.lists(st.sampled_from(TOKEN_VALUES), min_size=16, max_size=16),
    st.sampled_from([3, "12tok", 1]),
)
def test_every_accepted_pipeline_is_measured_within_bounds(tmp_path_factory, qrows, rrows, tokens, budget):
    """Hits built from the generated results (with token counts good and bad) through a retriever and a reranker."""
    from rag_eval.adapters import functions

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RagEvalWarning)
        qrels = _accepted(make_qrels, "dict", qrows, "\n", tmp_path_factory.mktemp("q"))
        if qrels is None:
            return
        results: dict[str, list] = {}
        for i, (q, d, s) in enumerate(rrows):
            results.setdefault(str(q), []).append((str(d), _score_value(s), tokens[i]))

        def search(query: str, k: int):
            hits = []
            for doc, score, count in results.get(query, [])[:k]:
                hits.append(rag_eval.Hit(doc, score if isinstance(score, float) else None, text=doc, tokens=count))
            return hits

        def reverse(query: str, hits):
            return list(reversed(hits))

        try:
            pipe = rag_eval.Pipeline(
                functions.retriever(search, name="first", version="1"),
                functions.reranker(reverse, name="rev", version="1"),
                depth=4,
                budget=budget,
            )
        except (InputError, ValueError):
            return
        queries = {q: q for q in list(qrels.query_ids) + list(results)}
        result = pipe.run(queries, progress=False)
        for conventions in CONVENTIONS[:2]:
            report = _accepted(rag_eval.evaluate, qrels, result, conventions=conventions)
            if report is not None:
                check_report(report, _counted(report))


def test_the_properties_reach_both_outcomes():
    """The generators produce inputs that are refused and inputs that are accepted, for each way in (else the
    property above would hold vacuously)."""
    import tempfile

    rows_good = [("q1", "a", 2), ("q2", "b", 1)]
    run_good = [("q1", "a", 1), ("q1", "b", 0), ("q2", "b", 2)]
    rows_collide = [(7, "a", 1), ("7", "b", 1)]
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", RagEvalWarning)
        folder = Path(tmp)
        for way in QRELS_WAYS:
            assert _accepted(make_qrels, way, rows_good, "\n", folder) is not None, way
        for way in RUN_WAYS:
            assert _accepted(make_run, way, run_good, "\n", folder) is not None, way
        assert _accepted(make_qrels, "dict", rows_collide, "\n", folder) is None
        assert _accepted(make_qrels, "trec", [("q1", "a", GRADE_TEXTS.index("1_0"))], "\n", folder) is None
        assert _accepted(make_run, "trec", [("q1", "a", SCORE_TEXTS.index("\u0663"))], "\n", folder) is None
