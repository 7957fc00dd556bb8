"""``evaluate`` from Python dicts or TREC files makes no Python function call per query or per id (issue 28).

Checks added one query at a time made rag_eval slower than pytrec_eval from the same dicts; this guard keeps every
check on whole columns (NumPy, or the C twins of ``rag_eval._speedups``) without a timed test: it counts the Python
function calls (``sys.setprofile``'s ``call`` events: a function, a method, a lambda, each resumption of a
generator; and its ``c_call`` events: a builtin called from Python, as a loop over queries calling ``dict`` or
``tolist`` makes) that one evaluation makes at 1,000 and at 10,000 queries, and fails when the count grows with the
number of queries by more than a small constant per block of queries. Deterministic: the same inputs make the same
calls, whatever the machine's load.
"""

from __future__ import annotations

import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import rag_eval
from rag_eval import _accel

METRICS = ["ndcg@10", "recall@10", "recall@100", "P@10", "mrr@10", "ap", "judged@10", "bpref"]
SMALL, LARGE = 1_000, 10_000
PER_BLOCK = 50  # calls allowed per block of 1,000 queries more: a loop over blocks, never over queries


def _dicts(queries: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """``queries`` queries of 30 results each (scores with ties), each judging 4 of its results (one relevant at
    least) and 2 documents it did not return."""
    rng = np.random.default_rng(28)
    docs = rng.integers(0, 100_000, size=(queries, 36))
    scores = np.round(rng.normal(size=(queries, 30)), 1)
    grades = rng.integers(0, 3, size=(queries, 6))
    grades[:, 0] = 2
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for i in range(queries):
        ids = [f"d{i}-{k}-{d}" for k, d in enumerate(docs[i].tolist())]
        run[f"q{i}"] = dict(zip(ids[:30], scores[i].tolist(), strict=True))
        qrels[f"q{i}"] = dict(zip([*ids[:4], *ids[30:32]], grades[i].tolist(), strict=True))
    return qrels, run


def _files(queries: int, folder: Path) -> tuple[Path, Path]:
    """The dicts of :func:`_dicts` written as a TREC qrels file and a TREC run file."""
    qrels, run = _dicts(queries)
    qrels_path, run_path = folder / f"{queries}.qrels", folder / f"{queries}.run"
    qrels_path.write_text("".join(f"{q} 0 {d} {g}\n" for q, judged in qrels.items() for d, g in judged.items()))
    run_path.write_text(
        "".join(
            f"{q} Q0 {d} {rank} {score} guard\n"
            for q, scores in run.items()
            for rank, (d, score) in enumerate(scores.items(), 1)
        )
    )
    return qrels_path, run_path


def _calls(queries: int, source: str, folder: Path) -> tuple[int, Counter[str]]:
    """The Python function calls one ``evaluate`` from dicts or files makes (with the constructors and the per-query
    table), in total and by function."""
    if source == "dicts":
        qrels, run = _dicts(queries)
    else:
        qrels_path, run_path = _files(queries, folder)
    where: Counter[str] = Counter()

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            where[f"{code.co_filename}:{code.co_firstlineno}({code.co_name})"] += 1
        elif event == "c_call":
            where[f"{getattr(arg, '__qualname__', arg)} from {frame.f_code.co_name}"] += 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.setprofile(profile)
        try:
            if source == "dicts":
                inputs = rag_eval.Qrels.from_dict(qrels), rag_eval.Run.from_scores(run)
            else:
                inputs = rag_eval.Qrels.from_trec(qrels_path), rag_eval.Run.from_trec(run_path)
            report = rag_eval.evaluate(*inputs, METRICS)
            report.per_query  # noqa: B018  (built on first use: included)
        finally:
            sys.setprofile(None)
    assert len(report.per_query) == len(METRICS) * queries
    return sum(where.values()), where


@pytest.mark.parametrize("source", ["dicts", "files"])
def test_evaluate_makes_no_python_call_per_query(source, tmp_path):
    if source == "files" and _accel.speedups is None:
        pytest.skip("the pure-Python TREC reader (the C reader's twin) reads line by line by design")
    _calls(200, source, tmp_path)  # imports and first-use set-up, made once, are not what is counted
    small, small_where = _calls(SMALL, source, tmp_path)
    large, large_where = _calls(LARGE, source, tmp_path)
    allowed = PER_BLOCK * (LARGE - SMALL) // 1_000
    growth = {name: large_where[name] - small_where.get(name, 0) for name in large_where}
    worst = sorted(((g, name) for name, g in growth.items() if g > 0), reverse=True)[:5]
    assert large - small <= allowed, (
        f"evaluate from {source} made {small} Python calls at {SMALL} queries and {large} at {LARGE}: it grows "
        f"with the number of queries (allowed: {allowed} more). Most grown: {worst}"
    )
