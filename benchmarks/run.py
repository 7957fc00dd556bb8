"""The benchmark script: run rag_eval pipelines on a BEIR-layout collection and write a report folder.

    .venv/bin/python benchmarks/run.py --beir ../shared/datasets/scifact --depth 100 --budget 5

Same as ``rag-eval bench``; ``rag-eval bench --help`` lists the options.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rag_eval.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
