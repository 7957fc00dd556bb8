"""``python -m rag_eval``: the ``rag-eval`` command (:mod:`rag_eval.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
