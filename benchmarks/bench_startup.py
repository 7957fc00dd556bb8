"""Start-up: what a user waits for before the first number (issue 28). Not a test; run from the repository root:

    .venv/bin/python benchmarks/bench_startup.py --repeat 15 --write /tmp/startup.md

Each case runs in a fresh interpreter (``subprocess``), bytecode written and warm (one run first, not counted), as a
user's second call would; the median and the spread of ``--repeat`` wall times are reported, side by side with
pytrec_eval doing the same job (reading the bundled example's TREC files and computing nDCG@5 and recall@20), with
the machine's load. ``python -X importtime -m rag_eval evaluate ...`` shows what loads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "rag_eval" / "examples"
FILES = [str(EXAMPLES / name) for name in ("qrels.txt", "bm25.trec", "bm25_rerank.trec")]
PYTREC_JOB = """
import sys, pytrec_eval
def read(path, run):
    out = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if run:
                out.setdefault(p[0], {})[p[2]] = float(p[4])
            else:
                out.setdefault(p[0], {})[p[2]] = int(p[3])
    return out
qrels = read(sys.argv[1], False)
evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5", "recall.20"})
for path in sys.argv[2:]:
    scores = evaluator.evaluate(read(path, True))
    n = len(scores)
    print(path, sum(s["ndcg_cut_5"] for s in scores.values()) / n, sum(s["recall_20"] for s in scores.values()) / n)
"""
METRICS = ["-m", "ndcg@5", "-m", "recall@20"]  # the README's command
TARGETS = {"import rag_eval": 0.2, "rag-eval evaluate (bundled example)": 0.4}


def _cases() -> dict[str, list[str]]:
    python = sys.executable
    return {
        "python (nothing imported)": [python, "-c", "pass"],
        "import rag_eval": [python, "-c", "import rag_eval"],
        "rag-eval evaluate (bundled example)": [python, "-m", "rag_eval", "evaluate", *FILES, *METRICS],
        "import pytrec_eval": [python, "-c", "import pytrec_eval"],
        "pytrec_eval, the same job": [python, "-c", PYTREC_JOB, *FILES],
    }


def _time(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 10):  # evaluate exits 10 when it warns (docs/cli.md): the job was done
        raise SystemExit(f"{' '.join(command[:4])} failed ({done.returncode}): {done.stderr[-400:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--write", help="write the Markdown table to this file")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # a user's bytecode is cached
    load = os.getloadavg()[0]
    rows = []
    for name, command in _cases().items():
        _time(command, env)  # writes the bytecode; not counted
        times = sorted(_time(command, env) for _ in range(args.repeat))
        rows.append((name, statistics.median(times), times[0], times[-1]))
    load = max(load, os.getloadavg()[0])
    lines = [
        f"Start-up, {args.repeat} fresh interpreters per case, warm bytecode; load (1 min) up to {load:.1f}:",
        "",
        "| case | median (s) | min (s) | max (s) | target |",
        "|---|---:|---:|---:|---|",
    ]
    for name, median, low, high in rows:
        target = TARGETS.get(name)
        verdict = "" if target is None else f"at most {target} s ({'met' if median <= target else 'not met'})"
        lines.append(f"| {name} | {median:.3f} | {low:.3f} | {high:.3f} | {verdict} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
