"""Reading a trace export (rag_eval.stages.traced.from_traces): time and peak memory against the number of spans.

Each trace is one query: a CHAIN root, ``--other`` more spans that are no stage (LLM calls, tools), a RETRIEVER
span of ``--docs`` documents and a RERANKER span keeping 5; written as OTLP JSON lines (one request per 1,000
traces). Each size is read in a fresh process, so its peak resident memory (ru_maxrss) is its own. Run:

    .venv/bin/python benchmarks/bench_traces.py --traces 10000 30000 --other 0 10
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _span(trace: int, n: int, name: str, kind: str | None, attrs: dict, parent: int | None) -> dict:
    start = 1_700_000_000_000_000_000 + trace * 10**9 + n * 10**6
    attributes = dict(attrs)
    if kind:
        attributes["openinference.span.kind"] = kind
    return {
        "traceId": f"{trace + 1:032x}",
        "spanId": f"{trace * 64 + n + 1:016x}",
        "parentSpanId": f"{trace * 64 + parent + 1:016x}" if parent is not None else "",
        "name": name,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 500_000),
        "attributes": [
            {"key": k, "value": {"doubleValue": v} if isinstance(v, float) else {"stringValue": v}}
            for k, v in attributes.items()
        ],
    }


def write(path: Path, traces: int, other: int, docs: int) -> int:
    spans_written = 0
    with open(path, "w", encoding="utf-8") as out:
        for block in range(0, traces, 1000):
            spans = []
            for t in range(block, min(block + 1000, traces)):
                query = f"question number {t}"
                spans.append(_span(t, 0, "rag", "CHAIN", {"input.value": query}, None))
                for o in range(other):
                    spans.append(_span(t, 1 + o, "llm", "LLM", {"input.value": query, "output.value": "x" * 200}, 0))
                found = {"input.value": query}
                for d in range(docs):
                    found[f"retrieval.documents.{d}.document.id"] = f"doc{(t * 7 + d) % 50_000}"
                    found[f"retrieval.documents.{d}.document.score"] = float(docs - d)
                    found[f"retrieval.documents.{d}.document.content"] = f"text of document {(t * 7 + d) % 50_000} " * 8
                spans.append(_span(t, other + 1, "retrieve", "RETRIEVER", found, 0))
                kept = {"reranker.query": query}
                for d in range(5):
                    kept[f"reranker.output_documents.{d}.document.id"] = f"doc{(t * 7 + docs - 1 - d) % 50_000}"
                    kept[f"reranker.output_documents.{d}.document.score"] = float(5 - d)
                spans.append(_span(t, other + 2, "rerank", "RERANKER", kept, 0))
            spans_written += len(spans)
            request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}
            out.write(json.dumps(request) + "\n")
    return spans_written


def read(path: str) -> None:
    """In the child process: read the export and print seconds and peak RSS."""
    import resource

    from rag_eval.stages.traced import from_traces

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = from_traces(path)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    got = {"seconds": seconds, "peak_mib": peak / 1024, "base_mib": before / 1024, "queries": len(result.queries)}
    print(json.dumps(got))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--traces", type=int, nargs="+", default=[10_000, 30_000])
    parser.add_argument("--other", type=int, nargs="+", default=[0, 10])
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        read(args.child)
        return
    print("| traces | other spans per trace | spans | file MiB | read s | spans/s | peak RSS MiB | before reading |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for other in args.other:
        for traces in args.traces:
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "spans.jsonl"
                spans = write(path, traces, other, args.docs)
                done = subprocess.run(
                    [sys.executable, __file__, "--child", str(path)],
                    capture_output=True,
                    text=True,
                    check=True,
                    env={**os.environ, "PYTHONWARNINGS": "ignore"},
                )
                got = json.loads(done.stdout.strip().splitlines()[-1])
                size = path.stat().st_size / 2**20
                print(
                    f"| {traces:,} | {other} | {spans:,} | {size:,.0f} | {got['seconds']:.1f} | "
                    f"{spans / got['seconds']:,.0f} | {got['peak_mib']:,.0f} | {got['base_mib']:,.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
