"""Pipeline: a first stage with a candidate depth, zero or more rerankers, and the context budget.

>>> pipe = rag_eval.Pipeline(bm25, minilm_rerank, depth=100, budget=5)
>>> pipe
bm25 %100 >> minilm-rerank %budget(5)
>>> result = pipe.run(queries, cache="cache/")      # every stage's output kept and cached
>>> rag_eval.evaluate(qrels, result)                # each stage judged by the metric that fits its job
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

from .._checks import check_int, check_seconds
from ..errors import InputError
from .budget import Budget, count_tokens
from .fusion import Fusion
from .result import PipelineResult
from .stage import Reranker, Retriever, Stage

if TYPE_CHECKING:  # the runner (and pyarrow under it) is imported when a pipeline runs, not with rag_eval
    from ._cache import StageCache
    from ._executor import Executor


class Pipeline:
    """``retriever`` asked for ``depth`` candidates, then each reranker in turn, then ``budget`` (chunks, or
    ``"Ntok"`` tokens counted by ``tokenizer``). ``corpus``: the known doc ids, to check stage outputs against.
    Every setting is checked here, before anything runs."""

    def __init__(
        self,
        retriever: Retriever,
        *rerankers: Reranker,
        depth: int = 100,
        budget: int | str | Budget = 5,
        corpus: Collection[str] | None = None,
        tokenizer: Callable[[str], int] = count_tokens,
    ) -> None:
        if not isinstance(retriever, Retriever):
            raise TypeError(
                f"the first stage must be a Retriever (see rag_eval.adapters), not {type(retriever).__name__}"
            )
        for r in rerankers:
            if not isinstance(r, Reranker):
                raise TypeError(f"stages after the first must be Rerankers, not {type(r).__name__} ({r!r})")
        depth = check_int(depth, "depth (how many candidates to ask the first stage for)")
        if not callable(tokenizer):
            raise TypeError("tokenizer must be a callable str -> int")
        self.retriever: Retriever = retriever
        self.rerankers: tuple[Reranker, ...] = tuple(rerankers)
        self.depth: int = depth
        self.budget: Budget = Budget.parse(budget)
        self.corpus: frozenset[str] | None = _corpus(corpus) if corpus is not None else None
        self.tokenizer: Callable[[str], int] = tokenizer
        names = [s.name for s in self.stages]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"stage names must differ (they name the stages in reports): {repeated} repeated")

    @property
    def stages(self) -> list[Stage]:
        """Every stage the harness runs, in order: a fusion's inputs, the first stage, the rerankers."""
        inputs = list(self.retriever.retrievers) if isinstance(self.retriever, Fusion) else []
        return [*inputs, self.retriever, *self.rerankers]

    def __repr__(self) -> str:
        first = self.retriever.name
        if isinstance(self.retriever, Fusion):
            first = f"{self.retriever.method}({', '.join(r.name for r in self.retriever.retrievers)})"
        parts = [f"{first} %{self.depth}", *(r.name for r in self.rerankers)]
        return " >> ".join(parts) + f" %{self.budget}"

    def run(
        self,
        queries: Mapping[str, str],
        *,
        cache: StageCache | str | os.PathLike[str] | None = None,
        concurrency: int = 1,
        progress: bool | None = None,
        retries: int = 0,
        backoff: float = 0.5,
        timeout: float | None = None,
        verify: bool | int = False,
        batch_size: int = 1,
        executor: Executor | str | None = None,
    ) -> PipelineResult:
        """Run every query through every stage, in blocks of queries (see :mod:`rag_eval.stages._runner` for the
        blocks and the cache, :mod:`rag_eval.stages._batch` for the faults, batches and timeouts). The result keeps
        a frozen :class:`~rag_eval.stages.PipelineSpec` of this pipeline (``result.pipeline``), not the pipeline and
        its models.

        ``concurrency`` calls of a stage at once (threads, or an event loop per thread for an async stage);
        ``batch_size`` queries per call of a stage that answers batches (``search_batch`` / ``rerank_batch``);
        ``retries`` per query, ``backoff`` seconds before the first retry (doubling), ``timeout`` seconds per query
        (a batch call gets ``timeout x`` its size). ``verify`` calls each stage a second time on every computed
        query (``True``) or on the first ``verify`` of them, and records a query whose second answer differs (a
        nondeterministic stage) in ``issues``. ``executor``: None (this process), ``"ray"`` (a default
        ``RayExecutor``: ``pip install 'rag-eval-stages[ray]'``) or an executor object (``run_stage``), which runs the
        pipeline stage by stage; the result is the same. Every argument is checked here, once (an InputError).
        """
        concurrency = check_int(concurrency, "concurrency", high=1024)
        batch_size = check_int(batch_size, "batch_size", high=1_000_000)
        if executor is not None and not (executor == "ray" or callable(getattr(executor, "run_stage", None))):
            raise InputError(
                f"executor must be None, 'ray' or an executor object (with run_stage), not {executor!r:.80}"
            )
        retries = check_int(retries, "retries", low=0, high=1000)
        backoff = check_seconds(backoff, "backoff", zero=True)
        timeout = None if timeout is None else check_seconds(timeout, "timeout")
        if not isinstance(verify, bool):
            if not isinstance(verify, numbers.Integral) or verify < 0:
                raise InputError(f"verify must be True, False or a number of queries (0 or more), not {verify!r}")
            verify = int(verify)
        if progress is not None and not isinstance(progress, bool):
            raise InputError(f"progress must be True, False or None, not {progress!r}")
        from ._runner import run_pipeline

        return run_pipeline(
            self,
            queries,
            cache=cache,
            concurrency=concurrency,
            progress=progress,
            retries=retries,
            backoff=backoff,
            timeout=timeout,
            verify=verify,
            batch_size=batch_size,
            executor=executor,
        )


def _corpus(corpus: Collection[str]) -> frozenset[str]:
    """The known doc ids: a collection of non-empty str (a str itself is refused: it is not a collection of ids)."""
    if isinstance(corpus, (str, bytes)) or not isinstance(corpus, Collection):
        raise InputError(f"corpus must be a collection of doc ids (str), not {type(corpus).__name__}")
    ids = frozenset(corpus)
    bad = next((d for d in ids if not isinstance(d, str) or not d), None)
    if bad is not None:
        raise InputError(f"corpus: doc id {bad!r} is not a non-empty str")
    return ids
