"""The built-in pipelines, the demo and the benchmark command (layer 5; ``rag-eval bench``, ``rag-eval demo``).

Needs the ``models`` extra (bm25s, MiniLM); each module imports what it needs when used. It exports no names: the
commands are its face (:mod:`rag_eval.cli`), and ``rag_eval.builtin.pipelines.build`` is the documented function a
user's own pipeline replaces.
"""

__all__: list[str] = []
