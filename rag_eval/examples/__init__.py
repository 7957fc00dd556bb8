"""The example files bundled with rag_eval, found wherever it is installed (a clone, a wheel, an editable install).

- :data:`FOLDER`: this folder. Its TREC example: ``qrels.txt`` (graded qrels of twelve questions),
  ``bm25.trec`` (a first stage's top 20) and ``bm25_rerank.trec`` (a reranker's order of the same candidates).
- :data:`BEIR_FOLDER`: a tiny collection in BEIR's layout (``corpus.jsonl``: 30 short passages on bicycles, bread,
  houseplants and coffee; ``queries.jsonl``: 11 questions; ``qrels/test.tsv``: 10 of them judged 0-3), written for
  the complete example of ``docs/getting-started.md``: ``rag_eval.Collection.from_beir(BEIR_FOLDER)``.

``python -m rag_eval.examples`` prints :data:`FOLDER`, for the shell::

    EXAMPLES=$(python -m rag_eval.examples)
    rag-eval evaluate $EXAMPLES/qrels.txt $EXAMPLES/bm25.trec -m ndcg@5

Every file is made up for these examples (see ``README.md`` here); none is a benchmark.
"""

from pathlib import Path

__all__ = ["BEIR_FOLDER", "FOLDER"]

FOLDER = Path(__file__).resolve().parent
BEIR_FOLDER = FOLDER / "tiny-beir"  # a hyphen: a data folder, never an importable package
