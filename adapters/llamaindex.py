"""LlamaIndex retrievers and node postprocessors as stages.

k, hits, rerankers, async, batches, fingerprints and judges: ``docs/adapters.md``, "LlamaIndex". llama_index is
imported when an adapter is built or called."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import MappingProxyType, SimpleNamespace
from typing import Any

from .._optional import require
from ..stages import Fingerprint, Hit, Reranker, Retriever, Uncacheable
from ..stages.generator import Generation, Generator
from ..stages.judges import without_secrets
from ._common import describe, jsonable, metadata_copy, read_score, returned_items
from ._judging import Answer, PromptJudge

__all__ = [
    "LlamaIndexGenerator",
    "LlamaIndexJudge",
    "LlamaIndexReranker",
    "LlamaIndexRetriever",
    "generator",
    "judge",
    "reranker",
    "retriever",
]

FEATURE = "rag_eval.adapters.llamaindex"  # what the ImportError names when llama-index-core is not installed
SOURCE_KEY, START_KEY, END_KEY = "source_doc_id", "start_char", "end_char"


def retriever(obj: Any, *, name: str, version: str | None = None) -> LlamaIndexRetriever:
    """A first stage from a LlamaIndex ``BaseRetriever`` (``retrieve``/``aretrieve``). LlamaIndex retrievers take
    k at construction (``similarity_top_k``): build yours with at least the pipeline's depth; the runner keeps the
    first ``depth`` hits of what it returns."""
    return LlamaIndexRetriever(obj, name=name, version=version)


def reranker(postprocessor: Any, *, name: str, version: str | None = None) -> LlamaIndexReranker:
    """A later stage from a LlamaIndex ``BaseNodePostprocessor`` (``postprocess_nodes(nodes, query_str=...)``),
    given fresh nodes built from the hits on each call."""
    return LlamaIndexReranker(postprocessor, name=name, version=version)


def judge(
    llm: Any,
    *,
    name: str | None = None,
    prompt: str | None = None,
    timeout: float | None = None,
    max_concurrency: int | None = None,
    version: str | None = None,
) -> LlamaIndexJudge:
    """A judge from a LlamaIndex LLM (``llama_index.core.llms.LLM``: ``complete``/``acomplete``).

    ``name``: the judge's name in the judgement log (default: the LLM's ``model``/``model_name`` field, else its
    class name). ``prompt``, ``timeout``, ``max_concurrency`` (calls at once, default 4), ``version``: as for
    :func:`rag_eval.adapters.langchain.judge`."""
    return LlamaIndexJudge(
        llm, name=name, prompt=prompt, timeout=timeout, max_concurrency=max_concurrency, version=version
    )


class LlamaIndexJudge(PromptJudge):
    """A judge wrapping a LlamaIndex LLM; see :func:`judge`."""

    description = "a LlamaIndex LLM prompted per item"

    def __init__(
        self,
        llm: Any,
        *,
        name: str | None = None,
        prompt: str | None = None,
        timeout: float | None = None,
        max_concurrency: int | None = None,
        version: str | None = None,
    ) -> None:
        base = require("llama_index.core.llms", extra="llamaindex", feature=FEATURE).LLM
        if not isinstance(llm, base):
            raise TypeError(f"a LlamaIndex judge needs a llama_index.core.llms.LLM, not {type(llm).__name__}")
        self.llm = llm
        label = next(
            (
                v.strip()
                for v in (getattr(llm, f, None) for f in ("model", "model_name"))
                if isinstance(v, str) and v.strip()
            ),
            type(llm).__name__,
        )
        super().__init__(
            label if name is None else name,
            prompt=prompt,
            timeout=timeout,
            max_concurrency=max_concurrency,
            version=version,
        )
        _ = self.fingerprint  # read now, as the LLM is when the judge is built

    def model_config(self) -> Any:
        return without_secrets(describe(self.llm))

    @property
    def has_async(self) -> bool:
        return True

    def _invoke(self, prompt: str) -> Answer:
        return self.llm.complete(prompt)

    async def _ainvoke(self, prompt: str) -> Answer:
        return await self.llm.acomplete(prompt)

    def _text(self, answer: Answer) -> str:
        text = getattr(answer, "text", None)
        if not isinstance(text, str):
            raise TypeError(f"the LLM answered a {type(answer).__name__} without text: {answer!r:.200}")
        return text

    def __repr__(self) -> str:
        return f"LlamaIndexJudge({self.name!r}, {type(self.llm).__name__}, fingerprint={self.fingerprint!r})"


def generator(llm: Any, *, name: str | None = None, version: str | None = None) -> LlamaIndexGenerator:
    """A generator from a LlamaIndex LLM (``llama_index.core.llms.LLM``): ``complete(prompt)``, the response's
    ``text``; token counts where the response's ``raw`` carries an OpenAI-style ``usage`` (``prompt_tokens``,
    ``completion_tokens``). ``name``: default the LLM's ``model``/``model_name``; ``version``: as for :func:`judge`."""
    return LlamaIndexGenerator(llm, name=name, version=version)


class LlamaIndexGenerator(Generator):
    """A generator wrapping a LlamaIndex LLM; see :func:`generator`."""

    description = "a LlamaIndex LLM"

    def __init__(self, llm: Any, *, name: str | None = None, version: str | None = None) -> None:
        base = require("llama_index.core.llms", extra="llamaindex", feature=FEATURE).LLM
        if not isinstance(llm, base):
            raise TypeError(f"a LlamaIndex generator needs a llama_index.core.llms.LLM, not {type(llm).__name__}")
        self.llm = llm
        label = next(
            (
                v.strip()
                for v in (getattr(llm, f, None) for f in ("model", "model_name"))
                if isinstance(v, str) and v.strip()
            ),
            type(llm).__name__,
        )
        super().__init__(label if name is None else name, version=version)
        self._model_config = without_secrets(describe(llm))  # read now, as the LLM is when the generator is built

    def config(self) -> dict[str, Any]:
        return {"model": self._model_config}

    def generate(self, prompt: str) -> Generation:
        response = self.llm.complete(prompt)
        text = getattr(response, "text", None)
        if not isinstance(text, str):
            raise TypeError(f"the LLM answered a {type(response).__name__} without text: {response!r:.200}")
        raw = getattr(response, "raw", None)
        usage = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
        if usage is not None and not isinstance(usage, dict):
            usage = {k: getattr(usage, k, None) for k in ("prompt_tokens", "completion_tokens")}
        counts = [(usage or {}).get(k) for k in ("prompt_tokens", "completion_tokens")]
        counts = [c if isinstance(c, int) and not isinstance(c, bool) and c >= 0 else None for c in counts]
        return Generation(text, counts[0], counts[1])

    def __repr__(self) -> str:
        return f"LlamaIndexGenerator({self.name!r}, {type(self.llm).__name__}, fingerprint={self.fingerprint!r})"


class LlamaIndexRetriever(Retriever):
    """A first stage wrapping a LlamaIndex retriever; see :func:`retriever`."""

    def __init__(self, obj: Any, *, name: str, version: str | None = None) -> None:
        super().__init__(name, version=version)
        base = _llama_index().BaseRetriever
        if not isinstance(obj, base):
            raise TypeError(f"stage {name!r}: expected a LlamaIndex BaseRetriever, not {type(obj).__name__}")
        self.wrapped = obj
        # only _aretrieve tells: LlamaIndex's instrumentation re-wraps aretrieve in every subclass
        self._native_async = type(obj)._aretrieve is not base._aretrieve

    def config(self) -> dict[str, Any]:
        return {"retriever": describe(self.wrapped)}

    def code(self) -> Fingerprint | None:
        """A LlamaIndex retriever's outputs depend on its index, which its settings do not describe (two indexes
        of the same size share every setting): without ``version=`` it refuses to be cached rather than be keyed
        by a partial description."""
        raise Uncacheable(
            f"stage {self.name!r}: the index behind a LlamaIndex retriever ({type(self.wrapped).__name__}) cannot be "
            "described exactly by its settings; pass version='...' (and change it when the index changes) to cache it"
        )

    @property
    def has_async(self) -> bool:
        return self._native_async

    def search(self, query: str, k: int) -> list[Hit]:
        return self._hits(self.wrapped.retrieve(query))

    async def asearch(self, query: str, k: int) -> list[Hit]:
        if self._native_async:
            return self._hits(await self.wrapped.aretrieve(query))
        return self._hits(await asyncio.to_thread(self.wrapped.retrieve, query))

    def _hits(self, returned: Any) -> list[Hit]:
        return [_hit(self.name, item) for item in returned_items(self.name, returned, "the retriever")]

    def __repr__(self) -> str:
        return f"LlamaIndexRetriever({self.name!r}, {type(self.wrapped).__name__})"


class LlamaIndexReranker(Reranker):
    """A later stage wrapping a LlamaIndex node postprocessor; see :func:`reranker`."""

    def __init__(self, postprocessor: Any, *, name: str, version: str | None = None) -> None:
        super().__init__(name, version=version)
        if not isinstance(postprocessor, _llama_index().BaseNodePostprocessor):
            raise TypeError(
                f"stage {name!r}: expected a LlamaIndex BaseNodePostprocessor, not {type(postprocessor).__name__}"
            )
        self.postprocessor = postprocessor

    def config(self) -> dict[str, Any]:
        return {"postprocessor": describe(self.postprocessor)}

    @property
    def has_async(self) -> bool:
        return True  # apostprocess_nodes: native, or LlamaIndex's own thread

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        given = list(hits)
        if not given:
            return []
        return self._map(given, self.postprocessor.postprocess_nodes(_nodes(given), query_str=query))

    async def arerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        given = list(hits)
        if not given:
            return []
        return self._map(given, await self.postprocessor.apostprocess_nodes(_nodes(given), query_str=query))

    def _map(self, given: list[Hit], returned: Any) -> list[Hit]:
        by_id = {hit.doc_id: hit for hit in given}
        out = []
        for item in returned_items(self.name, returned, "the postprocessor"):
            new = _hit(self.name, item)
            base = by_id.get(new.doc_id)
            if base is None:
                raise ValueError(
                    f"stage {self.name!r}: the postprocessor returned node {new.doc_id!r}, which it was not given"
                )
            if new.text == (base.text or ""):  # unchanged: keep the hit's own text (or its absence) and tokens
                out.append(Hit(base.doc_id, new.score, base.text, base.tokens, new.metadata))
            else:  # the postprocessor rewrote the text (an extractor, a sentence optimiser)
                out.append(Hit(base.doc_id, new.score, new.text, None, new.metadata))
        return out

    def __repr__(self) -> str:
        return f"LlamaIndexReranker({self.name!r}, {type(self.postprocessor).__name__})"


def _llama_index() -> SimpleNamespace:
    """llama-index-core's base classes; without it, an ImportError naming the ``llamaindex`` extra."""
    retrievers = require("llama_index.core.base.base_retriever", extra="llamaindex", feature=FEATURE)
    postprocessors = require("llama_index.core.postprocessor.types", extra="llamaindex", feature=FEATURE)
    return SimpleNamespace(
        BaseRetriever=retrievers.BaseRetriever, BaseNodePostprocessor=postprocessors.BaseNodePostprocessor
    )


def _hit(stage_name: str, item: Any) -> Hit:
    from llama_index.core.schema import MetadataMode

    node = getattr(item, "node", None)
    if node is None or not hasattr(item, "score"):
        raise TypeError(f"stage {stage_name!r}: expected LlamaIndex NodeWithScore items, got {type(item).__name__}")
    doc_id = node.node_id
    score = read_score(stage_name, item.score, f"the score of node {doc_id!r}")
    return Hit(doc_id, score, node.get_content(metadata_mode=MetadataMode.NONE), None, _metadata(node))


def _metadata(node: Any) -> MappingProxyType:
    metadata = jsonable(dict(node.metadata or {}))
    source = node.source_node  # what the (deprecated) ref_doc_id property reads
    if source is not None:
        metadata[SOURCE_KEY] = source.node_id
    for key, value in ((START_KEY, node.start_char_idx), (END_KEY, node.end_char_idx)):
        if value is not None:
            metadata[key] = value
    return MappingProxyType(metadata)


def _nodes(hits: list[Hit]) -> list[Any]:
    """New nodes carrying what the hits know: the postprocessor may write into them freely."""
    from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode

    nodes = []
    for hit in hits:
        metadata = metadata_copy(hit)
        source, start, end = metadata.pop(SOURCE_KEY, None), metadata.pop(START_KEY, None), metadata.pop(END_KEY, None)
        node = TextNode(
            id_=hit.doc_id,
            text=hit.text or "",
            metadata=metadata,
            start_char_idx=start if isinstance(start, int) else None,
            end_char_idx=end if isinstance(end, int) else None,
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=source)} if isinstance(source, str) else {},
        )
        nodes.append(NodeWithScore(node=node, score=hit.score))
    return nodes
