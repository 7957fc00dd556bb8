"""``python -m rag_eval.cli``: the ``rag-eval`` command (see docs/cli.md)."""

import sys

from . import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
