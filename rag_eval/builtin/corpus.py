"""The demo corpus: docstrings of standard-library modules every Python installation carries, chunked.

Chunk ids are the module-qualified name plus a chunk number (``pathlib.Path.glob#1``); the title is the
qualified name. Docstrings change between Python versions: the demo's labels record a hash of each labelled
chunk's text, and a chunk whose local text differs counts as unjudged.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re

from ..data.collection import Chunk

MODULES = (
    "pathlib",
    "os",
    "os.path",
    "shutil",
    "json",
    "csv",
    "re",
    "datetime",
    "collections",
    "itertools",
    "functools",
    "subprocess",
    "logging",
    "argparse",
    "asyncio",
    "threading",
    "typing",
    "dataclasses",
    "random",
    "math",
    "statistics",
    "time",
    "tempfile",
    "glob",
    "urllib.parse",
    "hashlib",
    "sqlite3",
    "string",
    "textwrap",
    "enum",
    "contextlib",
    "zipfile",
    "copy",
    "heapq",
    "bisect",
    "uuid",
)
MAX_WORDS = 120
# where a module's public functions are implemented, besides the module itself
_ALSO_HOME = {"os": ("posix", "nt"), "os.path": ("posixpath", "ntpath", "genericpath"), "time": ("time",)}


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_corpus(modules: tuple[str, ...] = MODULES) -> dict[str, Chunk]:
    """Chunk id -> Chunk for the docstrings of ``modules`` and of their public functions, classes and methods."""
    corpus: dict[str, Chunk] = {}
    for name in modules:
        module = importlib.import_module(name)
        for qualname, doc in _documented(module, name):
            for number, text in enumerate(_chunks(doc), start=1):
                corpus[f"{qualname}#{number}"] = Chunk(qualname, text, {"module": name})
    return corpus


def _documented(module, name: str):
    yield name, inspect.getdoc(module) or ""
    members = getattr(module, "__all__", None) or [m for m in dir(module) if not m.startswith("_")]
    for member in sorted(set(members)):
        obj = getattr(module, member, None)
        if obj is None or inspect.ismodule(obj) or not (inspect.isclass(obj) or callable(obj)):
            continue
        home = (getattr(obj, "__module__", None) or "").split(".")[0].lstrip("_")
        if home != name.split(".")[0].lstrip("_") and home not in _ALSO_HOME.get(name, ()):
            continue  # imported from elsewhere: documented there
        doc = obj.__doc__ if isinstance(obj.__doc__, str) else None
        if doc:
            yield f"{name}.{member}", inspect.cleandoc(doc)
        if inspect.isclass(obj):
            for attr, value in sorted(vars(obj).items()):
                if attr.startswith("_") or (
                    not callable(value) and not isinstance(value, (property, classmethod, staticmethod))
                ):
                    continue
                inner = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
                doc = inner.__doc__ if isinstance(inner.__doc__, str) else None
                if doc:
                    yield f"{name}.{member}.{attr}", inspect.cleandoc(doc)


def _chunks(doc: str) -> list[str]:
    """Paragraphs packed into chunks of at most ~MAX_WORDS words (a longer paragraph is a chunk of its own)."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", doc) if p.strip()]
    chunks: list[str] = []
    current: list[str] = []
    words = 0
    for paragraph in paragraphs:
        size = len(paragraph.split())
        if current and words + size > MAX_WORDS:
            chunks.append("\n\n".join(current))
            current, words = [], 0
        current.append(paragraph)
        words += size
    if current:
        chunks.append("\n\n".join(current))
    return chunks
