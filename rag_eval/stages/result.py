"""What a pipeline run returns: every stage's output per query, kept, with faults, latency and cache hits."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..data.run import Run
from ..errors import CappedResults, FailingStage
from .budget import Budget, count_tokens
from .hits import Hit

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class StageSpec:
    """One stage of a pipeline, as it was when the pipeline ran: what a result and a report need of it, with no
    model or index behind it. ``role``: "input" (an input of a fusion), "first" or "reranker"; ``kind``: the stage
    class's kind ("retriever" or "reranker"); ``fingerprint``: the stage's own cache key (its class, name, version,
    config and code, see :meth:`Stage.described`) and ``covers``, what that key covers, in words."""

    name: str
    role: str
    kind: str
    cls: str  # the stage's class, "module.QualName"
    fingerprint: str
    covers: str
    version: str | None = None


@dataclass(frozen=True)
class PipelineSpec:
    """A frozen description of the pipeline that produced a :class:`PipelineResult`: its printed form
    (``structure``, e.g. ``bm25 %100 >> rerank %budget(5)``, also its ``repr``), ``depth``, ``budget``, its
    ``stages`` in order, the size of the corpus it was checked against (None: not given) and the token counter the
    budget cuts with (``tokenizer``: a function, left out of equality). It holds none of the stages' models, indexes
    or clients: a result keeps its numbers, never the live pipeline."""

    structure: str
    depth: int
    budget: Budget
    stages: tuple[StageSpec, ...]
    corpus_size: int | None = None
    tokenizer: Callable[[str], int] = field(default=count_tokens, compare=False, repr=False)

    def __repr__(self) -> str:
        return self.structure

    def __str__(self) -> str:
        return self.structure

    def stage(self, name: str) -> StageSpec:
        """The stage named ``name`` (a KeyError naming the stages otherwise)."""
        for spec in self.stages:
            if spec.name == name:
                return spec
        raise KeyError(f"no stage {name!r} in {self.structure} (stages: {', '.join(s.name for s in self.stages)})")


@dataclass(frozen=True)
class Outcome:
    """One stage's output for one query: its hits, or the fault that stopped it."""

    hits: tuple[Hit, ...] | None  # None: the stage failed on this query
    error: str | None = None
    latency: float = 0.0  # seconds of the call that produced it (for a cache hit, the original call's)
    cached: bool = False
    beyond_depth: tuple[str, ...] = ()  # first stage: doc ids it returned past the pipeline's depth
    issues: tuple[str, ...] = ()  # what was mended in a usable answer (a repeated doc id, hits past the depth, ...)
    skipped: bool = False  # not run: an earlier stage failed on this query (the failure is that stage's)

    @property
    def failed(self) -> bool:
        return self.hits is None


@dataclass
class StageOutput:
    """Every query's outcome for one stage. ``role``: "input" (an input of a fusion), "first" or "reranker"."""

    name: str
    role: str
    fingerprint: str
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    covers: str = ""  # what the fingerprint covers, in words (the stage's code and data, or its version=)

    def run(self) -> Run:
        """The stage's rankings as a Run in the order the stage returned them (failed queries are absent)."""
        ranking = {
            q: [(h.doc_id, h.score if h.score is not None else float("nan")) for h in o.hits or ()]
            for q, o in self.outcomes.items()
            if not o.failed
        }
        with_scores = all(h.score is not None for o in self.outcomes.values() for h in o.hits or ())
        if not with_scores:
            return Run.from_ranking({q: [d for d, _ in hits] for q, hits in ranking.items()}, name=self.name)
        return Run.from_ranking(ranking, name=self.name)

    @property
    def failures(self) -> dict[str, str]:
        return {q: o.error or "failed" for q, o in self.outcomes.items() if o.failed}

    @property
    def cache_hits(self) -> int:
        return sum(o.cached for o in self.outcomes.values())

    def latencies(self) -> npt.NDArray[np.float64]:
        """Seconds per query, for the queries computed in this run (cache hits left out)."""
        return np.array([o.latency for o in self.outcomes.values() if not o.cached and not o.failed])


FAILING_SHARE = 0.5  # a stage failing on more than this share of the queries it ran is announced
CAPPED_SHARE = 0.5  # a retriever returning one same count below the depth on more than this share ...
CAPPED_MIN_QUERIES = 10  # ... of at least this many answered queries is announced (fewer cannot show a pattern)


@dataclass(frozen=True)
class Finding:
    """A systematic problem of one stage, seen across its queries and said once: ``message`` is its line."""

    kind: str  # "failing_stage" (warned as FailingStage) or "capped_results" (CappedResults)
    stage: str
    message: str


def stage_findings(out: StageOutput, depth: int, corpus_size: int | None = None) -> list[Finding]:
    """What :data:`FAILING_SHARE` and :data:`CAPPED_SHARE` flag in one stage's outcomes.

    - failing: the stage's own failures (queries skipped because an earlier stage failed are that stage's) on
      more than half of the queries it ran; the line names the count and the first error.
    - capped (a first stage or a fusion input): at least :data:`CAPPED_MIN_QUERIES` answered queries, more than
      half of which returned the same number of hits n < depth and nothing past it; not when the corpus (given
      to the Pipeline) holds n documents or fewer, which is then simply all of it.
    """
    found: list[Finding] = []
    ran = {q: o for q, o in out.outcomes.items() if not o.skipped}
    own = [(q, o.error or "failed") for q, o in ran.items() if o.failed]
    if ran and len(own) > FAILING_SHARE * len(ran):
        q, error = own[0]
        found.append(
            Finding(
                "failing_stage",
                out.name,
                (
                    f"stage {out.name!r} failed on {len(own)} of {len(ran)} queries (first: query {q!r}: {error}); "
                    "those queries score 0 (or are left out, failed='exclude'): see the failures table"
                ),
            )
        )
    if out.role in ("first", "input"):
        answered = [o for o in ran.values() if not o.failed]
        short = Counter(n for o in answered if (n := len(o.hits or ())) < depth and not o.beyond_depth)
        if short and len(answered) >= CAPPED_MIN_QUERIES:
            n, times = short.most_common(1)[0]
            if times > CAPPED_SHARE * len(answered) and (corpus_size is None or n < corpus_size):
                first = next(
                    q for q, o in ran.items() if not o.failed and len(o.hits or ()) == n and not o.beyond_depth
                )
                found.append(
                    Finding(
                        "capped_results",
                        out.name,
                        (
                            f"stage {out.name!r} returned exactly {n} hit(s) for a depth of {depth} on {times} of "
                            f"{len(answered)} answered queries (e.g. {first!r}): a cap of its own (LangChain's "
                            f"default k=4, a store's limit?); recall@depth is measured on those {n}"
                        ),
                    )
                )
    return found


def summarised(findings: list[Finding]) -> dict[str, str]:
    """One line per kind of finding (several stages joined with ``; ``): what is warned once per run or report."""
    kinds = dict.fromkeys(f.kind for f in findings)
    return {kind: "; ".join(f.message for f in findings if f.kind == kind) for kind in kinds}


def announce(findings: list[Finding], stacklevel: int) -> list[str]:
    """Warn :func:`summarised` lines, each of its own kind (``stacklevel`` counts from the caller); returns them."""
    lines = summarised(findings)
    if "failing_stage" in lines:
        warnings.warn(lines["failing_stage"], FailingStage, stacklevel=stacklevel + 1)
    if "capped_results" in lines:
        warnings.warn(lines["capped_results"], CappedResults, stacklevel=stacklevel + 1)
    return list(lines.values())


class PipelineResult:
    """The outputs of :meth:`Pipeline.run`: one :class:`StageOutput` (and Run) per stage, in pipeline order.
    ``pipeline`` is the :class:`PipelineSpec` of the pipeline that ran (a frozen description, not the pipeline)."""

    def __init__(self, pipeline: PipelineSpec, queries: Mapping[str, str], stages: dict[str, StageOutput]) -> None:
        if not isinstance(pipeline, PipelineSpec):
            raise TypeError(f"a PipelineResult holds a PipelineSpec, not a {type(pipeline).__name__}")
        self.pipeline = pipeline
        self.queries = dict(queries)
        self.stages = stages

    @property
    def query_ids(self) -> list[str]:
        return list(self.queries)

    @property
    def runs(self) -> dict[str, Run]:
        """One Run per stage, in pipeline order."""
        return {name: out.run() for name, out in self.stages.items()}

    def delivered(self, stage: str | None = None) -> dict[str, int]:
        """How many hits of each (successful) query the generator receives from ``stage`` (the last by default)."""
        out = self.stages[stage or self.final_stage]
        budget, tokenizer = self.pipeline.budget, self.pipeline.tokenizer
        return {q: budget.cut(o.hits or (), tokenizer) for q, o in out.outcomes.items() if not o.failed}

    @property
    def findings(self) -> list[Finding]:
        """Systematic problems of the stages (see :func:`stage_findings`): each is warned once when the run ends
        and once more by the report that evaluates it, and kept in the report's ``issues`` and card."""
        size = self.pipeline.corpus_size
        return [f for out in self.stages.values() for f in stage_findings(out, self.pipeline.depth, size)]

    @property
    def first_stage(self) -> str:
        return next(n for n, s in self.stages.items() if s.role == "first")

    @property
    def final_stage(self) -> str:
        return list(self.stages)[-1]

    @property
    def failures(self) -> pd.DataFrame:
        """One row per failed query and stage: ``stage, query_id, error``."""
        import pandas as pd

        rows = [(s, q, e) for s, out in self.stages.items() for q, e in out.failures.items()]
        return pd.DataFrame(rows, columns=["stage", "query_id", "error"])

    @property
    def issues(self) -> pd.DataFrame:
        """One row per issue with a usable answer, by query and stage: ``stage, query_id, issue`` (a repeated doc
        id kept once, hits cut to the depth, a different answer on a second call under ``verify``)."""
        import pandas as pd

        rows = [(s, q, i) for s, out in self.stages.items() for q, o in out.outcomes.items() for i in o.issues]
        return pd.DataFrame(rows, columns=["stage", "query_id", "issue"])

    @property
    def latency(self) -> pd.DataFrame:
        """Per stage: ``p50`` and ``p95`` seconds per query computed, ``n`` computed, ``cache_hits``, ``failed``."""
        import pandas as pd

        rows = []
        for name, out in self.stages.items():
            lat = out.latencies()
            p50, p95 = np.percentile(lat, [50, 95]) if len(lat) else (np.nan, np.nan)
            rows.append((name, float(p50), float(p95), len(lat), out.cache_hits, len(out.failures)))
        return pd.DataFrame(rows, columns=["stage", "p50", "p95", "n", "cache_hits", "failed"])

    def __repr__(self) -> str:
        return f"PipelineResult({self.pipeline!r}, {len(self.queries)} queries)"
