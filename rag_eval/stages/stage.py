"""Stages: a retriever turns a query into ranked hits; a reranker reorders (and may rescore or cut) the hits it is
given. Adapters (``rag_eval.adapters``) wrap LangChain, LlamaIndex and plain functions as these."""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from ._fingerprint import Fingerprint, fingerprint, is_users_class
from .hits import Hit


class Stage(ABC):
    """One step of a pipeline, with a name and a fingerprint of its configuration (the cache key)."""

    kind: ClassVar[str]

    def __init__(self, name: str, *, version: str | None = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a stage needs a non-empty name, not {name!r}")
        self.name = name
        self.version = version

    def config(self) -> dict[str, Any]:
        """What identifies this stage's behaviour besides its class and name (JSON-serialisable)."""
        return {}

    def code(self) -> Fingerprint | None:
        """What decides this stage's outputs besides :meth:`config` (see :mod:`rag_eval.stages._fingerprint`): for a
        stage class of the user's own, its code, and, when it does not define :meth:`config`, its whole state; None
        for rag_eval's own classes (their config says it all). Raises ``Uncacheable`` when that cannot be described
        exactly."""
        if not is_users_class(type(self)):
            return None
        if type(self).config is Stage.config:
            return fingerprint(self, stage=self.name)
        return fingerprint(type(self), stage=self.name)

    def described(self) -> Fingerprint:
        """The fingerprint (a stable hash of the class, name, version, :meth:`config` and, without a version,
        :meth:`code`: equal fingerprints, equal outputs) and what it covers, in words."""
        code = None if self.version is not None else self.code()
        identity = {
            "class": f"{type(self).__module__}.{type(self).__qualname__}",
            "name": self.name,
            "version": self.version,
            "config": self.config(),
            "code": code.digest if code is not None else None,
        }
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:20]
        if self.version is not None:
            covers = f"version {self.version!r} (given: the code is not looked at)"
        elif code is not None:
            covers = code.covers
        else:
            covers = "its class and its settings (config())"
        return Fingerprint(digest, covers)

    def fingerprint(self) -> str:
        """The stage's cache key: see :meth:`described`."""
        return self.described().digest

    @property
    def has_async(self) -> bool:
        """Whether the stage has a native async path (else concurrency uses threads)."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Retriever(Stage):
    """A first stage: ``search(query_text, k)`` returns at most k hits, best first."""

    kind = "retriever"

    @abstractmethod
    def search(self, query: str, k: int) -> Sequence[Hit]: ...

    async def asearch(self, query: str, k: int) -> Sequence[Hit]:
        raise NotImplementedError


class Reranker(Stage):
    """A later stage: ``rerank(query_text, hits)`` returns the hits reordered, optionally rescored and cut.

    It may return only hits it was given (by doc id); the input list must not be changed in place.
    """

    kind = "reranker"

    @abstractmethod
    def rerank(self, query: str, hits: Sequence[Hit]) -> Sequence[Hit]: ...

    async def arerank(self, query: str, hits: Sequence[Hit]) -> Sequence[Hit]:
        raise NotImplementedError
