"""What the HTML report costs at scale: the page's size, the time and memory to write it. Not a test; run from the
repository root:

    .venv/bin/python benchmarks/bench_html_report.py [--queries 100000]

It measures :func:`rag_eval.renderers.html_report.write_html` (what ``rag-eval report`` does once the folder is
read) on a synthetic report of N queries (built with NumPy: two stages, ``bm25 %100 >> rerank %budget(10)``, each
ranking 20 chunks deep, two relevant chunks a query with random fates, values drawn at random), without plots: the
seconds of the report's summary (bootstrap intervals) and of the page, the process's peak RSS, the page's bytes and
the drill-down files beside it. The tests build the same report
(``tests/test_html_report.py::test_a_page_of_100000_queries_stays_under_10_mb``).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DEPTH, BUDGET, RANKED = 100, 10, 20


def synthetic(n: int, seed: int = 0) -> tuple[Any, dict[tuple[str, str], Any], Any, dict[str, str]]:
    """``(report, rankings, qrels, questions)`` of ``n`` queries, from columns (no Python loop per query)."""
    import pandas as pd

    from rag_eval import Conventions, Qrels, Run
    from rag_eval.reports.card import MetricCard, QueryRecord
    from rag_eval.reports.fates import FATES
    from rag_eval.reports.report import Report, RunScores

    rng = np.random.default_rng(seed)
    ids = np.char.add("q", np.char.zfill(np.arange(n).astype(str), 6)).astype(object)
    words = np.array(["effect", "cause", "role", "rate", "risk", "use", "cost", "level"], dtype=object)
    questions = (
        "what is the " + words[rng.integers(0, 8, n)] + " of topic " + np.arange(n).astype(str).astype(object) + "?"
    )
    run, stages = "bm25 %100 >> rerank %budget(10)", {"bm25": "first", "rerank": "reranker"}
    # each query's chunks: 20 of 40 of its own, distinct; the reranker shuffles the first stage's
    own = np.argsort(rng.random((n, 2 * RANKED)), axis=1)[:, :RANKED] + np.arange(n)[:, None] * 2 * RANKED
    shuffled = np.take_along_axis(own, np.argsort(rng.random((n, RANKED)), axis=1), axis=1)
    rankings = {}
    for stage, numbers in zip(stages, (own, shuffled), strict=True):
        frame = pd.DataFrame(
            {
                "query_id": np.repeat(ids, RANKED),
                "doc_id": ("d" + numbers.astype(str).astype(object)).ravel(),
                "score": np.tile(np.arange(RANKED, 0, -1, dtype=np.float64), n),
            }
        )
        rankings[(run, stage)] = Run.from_frame(frame, name=stage, order="given")
    first = rankings[(run, "bm25")]
    relevant = first.doc_ids.reshape(n, RANKED)[:, [0, 7]]  # two relevant chunks a query, found by the first stage
    qrels = Qrels.from_frame(
        pd.DataFrame({"query_id": np.repeat(ids, 2), "doc_id": relevant.ravel(), "grade": np.tile([2, 1], n)})
    )
    fate = rng.choice(np.array(FATES, dtype=object), size=2 * n, p=[0.1, 0.05, 0.25, 0.0, 0.02, 0.58])
    loss_items = pd.DataFrame(
        {
            "query_id": np.repeat(ids, 2),
            "doc_id": relevant.ravel(),
            "grade": np.tile([2, 1], n),
            "fate": fate,
            "cut_by": np.where(fate == "reranked_out", "rerank", None),
        }
    )
    metrics = {
        "bm25": ["recall@depth", "recall@budget", "precision@budget"],
        "rerank": ["ndcg@budget", "mrr@budget", "recall@budget", *[f"loss.{f}" for f in FATES if f != "cut_by_budget"]],
    }
    blocks = [RunScores(list(ids), rng.random((n, len(m))).round(4), run, s, m) for s, m in metrics.items()]
    names = list(dict.fromkeys(m for ms in metrics.values() for m in ms))
    described = {"run": run, "structure": run, "depth": DEPTH, "budget": f"budget({BUDGET})", "stages": stages}
    card = MetricCard.build(
        Conventions(),
        names,
        [],
        [QueryRecord(run=s, counted=n) for s in stages],
        pipeline=described | {"all": [described]},
    )
    empty = {
        "failures": pd.DataFrame(columns=["stage", "query_id", "error"]),
        "latency": pd.DataFrame(),
        "issues": pd.DataFrame(columns=["stage", "query_id", "issue"]),
    }
    report = Report(blocks, names, card, {"loss_items": loss_items, **empty})
    return report, rankings, qrels, dict(zip(ids.tolist(), questions.tolist(), strict=True))


def write_page(n: int, out: Path) -> dict[str, Any]:
    """Write the page of a synthetic report of ``n`` queries to ``out``; its size, the files beside it, the time."""
    from rag_eval.renderers.html_report import HtmlSide, write_html

    report, rankings, qrels, questions = synthetic(n)
    start = time.perf_counter()
    report.summary  # noqa: B018 - measured apart: the summary is the report's, not the page's
    summary_seconds = time.perf_counter() - start
    side = HtmlSide("synthetic", report, runs=rankings, qrels=qrels, queries=questions)
    start = time.perf_counter()
    write_html(out, [side], plots=False)
    seconds = time.perf_counter() - start
    beside = sorted(out.with_name(out.name + ".drill").glob("shard-*.js"))
    return {
        "queries": n,
        "summary_seconds": round(summary_seconds, 2),
        "page_seconds": round(seconds, 2),
        "page_bytes": out.stat().st_size,
        "drill_files": len(beside),
        "drill_bytes": sum(p.stat().st_size for p in beside),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(write_page(args.queries, Path(tmp) / "page.html"))


if __name__ == "__main__":
    main()
