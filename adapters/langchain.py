"""LangChain retrievers, vector stores and document compressors as stages.

Rank, doc ids, k, rerankers, batches, fingerprints and judges: ``docs/adapters.md``, "LangChain". langchain-core is
imported when an adapter is built; langchain-classic never."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import MappingProxyType, SimpleNamespace
from typing import Any

from .._optional import require
from ..stages import Hit, Pipeline, Reranker, Retriever, fuse
from ..stages.generator import Generation, Generator
from ..stages.judges import without_secrets
from ._common import content, describe, jsonable, metadata_copy, read_score, returned_items, settled
from ._common import max_concurrency as _max_concurrency
from ._judging import Answer, PromptJudge

__all__ = [
    "LangChainGenerator",
    "LangChainJudge",
    "LangChainReranker",
    "LangChainRetriever",
    "generator",
    "judge",
    "pipeline",
    "reranker",
    "retriever",
]

FEATURE = "rag_eval.adapters.langchain"  # what the ImportError names when langchain-core is not installed
POSITION_KEY = "__rag_eval_position__"  # the private metadata tag a reranker's input documents carry


def retriever(
    obj: Any,
    *,
    name: str,
    k_param: str | None = None,
    score_key: str = "relevance_score",
    id_key: str | None = None,
    with_scores: bool = False,
    version: str | None = None,
    max_concurrency: int | None = None,
) -> LangChainRetriever:
    """A first stage from a LangChain ``BaseRetriever`` (``invoke``/``ainvoke``), any Runnable returning
    documents, or a ``VectorStore`` (``as_retriever()``; with ``with_scores=True``,
    ``similarity_search_with_score(query, k=k)``, also reachable from a similarity ``VectorStoreRetriever``).

    ``k_param``: the name of the retriever's field, or of the ``invoke`` keyword, that sets how many documents it
    returns (found by itself for ``search_kwargs`` retrievers and ``k`` fields). ``score_key``: the metadata key
    holding a score. ``id_key``: the metadata key holding the chunk id, when ``Document.id`` is not set.
    ``version``: bump it to invalidate the cache when the index changes. ``max_concurrency``: how many queries
    of a batch LangChain runs at once (``batch``'s config; None: LangChain's default, a thread pool of its own
    size for ``batch``, every query at once for ``abatch``); it never changes results, so it is not in the
    fingerprint.
    """
    return LangChainRetriever(
        obj,
        name=name,
        k_param=k_param,
        score_key=score_key,
        id_key=id_key,
        with_scores=with_scores,
        version=version,
        max_concurrency=max_concurrency,
    )


def reranker(
    compressor: Any,
    *,
    name: str,
    score_key: str = "relevance_score",
    version: str | None = None,
) -> LangChainReranker:
    """A later stage from a LangChain ``BaseDocumentCompressor`` (``compress_documents(documents, query)``). The
    new score is ``metadata[score_key]`` of what it returns, when present."""
    return LangChainReranker(compressor, name=name, score_key=score_key, version=version)


def pipeline(
    obj: Any,
    *,
    depth: int = 100,
    budget: int | str = 5,
    name: str | None = None,
    id_key: str | None = None,
    score_key: str = "relevance_score",
) -> Pipeline:
    """A :class:`~rag_eval.stages.Pipeline` unfolded from a LangChain retriever, so that each part is a stage
    judged on its own:

    - a ``ContextualCompressionRetriever`` becomes its ``base_retriever`` (unfolded in turn) followed by a reranker
      for its ``base_compressor``;
    - an ``EnsembleRetriever`` becomes a fused first stage: reciprocal rank fusion of its retrievers with its
      ``weights`` and its ``c`` as the rrf constant. LangChain merges documents with equal text (unless its
      ``id_key`` is set); the fused stage merges by doc id;
    - anything else becomes a one-stage pipeline.

    Each retriever is asked for ``depth`` candidates, whatever ``k`` the LangChain object was configured with.
    Stage names are the wrapped objects' names (or class names), prefixed by ``name + "/"`` when given.
    ``id_key`` defaults to the ``EnsembleRetriever``'s own.
    """
    prefix = f"{name}/" if name else ""
    first, rerankers = _unfold(obj, prefix, id_key, score_key)
    return Pipeline(first, *rerankers, depth=depth, budget=budget)


def judge(
    chat_model: Any,
    *,
    name: str | None = None,
    prompt: str | None = None,
    timeout: float | None = None,
    max_concurrency: int | None = None,
    version: str | None = None,
) -> LangChainJudge:
    """A judge from a LangChain chat model (a ``BaseChatModel``; a plain ``BaseLLM`` answering text also works).

    ``name``: the judge's name in the judgement log (default: the model's ``model_name``/``model`` field, else its
    class name). ``prompt``: a template with ``{query}`` and ``{passage}`` (and optionally ``{low}``, ``{high}``,
    ``{meanings}``); default :data:`~rag_eval.stages.judges.UMBRELA_PROMPT`. ``timeout``: seconds each call may
    take before its item fails. ``max_concurrency``: calls at once within a batch (LangChain's ``max_concurrency``).
    ``version``: recorded in the fingerprint (change it when the model behind the same settings changes)."""
    return LangChainJudge(
        chat_model, name=name, prompt=prompt, timeout=timeout, max_concurrency=max_concurrency, version=version
    )


class LangChainJudge(PromptJudge):
    """A judge wrapping a LangChain chat model; see :func:`judge`."""

    description = "a LangChain chat model prompted per item"

    def __init__(
        self,
        chat_model: Any,
        *,
        name: str | None = None,
        prompt: str | None = None,
        timeout: float | None = None,
        max_concurrency: int | None = None,
        version: str | None = None,
    ) -> None:
        base = require("langchain_core.language_models", extra="langchain", feature=FEATURE).BaseLanguageModel
        if not isinstance(chat_model, base):
            raise TypeError(f"a LangChain judge needs a BaseChatModel, not {type(chat_model).__name__}")
        self.model = chat_model
        super().__init__(
            _model_name(chat_model) if name is None else name,
            prompt=prompt,
            timeout=timeout,
            max_concurrency=max_concurrency,
            version=version,
        )
        _ = self.fingerprint  # read now: a model's state may change as it answers (a fake model's counter)

    def model_config(self) -> Any:
        return without_secrets(describe(self.model))

    @property
    def has_async(self) -> bool:
        return True

    def _config(self) -> dict[str, Any]:
        return {} if self.max_concurrency is None else {"max_concurrency": self.max_concurrency}

    def _invoke(self, prompt: str) -> Answer:
        return self.model.invoke(prompt)

    async def _ainvoke(self, prompt: str) -> Answer:
        return await self.model.ainvoke(prompt)

    def _batch(self, prompts: list[str]) -> list[Answer]:
        try:
            answers = list(self.model.batch(prompts, config=self._config(), return_exceptions=True))
        except Exception:  # noqa: BLE001 - a batch raising whole (some models ignore return_exceptions): one by one
            answers = []
        if len(answers) == len(prompts):
            return answers
        out: list[Answer] = []
        for prompt in prompts:
            try:
                out.append(self.model.invoke(prompt))
            except Exception as exc:  # noqa: BLE001 - the item's fault
                out.append(exc)
        return out

    async def _abatch(self, prompts: list[str]) -> list[Answer]:
        try:
            answers = list(await self.model.abatch(prompts, config=self._config(), return_exceptions=True))
        except Exception:  # noqa: BLE001 - as in _batch
            answers = []
        if len(answers) == len(prompts):
            return answers
        return await self._gathered(prompts, None)

    def _text(self, answer: Answer) -> str:
        content = getattr(answer, "content", answer)
        if isinstance(content, str):
            return content
        if isinstance(content, list):  # content blocks: the text ones, in order
            parts = [b if isinstance(b, str) else b.get("text") for b in content if isinstance(b, (str, dict))]
            if parts and all(isinstance(p, str) for p in parts):
                return "".join(str(p) for p in parts)
        raise TypeError(f"the model answered a {type(answer).__name__} without text content: {content!r:.200}")

    def __repr__(self) -> str:
        return f"LangChainJudge({self.name!r}, {type(self.model).__name__}, fingerprint={self.fingerprint!r})"


def generator(
    chat_model: Any, *, name: str | None = None, max_concurrency: int | None = None, version: str | None = None
) -> LangChainGenerator:
    """A generator from a LangChain chat model (a ``BaseChatModel``; a ``BaseLLM`` answering text also works): each
    prompt sent as one human message, the answer's text content read back, its ``usage_metadata`` token counts
    kept where the model reports them. A batch goes through the model's own ``batch`` (``max_concurrency`` calls at
    once). ``name``: default the model's ``model_name``/``model``; ``version``: as for :func:`judge`."""
    return LangChainGenerator(chat_model, name=name, max_concurrency=max_concurrency, version=version)


class LangChainGenerator(Generator):
    """A generator wrapping a LangChain chat model; see :func:`generator`."""

    description = "a LangChain chat model"

    def __init__(
        self,
        chat_model: Any,
        *,
        name: str | None = None,
        max_concurrency: int | None = None,
        version: str | None = None,
    ) -> None:
        base = require("langchain_core.language_models", extra="langchain", feature=FEATURE).BaseLanguageModel
        if not isinstance(chat_model, base):
            raise TypeError(f"a LangChain generator needs a BaseChatModel, not {type(chat_model).__name__}")
        self.model = chat_model
        super().__init__(_model_name(chat_model) if name is None else name, version=version)
        self.max_concurrency = _max_concurrency(self.name, max_concurrency)
        self._model_config = without_secrets(describe(chat_model))  # read now: a model's state may change as it answers

    def config(self) -> dict[str, Any]:
        return {"model": self._model_config}

    def generate(self, prompt: str) -> Generation:
        return _generation(self.model.invoke(prompt))

    def generate_batch(self, prompts: Sequence[str]) -> Sequence[str | Generation | BaseException]:
        config = {} if self.max_concurrency is None else {"max_concurrency": self.max_concurrency}
        answers = list(self.model.batch(list(prompts), config=config, return_exceptions=True))
        out: list[str | Generation | BaseException] = []
        for answer in answers:
            try:
                out.append(answer if isinstance(answer, BaseException) else _generation(answer))
            except TypeError as exc:
                out.append(exc)
        return out

    def __repr__(self) -> str:
        return f"LangChainGenerator({self.name!r}, {type(self.model).__name__}, fingerprint={self.fingerprint!r})"


def _generation(answer: Any) -> Generation:
    """A chat model's message (or an LLM's str) as a Generation: its text content, and the token counts of its
    ``usage_metadata`` where present."""
    content = getattr(answer, "content", answer)
    if isinstance(content, list):  # content blocks: the text ones, in order
        parts = [b if isinstance(b, str) else b.get("text") for b in content if isinstance(b, (str, dict))]
        content = "".join(str(p) for p in parts) if parts and all(isinstance(p, str) for p in parts) else None
    if not isinstance(content, str):
        raise TypeError(f"the model answered a {type(answer).__name__} without text content: {answer!r:.200}")
    usage = getattr(answer, "usage_metadata", None) or {}
    counts = [usage.get(k) if isinstance(usage, dict) else None for k in ("input_tokens", "output_tokens")]
    counts = [c if isinstance(c, int) and not isinstance(c, bool) and c >= 0 else None for c in counts]
    return Generation(content, counts[0], counts[1])


def _model_name(model: Any) -> str:
    for field in ("model_name", "model", "model_id"):
        value = getattr(model, field, None)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return type(model).__name__


class LangChainRetriever(Retriever):
    """A first stage wrapping a LangChain retriever or vector store; see :func:`retriever`."""

    def __init__(
        self,
        obj: Any,
        *,
        name: str,
        k_param: str | None = None,
        score_key: str = "relevance_score",
        id_key: str | None = None,
        with_scores: bool = False,
        version: str | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        super().__init__(name, version=version)
        core = _langchain_core()
        self.score_key, self.id_key, self.with_scores = score_key, id_key, with_scores
        self.max_concurrency = _max_concurrency(name, max_concurrency)
        self._runnable_lambda = core.RunnableLambda
        self._extra: dict[str, Any] = {}  # other keywords for similarity_search_with_score
        self._copies: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._k_param: str | None  # how k reaches the retriever (see _k_route): a keyword or field name, or none
        self._k_via: str | None
        if with_scores:
            if isinstance(obj, core.VectorStore):
                self.wrapped = obj
            elif isinstance(getattr(obj, "vectorstore", None), core.VectorStore) and isinstance(
                getattr(obj, "search_kwargs", None), dict
            ):
                if getattr(obj, "search_type", "similarity") != "similarity":
                    raise ValueError(
                        f"stage {name!r}: with_scores=True calls similarity_search_with_score, which would not do "
                        f"this retriever's search_type {obj.search_type!r}; use with_scores=False"
                    )
                self.wrapped = obj.vectorstore
                self._extra = {k: v for k, v in obj.search_kwargs.items() if k != (k_param or "k")}
            else:
                raise TypeError(
                    f"stage {name!r}: with_scores=True reads scores from a VectorStore's similarity_search_with_score;"
                    f" a {type(obj).__name__} is not a vector store (pass the store, or with_scores=False)"
                )
            self._k_param, self._k_via = k_param or "k", "keyword"
        else:
            if isinstance(obj, core.VectorStore):
                obj = obj.as_retriever()
            if not isinstance(obj, core.Runnable):
                raise TypeError(
                    f"stage {name!r}: expected a LangChain BaseRetriever, Runnable or VectorStore, "
                    f"not {type(obj).__name__}"
                )
            self.wrapped = obj
            self._k_param, self._k_via = _k_route(obj, k_param, name)

    def config(self) -> dict[str, Any]:
        wrapped = describe(self.wrapped)
        fields = wrapped.get("fields") if isinstance(wrapped, dict) else None
        if isinstance(fields, dict) and self._k_param is not None:  # the k we override is not configuration
            if self._k_via == "field":
                fields.pop(self._k_param, None)
            elif isinstance(fields.get("search_kwargs"), dict):
                fields["search_kwargs"].pop(self._k_param, None)
        return {
            "object": wrapped,
            "with_scores": self.with_scores,
            "k_param": self._k_param,
            "k_via": self._k_via,
            "score_key": self.score_key,
            "id_key": self.id_key,
            "extra": describe(self._extra),
            **({"content": content([self._without_k(), self._extra], self.name)} if self.version is None else {}),
        }

    def _without_k(self) -> Any:
        """The wrapped object with the k this adapter overrides left out (a shallow copy), for its fingerprint."""
        target = self.wrapped
        if self._k_param is None or not hasattr(target, "model_copy"):
            return target
        if self._k_via == "field":
            return target.model_copy(update={self._k_param: None})
        search_kwargs = getattr(target, "search_kwargs", None)
        if isinstance(search_kwargs, dict):
            kept = {k: v for k, v in search_kwargs.items() if k != self._k_param}
            return target.model_copy(update={"search_kwargs": kept})
        return target

    @property
    def has_async(self) -> bool:
        return True  # ainvoke / asimilarity_search_with_score: native, or LangChain's own executor

    def search(self, query: str, k: int) -> list[Hit]:
        if self.with_scores:
            pairs = self.wrapped.similarity_search_with_score(query, **self._k_keyword(k), **self._extra)
            return self._scored(pairs)
        target, kwargs = self._target(k)
        return self._hits(target.invoke(query, **kwargs))

    async def asearch(self, query: str, k: int) -> list[Hit]:
        if self.with_scores:
            pairs = await self.wrapped.asimilarity_search_with_score(query, **self._k_keyword(k), **self._extra)
            return self._scored(pairs)
        target, kwargs = self._target(k)
        return self._hits(await target.ainvoke(query, **kwargs))

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """The retriever's ``batch`` (see the module's rules); each query's documents checked as in :meth:`search`."""
        queries = list(queries)
        if self.with_scores:
            pairs = self._scored_runnable(k).batch(queries, config=self._batch_config(), return_exceptions=True)
            return settled(pairs, self._scored)
        target, kwargs = self._target(k)
        answers = target.batch(queries, config=self._batch_config(), return_exceptions=True, **kwargs)
        return settled(answers, self._hits)

    async def asearch_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """The retriever's ``abatch``; see :meth:`search_batch`."""
        queries = list(queries)
        if self.with_scores:
            runnable = self._scored_runnable(k)
            pairs = await runnable.abatch(queries, config=self._batch_config(), return_exceptions=True)
            return settled(pairs, self._scored)
        target, kwargs = self._target(k)
        answers = await target.abatch(queries, config=self._batch_config(), return_exceptions=True, **kwargs)
        return settled(answers, self._hits)

    def _batch_config(self) -> dict[str, Any]:
        return {} if self.max_concurrency is None else {"max_concurrency": self.max_concurrency}

    def _scored_runnable(self, k: int) -> Any:
        """``similarity_search_with_score`` (and its async twin) as a LangChain Runnable, for its ``batch``."""
        store, keywords = self.wrapped, {**self._k_keyword(k), **self._extra}

        def call(query: str) -> Any:
            return store.similarity_search_with_score(query, **keywords)

        async def acall(query: str) -> Any:
            return await store.asimilarity_search_with_score(query, **keywords)

        return self._runnable_lambda(call, afunc=acall)

    def _k_keyword(self, k: int) -> dict[str, int]:
        """k as the keyword argument it travels in (a keyword route always has its parameter's name)."""
        return {} if self._k_param is None else {self._k_param: k}

    def _target(self, k: int) -> tuple[Any, dict[str, Any]]:
        if self._k_via == "keyword":
            return self.wrapped, self._k_keyword(k)
        if self._k_via == "field":
            with self._lock:  # one shallow copy per k (a run uses one depth), shared by the runner's threads
                copy = self._copies.get(k)
                if copy is None:
                    copy = self._copies[k] = self.wrapped.model_copy(update={self._k_param: k})
            return copy, {}
        return self.wrapped, {}

    def _scored(self, pairs: Any) -> list[Hit]:
        out = []
        for pair in returned_items(self.name, pairs, "similarity_search_with_score"):
            document, score = pair
            out.append(self._hit(document, read_score(self.name, score, "similarity_search_with_score")))
        return out

    def _hits(self, documents: Any) -> list[Hit]:
        out = []
        for document in returned_items(self.name, documents, "the retriever"):
            score = _metadata(self.name, document).get(self.score_key)
            out.append(self._hit(document, read_score(self.name, score, f"metadata[{self.score_key!r}] of a document")))
        return out

    def _hit(self, document: Any, score: float | None) -> Hit:
        metadata = _metadata(self.name, document)
        if self.id_key is not None:
            if self.id_key not in metadata:
                raise ValueError(
                    f"stage {self.name!r}: a document has no metadata[{self.id_key!r}] to read its id from "
                    f"(its text starts {_start(document)!r})"
                )
            doc_id = _as_id(self.name, metadata[self.id_key])
        elif getattr(document, "id", None) is None:
            raise ValueError(
                f"stage {self.name!r}: the retriever returned a document without an id (Document.id is None; its "
                f"text starts {_start(document)!r}). Set id_key= to the metadata key that holds your chunk ids, "
                f"or give the documents ids when you index them"
            )
        else:
            doc_id = _as_id(self.name, document.id)
        return Hit(doc_id, score, document.page_content, None, _hit_metadata(metadata))

    def __repr__(self) -> str:
        return f"LangChainRetriever({self.name!r}, {type(self.wrapped).__name__})"


class LangChainReranker(Reranker):
    """A later stage wrapping a LangChain ``BaseDocumentCompressor``; see :func:`reranker`."""

    def __init__(
        self,
        compressor: Any,
        *,
        name: str,
        score_key: str = "relevance_score",
        version: str | None = None,
    ) -> None:
        super().__init__(name, version=version)
        _langchain_core()  # the missing framework first: it is why nothing else can work
        if not callable(getattr(compressor, "compress_documents", None)):
            raise TypeError(
                f"stage {name!r}: expected a LangChain BaseDocumentCompressor (with compress_documents), "
                f"not {type(compressor).__name__}"
            )
        self.compressor = compressor
        self.score_key = score_key

    def config(self) -> dict[str, Any]:
        return {
            "compressor": describe(self.compressor),
            "score_key": self.score_key,
            **({"content": content(self.compressor, self.name)} if self.version is None else {}),
        }

    @property
    def has_async(self) -> bool:
        return callable(getattr(self.compressor, "acompress_documents", None))

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        given = list(hits)
        if not given:
            return []
        return self._map(given, self.compressor.compress_documents(self._documents(given), query))

    async def arerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        given = list(hits)
        if not given:
            return []
        return self._map(given, await self.compressor.acompress_documents(self._documents(given), query))

    def _documents(self, hits: list[Hit]) -> list[Any]:
        from langchain_core.documents import Document

        documents = []
        for position, hit in enumerate(hits):
            if hit.text is None:
                raise ValueError(
                    f"stage {self.name!r}: hit {hit.doc_id!r} has no text, and a document compressor reads the "
                    f"text: have the first stage return it"
                )
            metadata = metadata_copy(hit)
            metadata.pop(self.score_key, None)  # the previous stage's score is not this one's
            metadata[POSITION_KEY] = position
            documents.append(Document(page_content=hit.text, metadata=metadata, id=hit.doc_id))
        return documents

    def _map(self, given: list[Hit], returned: Any) -> list[Hit]:
        by_id = {hit.doc_id: hit for hit in given}
        out = []
        for document in returned_items(self.name, returned, "the compressor"):
            metadata = _metadata(self.name, document)
            tag = metadata.get(POSITION_KEY)
            if isinstance(tag, int) and not isinstance(tag, bool) and 0 <= tag < len(given):
                base = given[tag]
            elif getattr(document, "id", None) in by_id:
                base = by_id[document.id]
            else:
                raise ValueError(
                    f"stage {self.name!r}: the compressor returned a document that is none of its inputs (no "
                    f"position tag in its metadata, id {getattr(document, 'id', None)!r}; text starts "
                    f"{_start(document)!r})"
                )
            where = f"metadata[{self.score_key!r}] of document {base.doc_id!r}"
            score = read_score(self.name, metadata.get(self.score_key), where)
            text = document.page_content
            tokens = base.tokens if text == base.text else None
            out.append(Hit(base.doc_id, score, text, tokens, _hit_metadata(metadata)))
        return out

    def __repr__(self) -> str:
        return f"LangChainReranker({self.name!r}, {type(self.compressor).__name__})"


def _langchain_core() -> SimpleNamespace:
    """langchain-core's classes the adapters recognise; without it, an ImportError naming the ``langchain`` extra."""
    runnables = require("langchain_core.runnables", extra="langchain", feature=FEATURE)
    vectorstores = require("langchain_core.vectorstores", extra="langchain", feature=FEATURE)
    return SimpleNamespace(
        Runnable=runnables.Runnable, RunnableLambda=runnables.RunnableLambda, VectorStore=vectorstores.VectorStore
    )


def _k_route(obj: Any, k_param: str | None, name: str) -> tuple[str | None, str | None]:
    """How k reaches the retriever: as an ``invoke`` keyword, as a field set on a copy, or not at all."""
    fields = getattr(type(obj), "model_fields", None) or {}
    takes_keywords = bool(getattr(obj, "_expects_other_args", False))
    if k_param is None:
        if isinstance(getattr(obj, "search_kwargs", None), dict) and takes_keywords:
            return "k", "keyword"  # VectorStoreRetriever: invoke's keywords update its search_kwargs
        if "k" in fields and hasattr(obj, "model_copy"):
            return "k", "field"
        return None, None
    if k_param in fields and hasattr(obj, "model_copy"):
        return k_param, "field"
    if takes_keywords:
        return k_param, "keyword"
    raise ValueError(
        f"stage {name!r}: k_param={k_param!r} is not a field of {type(obj).__name__}, and its invoke takes no "
        f"extra keywords: k would be silently ignored. Leave k_param unset (the runner keeps the first depth hits)"
    )


def _metadata(stage_name: str, document: Any) -> dict[str, Any]:
    metadata = getattr(document, "metadata", None)
    if not isinstance(metadata, dict) or not hasattr(document, "page_content"):
        raise TypeError(f"stage {stage_name!r}: expected LangChain Documents, got {type(document).__name__}")
    return metadata


def _hit_metadata(metadata: dict[str, Any]) -> MappingProxyType:
    return MappingProxyType({k: v for k, v in jsonable(metadata).items() if k != POSITION_KEY})


def _as_id(stage_name: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"stage {stage_name!r}: a document id must be a str, not {type(value).__name__} ({value!r})")


def _start(document: Any) -> str:
    return str(getattr(document, "page_content", ""))[:40]


def _label(obj: Any) -> str:
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) and name else type(obj).__name__


def _is_compression(obj: Any) -> bool:
    return hasattr(obj, "base_retriever") and hasattr(obj, "base_compressor")


def _is_ensemble(obj: Any) -> bool:
    return isinstance(getattr(obj, "retrievers", None), (list, tuple)) and hasattr(obj, "weights")


def _unfold(obj: Any, prefix: str, id_key: str | None, score_key: str) -> tuple[Retriever, list[Reranker]]:
    if _is_compression(obj):
        first, rerankers = _unfold(obj.base_retriever, prefix, id_key, score_key)
        compressor = obj.base_compressor
        rerankers.append(reranker(compressor, name=prefix + _label(compressor), score_key=score_key))
        return first, rerankers
    return _first_stage(obj, prefix, id_key, score_key), []


def _first_stage(obj: Any, prefix: str, id_key: str | None, score_key: str) -> Retriever:
    if not _is_ensemble(obj):
        return retriever(obj, name=prefix + _label(obj), id_key=id_key, score_key=score_key)
    id_key = id_key if id_key is not None else getattr(obj, "id_key", None)
    labels = [_label(r) for r in obj.retrievers]
    if len(set(labels)) != len(labels):
        labels = [f"{label}[{i}]" for i, label in enumerate(labels)]
    inputs = []
    for r, label in zip(obj.retrievers, labels, strict=True):
        if _is_ensemble(r):  # a nested ensemble: a fusion of its own, its stages named under its label
            inputs.append(_first_stage(r, f"{prefix}{label}/", id_key, score_key))
        else:  # anything else, a compression retriever included, runs whole as one input
            inputs.append(retriever(r, name=prefix + label, id_key=id_key, score_key=score_key))
    weights = list(obj.weights) if obj.weights else None
    c = getattr(obj, "c", 60)
    return fuse(*inputs, method="rrf", rrf_k=int(c), weights=weights, name=f"{prefix}rrf({','.join(labels)})")
