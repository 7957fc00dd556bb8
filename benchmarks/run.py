"""The benchmark script: run rag_eval pipelines on a BEIR-layout collection and write a report folder.

    .venv/bin/python benchmarks/run.py --dataset ../shared/datasets/scifact --depth 100 --budget 5

Same as ``rag-eval bench``; see ``rag_eval/bench/run.py`` for the options.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rag_eval.bench.run import main

if __name__ == "__main__":
    sys.exit(main())
