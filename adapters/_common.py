"""What every adapter shares: describing a framework object for a fingerprint, making metadata JSON-friendly,
reading a stage's returned items back into Hits, and running a coroutine from sync code.

Nothing here imports a framework.
"""

from __future__ import annotations

import copy
import datetime
import enum
import functools
import math
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from .._sync import run_sync as run_sync  # re-exported: the adapters await through it
from ..errors import InputError
from ..stages.hits import Hit

T = TypeVar("T")

_SCALARS = (str, int, float, bool, type(None))
_MAX_DEPTH = 3  # how far into nested pydantic models (declared configuration) a description goes
_MAX_OBJECT_DEPTH = 2  # and into other objects (whose attributes deeper down are state: an index's uuid, a lock)
_MAX_ITEMS = 32  # containers larger than this (or holding objects) are described by their type and length
# attributes that change logging or tracing, never results
_NOT_CONFIG = frozenset(
    {
        "callbacks",
        "callback_manager",
        "verbose",
        "_verbose",
        "tags",
        "metadata",
        "show_progress",
    }
)


def content(value: Any, stage: str, *, also_ignore: frozenset[str] = frozenset()) -> str:
    """The exact fingerprint of a wrapped framework object, everything it holds included (a vector store's vectors
    and texts, a BM25 index), callbacks and verbosity left out (:mod:`rag_eval.stages.fingerprint`): what the cache
    key adds to :func:`describe`'s readable settings, which leave data out. ``Uncacheable`` (asking for
    ``version=``) when some of it cannot be described exactly (a model, a client)."""
    from ..stages.fingerprint import fingerprint

    return fingerprint(value, stage=stage, ignore=(_NOT_CONFIG - {"tags", "metadata"}) | also_ignore).digest


def qualified_name(obj: Any) -> str:
    kind = obj if isinstance(obj, type) else type(obj)
    return f"{kind.__module__}.{kind.__qualname__}"


def describe(value: Any, depth: int = 0) -> Any:
    """A JSON-ready description of ``value`` that is stable across processes: what a fingerprint hashes.

    Scalars as they are; small containers of plain values in full; larger containers, or containers holding
    objects, by type and length (an index's contents are data, not configuration); pydantic models by their fields;
    other objects by their class and their plain attributes (scalars and small containers of scalars, private ones
    included: LlamaIndex keeps ``_similarity_top_k`` there), one level into the objects they hold, deeper ones by
    class only.
    Never a ``repr`` (it may hold a memory address) and never a Python ``hash`` (salted per process).
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, np.generic):
        return describe(value.item(), depth)
    if isinstance(value, enum.Enum):
        return {"enum": qualified_name(value), "value": describe(value.value, depth)}
    if isinstance(value, type):
        return qualified_name(value)
    if isinstance(value, (Mapping, list, tuple, set, frozenset)):
        if _is_plain(value):
            return _plain(value)
        return {"type": qualified_name(value), "len": len(value)}
    if isinstance(value, functools.partial):
        return {
            "partial": describe(value.func, depth),
            "args": [describe(a, depth + 1) for a in value.args],
            "keywords": {k: describe(v, depth + 1) for k, v in value.keywords.items()},
        }
    if _is_function(value):
        qualname = getattr(value, "__qualname__", type(value).__name__)
        return {"callable": f"{getattr(value, '__module__', None)}.{qualname}"}
    out: dict[str, Any] = {"class": qualified_name(value)}
    fields = _pydantic_fields(value)
    if depth >= (_MAX_DEPTH if fields is not None else _MAX_OBJECT_DEPTH):
        return out
    if fields is not None:
        out["fields"] = {
            name: describe(getattr(value, name, None), depth + 1) for name in fields if name not in _NOT_CONFIG
        }
        return out
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        settings = {}
        for name, attribute in attributes.items():
            if name.startswith("__") or name in _NOT_CONFIG:
                continue
            if isinstance(attribute, (Mapping, list, tuple, set, frozenset)) and not _is_flat(attribute):
                continue  # data held by the object (a corpus, a docstore), not a setting
            settings[name] = describe(attribute, depth + 1)
        out["settings"] = settings
    return out


def _is_function(value: Any) -> bool:
    return isinstance(value, (types.FunctionType, types.MethodType, types.BuiltinFunctionType))


def _pydantic_fields(value: Any) -> list[str] | None:
    fields = getattr(type(value), "model_fields", None)
    if isinstance(fields, dict) and hasattr(value, "model_copy"):
        return sorted(fields)
    return None


def _is_flat(value: Any) -> bool:
    """A small container of scalars (a list of node ids, keyword arguments): what an attribute that is a setting
    looks like, as opposed to data held (a corpus of dicts)."""
    items = value.values() if isinstance(value, Mapping) else value
    return len(value) <= _MAX_ITEMS and all(isinstance(v, (*_SCALARS, np.generic)) for v in items)


def _is_plain(value: Any, depth: int = 0) -> bool:
    if isinstance(value, (*_SCALARS, np.generic)):
        return True
    if depth > 3:
        return False
    if isinstance(value, Mapping):
        return len(value) <= _MAX_ITEMS and all(
            isinstance(k, _SCALARS) and _is_plain(v, depth + 1) for k, v in value.items()
        )
    if isinstance(value, (list, tuple, set, frozenset)):
        return len(value) <= _MAX_ITEMS and all(_is_plain(v, depth + 1) for v in value)
    return False


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.generic):
        return _plain(value.item())
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=repr)  # set order varies with the process's hash seed
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def jsonable(value: Any) -> Any:
    """A JSON-serialisable deep copy of a metadata value: mappings with str keys, lists, finite numbers, strings;
    NaN and infinities become None, dates ISO strings, numpy scalars Python numbers, anything else its ``str``."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    return str(value)


def metadata_copy(hit: Hit) -> dict[str, Any]:
    """A deep copy of a hit's metadata, safe to hand to a framework that writes into what it is given."""
    return copy.deepcopy(dict(hit.metadata))


def returned_items(stage_name: str, returned: Any, what: str) -> list[Any]:
    """``returned`` as a list, or a TypeError naming the stage when it is not a list of results."""
    if returned is None or isinstance(returned, (str, bytes, Mapping)) or not isinstance(returned, Iterable):
        raise TypeError(f"stage {stage_name!r}: {what} returned {type(returned).__name__}, not a list of results")
    return list(returned)


def read_score(stage_name: str, value: Any, where: str) -> float | None:
    """A score read from framework data: None stays None; numbers become floats; anything else is an error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"stage {stage_name!r}: the score in {where} is {value!r}, not a number")
    return float(value)


def map_back(
    stage_name: str,
    given: Sequence[Hit],
    returned: Iterable[Any],
    *,
    what: str = "the reranker",
) -> list[Hit]:
    """A reranker's returned items (Hits, doc ids or ``(doc_id, score)`` pairs) as Hits of the ones it was given.

    A bare doc id keeps the given hit's text, tokens and metadata and has no score (a score is the stage's own;
    the first stage's would mislead); a pair takes the new score; a Hit is taken as returned, with the text,
    tokens and metadata it leaves out filled in from the given hit.
    """
    by_id = {h.doc_id: h for h in given}
    out = []
    for item in returned:
        if isinstance(item, Hit):
            doc_id, score, new = item.doc_id, item.score, item
        elif isinstance(item, str):
            doc_id, score, new = item, None, None
        elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
            doc_id, score, new = item[0], read_score(stage_name, item[1], f"the pair {tuple(item)!r}"), None
        else:
            raise TypeError(
                f"stage {stage_name!r}: {what} returned {item!r}; return Hits, doc ids or (doc_id, score) pairs"
            )
        base = by_id.get(doc_id)
        if base is None:
            raise ValueError(f"stage {stage_name!r}: {what} returned doc id {doc_id!r}, which it was not given")
        if new is None:
            out.append(Hit(doc_id, score, base.text, base.tokens, base.metadata))
            continue
        text = new.text if new.text is not None else base.text
        tokens = new.tokens if new.tokens is not None else (base.tokens if text == base.text else None)
        out.append(Hit(doc_id, score, text, tokens, new.metadata if new.metadata else base.metadata))
    return out


def settled(answers: Iterable[Any], convert: Callable[[Any], T]) -> list[T]:
    """A framework's batch answers (each query's result, or the exception that query raised, as LangChain's
    ``batch(..., return_exceptions=True)`` gives them), each read by ``convert`` (which checks it as the
    single-query path does). The first fault, the framework's or ``convert``'s, is raised: the runner then asks
    the single-query method query by query, so that the fault is charged to its own query and only to it."""
    out = []
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
        out.append(convert(answer))
    return out


def max_concurrency(stage_name: str, value: Any) -> int | None:
    """A batch's ``max_concurrency`` setting: None (the framework's default) or an int of 1 or more."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"stage {stage_name!r}: max_concurrency must be None or an int of 1 or more, not {value!r}")
    return value
