"""What a stage's cache key covers: its code, the code and data that code reaches, described exactly or refused.
See docs/adapters.md.

What is described, what is refused, and the encoding: ``docs/runner.md``, "What a cache key covers"."""

from __future__ import annotations

import contextlib
import dis
import enum
import functools
import hashlib
import importlib.metadata
import importlib.util
import logging
import marshal
import os
import re
import site
import struct
import sys
import sysconfig
import types
import weakref
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from ..errors import InputError

SCHEME = 3  # the key scheme: 1 hashed a function's source alone (and large objects by type and length); 3 shards

_PLAIN = frozenset({str, int, float, bool, type(None)})
_SCALAR_TAG = {type(None): b"N", bool: b"B", int: b"I", float: b"F", complex: b"C"}
_NOT_BEHAVIOUR = frozenset({"_abc_impl", "__abstractmethods__"})
_PYTHON = f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}"


class Uncacheable(InputError):
    """A stage whose behaviour rag_eval cannot describe exactly, asked to run with a cache: pass ``version=``."""


@dataclass(frozen=True)
class Fingerprint:
    """A stage's key (``digest``) and what it covers, in words for the card (``covers``)."""

    digest: str
    covers: str


def fingerprint(value: Any, *, stage: str, ignore: frozenset[str] = frozenset()) -> Fingerprint:
    """The fingerprint of ``value`` (a function, a bound method, a callable object, a class, data), or
    :class:`Uncacheable` naming the first part of it that cannot be described exactly. ``ignore``: attribute
    names left out of every object's state (what changes logging, never results: a framework's callbacks)."""
    describer = _Describer(stage, ignore)
    try:
        describer.describe(value, _label(value))
    except RecursionError:
        describer.refuse(_label(value), value, "holds objects nested too deeply (or a cycle through a set)")
    return Fingerprint(describer.digest(), describer.summary())


# -- where a module comes from ----------------------------------------------------------------------------------


@functools.cache
def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)}
    roots.update(site.getsitepackages())
    with contextlib.suppress(AttributeError):  # a virtualenv's old site module has none
        roots.add(site.getusersitepackages())
    roots.update({os.path.join(sys.base_prefix, "lib"), os.path.join(sys.prefix, "lib")})
    return tuple(sorted(os.path.realpath(r) + os.sep for r in roots if r))


@functools.cache
def _distributions() -> dict[str, list[str]]:
    try:
        return dict(importlib.metadata.packages_distributions())
    except Exception:  # noqa: BLE001 - a broken metadata folder: versions unknown, never a crash
        return {}


@functools.cache
def _package_version(top: str) -> str:
    if top == "rag_eval":
        from .._version import __version__

        return __version__
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return _PYTHON
    for dist in _distributions().get(top, ()):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    module = sys.modules.get(top)
    version = getattr(module, "__version__", None)
    return str(version) if isinstance(version, str) else "version unknown"


@functools.cache
def _is_installed_module(name: str) -> bool:
    """Whether module ``name`` belongs to an installed package (stdlib, site-packages, rag_eval) rather than to the
    user's own code (a script, a notebook, a module beside them, a project of theirs installed in editable mode)."""
    if name == "__main__":
        return False
    top = name.partition(".")[0]
    if top == "rag_eval" or top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return True
    module = sys.modules.get(name) or sys.modules.get(top)
    where = getattr(module, "__file__", None)
    if where is None:
        paths = list(getattr(module, "__path__", None) or ())
        if not paths:
            return True  # built into the interpreter, or frozen
        where = paths[0]
    where = os.path.realpath(where)
    return where.startswith(_installed_roots())


def _frozen(array: np.ndarray) -> bool:
    """Whether ``array`` cannot change: read-only, and so is every array it views, down to memory it owns or to
    ``bytes`` (a writable base, a memory map or another object's buffer could change it under a read-only view)."""
    base: Any = array
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return base is None or type(base) is bytes


def _module_of(value: Any) -> str | None:
    module = getattr(value, "__module__", None)
    return module if isinstance(module, str) else None


# -- big known objects, hashed once per process --------------------------------------------------------------


class _Memo:
    """Digests of weak-referenceable objects by identity, forgotten when the object is collected."""

    def __init__(self) -> None:
        self._digests: dict[int, tuple[weakref.ref[Any], bytes]] = {}

    def get(self, value: Any) -> bytes | None:
        entry = self._digests.get(id(value))
        if entry is not None and entry[0]() is value:
            return entry[1]
        return None

    def put(self, value: Any, digest: bytes) -> None:
        key = id(value)

        def forget(_: object, key: int = key) -> None:  # the object is gone: so is its digest
            self._digests.pop(key, None)

        try:
            ref = weakref.ref(value, forget)
        except TypeError:
            return
        self._digests[key] = (ref, digest)


_MEMO = _Memo()


@functools.lru_cache(maxsize=4096)
def _loads(code: types.CodeType) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...], frozenset[str]]:
    """What a code object (and the code nested in it) reaches: the globals it loads, in order of first use; the
    modules it imports (name and level); and the attribute names it reads (what it may take from a module)."""
    globals_: dict[str, None] = {}
    imports: dict[tuple[str, int], None] = {}
    attributes: set[str] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        consts: list[Any] = []
        for instruction in dis.get_instructions(current):
            name = instruction.opname
            if name in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"):
                globals_.setdefault(instruction.argval, None)
            elif name in ("LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM", "LOAD_SUPER_ATTR"):
                attributes.add(instruction.argval)
            elif name == "IMPORT_NAME":
                level = consts[-2] if len(consts) >= 2 and isinstance(consts[-2], int) else 0
                imports.setdefault((instruction.argval, level), None)
            consts.append(instruction.argval if name == "LOAD_CONST" else None)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return tuple(globals_), tuple(imports), frozenset(attributes)


def _definition(value: Any) -> bool:
    """Code rather than data: a function, class, method or builtin (named as code, not as data, on the card)."""
    return isinstance(
        value,
        (
            type,
            types.FunctionType,
            types.BuiltinFunctionType,
            types.MethodType,
            functools.partial,
            staticmethod,
            classmethod,
        ),
    )


# -- the describer ---------------------------------------------------------------------------------------------


class _Describer:
    def __init__(self, stage: str, ignore: frozenset[str] = frozenset()) -> None:
        self.stage = stage
        self.ignore = ignore
        self._hash = hashlib.sha256(f"rag_eval fingerprint {SCHEME} {_PYTHON}".encode())
        self._seen: dict[int, int] = {}  # id -> order of first visit (shared references, cycles)
        self._alive: list[Any] = []  # keeps what was visited alive, so that no id is reused meanwhile
        self.code: list[str] = []
        self.data: list[str] = []
        self.installed: dict[str, str] = {}

    # encoding
    def _put(self, tag: bytes, payload: bytes = b"") -> None:
        self._hash.update(tag + struct.pack("<Q", len(payload)) + payload)

    def digest(self) -> str:
        return self._hash.hexdigest()[:20]

    def summary(self) -> str:
        def few(items: list[str], limit: int = 4) -> str:
            shown = ", ".join(items[:limit])
            return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")

        parts = []
        if self.code:
            parts.append(f"code of {few(list(dict.fromkeys(self.code)))}")
        if self.data:
            parts.append(f"data {few(list(dict.fromkeys(self.data)))} by content")
        if self.installed:
            parts.append("installed " + few([f"{k} {v}" for k, v in sorted(self.installed.items())], 3))
        return "; ".join(parts) or "nothing but its class"

    def refuse(self, path: str, value: Any, what: str | None = None) -> NoReturn:
        kind = type(value)
        what = what or f"is a {kind.__module__}.{kind.__qualname__}"
        raise Uncacheable(
            f"cannot cache this stage: {path} {what}, which rag_eval cannot describe exactly (only code, plain data, "
            "arrays, frames, collections, qrels, runs and objects of "
            "pure-Python classes are); a key from a partial description could reuse another configuration's "
            "results. Pass version='...' to the stage (and change it whenever that object changes), or run "
            "without cache=",
            source=f"stage {self.stage!r}",
        )

    def _installed(self, module: str, name: str) -> None:
        top = module.partition(".")[0]
        version = _package_version(top)
        self.installed["python" if version == _PYTHON else top] = version
        self._put(b"P", f"{module}:{name}@{version}".encode())

    def _visited(self, value: Any) -> bool:
        """Whether ``value`` was seen before in this description (then a back-reference is written)."""
        key = id(value)
        order = self._seen.get(key)
        if order is not None:
            self._put(b"R", struct.pack("<Q", order))
            return True
        self._seen[key] = len(self._seen)
        self._alive.append(value)
        return False

    # dispatch
    def describe(self, value: Any, path: str) -> None:
        kind = type(value)
        if kind in _SCALAR_TAG:
            self._put(_SCALAR_TAG[kind], repr(value).encode())
            return
        if kind is str:
            self._put(b"S", value.encode("utf-8", "surrogatepass"))
            return
        if kind in (bytes, bytearray):
            self._put(b"Y" if kind is bytes else b"y", bytes(value))
            return
        if kind is tuple:  # immutable: no back-reference needed (a cycle passes through something mutable)
            self._sequence(value, path)
            return
        if kind is frozenset:
            self._set(value, path)
            return
        if self._visited(value):
            return
        if kind is list:
            self._sequence(value, path)
        elif kind in (dict, OrderedDict, defaultdict, types.MappingProxyType):
            self._mapping(value, path)
        elif kind in (set, frozenset):
            self._set(value, path)
        elif isinstance(value, np.ndarray):
            self._array(value, path)
        elif isinstance(value, np.generic):
            self._put(b"g", value.dtype.str.encode() + b"\0" + value.tobytes())
        elif isinstance(value, types.FunctionType):
            self._function(value, path)
        elif isinstance(value, types.MethodType):
            self._put(b"m")
            self.describe(value.__self__, f"{path}.__self__")
            self.describe(value.__func__, path)
        elif isinstance(value, functools.partial):
            self._put(b"p")
            self.describe(value.func, f"{path}.func")
            self.describe(value.args, f"{path}.args")
            self.describe(value.keywords, f"{path}.keywords")
        elif isinstance(value, types.BuiltinFunctionType):
            self._builtin(value, path)
        elif isinstance(value, types.ModuleType):
            self._module(value, path, None)
        elif isinstance(value, type):
            self._class(value, path)
        elif isinstance(value, (staticmethod, classmethod)):
            self._put(b"s" if isinstance(value, staticmethod) else b"c")
            self.describe(value.__func__, path)
        elif isinstance(value, property):
            self._put(b"r")
            for accessor in (value.fget, value.fset, value.fdel):
                self.describe(accessor, path)
        elif isinstance(value, types.CodeType):
            self._code(value)
        elif isinstance(value, enum.Enum):
            self._put(b"e", value.name.encode())
            self.describe(type(value), path)
        elif isinstance(value, re.Pattern):
            self._put(b"x", str(value.flags).encode())
            self.describe(value.pattern, path)
        elif isinstance(value, logging.Logger):
            self._put(b"l", value.name.encode())
        elif kind.__module__.partition(".")[0] == "pandas" and hasattr(value, "to_numpy"):
            self._pandas(value, path)
        elif kind.__module__.partition(".")[0] == "rag_eval" and kind.__name__ in ("Run", "Qrels", "Collection"):
            self._rag_eval(value, path)
        else:
            self._object(value, path)

    def _sequence(self, value: list[Any] | tuple[Any, ...], path: str) -> None:
        tag = b"L" if type(value) is list else b"T"
        if set(map(type, value)) <= _PLAIN:  # the common case, in C: marshal format 0 has no refs, no interning
            self._put(tag + b"m", marshal.dumps(value, 0))
            return
        self._put(tag, struct.pack("<Q", len(value)))
        for i, item in enumerate(value):
            self.describe(item, f"{path}[{i}]")

    def _mapping(self, value: Any, path: str) -> None:
        if type(value) is defaultdict:
            self._put(b"Dd")
            self.describe(value.default_factory, f"{path}.default_factory")
        if type(value) is dict and set(map(type, value)) <= _PLAIN and set(map(type, value.values())) <= _PLAIN:
            self._put(b"Dm", marshal.dumps(value, 0))
            return
        self._put(b"D", struct.pack("<Q", len(value)))
        for key, item in value.items():  # in order: iteration order is behaviour
            self.describe(key, f"{path} key")
            self.describe(item, f"{path}[{key!r}]")

    def _set(self, value: set[Any] | frozenset[Any], path: str) -> None:
        digests = []
        for item in value:  # ordered by the members' own digests: set order follows the process's hash seed
            member = _Describer(self.stage, self.ignore)
            member.describe(item, f"{path} member")
            digests.append(member._hash.digest())
            self._merge(member)
        self._put(b"E" if type(value) is set else b"e", b"".join(sorted(digests)))

    def _merge(self, other: _Describer) -> None:
        self.code.extend(other.code)
        self.data.extend(other.data)
        self.installed.update(other.installed)

    def _array(self, value: np.ndarray, path: str) -> None:
        frozen = _frozen(value) and not value.dtype.hasobject  # an object array's items may change themselves
        known = _MEMO.get(value) if frozen else None
        if known is None:
            sub = hashlib.sha256(f"{value.dtype.str} {value.shape}".encode())
            if value.dtype.hasobject:
                member = _Describer(self.stage, self.ignore)
                member.describe(value.tolist(), path)
                sub.update(member._hash.digest())
            else:
                data = memoryview(np.ascontiguousarray(value))  # type: ignore[arg-type]  # an array is a buffer
                sub.update(data.cast("B"))  # (numpy's stubs do not say so); no copy of a large array
            known = sub.digest()
            if frozen:
                _MEMO.put(value, known)
        self._put(b"A", known)

    def _pandas(self, value: Any, path: str) -> None:
        # pandas objects change in place (none can be made read-only): described anew each time, never remembered
        member = _Describer(self.stage, self.ignore)
        kind = type(value).__name__
        member._put(b"pd", kind.encode())
        if kind == "DataFrame":
            member.describe(list(map(str, value.dtypes)), path)
            member.describe(value.columns, f"{path}.columns")
            member.describe(value.index, f"{path}.index")
            for i in range(value.shape[1]):
                member._column(value.iloc[:, i], f"{path} column {i}")
        elif kind == "Series":
            member.describe(str(value.dtype), path)
            member.describe(value.name, path)
            member.describe(value.index, f"{path}.index")
            member._column(value, path)
        elif "Index" in kind:
            member.describe(str(value.dtype), path)
            member.describe(list(value.names), path)
            member._column(value, path)
        else:
            self.refuse(path, value)
        known = member._hash.digest()
        self._merge(member)
        self._put(b"PD", known)

    def _column(self, column: Any, path: str) -> None:
        values = column.to_numpy()
        if values.dtype.hasobject:
            self.describe(values.tolist(), path)
        else:
            self._put(b"c", values.dtype.str.encode() + b"\0" + np.ascontiguousarray(values).tobytes())

    def _rag_eval(self, value: Any, path: str) -> None:
        """rag_eval's data, by content. What cannot change (a Qrels' judgements, a Run's columns: read-only) is
        hashed once and remembered on the object; what can (a Run's name, a Collection's corpus and queries, dicts
        a user may add to) is described anew each time."""
        name = type(value).__name__
        if name == "Collection":
            member = _Describer(self.stage, self.ignore)
            member._put(b"re", name.encode())
            member.describe([value.name, value.queries, value.qrels], path)
            member._corpus(value.corpus, f"{path}.corpus")
            self._merge(member)
            self.data.append(f"Collection({value.name})")
            self._put(b"RE", member._hash.digest())
            return
        memo = value._memo if name == "Run" else value.__dict__  # Run has slots; Qrels a __dict__ for its caches
        known = memo.get("_fingerprint")
        if known is None:
            member = _Describer(self.stage, self.ignore)
            member._put(b"re", name.encode())
            if name == "Run":  # its columns, read-only from the start (data/run.py)
                ids = value.doc_id_column
                member.describe([value._query_ids, value._offsets, value._scores, value._by_score], path)
                if isinstance(ids, np.ndarray):
                    member.describe(ids, path)
                else:  # PackedIds: the UTF-8 blob and its offsets
                    member.describe([ids.blob, ids.starts], path)
            else:  # Qrels: immutable (data/qrels.py)
                member.describe({q: dict(value[q]) for q in value.query_ids}, path)
            known = member._hash.digest()
            self._merge(member)
            memo["_fingerprint"] = known
        self.data.append(f"Run({value.name})" if name == "Run" else "Qrels")
        self._put(b"RE", known)
        if name == "Run":  # what may be set on a run after it was made
            self.describe([value.name, value.tag, value.notes, value.source], path)

    def _corpus(self, corpus: Any, path: str) -> None:
        """A collection's corpus, ``{chunk id: Chunk}``: as columns (ids, titles, texts, metadata) when it is a dict
        of Chunks with str ids, each column written in C where it holds plain values; else member by member."""
        from ..data.collection import Chunk

        chunks = list(corpus.values()) if type(corpus) is dict else []
        if not chunks or set(map(type, chunks)) != {Chunk}:
            self._put(b"cg")
            self.describe(corpus, path)
            return
        self._put(b"cc", struct.pack("<Q", len(chunks)))
        self.describe(list(corpus), f"{path} ids")
        self.describe([c.title for c in chunks], f"{path} titles")
        self.describe([c.text for c in chunks], f"{path} texts")
        metadata = [c.metadata for c in chunks]
        if not any(metadata):
            self._put(b"c0")  # every chunk's metadata empty
            return
        if all(
            type(m) is dict and set(map(type, m)) <= _PLAIN and set(map(type, m.values())) <= _PLAIN for m in metadata
        ):  # flat dicts of plain values, in C (marshal would take any buffer, an array too, as bare bytes)
            self._put(b"cm", marshal.dumps(metadata, 0))
        else:
            self.describe(metadata, f"{path} metadata")

    def _code(self, code: types.CodeType) -> None:
        self._put(b"K", code.co_code)
        self.describe((code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags), "code")
        self.describe((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars), "code")
        self._put(b"k", struct.pack("<Q", len(code.co_consts)))
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self._code(const)
            elif type(const) is frozenset:  # `x in {"a", "b"}` compiles to one
                self._set(const, "a constant")
            else:
                self.describe(const, "a constant")

    def _function(self, fn: types.FunctionType, path: str) -> None:
        module = _module_of(fn) or "__main__"
        if _is_installed_module(module):
            self._installed(module, fn.__qualname__)
            return
        self.code.append(fn.__qualname__)
        self._put(b"f", f"{module}:{fn.__qualname__}".encode())
        self._code(fn.__code__)
        self.describe(fn.__defaults__, f"{path} (a default)")
        self.describe(fn.__kwdefaults__, f"{path} (a default)")
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell (a name assigned later)
                self._put(b"0")
                continue
            self.describe(contents, f"{name!r} in the closure of {fn.__qualname__}")
        loads, imports, attributes = _loads(fn.__code__)
        namespace = fn.__globals__
        builtins = namespace.get("__builtins__", {})
        builtins = builtins if isinstance(builtins, dict) else vars(builtins)
        for name in loads:
            where = f"global {name!r} of {fn.__qualname__}"
            self._put(b"G", name.encode())
            if name in namespace:
                value = namespace[name]
                if isinstance(value, types.ModuleType):
                    self._module(value, where, attributes)
                    continue
                if not _definition(value):
                    self.data.append(name)
                self.describe(value, where)
            elif name in builtins:
                self._put(b"b")
            else:
                self._put(b"u")  # not defined (yet): a NameError when called, the same in every process
        for name, level in imports:  # `import x` inside the function: the module it gets
            self._put(b"i", f"{level}:{name}".encode())
            try:
                absolute = (
                    importlib.util.resolve_name("." * level + name, namespace.get("__package__")) if level else name
                )
            except (ImportError, ValueError):
                absolute = name
            imported = sys.modules.get(absolute)
            if imported is None:  # not imported yet: which file it will be is not known before the call
                if _is_installed_module(absolute):
                    self._installed(absolute, "")
                    continue
                self.refuse(
                    f"the module {absolute!r} imported by {fn.__qualname__}",
                    None,
                    "is not imported yet (its code is known only once the stage runs)",
                )
            self._module(imported, f"the module {absolute!r} imported by {fn.__qualname__}", attributes)

    def _module(self, module: types.ModuleType, path: str, attributes: frozenset[str] | None) -> None:
        name = module.__name__
        if _is_installed_module(name):
            self._installed(name, "")
            return
        self._put(b"M", name.encode())
        if attributes is None:  # a module of the user's held as data: which of its names matter is unknown
            self.refuse(path, module)
        for attribute in sorted(attributes):
            if attribute in vars(module):
                value = vars(module)[attribute]
                self._put(b"a", attribute.encode())
                if isinstance(value, types.ModuleType):
                    self._module(value, f"{path}.{attribute}", attributes)
                else:
                    if not callable(value):
                        self.data.append(f"{name}.{attribute}")
                    self.describe(value, f"{name}.{attribute}")

    def _builtin(self, fn: types.BuiltinFunctionType, path: str) -> None:
        owner = fn.__self__
        if owner is None or isinstance(owner, types.ModuleType):
            self._installed(_module_of(fn) or str(getattr(owner, "__name__", "builtins")), fn.__qualname__)
            return
        self._put(b"bm", fn.__name__.encode())  # a C method bound to an object: the object decides
        self.describe(owner, f"{path}.__self__")

    def _class(self, cls: type, path: str) -> None:
        module = _module_of(cls) or "builtins"
        if _is_installed_module(module):
            self._installed(module, cls.__qualname__)
            return
        self.code.append(cls.__qualname__)
        self._put(b"C", f"{module}:{cls.__qualname__}".encode())
        self.describe(cls.__bases__, f"the bases of {cls.__qualname__}")
        for name, member in cls.__dict__.items():
            if (
                isinstance(member, types.MemberDescriptorType)
                or name in _NOT_BEHAVIOUR
                or (
                    name.startswith("__")
                    and name.endswith("__")
                    and not _definition(member)
                    and not isinstance(member, property)
                )
            ):  # a slot (its value is the instance's state), or what a framework or ABC keeps on the class
                continue
            self._put(b"a", name.encode())
            self.describe(member, f"{cls.__qualname__}.{name}")

    def _object(self, value: Any, path: str) -> None:
        kind: type = type(value)
        if _importable(value):  # a named definition of a package (a NumPy ufunc, a C function object)
            self._installed(value.__module__, getattr(value, "__qualname__", value.__name__))
            return
        wrapped = getattr(value, "__wrapped__", None)
        if wrapped is not None and type(value).__module__ == "functools":  # @lru_cache / @cache: the function
            self._put(b"w")
            self.describe(wrapped, path)
            return
        base = _builtin_base(kind)
        if base is None or _pickles_its_own_way(kind):  # pickle's view: what the class says its state is
            self._reduced(value, path)
            return
        self._put(b"O")
        self.describe(kind, path)
        if base is not object:  # a subclass of a builtin (a namedtuple, a dict subclass): its builtin content
            self.describe(base(value) if base not in (dict,) else dict(value.items()), path)
        state = getattr(value, "__dict__", None)
        if state is not None:
            if not isinstance(state, dict):
                self.refuse(path, value)
            names = sorted(n for n in state if n not in self.ignore)
            self._put(b"od", struct.pack("<Q", len(names)))
            for name in names:
                self._put(b"a", name.encode())
                self.describe(state[name], f"{path}.{name}")
        for name in _slots(kind):
            if name in self.ignore:
                continue
            self._put(b"os", name.encode())
            try:
                item = object.__getattribute__(value, name)
            except AttributeError:
                self._put(b"0")
                continue
            self.describe(item, f"{path}.{name}")

    def _reduced(self, value: Any, path: str) -> None:
        """An extension object of an installed package by what pickle would store of it (its constructor and
        arguments, and its state): the package promises that this rebuilds it. Refused when it cannot be pickled."""
        kind: type = type(value)
        if _builtin_base(kind) is None and not _is_installed_module(_module_of(kind) or ""):
            self.refuse(path, value)
        try:
            reduced = value.__reduce_ex__(4)
        except Exception:  # noqa: BLE001 - not picklable (a lock, a file, a client): not describable
            reduced = None
        if (
            not isinstance(reduced, tuple)
            or not 2 <= len(reduced) <= 6
            or any(
                item is not None
                for item in reduced[3:5]  # list or dict items as iterators: not read here
            )
        ):
            self.refuse(path, value)
        self._put(b"X")
        self.describe(kind, path)
        for item in reduced[:3]:
            self.describe(item, f"{path} (as pickled)")


@functools.cache
def _pickles_its_own_way(kind: type) -> bool:
    """Whether a pure-Python class says what its state is (``__getstate__`` or ``__reduce__``), as a wrapper of an
    extension object does (a tokenizer keeping its name and ranks, not its compiled core)."""
    for cls in kind.__mro__[:-1]:
        if cls.__module__.partition(".")[0] == "pydantic":  # its own __getstate__ is its __dict__ and private state
            continue
        if any(name in cls.__dict__ for name in ("__getstate__", "__reduce__", "__reduce_ex__")):
            return True
    return False


def _importable(value: Any) -> bool:
    module, name = getattr(value, "__module__", None), getattr(value, "__name__", None)
    if not isinstance(module, str) or not isinstance(name, str) or not _is_installed_module(module):
        return False
    return getattr(sys.modules.get(module), name, None) is value


_BUILTIN_BASES = (tuple, list, dict, str, bytes, int, float, set, frozenset)


@functools.cache
def _builtin_base(kind: type) -> type | None:
    """``object``, or the builtin container or scalar type ``kind`` extends, when every other class ``kind`` is
    made of is written in Python, so that an instance's whole state is in that content, its ``__dict__`` and its
    slots (an extension type keeps state Python cannot see); None otherwise."""
    base: type = object
    for cls in kind.__mro__[:-1]:
        if cls in _BUILTIN_BASES:
            if base is not object and not issubclass(base, cls):
                return None
            base = base if base is not object else cls
            continue
        if not cls.__flags__ & (1 << 9):  # not Py_TPFLAGS_HEAPTYPE: a static C type
            return None
        module = sys.modules.get(_module_of(cls) or "")
        where = getattr(module, "__file__", None) if module is not None else None
        if cls.__module__ != "__main__" and not (isinstance(where, str) and where.endswith((".py", ".pyc"))):
            return None
    return base


@functools.cache
def _slots(kind: type) -> tuple[str, ...]:
    names: list[str] = []
    for cls in kind.__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and name not in names:
                names.append(
                    f"_{cls.__name__.lstrip('_')}{name}" if name.startswith("__") and not name.endswith("__") else name
                )
    return tuple(names)


def is_users_class(cls: type) -> bool:
    """Whether ``cls`` is defined in the user's own code (not in rag_eval or an installed package)."""
    return not _is_installed_module(_module_of(cls) or "builtins")


def _label(value: Any) -> str:
    name = str(getattr(value, "__qualname__", None) or getattr(type(value), "__qualname__", "the stage"))
    return f"the function {name}" if callable(value) else name
