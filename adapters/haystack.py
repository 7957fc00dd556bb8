"""Haystack 3.x retrievers and rankers as stages.

What is adapted, hits, k, pipelines, rankers, async, batches and fingerprints: ``docs/adapters.md``, "Haystack".
haystack-ai is imported when an adapter is built or called."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import threading
import uuid
from collections.abc import Sequence
from types import MappingProxyType, SimpleNamespace
from typing import Any

import numpy as np

from .._optional import require
from ..stages import Hit, Reranker, Retriever, Uncacheable
from ..stages.generator import Generation, Generator
from ..stages.judges import without_secrets
from ._common import content, describe, jsonable, metadata_copy, read_score, returned_items

__all__ = ["HaystackGenerator", "HaystackReranker", "HaystackRetriever", "generator", "reranker", "retriever"]

FEATURE = "rag_eval.adapters.haystack"  # what the ImportError names when haystack-ai is not installed
QUERY_INPUT_NAMES = ("query", "text")  # the pipeline inputs that receive the query text by default
# what @component adds to each instance (its declared sockets, pipeline bookkeeping): not configuration
_COMPONENT_BOOKKEEPING = frozenset(
    {"__haystack_input__", "__haystack_output__", "__haystack_added_to_pipeline__", "__haystack_supports_async__"}
)


def retriever(
    obj: Any,
    *,
    name: str,
    component: str | None = None,
    k_param: str = "top_k",
    query_inputs: Sequence[str] | None = None,
    id_key: str | None = None,
    version: str | None = None,
) -> HaystackRetriever:
    """A first stage from a Haystack retriever component (``run(query=..., top_k=...)`` returning
    ``{"documents": [...]}``), or from a Haystack ``Pipeline`` with ``component=`` naming the retriever in it.

    ``k_param``: the run input that sets how many documents it returns (``top_k``). ``query_inputs``: for a
    pipeline, the ``"component.input"`` names that receive the query text (default: every input nothing feeds
    named ``query`` or ``text``; for a single component, its ``query`` input, or the one name given). ``id_key``:
    the ``meta`` key holding the chunk id, when ``Document.id`` is not it. ``version``: required to cache a stage
    whose results depend on what cannot be described exactly (a model, a remote document store); change it when
    the index changes."""
    return HaystackRetriever(
        obj,
        name=name,
        component=component,
        k_param=k_param,
        query_inputs=query_inputs,
        id_key=id_key,
        version=version,
    )


def reranker(
    obj: Any,
    *,
    name: str,
    component: str | None = None,
    top_k: int | None = None,
    version: str | None = None,
) -> HaystackReranker:
    """A later stage from a Haystack ranker component (``run(query=..., documents=...)`` returning
    ``{"documents": [...]}``), or the component named ``component`` of a Haystack ``Pipeline`` (run alone).
    ``top_k``: passed to the ranker's ``top_k`` input when given (by default the ranker keeps what it was
    configured to)."""
    return HaystackReranker(obj, name=name, component=component, top_k=top_k, version=version)


class _HaystackStage:
    """What the two Haystack stages share: recognising components, describing them, reading documents back."""

    name: str
    version: str | None

    def _component(self, obj: Any, what: str) -> Any:
        """``obj`` checked as a Haystack component returning ``documents``, else a TypeError naming the stage."""
        if _is_pipeline(obj):
            raise TypeError(f"stage {self.name!r}: a Haystack Pipeline needs component= naming the {what} in it")
        if not callable(getattr(obj, "run", None)) or _sockets(obj, "__haystack_input__") is None:
            raise TypeError(
                f"stage {self.name!r}: expected a Haystack component (a class decorated with @component) or a "
                f"Pipeline, not {type(obj).__name__}"
            )
        outputs = _sockets(obj, "__haystack_output__")
        if outputs is not None and "documents" not in outputs:
            raise TypeError(
                f"stage {self.name!r}: the {what} {type(obj).__name__} declares the outputs {sorted(outputs)}, not "
                f"'documents': rag_eval reads a {what}'s ranked documents from its 'documents' output"
            )
        return obj

    def _documents(self, out: Any, where: str) -> list[Any]:
        if not isinstance(out, dict) or "documents" not in out:
            keys = sorted(out) if isinstance(out, dict) else type(out).__name__
            raise TypeError(f"stage {self.name!r}: {where} returned {keys}, not a dict with 'documents'")
        return returned_items(self.name, out["documents"], where)

    def _check_document(self, document: Any, where: str) -> None:
        if not (hasattr(document, "id") and hasattr(document, "meta") and hasattr(document, "content")):
            raise TypeError(
                f"stage {self.name!r}: {where} returned a {type(document).__name__}, not a Haystack Document"
            )


class HaystackRetriever(_HaystackStage, Retriever):
    """A first stage wrapping a Haystack retriever component, alone or inside a Pipeline; see :func:`retriever`."""

    def __init__(
        self,
        obj: Any,
        *,
        name: str,
        component: str | None = None,
        k_param: str = "top_k",
        query_inputs: Sequence[str] | None = None,
        id_key: str | None = None,
        version: str | None = None,
    ) -> None:
        Retriever.__init__(self, name, version=version)
        _haystack()
        self.k_param, self.id_key = k_param, id_key
        self.pipeline: Any = None
        self.component_name = component
        if _is_pipeline(obj):
            if component is None:
                raise TypeError(f"stage {name!r}: a Haystack Pipeline needs component= naming the retriever in it")
            self.pipeline = obj
            self.wrapped = self._component(_get_component(name, obj, component), "retriever")
            self.query_inputs = self._pipeline_routes(query_inputs)
        else:
            if component is not None:
                raise TypeError(
                    f"stage {name!r}: component= names a component of a Haystack Pipeline; a "
                    f"{type(obj).__name__} is not one"
                )
            self.wrapped = self._component(obj, "retriever")
            self.query_inputs = self._component_routes(query_inputs)
        inputs = _sockets(self.wrapped, "__haystack_input__")
        if inputs is None or k_param not in inputs:
            declared = sorted(inputs) if inputs is not None else []
            raise TypeError(
                f"stage {name!r}: {type(self.wrapped).__name__}.run() declares no {k_param!r} input (it takes "
                f"{declared}), so the pipeline's depth cannot reach it; pass k_param= naming the input that sets how "
                f"many documents it returns, or wrap it in a component of your own that takes {k_param!r}"
            )
        if self.pipeline is not None and getattr(inputs[k_param], "senders", None):
            raise ValueError(
                f"stage {name!r}: the {k_param!r} input of {component!r} is fed by {inputs[k_param].senders} in the "
                f"pipeline, so the depth cannot reach it"
            )
        if self.pipeline is not None:
            self._native_async = callable(getattr(self.pipeline, "run_async", None))
        else:
            self._native_async = inspect.iscoroutinefunction(getattr(self.wrapped, "run_async", None))
        self._warm = threading.Lock()
        self._warmed = False

    # -- routing ---------------------------------------------------------------------------------------------

    def _component_routes(self, query_inputs: Sequence[str] | None) -> tuple[str, ...]:
        inputs = _sockets(self.wrapped, "__haystack_input__") or {}
        names = tuple(query_inputs) if query_inputs is not None else ("query",)
        if len(names) != 1 or names[0] not in inputs:
            hint = (
                " (an embedding retriever takes query_embedding: put it in a Haystack Pipeline after a text "
                "embedder and pass the pipeline with component=)"
                if "query_embedding" in inputs
                else ""
            )
            raise TypeError(
                f"stage {self.name!r}: {type(self.wrapped).__name__}.run() declares the inputs {sorted(inputs)}; "
                f"the query text needs one input to go to, and {list(names)} is not one of them{hint}"
            )
        return names

    def _pipeline_routes(self, query_inputs: Sequence[str] | None) -> tuple[str, ...]:
        open_inputs = self.pipeline.inputs()  # component -> {input: {"type", "is_mandatory", ...}}, none fed
        available = {f"{c}.{i}": d for c, sockets in open_inputs.items() for i, d in sockets.items()}
        if query_inputs is None:
            routes = tuple(
                sorted(
                    key
                    for key, d in available.items()
                    if key.rsplit(".", 1)[1] in QUERY_INPUT_NAMES and d.get("type") in (str, str | None)
                )
            )
            if not routes:
                raise ValueError(
                    f"stage {self.name!r}: no input of the pipeline that nothing feeds is named "
                    f"{' or '.join(QUERY_INPUT_NAMES)}; name where the query text goes with query_inputs= "
                    f"(one of {sorted(available)})"
                )
        else:
            routes = tuple(query_inputs)
            unknown = [r for r in routes if r not in available]
            if not routes or unknown:
                raise ValueError(
                    f"stage {self.name!r}: query_inputs {unknown or list(routes)} are not inputs of the pipeline that "
                    f"nothing feeds ({sorted(available)})"
                )
        given = {*routes, f"{self.component_name}.{self.k_param}"}
        missing = sorted(k for k, d in available.items() if d.get("is_mandatory") and k not in given)
        if missing:
            raise ValueError(
                f"stage {self.name!r}: the pipeline needs the inputs {missing}, which rag_eval cannot give (it gives "
                f"the query text to {list(routes)} and the depth to {self.component_name}.{self.k_param})"
            )
        return routes

    def _pipeline_data(self, query: str, k: int) -> dict[str, dict[str, Any]]:
        data: dict[str, dict[str, Any]] = {}
        for route in self.query_inputs:
            component, socket = route.rsplit(".", 1)
            data.setdefault(component, {})[socket] = query
        data.setdefault(str(self.component_name), {})[self.k_param] = k
        return data

    def _warm_up(self) -> None:
        """Warm the pipeline once (Haystack warms it on each run otherwise: threads would race to)."""
        with self._warm:
            if not self._warmed:
                self.pipeline.warm_up()
                self._warmed = True

    # -- fingerprint -------------------------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        return {
            "object": self._settings(),
            "component": self.component_name,
            "k_param": self.k_param,
            "query_inputs": list(self.query_inputs),
            "id_key": self.id_key,
            **({"content": self._content()} if self.version is None else {}),
        }

    def _components(self) -> dict[str, Any]:
        if self.pipeline is None:
            return {"": self.wrapped}
        return {n: self.pipeline.get_component(n) for n in sorted(self.pipeline.graph.nodes)}

    def _settings(self) -> Any:
        out = {n: _settings(c, self.k_param if c is self.wrapped else None) for n, c in self._components().items()}
        if self.pipeline is None:
            return out[""]
        return {"components": out, "connections": _connections(self.pipeline)}

    def _content(self) -> str:
        return _exact(self.name, self._components(), self.wrapped, self.k_param)

    # -- searching -----------------------------------------------------------------------------------------------

    @property
    def has_async(self) -> bool:
        return self._native_async

    def search(self, query: str, k: int) -> list[Hit]:
        if self.pipeline is None:
            out = self.wrapped.run(**{self.query_inputs[0]: query, self.k_param: k})
            return self._hits(out)
        self._warm_up()
        try:
            result = self.pipeline.run(self._pipeline_data(query, k), include_outputs_from={self.component_name})
        except Exception as exc:  # noqa: BLE001 - a component's own error raised as itself
            raise _cause(exc) from None
        return self._hits(result.get(str(self.component_name)))

    async def asearch(self, query: str, k: int) -> list[Hit]:
        if not self._native_async:
            return await asyncio.to_thread(self.search, query, k)
        if self.pipeline is None:
            return self._hits(await self.wrapped.run_async(**{self.query_inputs[0]: query, self.k_param: k}))
        await asyncio.to_thread(self._warm_up)
        try:
            result = await self.pipeline.run_async(
                self._pipeline_data(query, k), include_outputs_from={self.component_name}
            )
        except Exception as exc:  # noqa: BLE001 - as in search
            raise _cause(exc) from None
        return self._hits(result.get(str(self.component_name)))

    def _hits(self, out: Any) -> list[Hit]:
        where = "the retriever" if self.pipeline is None else f"the pipeline's component {self.component_name!r}"
        return [self._hit(document, where) for document in self._documents(out, where)]

    def _hit(self, document: Any, where: str) -> Hit:
        self._check_document(document, where)
        meta = document.meta if isinstance(document.meta, dict) else {}
        if self.id_key is not None:
            if self.id_key not in meta:
                raise ValueError(
                    f"stage {self.name!r}: a document has no meta[{self.id_key!r}] to read its id from (Document.id "
                    f"{document.id!r})"
                )
            doc_id = _as_id(self.name, meta[self.id_key])
        else:
            doc_id = _as_id(self.name, document.id)
        score = read_score(self.name, document.score, f"the score of document {doc_id!r}")
        return Hit(doc_id, score, document.content, None, MappingProxyType(jsonable(meta)))

    def __repr__(self) -> str:
        inside = f", in a Pipeline as {self.component_name!r}" if self.pipeline is not None else ""
        return f"HaystackRetriever({self.name!r}, {type(self.wrapped).__name__}{inside})"


class HaystackReranker(_HaystackStage, Reranker):
    """A later stage wrapping a Haystack ranker component; see :func:`reranker`."""

    def __init__(
        self,
        obj: Any,
        *,
        name: str,
        component: str | None = None,
        top_k: int | None = None,
        version: str | None = None,
    ) -> None:
        Reranker.__init__(self, name, version=version)
        _haystack()
        if _is_pipeline(obj):
            if component is None:
                raise TypeError(f"stage {name!r}: a Haystack Pipeline needs component= naming the ranker in it")
            obj = _get_component(name, obj, component)
        elif component is not None:
            raise TypeError(
                f"stage {name!r}: component= names a component of a Haystack Pipeline; a {type(obj).__name__} is "
                "not one"
            )
        self.ranker = self._component(obj, "ranker")
        inputs = _sockets(self.ranker, "__haystack_input__") or {}
        if "documents" not in inputs:
            raise TypeError(
                f"stage {name!r}: {type(self.ranker).__name__}.run() declares no 'documents' input (it takes "
                f"{sorted(inputs)}): a ranker is given the hits as documents"
            )
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
            raise ValueError(f"stage {name!r}: top_k must be None or an int of 1 or more, not {top_k!r}")
        if top_k is not None and "top_k" not in inputs:
            raise TypeError(f"stage {name!r}: top_k={top_k} given, but {type(self.ranker).__name__}.run() has no top_k")
        extra = sorted(
            n
            for n, socket in inputs.items()
            if n not in {"query", "documents", "top_k"} and getattr(socket, "is_mandatory", False)
        )
        if extra:
            raise TypeError(
                f"stage {name!r}: {type(self.ranker).__name__}.run() needs the inputs {extra}, which rag_eval cannot "
                f"give (it gives query, documents and top_k)"
            )
        self.takes_query = "query" in inputs
        self.top_k = top_k
        self._native_async = inspect.iscoroutinefunction(getattr(self.ranker, "run_async", None))

    def config(self) -> dict[str, Any]:
        return {
            "ranker": _settings(self.ranker, None),
            "top_k": self.top_k,
            **({"content": _exact(self.name, {"": self.ranker}, None, None)} if self.version is None else {}),
        }

    @property
    def has_async(self) -> bool:
        return self._native_async

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        given = list(hits)
        if not given:
            return []
        return self._map(given, self.ranker.run(**self._inputs(query, given)))

    async def arerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        given = list(hits)
        if not given:
            return []
        if not self._native_async:
            return await asyncio.to_thread(self.rerank, query, given)
        return self._map(given, await self.ranker.run_async(**self._inputs(query, given)))

    def _inputs(self, query: str, hits: list[Hit]) -> dict[str, Any]:
        from haystack import Document

        documents = [
            Document(id=hit.doc_id, content=hit.text, meta=metadata_copy(hit), score=hit.score) for hit in hits
        ]
        inputs: dict[str, Any] = {"documents": documents}
        if self.takes_query:
            inputs["query"] = query
        if self.top_k is not None:
            inputs["top_k"] = self.top_k
        return inputs

    def _map(self, given: list[Hit], out: Any) -> list[Hit]:
        by_id = {hit.doc_id: hit for hit in given}
        result = []
        for document in self._documents(out, "the ranker"):
            self._check_document(document, "the ranker")
            base = by_id.get(document.id) if isinstance(document.id, str) else None
            if base is None:
                raise ValueError(
                    f"stage {self.name!r}: the ranker returned document {document.id!r}, which it was not given"
                )
            score = read_score(self.name, document.score, f"the score of document {base.doc_id!r}")
            meta = MappingProxyType(jsonable(document.meta if isinstance(document.meta, dict) else {}))
            if document.content == base.text:
                result.append(Hit(base.doc_id, score, base.text, base.tokens, meta))
            else:  # the ranker rewrote the text
                result.append(Hit(base.doc_id, score, document.content, None, meta))
        return result

    def __repr__(self) -> str:
        return f"HaystackReranker({self.name!r}, {type(self.ranker).__name__})"


# -- helpers -------------------------------------------------------------------------------------------------------


def generator(
    obj: Any, *, name: str, component: str | None = None, prompt_input: str | None = None, version: str | None = None
) -> HaystackGenerator:
    """A generator from a Haystack generator component (``run(prompt=...)`` returning ``{"replies": [...]}``) or chat
    generator (``run(messages=[ChatMessage, ...])``: the prompt is sent as one user message), or the component named
    ``component`` of a Haystack ``Pipeline`` (run alone). The first reply is the answer (a str, or a
    ``ChatMessage``'s text); token counts are read from ``meta[0]["usage"]`` or the reply's own ``meta["usage"]``
    (``prompt_tokens``, ``completion_tokens``) where the component reports them. ``prompt_input``: the run input
    that takes the prompt (default ``prompt``, else ``messages``). ``version``: change it when the model behind the
    same settings changes."""
    return HaystackGenerator(obj, name=name, component=component, prompt_input=prompt_input, version=version)


class HaystackGenerator(Generator):
    """A generator wrapping a Haystack generator component; see :func:`generator`."""

    description = "a Haystack generator component"

    def __init__(
        self,
        obj: Any,
        *,
        name: str,
        component: str | None = None,
        prompt_input: str | None = None,
        version: str | None = None,
    ) -> None:
        super().__init__(name, version=version)
        _haystack()
        if _is_pipeline(obj):
            if component is None:
                raise TypeError(f"generator {name!r}: a Haystack Pipeline needs component= naming the generator in it")
            obj = _get_component(name, obj, component)
        inputs = _sockets(obj, "__haystack_input__")
        if not callable(getattr(obj, "run", None)) or inputs is None:
            raise TypeError(
                f"generator {name!r}: expected a Haystack component (a class decorated with @component) or a "
                f"Pipeline, not {type(obj).__name__}"
            )
        outputs = _sockets(obj, "__haystack_output__")
        if outputs is not None and "replies" not in outputs:
            raise TypeError(
                f"generator {name!r}: {type(obj).__name__} declares the outputs {sorted(outputs)}, not 'replies': "
                "rag_eval reads a generator's answer from its 'replies' output"
            )
        if prompt_input is None:  # a generator's prompt, else a chat generator's messages
            prompt_input = next((i for i in ("prompt", "messages") if i in inputs), None)
            if prompt_input is None:
                raise TypeError(
                    f"generator {name!r}: {type(obj).__name__} has neither a 'prompt' nor a 'messages' input (it has "
                    f"{sorted(inputs)}): name the one that takes the prompt with prompt_input="
                )
        if prompt_input not in inputs:
            raise TypeError(f"generator {name!r}: {type(obj).__name__} has no input {prompt_input!r} (prompt_input=)")
        self.component, self.prompt_input = obj, prompt_input
        self._as_message = None
        if prompt_input == "messages":  # a chat generator: the prompt as one user message
            from haystack.dataclasses import ChatMessage

            self._as_message = ChatMessage.from_user
        self._settings = without_secrets(_settings(obj, None))  # read now, as the component is when wrapped

    def config(self) -> dict[str, Any]:
        return {"component": self._settings, "prompt_input": self.prompt_input}

    def generate(self, prompt: str) -> Generation:
        value = prompt if self._as_message is None else [self._as_message(prompt)]
        out = self.component.run(**{self.prompt_input: value})
        replies = out.get("replies") if isinstance(out, dict) else None
        if not isinstance(replies, list) or not replies:
            raise TypeError(f"the component returned {out!r:.200}, not a dict with a non-empty 'replies' list")
        reply = replies[0]
        text = reply if isinstance(reply, str) else getattr(reply, "text", None)
        if not isinstance(text, str):
            raise TypeError(f"the component's reply is a {type(reply).__name__} without text: {reply!r:.200}")
        meta = out.get("meta")
        usage = meta[0].get("usage") if isinstance(meta, list) and meta and isinstance(meta[0], dict) else None
        if usage is None and not isinstance(reply, str):  # a ChatMessage carries its own meta
            usage = (getattr(reply, "meta", None) or {}).get("usage")
        counts = [usage.get(k) if isinstance(usage, dict) else None for k in ("prompt_tokens", "completion_tokens")]
        counts = [c if isinstance(c, int) and not isinstance(c, bool) and c >= 0 else None for c in counts]
        return Generation(text, counts[0], counts[1])

    def __repr__(self) -> str:
        return f"HaystackGenerator({self.name!r}, {type(self.component).__name__}, fingerprint={self.fingerprint!r})"


def _haystack() -> SimpleNamespace:
    """haystack-ai's classes the adapters recognise; without it, an ImportError naming the ``haystack`` extra."""
    core = require("haystack", extra="haystack", feature=FEATURE)
    stores = require("haystack.document_stores.in_memory", extra="haystack", feature=FEATURE)
    return SimpleNamespace(
        Pipeline=core.Pipeline, Document=core.Document, InMemoryDocumentStore=stores.InMemoryDocumentStore
    )


def _is_pipeline(obj: Any) -> bool:
    return isinstance(obj, _haystack().Pipeline)


def _get_component(stage_name: str, pipeline: Any, component: str) -> Any:
    if component not in pipeline.graph.nodes:
        raise ValueError(
            f"stage {stage_name!r}: the pipeline has no component {component!r} (it has {sorted(pipeline.graph.nodes)})"
        )
    return pipeline.get_component(component)


def _sockets(obj: Any, which: str) -> dict[str, Any] | None:
    """A component's declared inputs or outputs by name (the sockets ``@component`` builds from its ``run``), or
    None for an object that is not a component. Haystack 3.4's ``Sockets`` answers ``in`` and ``get`` but cannot be
    listed; its mapping is read, or else, for inputs, ``run``'s signature."""
    sockets = getattr(obj, which, None)
    if sockets is None:
        return None
    mapping = getattr(sockets, "_sockets_dict", None)
    if isinstance(mapping, dict):
        return mapping
    if which != "__haystack_input__":
        return None
    parameters = inspect.signature(obj.run).parameters.values()
    return {
        p.name: SimpleNamespace(name=p.name, is_mandatory=p.default is inspect.Parameter.empty, senders=[])
        for p in parameters
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    }


def _cause(exc: Exception) -> Exception:
    """The exception a component raised inside a Haystack pipeline (Haystack wraps it in PipelineRuntimeError),
    with Haystack's message added as a note; any other exception as it is."""
    from haystack.core.errors import PipelineRuntimeError

    cause = exc.__cause__
    if isinstance(exc, PipelineRuntimeError) and isinstance(cause, Exception):
        cause.add_note(f"raised inside the Haystack pipeline: {exc}")
        return cause
    return exc


def _settings(component: Any, k_param: str | None) -> Any:
    """A component's settings as Haystack serialises them (``component_to_dict``), without the ``top_k`` the
    adapter overrides or a document store's ``index`` (random unless given): readable, for the card and the key."""
    from haystack.core.serialization import component_to_dict

    try:
        data = component_to_dict(component, type(component).__name__)
    except Exception:  # noqa: BLE001 - a component Haystack cannot serialise: its class and plain settings
        return describe(component)
    data = jsonable(data)
    params = data.get("init_parameters") if isinstance(data, dict) else None
    if isinstance(params, dict):
        if k_param is not None:
            params.pop(k_param, None)
        store = params.get("document_store")
        if isinstance(store, dict) and isinstance(store.get("init_parameters"), dict):
            store["init_parameters"].pop("index", None)
    return data


def _connections(pipeline: Any) -> list[list[str]]:
    edges = pipeline.graph.edges(keys=True, data=True)
    return sorted(
        [str(a), str(b), str(d.get("from_socket").name), str(d.get("to_socket").name)] for a, b, _, d in edges
    )


def _exact(stage_name: str, components: dict[str, Any], overridden: Any, k_param: str | None) -> str:
    """The exact fingerprint of components: each one's class (code, for a class of the user's) and whole state
    (the ``top_k`` the adapter overrides and @component's bookkeeping left out), its document store by content.
    ``Uncacheable`` (asking for ``version=``) when some of it cannot be described exactly."""
    described = {}
    for name, component in components.items():
        state = {
            k: v
            for k, v in vars(component).items()
            if k not in _COMPONENT_BOOKKEEPING
            and k != "document_store"
            and not (component is overridden and k == k_param)
        }
        store = getattr(component, "document_store", None)
        described[name] = {
            "class": type(component),
            "state": state,
            "store": None if store is None else _store_content(stage_name, component, store),
        }
    return content(described, stage_name, also_ignore=_COMPONENT_BOOKKEEPING)


def _store_content(stage_name: str, component: Any, store: Any) -> str:
    """An ``InMemoryDocumentStore``'s documents by content (and its settings but its index name), hashed; any
    other store is ``Uncacheable``: its content lives elsewhere and reading it all would cost a full scan."""
    if not isinstance(store, _haystack().InMemoryDocumentStore):
        raise Uncacheable(
            f"stage {stage_name!r}: the {type(store).__name__} behind {type(component).__name__} holds documents "
            "rag_eval cannot describe by content (only an InMemoryDocumentStore's are read); pass version='...' "
            "(and change it when the index changes) to cache it"
        )
    digest = hashlib.sha256()
    settings = jsonable(store.to_dict())
    settings.get("init_parameters", {}).pop("index", None)
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for document in sorted(store.filter_documents(), key=lambda d: d.id):
        digest.update(_document_bytes(document))
    return digest.hexdigest()


def _document_bytes(document: Any) -> bytes:
    """One stored document's content as bytes: id, text, metadata, embedding (exact floats), blob, sparse."""
    head = json.dumps(
        [document.id, document.content, jsonable(document.meta)], sort_keys=True, ensure_ascii=False
    ).encode()
    parts = [head]
    if document.embedding is not None:
        parts.append(b"E" + np.asarray(document.embedding, dtype=np.float64).tobytes())
    sparse = getattr(document, "sparse_embedding", None)
    if sparse is not None:
        parts.append(b"S" + json.dumps([list(sparse.indices), list(sparse.values)]).encode())
    blob = getattr(document, "blob", None)
    if blob is not None:
        parts.append(b"B" + str(blob.mime_type).encode() + b"\x00" + bytes(blob.data))
    return b"".join(len(p).to_bytes(8, "big") + p for p in parts)


def _as_id(stage_name: str, value: Any) -> str:
    """A document id as the report's str: a str as it is, an int (a NumPy one too) as its decimal string, a UUID
    as its canonical string (``str(uuid)``), as the other adapters read them; anything else is an error."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(
        f"stage {stage_name!r}: a document id must be a non-empty str, an int or a UUID, not {type(value).__name__} "
        f"({value!r})"
    )
