"""What a pipeline run returns: every stage's output per query, kept, with faults, latency and cache hits."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..data.packed import PackedIds
from ..data.queryset import QuerySet
from ..data.run import Run
from ..errors import CappedResults, FailingStage, InputError
from .budget import Budget, count_tokens
from .hits import Hit

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

# pyarrow (and the hit-table module built on it) is imported when a stage output is made or read, not with
# rag_eval: ``import rag_eval`` stays light


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
    budget cuts with (``tokenizer``: a function, left out of equality); ``source``, for a result read from traces,
    what they were (left out of equality). It holds none of the stages' models, indexes
    or clients: a result keeps its numbers, never the live pipeline."""

    structure: str
    depth: int
    budget: Budget
    stages: tuple[StageSpec, ...]
    corpus_size: int | None = None
    tokenizer: Callable[[str], int] = field(default=count_tokens, compare=False, repr=False)
    # where the outputs came from when not from a run: recorded traces (rag_eval.stages.traced), what the card says
    source: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

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


class StageOutput:
    """One stage's output for every query, held as columns: ``table`` is a :data:`~rag_eval.stages.hit_table.SCHEMA`
    table with one row per query of the result, in query order (its hits a list of structs; null where the stage
    failed). ``role``: "input" (an input of a fusion), "first" or "reranker"; ``covers``: what the fingerprint
    covers, in words (the stage's code and data, or its version=).

    The table's hits are checked ones (each made a :class:`Hit`, each doc id once per query: the runner and the
    cache guarantee it; :meth:`from_outcomes` checks it). ``outcomes`` is a read-only view ``{query_id: Outcome}``
    that builds an :class:`Outcome` (and its Hits) when one is read; everything else here, :meth:`run` and the
    reports read the columns, never a Python object per hit."""

    __slots__ = ("_memo", "covers", "fingerprint", "name", "role", "table")

    def __init__(self, name: str, role: str, fingerprint: str, table: pa.Table | None = None, covers: str = "") -> None:
        pa, _hit_table = _arrow()

        if table is None:
            table = _hit_table.empty_table()
        if not isinstance(table, pa.Table):
            raise TypeError(f"a StageOutput holds a pyarrow Table of the hit-table schema, not {type(table).__name__}")
        expected = _hit_table.schema(_hit_table.fields_of(table)) if "hits" in table.schema.names else None
        if expected is None or not table.schema.equals(expected):
            raise TypeError(f"stage {name!r}: the table does not have the hit-table schema (rag_eval.stages.hit_table)")
        self.name, self.role, self.fingerprint, self.covers = name, role, fingerprint, covers
        self.table = table
        self._memo: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"StageOutput({self.name!r}, {self.role!r}, {len(self.table)} queries)"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StageOutput):
            return NotImplemented
        return (self.name, self.role, self.fingerprint, self.covers) == (
            other.name,
            other.role,
            other.fingerprint,
            other.covers,
        ) and self.table.equals(other.table)

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_outcomes(
        cls, name: str, role: str, fingerprint: str, outcomes: Mapping[str, Outcome], covers: str = ""
    ) -> StageOutput:
        """One built from Outcome objects ``{query_id: outcome}`` (in query order): for tests and code written
        before the columns. A doc id twice in one query's hits is an InputError (the runner keeps it once)."""
        builder = _columns().TableBuilder()
        for q, o in outcomes.items():
            if not isinstance(o, Outcome):
                raise TypeError(f"stage {name!r}, query {q!r}: expected an Outcome, not {type(o).__name__}")
            hits = o.hits
            if hits is not None:
                hits = tuple(hits)
                if len({h.doc_id for h in hits}) != len(hits):
                    seen: set[str] = set()
                    again = next(h.doc_id for h in hits if h.doc_id in seen or seen.add(h.doc_id))  # type: ignore[func-returns-value]
                    raise InputError(f"stage {name!r}, query {q!r}: doc id {again!r} is in the hits twice")
            builder.add(
                q,
                "",
                hits,
                error=o.error if hits is None else None,
                latency=o.latency,
                cached=o.cached,
                skipped=o.skipped,
                beyond_depth=tuple(o.beyond_depth),
                issues=tuple(o.issues),
            )
        return cls(name, role, fingerprint, builder.table(), covers=covers)

    # ----- columns ------------------------------------------------------------------------------------------
    def _memoised(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    @property
    def query_ids(self) -> list[str]:
        """The queries of the table, in its (query) order."""
        ids: list[str] = self._memoised("query_ids", lambda: self.table.column("query_id").to_pylist())
        return ids

    @property
    def failed(self) -> npt.NDArray[np.bool_]:
        """bool per row: the stage failed on the query (or was not run for it: ``skipped``)."""
        mask: npt.NDArray[np.bool_] = self._memoised("failed", lambda: _columns().failed_mask(self.table))
        return mask

    @property
    def skipped(self) -> npt.NDArray[np.bool_]:
        """bool per row: not run, because an earlier stage failed on the query."""
        return _bools(self.table.column("skipped"))

    @property
    def lengths(self) -> npt.NDArray[np.int64]:
        """int64 per row: hits returned (0 where failed)."""
        self._combine()
        lengths: npt.NDArray[np.int64] = self._memoised("lengths", lambda: _columns().lengths_of(self.table))
        return lengths

    def _combine(self) -> None:
        """Reading the hits as one array (:meth:`hit_columns`, :meth:`lengths`) needs one chunk per column. A run's
        outputs are made so (:func:`~rag_eval.stages.hit_table.contiguous`); a table given in chunks (made by
        hand) is combined once and becomes the table itself (the same values), so that the stage then holds its
        hits once, not its chunks and a combined copy."""
        if self.table.column("hits").num_chunks > 1:
            self.table = _columns().contiguous([self.table])

    def hit_columns(self) -> tuple[npt.NDArray[np.int64], pa.StructArray]:
        """``(offsets, hits)``: the non-failed rows' hits one after the other, row ``i`` owning
        ``hits[offsets[i]:offsets[i + 1]]`` (:func:`~rag_eval.stages.hit_table.flat_hits`)."""
        self._combine()
        flat: tuple[npt.NDArray[np.int64], pa.StructArray] = self._memoised(
            "flat", lambda: _columns().flat_hits(self.table)
        )
        return flat

    def doc_ids(self) -> PackedIds:
        """Every hit's doc id, packed (UTF-8 bytes and starts, straight from the Arrow buffers), CSR as
        :meth:`hit_columns`."""
        _, hits = self.hit_columns()
        starts, data = _columns().string_buffers(hits.field("doc_id"))
        return ArrowIds(data, starts)

    @property
    def outcomes(self) -> Mapping[str, Outcome]:
        """``{query_id: Outcome}``, read-only, built when read (a block of rows at a time)."""
        view: Mapping[str, Outcome] = self._memoised("outcomes", lambda: _Outcomes(self))
        return view

    @property
    def rows(self) -> dict[str, int]:
        """``{query_id: row}`` of the table."""
        index: dict[str, int] = self._memoised("rows", lambda: _columns().row_index(self.table))
        return index

    def run(self) -> Run:
        """The stage's rankings as a Run in the order the stage returned them (failed queries are absent), built
        from the columns: doc ids straight from the Arrow buffers, scores from the score column (a stage with a
        hit without a score gives a ranking without scores: as given)."""
        return self.ranking_run()

    def ranking_run(self, *, with_failed: bool = False, with_scores: bool = True) -> Run:
        """:meth:`run`, optionally with the failed queries as empty rankings (``with_failed``) or without the
        scores (``with_scores=False``: the order alone, what stage-aware evaluation measures)."""
        offsets, hits = self.hit_columns()
        ids = self.query_ids
        docs = self.doc_ids()
        scores = None
        if with_scores:
            score = hits.field("score")
            if score.null_count == 0:
                scores = np.asarray(score.to_numpy(zero_copy_only=False), np.float64)
        ok = ~self.failed
        if not with_failed and not ok.all():
            keep = np.flatnonzero(ok)
            ids = [ids[i] for i in keep.tolist()]
            # failed rows own no hits, so the kept rows' hits stay contiguous: only the row pointers change
            offsets = np.concatenate([offsets[keep], offsets[-1:]])
        return Run._from_csr(self.name, ids, offsets, docs, scores)

    def delivered(self, budget: Budget, tokenizer: Callable[[str], int]) -> npt.NDArray[np.int64]:
        """int64 per row: how many hits the generator receives under ``budget`` (:meth:`Budget.cut`; 0 where the
        stage failed). A chunk budget is ``min(n, chunks)``; a token budget sums the ``tokens`` column where every
        hit of a query has a count (vectorised), and cuts the other queries hit by hit with ``tokenizer``."""
        lengths = self.lengths
        if budget.chunks is not None:
            return np.minimum(lengths, budget.chunks)
        limit = int(budget.tokens or 0)
        offsets, hits = self.hit_columns()
        tokens = _columns().field_or_none(hits, "tokens")
        sizes = np.zeros(len(hits), np.int64)
        known = np.zeros(len(hits), bool)
        if tokens is not None and len(hits):
            known = np.asarray(tokens.is_valid().to_numpy(zero_copy_only=False), bool)
            sizes[known] = np.asarray(tokens.drop_null().to_numpy(), np.int64)
        rows = np.repeat(np.arange(len(lengths)), lengths)
        unknown_rows = np.unique(rows[~known])
        used = np.cumsum(sizes)
        base = np.where(offsets[:-1] > 0, used[np.maximum(offsets[:-1] - 1, 0)], 0) if len(used) else offsets[:-1]
        within = used - base[rows] <= limit  # prefix sums never fall (counts are >= 0): a prefix fits
        out = np.bincount(rows[within], minlength=len(lengths)).astype(np.int64)
        if len(unknown_rows):  # some hit without a count: cut those queries as Budget.cut does, hit by hit
            for row, hit_list in zip(
                unknown_rows.tolist(), _columns().hit_lists(self.table, unknown_rows), strict=True
            ):
                out[row] = budget.cut(hit_list or (), tokenizer)
        return out

    @property
    def failures(self) -> dict[str, str]:
        failed = np.flatnonzero(self.failed)
        if not len(failed):
            return {}
        ids = self.query_ids
        errors = self.table.column("error").take(_arrow()[0].array(failed)).to_pylist()
        return {ids[i]: e or "failed" for i, e in zip(failed.tolist(), errors, strict=True)}

    @property
    def cache_hits(self) -> int:
        return int(_bools(self.table.column("cached")).sum())

    def latencies(self) -> npt.NDArray[np.float64]:
        """Seconds per query, for the queries computed in this run (cache hits left out, and NaN: a traced span
        whose clock went backwards)."""
        latency = np.asarray(self.table.column("latency").to_numpy(), np.float64)
        return latency[~_bools(self.table.column("cached")) & ~self.failed & ~np.isnan(latency)]

    def issue_rows(self) -> list[tuple[str, str]]:
        """``(query_id, issue)`` for every issue recorded with a usable answer, in query order."""
        column = self.table.column("issues")
        counts = np.asarray(_compute().fill_null(_compute().list_value_length(column), 0).to_numpy(), np.int64)
        if not counts.any():
            return []
        ids = self.query_ids
        owners = np.repeat(np.arange(len(counts)), counts).tolist()
        texts = _compute().list_flatten(column).to_pylist()
        return [(ids[r], t) for r, t in zip(owners, texts, strict=True)]

    @property
    def mended(self) -> int:
        """Queries with an issue in a usable answer."""
        counts = _compute().fill_null(_compute().list_value_length(self.table.column("issues")), 0)
        return int(np.count_nonzero(counts.to_numpy()))


def _arrow() -> tuple[Any, Any]:
    """``(pyarrow, rag_eval.stages.hit_table)``, imported on first use (see the imports)."""
    import pyarrow

    from . import hit_table as _hit_table

    return pyarrow, _hit_table


def _columns() -> Any:
    return _arrow()[1]


def _compute() -> Any:
    import pyarrow.compute

    return pyarrow.compute


class ArrowIds(PackedIds):
    """Packed ids whose bytes are an Arrow buffer (not a bytes object): read without a copy."""

    def take(self, indices: np.ndarray) -> np.ndarray:
        s, view = self.starts, memoryview(self.blob)
        return np.array([str(view[s[i] : s[i + 1]], "utf-8") for i in indices.tolist()], dtype=object)


def _bools(column: pa.ChunkedArray) -> npt.NDArray[np.bool_]:
    return np.asarray(_compute().fill_null(column, False).to_numpy(), dtype=bool)


class _Outcomes(Mapping[str, Outcome]):
    """A stage's table read as ``{query_id: Outcome}``: each Outcome made when read, a block of rows at a time
    (only the last block is kept), so iterating is fast and holds no object per hit for the whole table."""

    BLOCK = 512

    def __init__(self, out: StageOutput) -> None:
        self._out = out
        self._index: dict[str, int] | None = None
        self._block: tuple[int, list[Outcome]] | None = None

    def __len__(self) -> int:
        return len(self._out.table)

    def __iter__(self) -> Iterator[str]:
        return iter(self._out.query_ids)

    def __contains__(self, key: object) -> bool:
        return key in self._rows()

    def _rows(self) -> dict[str, int]:
        if self._index is None:
            self._index = _columns().row_index(self._out.table)
        return self._index

    def __getitem__(self, key: str) -> Outcome:
        row = self._rows()[key]
        first = row - row % self.BLOCK
        if self._block is None or self._block[0] != first:
            self._block = (first, self._make(first, min(first + self.BLOCK, len(self))))
        return self._block[1][row - first]

    def _make(self, start: int, stop: int) -> list[Outcome]:
        part = self._out.table.slice(start, stop - start)
        hits = _columns().hit_lists(part)
        columns = {
            c: part.column(c).to_pylist() for c in ("error", "latency", "cached", "skipped", "beyond_depth", "issues")
        }
        return [
            Outcome(
                h,
                error=(columns["error"][i] or "failed") if h is None else None,
                latency=columns["latency"][i] or 0.0,
                cached=bool(columns["cached"][i]),
                beyond_depth=tuple(columns["beyond_depth"][i] or ()),
                issues=tuple(columns["issues"][i] or ()),
                skipped=bool(columns["skipped"][i]),
            )
            for i, h in enumerate(hits)
        ]


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
    ids = out.query_ids
    ran = ~out.skipped
    own = np.flatnonzero(ran & out.failed)
    n_ran = int(ran.sum())
    if n_ran and len(own) > FAILING_SHARE * n_ran:
        q = ids[int(own[0])]
        error = out.failures[q]
        found.append(
            Finding(
                "failing_stage",
                out.name,
                (
                    f"stage {out.name!r} failed on {len(own)} of {n_ran} queries (first: query {q!r}: {error}); "
                    "those queries score 0 (or are left out, failed='exclude'): see the failures table"
                ),
            )
        )
    if out.role in ("first", "input"):
        answered = ran & ~out.failed
        n_answered = int(answered.sum())
        beyond = _columns().lengths_of_list(out.table.column("beyond_depth"))
        lengths = out.lengths
        short = answered & (lengths < depth) & (beyond == 0)
        if short.any() and n_answered >= CAPPED_MIN_QUERIES:
            counts = np.bincount(lengths[short])
            n = int(np.argmax(counts))  # the most common count (the smallest among equally common ones)
            times = int(counts[n])
            if times > CAPPED_SHARE * n_answered and (corpus_size is None or n < corpus_size):
                first = ids[int(np.flatnonzero(short & (lengths == n))[0])]
                found.append(
                    Finding(
                        "capped_results",
                        out.name,
                        (
                            f"stage {out.name!r} returned exactly {n} hit(s) for a depth of {depth} on {times} of "
                            f"{n_answered} answered queries (e.g. {first!r}): a cap of its own (LangChain's "
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
    ``pipeline`` is the :class:`PipelineSpec` of the pipeline that ran (a frozen description, not the pipeline).
    ``queries`` is the ``{query_id: text}`` dict run; ``query_set`` the :class:`~rag_eval.QuerySet` it was given as,
    if it was one (None otherwise): ``rag_eval.evaluate`` then reports the traffic-weighted mean with its card."""

    def __init__(
        self,
        pipeline: PipelineSpec,
        queries: Mapping[str, str],
        stages: dict[str, StageOutput],
        query_set: QuerySet | None = None,
    ) -> None:
        if not isinstance(pipeline, PipelineSpec):
            raise TypeError(f"a PipelineResult holds a PipelineSpec, not a {type(pipeline).__name__}")
        if query_set is not None and not isinstance(query_set, QuerySet):
            raise TypeError(f"query_set must be a QuerySet or None, not {type(query_set).__name__}")
        self.pipeline = pipeline
        self.queries = dict(queries)
        self.stages = stages
        self.query_set = query_set

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
        counts = out.delivered(self.pipeline.budget, self.pipeline.tokenizer).tolist()
        ids = out.query_ids
        return {ids[i]: counts[i] for i in np.flatnonzero(~out.failed).tolist()}

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

        rows = [(s, q, i) for s, out in self.stages.items() for q, i in out.issue_rows()]
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
