"""Reading a trace export (rag_eval.stages.traced.from_traces): time and peak memory against the number of spans.

Each trace is one query of four spans, as an instrumented RAG app records it: a CHAIN root, an LLM call (its
prompt and answer), a RETRIEVER span of ``--docs`` documents (id, score, ~120 characters of content, metadata) and
a RERANKER span given those ids and keeping 5; written as OTLP JSON lines, 128 traces (512 spans, the batch span
processor's default batch) a line, to ``--folder``. Each size is read in a fresh process, so its peak resident
memory (ru_maxrss) is its own; ``before`` is the process after ``import rag_eval`` and the export's first line.
Run (the issue's figures, benchmarks/RESULTS.md):

    .venv/bin/python benchmarks/bench_traces.py --spans 100000 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

PER_LINE = 128  # traces a line: 512 spans


def _span(trace: int, n: int, name: str, kind: str, attrs: dict, parent: int | None) -> dict:
    start = 1_700_000_000_000_000_000 + trace * 10**9 + n * 10**6
    attributes = {"openinference.span.kind": kind, **attrs}
    return {
        "traceId": f"{trace + 1:032x}",
        "spanId": f"{trace * 8 + n + 1:016x}",
        "parentSpanId": f"{trace * 8 + parent + 1:016x}" if parent is not None else "",
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 500_000 * (4 - n)),
        "status": {},
        "attributes": [
            {"key": k, "value": {"doubleValue": v} if isinstance(v, float) else {"stringValue": v}}
            for k, v in attributes.items()
        ],
    }


def _trace(t: int, docs: int) -> list[dict]:
    query = f"what does question number {t} ask about topic {t % 97}?"
    ids = [f"doc{(t * 7 + d) % 50_000}" for d in range(docs)]
    found: dict = {"input.value": query, "output.mime_type": "application/json"}
    for d, doc in enumerate(ids):
        found[f"retrieval.documents.{d}.document.id"] = doc
        found[f"retrieval.documents.{d}.document.score"] = float(docs - d) / 3
        found[f"retrieval.documents.{d}.document.content"] = f"text of {doc}: " + "lorem ipsum dolor " * 6
        found[f"retrieval.documents.{d}.document.metadata"] = json.dumps({"source": f"{doc}.pdf", "page": d})
    kept: dict = {"input.value": query, "reranker.query": query, "reranker.top_k": "5", "reranker.model_name": "ce"}
    for d, doc in enumerate(ids):
        kept[f"reranker.input_documents.{d}.document.id"] = doc
    for d in range(5):
        kept[f"reranker.output_documents.{d}.document.id"] = ids[docs - 1 - d]
        kept[f"reranker.output_documents.{d}.document.score"] = float(5 - d)
    answer = {"input.value": "context ... " * 30 + query, "output.value": "an answer " * 20, "llm.model_name": "m"}
    return [
        _span(t, 0, "rag", "CHAIN", {"input.value": query, "output.value": "an answer " * 20}, None),
        _span(t, 1, "retrieve", "RETRIEVER", found, 0),
        _span(t, 2, "rerank", "RERANKER", kept, 0),
        _span(t, 3, "llm", "LLM", answer, 0),
    ]


def write(path: Path, traces: int, docs: int) -> int:
    """An OTLP JSON lines export of ``traces`` traces (4 spans each); returns the spans written."""
    spans_written = 0
    with open(path, "w", encoding="utf-8") as out:
        for block in range(0, traces, PER_LINE):
            spans = [s for t in range(block, min(block + PER_LINE, traces)) for s in _trace(t, docs)]
            spans_written += len(spans)
            request = {
                "resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}]}]
            }
            out.write(json.dumps(request, separators=(",", ":")) + "\n")
    return spans_written


def read(path: str) -> None:
    """In the child process: read the export and print seconds and peak RSS (KiB from ru_maxrss, as MiB)."""
    import resource

    import rag_eval  # noqa: F401 (its import is in the baseline, not in the read)
    from rag_eval.stages.traced import from_traces

    with open(path, "rb") as stream:
        json.loads(stream.readline())  # one line parsed: the baseline holds what any reader needs
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = from_traces(path)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    hits = sum(len(out.table.column("hits").combine_chunks().values) for out in result.stages.values())
    got = {"seconds": seconds, "peak_mib": peak / 1024, "base_mib": before / 1024, "queries": len(result.queries)}
    print(json.dumps({**got, "hits": hits}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--folder", default="/tmp", help="where the exports are written (and removed)")
    parser.add_argument("--keep", action="store_true", help="keep the exports")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        read(args.child)
        return
    head = "spans | traces | file MiB | write s | read s | spans/s | peak RSS MiB | before MiB | extra MiB | KiB/trace"
    print(f"| {head} |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for total in args.spans:
        traces = total // 4
        path = Path(args.folder) / f"rag_eval_bench_traces_{total}.jsonl"
        started = time.perf_counter()
        spans = write(path, traces, args.docs)
        wrote = time.perf_counter() - started
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(path)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONWARNINGS": "ignore"},
            )
            got = json.loads(done.stdout.strip().splitlines()[-1])
            size = path.stat().st_size / 2**20
        finally:
            if not args.keep:
                path.unlink()
        assert got["queries"] == traces, got
        extra = got["peak_mib"] - got["base_mib"]
        print(
            f"| {spans:,} | {traces:,} | {size:,.0f} | {wrote:.0f} | {got['seconds']:.1f} | "
            f"{spans / got['seconds']:,.0f} | {got['peak_mib']:,.0f} | {got['base_mib']:,.0f} | {extra:,.0f} | "
            f"{extra * 1024 / traces:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
