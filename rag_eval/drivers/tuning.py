"""Tuning a pipeline's settings on labels: a grid (or seeded random) search over the settings users tune, judged on
a tuning split of the queries and reported on the held-out rest, with a bootstrap interval.

What is searched, the split by group, the stage cache and the result: ``docs/tuning.md``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import numbers
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import check_choice, check_int, check_number, check_share
from .._escape import markdown_code, plot_text
from .._files import write_output
from .._optional import require
from ..data.collection import Collection
from ..data.qrels import Qrels
from ..errors import InputError
from ..metrics.conventions import Conventions
from ..metrics.grammar import parse_metric
from ..reports.evaluation import JUDGED_THRESHOLD
from ..stages.budget import Budget
from ..stages.fusion import RRF_K, fuse
from ..stages.hits import Hit
from ..stages.pipeline import Pipeline
from ..stages.result import PipelineResult, StageOutput
from ..stages.stage import Reranker, Retriever
from ..statistics.paired import MIN_N, all_equal, shown_ids, warn_degenerate

if TYPE_CHECKING:
    import pandas as pd

    from ..reports.report import Report
    from ..stages import StageCache

__all__ = ["HeldOut", "Setting", "Space", "Tuning", "parse_space", "tune"]

SETTINGS = ("method", "alpha", "weights", "rrf_k", "depth", "budget", "reranker")
FUSIONS = ("rrf", "wsum")
SEARCHES = ("grid", "random")


@dataclass(frozen=True)
class Setting:
    """One candidate of a :class:`Space`. ``method`` is None for a single retriever (no fusion); ``weights`` are
    wsum's (``alpha`` is their first with two inputs), ``rrf_k`` rrf's; the others are None where they do not
    apply."""

    method: str | None
    weights: tuple[float, ...] | None
    rrf_k: int | None
    depth: int
    budget: int | str  # chunks, or "Ntok"
    reranker: bool

    @property
    def alpha(self) -> float | None:
        """wsum's weight of the first of two inputs (None otherwise)."""
        return self.weights[0] if self.weights is not None and len(self.weights) == 2 else None

    def label(self) -> str:
        """One line: ``wsum alpha=0.3 depth=100 budget=5 reranker=off``."""
        parts = []
        if self.method == "wsum":
            parts.append(f"wsum alpha={self.alpha:g}" if self.alpha is not None else f"wsum weights={self.weights}")
        elif self.method == "rrf":
            parts.append(f"rrf rrf_k={self.rrf_k}")
        parts += [f"depth={self.depth}", f"budget={self.budget}", f"reranker={'on' if self.reranker else 'off'}"]
        return " ".join(parts)


class Space:
    """What :func:`tune` searches: the stages (``retrievers``: one, or two or more to fuse; ``rerankers``: the
    rerankers that ``reranker=True`` puts after the first stage) and, for each setting, the values to try (a value
    or a sequence of values).

    - ``method``: fusion methods, ``"rrf"`` and/or ``"wsum"`` (default: ``"wsum"`` when ``alpha`` or ``weights`` is
      given, ``"rrf"`` when ``rrf_k`` is, both when both are, else ``"rrf"``);
    - ``alpha``: wsum's weight of the first of two retrievers (the second gets 1 - alpha), each in [0, 1];
    - ``weights``: wsum's weights, one tuple per candidate, a finite weight >= 0 per retriever (not all 0);
    - ``rrf_k``: RRF constants (ints >= 0; default 60);
    - ``depth``: candidates asked of the first stage (default 100); ``budget``: chunks or ``"Ntok"`` (default 5);
    - ``reranker``: True and/or False (default: True when ``rerankers`` are given, else False).

    Every value is checked here: a bad one is an InputError naming the setting."""

    def __init__(
        self,
        retrievers: Retriever | Sequence[Retriever],
        *,
        rerankers: Reranker | Sequence[Reranker] = (),
        method: str | Sequence[str] | None = None,
        alpha: float | Sequence[float] | None = None,
        weights: Sequence[float] | Sequence[Sequence[float]] | None = None,
        rrf_k: int | Sequence[int] | None = None,
        depth: int | Sequence[int] = 100,
        budget: int | str | Sequence[int | str] = 5,
        reranker: bool | Sequence[bool] | None = None,
    ) -> None:
        found = [retrievers] if isinstance(retrievers, Retriever) else list(retrievers)
        if not found or not all(isinstance(r, Retriever) for r in found):
            raise InputError("retrievers: give one Retriever, or two or more to fuse")
        names = [r.name for r in found]
        if len(set(names)) != len(names):
            raise InputError(f"retrievers: the retrievers need distinct names, not {names}")
        more = [rerankers] if isinstance(rerankers, Reranker) else list(rerankers)
        if not all(isinstance(r, Reranker) for r in more):
            raise InputError("rerankers: give Reranker stages")
        self.retrievers: tuple[Retriever, ...] = tuple(found)
        self.rerankers: tuple[Reranker, ...] = tuple(more)
        fused = len(found) > 1
        given = {"alpha": alpha, "weights": weights, "rrf_k": rrf_k, "method": method}
        if not fused:
            extra = [k for k, v in given.items() if v is not None]
            if extra:
                raise InputError(f"{extra[0]}: a fusion setting, but the space has one retriever (give two or more)")
        if alpha is not None and weights is not None:
            raise InputError("alpha and weights: give one of them (alpha is the first of two weights)")
        if alpha is not None and len(found) != 2:
            raise InputError(f"alpha: the weight of the first of two retrievers, but the space has {len(found)}")
        methods: tuple[str, ...] = ()
        if fused:
            if method is None:
                wsum = alpha is not None or weights is not None
                methods = (*(("wsum",) if wsum else ()), *(("rrf",) if rrf_k is not None or not wsum else ()))
            else:
                methods = _values("method", method, _method)
        self.method: tuple[str, ...] = methods
        self.weights: tuple[tuple[float, ...], ...] = ()
        if "wsum" in methods:
            if weights is not None:
                self.weights = _values("weights", weights, lambda w: _weights(w, len(found)), nested=True)
            else:
                alphas = _values("alpha", alpha if alpha is not None else 0.5, _alpha)
                self.weights = tuple((a, 1.0 - a) for a in alphas)
        elif alpha is not None or weights is not None:
            raise InputError(f"{'alpha' if alpha is not None else 'weights'}: wsum's, but method is {methods}")
        self.rrf_k: tuple[int, ...] = ()
        if "rrf" in methods:
            self.rrf_k = _values("rrf_k", rrf_k if rrf_k is not None else RRF_K, _rrf_k)
        elif rrf_k is not None:
            raise InputError(f"rrf_k: the RRF constant, but method is {methods}")
        self.depth: tuple[int, ...] = _values("depth", depth, lambda d: check_int(d, "depth"))
        self.budget: tuple[int | str, ...] = _values("budget", budget, _budget)
        if reranker is None:
            reranker = bool(more)
        self.reranker: tuple[bool, ...] = _values("reranker", reranker, _on_off)
        if True in self.reranker and not more:
            raise InputError("reranker: True puts the rerankers after the first stage, but the space has none")

    def settings(self) -> list[Setting]:
        """Every candidate, in grid order (see the module's docstring)."""
        firsts: list[tuple[str | None, tuple[float, ...] | None, int | None]] = []
        for m in self.method or (None,):
            if m == "wsum":
                firsts += [(m, w, None) for w in self.weights]
            elif m == "rrf":
                firsts += [(m, None, k) for k in self.rrf_k]
            else:
                firsts.append((None, None, None))
        return [
            Setting(m, w, k, d, b, r)
            for (m, w, k), d, b, r in itertools.product(firsts, self.depth, self.budget, self.reranker)
        ]

    def __len__(self) -> int:
        return len(self.settings())

    def __repr__(self) -> str:
        shown = {
            "method": self.method,
            "alpha": tuple(w[0] for w in self.weights) if len(self.retrievers) == 2 else None,
            "weights": self.weights if len(self.retrievers) != 2 else None,
            "rrf_k": self.rrf_k,
            "depth": self.depth,
            "budget": self.budget,
            "reranker": self.reranker,
        }
        body = ", ".join(f"{k}={v}" for k, v in shown.items() if v)
        return f"Space({', '.join(r.name for r in self.retrievers)}; {body}; {len(self)} settings)"


def _values(name: str, value: Any, check: Any, *, nested: bool = False) -> tuple[Any, ...]:
    """``value`` (one value, or a sequence of them) as a tuple of checked values: not empty, none twice."""
    if nested:
        many = isinstance(value, Sequence) and bool(value) and all(isinstance(v, Sequence) for v in value)
        items = list(value) if many else [value]
    elif isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        items = [value]
    else:
        items = list(value)
    if not items:
        raise InputError(f"{name}: no value to try (give at least one)")
    checked = tuple(check(v) for v in items)
    again = next((v for i, v in enumerate(checked) if v in checked[:i]), None)
    if again is not None:
        raise InputError(f"{name}: {again!r} is given twice")
    return checked


def _alpha(value: Any) -> float:
    return check_share(value, "alpha", closed="both", why=" (the first retriever's weight)")


def _weights(value: Any, n: int) -> tuple[float, ...]:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != n:
        raise InputError(f"weights: each candidate is {n} weights, one per retriever, not {value!r}")
    w = tuple(check_number(v, "a weight") for v in value)
    if any(v < 0 for v in w) or not any(w):
        raise InputError(f"weights must be >= 0 and not all 0, not {value!r}")
    return w


def _rrf_k(value: Any) -> int:
    return check_int(value, "rrf_k (the RRF constant)", low=0)


def _method(value: Any) -> str:
    if value not in FUSIONS:
        raise InputError(f"method: the fusion methods tuned are {FUSIONS}, not {value!r}")
    return str(value)


def _budget(value: Any) -> int | str:
    budget = Budget.parse(value)
    return budget.chunks if budget.chunks is not None else f"{budget.tokens}tok"


def _on_off(value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"reranker must be True or False, not {value!r}")
    return bool(value)


def parse_space(specs: Sequence[str]) -> dict[str, Any]:
    """``["alpha=0:1:0.1", "depth=50,100", "method=rrf,wsum"]`` as :class:`Space` keyword arguments: ``NAME=A:B:STEP``
    (from A to B inclusive, by STEP: numbers) or ``NAME=V1,V2,...``; ``weights=0.5/0.3/0.2,...`` (one ``/``-joined
    tuple per candidate); ``reranker=on,off``. An unknown name or a value that does not parse is an InputError."""
    out: dict[str, Any] = {}
    for spec in specs:
        name, sep, text = str(spec).partition("=")
        name = name.strip()
        if not sep or not text.strip():
            raise InputError(f"--space {spec!r}: write NAME=VALUES (e.g. alpha=0:1:0.1, depth=50,100)")
        if name not in SETTINGS:
            raise InputError(f"--space {spec!r}: unknown setting {name!r}; the settings are {', '.join(SETTINGS)}")
        if name in out:
            raise InputError(f"--space: {name} is given twice")
        number = functools.partial(_space_number, spec=spec)
        if name in ("method",):
            out[name] = [t.strip() for t in text.split(",")]
        elif name == "reranker":
            words = {"on": True, "true": True, "off": False, "false": False}
            bad = [t for t in text.split(",") if t.strip().lower() not in words]
            if bad:
                raise InputError(f"--space {spec!r}: reranker takes on and/or off, not {bad[0]!r}")
            out[name] = [words[t.strip().lower()] for t in text.split(",")]
        elif name == "weights":
            out[name] = [tuple(number(v) for v in t.split("/")) for t in text.split(",")]
        elif name == "budget":
            out[name] = [_int_or_text(t.strip()) for t in text.split(",")]
        elif ":" in text:
            bounds = text.split(":")
            if len(bounds) != 3:
                raise InputError(f"--space {spec!r}: a range is A:B:STEP")
            low, high, step = (number(b) for b in bounds)
            if not step > 0 or high < low:
                raise InputError(f"--space {spec!r}: a range needs A <= B and STEP > 0")
            count = math.floor((high - low) / step + 1e-9) + 1
            values = [round(low + i * step, 12) for i in range(count)]
            out[name] = (
                [int(v) for v in values] if name in ("depth", "rrf_k") and all(v == int(v) for v in values) else values
            )
        else:
            values = [number(t) for t in text.split(",")]
            out[name] = [int(v) if name in ("depth", "rrf_k") and v == int(v) else v for v in values]
    return out


def _space_number(token: str, *, spec: str) -> float:
    from ..data.numeric import score_text

    value = score_text(token.strip())
    if value is None:
        raise InputError(f"--space {spec!r}: {token!r} is not a plain decimal number")
    return value


def _int_or_text(token: str) -> int | str:
    return int(token) if token.isascii() and token.isdigit() else token


@dataclass(frozen=True)
class HeldOut:
    """The best setting's value on the held-out queries: the mean of ``metric`` over them, its bootstrap interval
    (``confidence``, ``resamples`` resamples, seeded; NaN below the bootstrap's ``min_n``), ``n`` values averaged
    and ``n_nan`` left out (0/0), of ``n_queries`` held-out queries; ``not_measured``: held-out queries the report
    did not count (a query missing from the run under ``conventions="trec_eval"``). ``degenerate``: every value
    the same, an interval of zero width (announced: DegenerateInterval), not certainty."""

    metric: str
    mean: float
    ci_low: float
    ci_high: float
    n: int
    n_nan: int
    confidence: float
    n_queries: int = 0
    not_measured: tuple[str, ...] = ()
    min_n: int = MIN_N["bootstrap"]
    degenerate: bool = False

    def interval(self) -> str:
        """``[low, high] (95% bootstrap, min n 10, n=12 of 12 held-out queries)``, saying what it rests on."""
        level = f"{self.confidence:.0%} bootstrap, min n {self.min_n}"
        rests = f"n={self.n} of {self.n_queries} held-out queries" if self.n_queries else f"n={self.n}"
        if self.n_nan:
            rests += f"; {self.n_nan} NaN left out"
        if self.not_measured:
            rests += f"; {len(self.not_measured)} not measured, left out ({shown_ids(self.not_measured)})"
        if self.n < self.min_n:
            return f"no interval: n {self.n} is below the bootstrap's minimum n {self.min_n} ({level}; {rests})"
        flat = "; zero width: every value the same, not certainty" if self.degenerate else ""
        return f"[{self.ci_low:.4f}, {self.ci_high:.4f}] ({level}; {rests}{flat})"


class _Cut(Retriever):
    """A retriever's answers at a larger depth, cut to the depth asked: the top ``k`` of the hits it returned for the
    query at ``from_depth`` (read from that run's stage output, never asked again). It has the retriever's name, so
    that reports name the stage as without tuning; its key is that retriever's fingerprint and ``from_depth``."""

    def __init__(self, retriever: Retriever, output: StageOutput, queries: Mapping[str, str], from_depth: int):
        super().__init__(retriever.name)
        self.of = retriever.fingerprint()
        self.from_depth = from_depth
        self._hits: dict[str, tuple[Hit, ...] | str] = {}
        for q, outcome in output.outcomes.items():
            self._hits[queries[q]] = outcome.hits if outcome.hits is not None else (outcome.error or "failed")

    def config(self) -> dict[str, Any]:
        return {"cut_of": self.of, "from_depth": self.from_depth}

    def search(self, query: str, k: int) -> list[Hit]:
        found = self._hits.get(query)
        if found is None:
            raise KeyError(f"query {query!r:.60} was not run at depth {self.from_depth}")
        if isinstance(found, str):
            raise RuntimeError(f"failed at depth {self.from_depth}: {found}")
        return list(found[:k])


class Tuning:
    """What :func:`tune` found. ``table``: one row per candidate in grid order (its settings; ``value``, the mean of
    the metric over the tuning queries, and ``n``; ``from_cache`` and ``computed``, its stage outputs read from the
    cache and computed; ``best``). ``best``: the best :class:`Setting`; ``tuning_value`` its tuning mean;
    ``held_out``: its :class:`HeldOut` value and interval, from ``held_out_report`` (:func:`rag_eval.evaluate` of
    ``held_out_result``, its run on the held-out queries). ``cache``: per candidate (``"held-out"`` for the held-out
    run, ``"first stages"`` for the retrievers at the largest depth) and stage, the stage outputs read from the
    cache (``from_cache``) and computed (``computed``; a fusion's are always computed); ``cache_hits`` and
    ``computed`` their totals over the search (the tuning split). ``settings``: how the search was made."""

    def __init__(
        self,
        *,
        metric: str,
        table: pd.DataFrame,
        best: Setting,
        tuning_value: float,
        held_out: HeldOut,
        held_out_report: Report,
        held_out_result: PipelineResult,
        cache: pd.DataFrame,
        split: tuple[tuple[str, ...], tuple[str, ...]],
        settings: dict[str, Any],
    ) -> None:
        self.metric, self.table, self.best, self.tuning_value = metric, table, best, tuning_value
        self.held_out, self.held_out_report, self.held_out_result = held_out, held_out_report, held_out_result
        self.cache, self.split, self.settings = cache, split, settings

    @property
    def cache_hits(self) -> int:
        """Stage outputs (one stage, one query) read from the cache during the search, on the tuning queries."""
        return int(self.cache.loc[self.cache["candidate"] != "held-out", "from_cache"].sum())

    @property
    def computed(self) -> int:
        """Stage outputs computed during the search, on the tuning queries (fusions included)."""
        return int(self.cache.loc[self.cache["candidate"] != "held-out", "computed"].sum())

    def render(self) -> str:
        h = self.held_out
        return "\n".join(
            [
                f"tuned {self.metric} over {len(self.table)} settings ({self.settings['search']} search) on "
                f"{len(self.split[0])} tuning queries; {len(self.split[1])} held out",
                f"best: {self.best.label()}",
                f"  tuning:   {self.tuning_value:.4f} (optimistic: chosen on these queries)",
                f"  held out: {h.mean:.4f} {h.interval()}",
                f"cache: {self.cache_hits} stage outputs read from the cache, {self.computed} computed",
            ]
        )

    def __repr__(self) -> str:
        return f"Tuning({self.metric}: {self.best.label()}; held out {self.held_out.mean:.4f})"

    def _repr_markdown_(self) -> str:
        return markdown_code(self.render(), "text")

    def plot(self, path: str | os.PathLike[str] | None = None) -> Any:
        """The tuning value of every candidate (a line over alpha, rrf_k, depth or budget when only that varies,
        else one point per candidate), and the best one's held-out value with its interval; saved to ``path`` when
        given (SVG, PNG, ... by its suffix). Needs matplotlib (``pip install 'rag-eval-stages[html]'``)."""
        require("matplotlib", extra="html", feature="Tuning.plot")
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        table = self.table
        varying = [c for c in ("alpha", "rrf_k", "depth") if c in table and table[c].nunique(dropna=True) > 1]
        from .._plot_style import OKABE_ITO, legend_outside

        fig, ax = plt.subplots(figsize=(7.5, 3.6))
        best_at = int(np.flatnonzero(table["best"].to_numpy())[0])
        if len(varying) == 1 and table[varying[0]].notna().all():
            x = table[varying[0]].to_numpy(dtype=float)
            ax.plot(
                x, table["value"], marker="o", color=OKABE_ITO["blue"], label=f"tuning ({len(self.split[0])} queries)"
            )
            ax.set_xlabel(varying[0])
        else:
            x = np.arange(len(table), dtype=float)
            ax.plot(
                x,
                table["value"],
                marker="o",
                linestyle="",
                color=OKABE_ITO["blue"],
                label=f"tuning ({len(self.split[0])} queries)",
            )
            ax.set_xticks(x, [plot_text(t, limit=120) for t in table["setting"]], rotation=60, ha="right", fontsize=7)
        h = self.held_out
        ax.errorbar(
            [x[best_at]],
            [h.mean],
            yerr=[[h.mean - h.ci_low], [h.ci_high - h.mean]],
            fmt="s",
            color=OKABE_ITO["black"],
            capsize=4,
            label=f"best, held out ({len(self.split[1])} queries, {h.confidence:.0%} CI)",
        )
        ax.set_ylabel(plot_text(self.metric))
        ax.set_title(plot_text(self.metric) + " of each candidate on the tuning queries; the best one held out")
        legend_outside(ax, fontsize=8)
        fig.tight_layout()
        if path is not None:
            suffix = os.path.splitext(os.fspath(path))[1].lstrip(".").lower() or None  # savefig's own default
            write_output(path, lambda file: fig.savefig(file, format=suffix))  # whole or not at all
            plt.close(fig)
        return fig


def tune(
    space: Space,
    collection_or_queries: Collection | Mapping[str, str],
    qrels: Qrels | Mapping[str, Mapping[str, int]] | None = None,
    *,
    metric: str = "recall@budget",
    split: float | tuple[Sequence[str], Sequence[str]] = 0.5,
    search: str = "grid",
    trials: int | None = None,
    seed: int = 0,
    groups: Mapping[str, Any] | None = None,
    cache: StageCache | str | os.PathLike[str] | None = None,
    conventions: Conventions | str = "default",
    resamples: int = 1000,
    confidence: float = 0.95,
    judged_threshold: float = JUDGED_THRESHOLD,
    batch_size: int = 1,
    concurrency: int = 1,
    progress: bool = False,
) -> Tuning:
    """Search ``space`` for the setting with the best mean ``metric`` on a tuning split of the queries, and report
    its value on the held-out rest with a bootstrap interval (see the module's docstring for what is searched, how
    the split is made and how the cache is used). ``groups``: ``{query_id: key}``; queries of one key (a
    conversation, a user) stay on one side of the split, as queries of one normalised text always do.

    ``collection_or_queries``: a :class:`Collection` (its queries and qrels; its corpus checks the stages' ids) or
    ``{query_id: text}`` with ``qrels``. ``metric``: one metric, of the pipeline's last stage (``recall@budget``,
    ``ndcg@10``, ...). ``cache``: a stage cache (a directory or a :class:`~rag_eval.stages.StageCache`) kept for a
    later search; by default a temporary one. ``seed``: the split's, the random search's and the bootstrap's.
    ``conventions`` and ``judged_threshold`` are :func:`rag_eval.evaluate`'s (the candidates are evaluated without
    the judged-share warning; the held-out report warns as any report). ``batch_size`` and ``concurrency`` are
    :meth:`Pipeline.run`'s.
    """
    from ..reports.evaluation import evaluate

    if not isinstance(space, Space):
        raise InputError(f"space must be a rag_eval Space, not {type(space).__name__}")
    queries, judged, corpus = _inputs(collection_or_queries, qrels)
    metric = _metric(metric)
    seed = check_int(seed, "seed", low=0, high=2**63 - 1)
    resamples = check_int(resamples, "resamples")
    confidence = check_share(confidence, "confidence")
    tuning_ids, held_ids, split_facts = _split(split, queries, seed, groups)
    candidates = _candidates(space, search, trials, seed)
    import pandas as pd

    run_options = {"batch_size": batch_size, "concurrency": concurrency, "progress": progress}
    counts: list[tuple[str, str, str, int, int]] = []
    with _cache_dir(cache) as store:
        runner = _Runner(space, corpus, store, run_options)
        tuning_queries = {q: queries[q] for q in tuning_ids}
        tuning_qrels = _qrels_of(judged, tuning_ids)
        runner.first_stages(tuning_queries, counts, "first stages")
        rows = []
        for n, setting in enumerate(candidates):
            result = runner.run(setting, tuning_queries, counts, str(n))
            report = evaluate(tuning_qrels, result, [metric], conventions=conventions, judged_threshold=0.0)
            final = result.final_stage
            values = report.values(repr(result.pipeline), metric, final)
            finite = values.dropna()
            rows.append((n, setting, float(finite.mean()) if len(finite) else math.nan, len(finite)))
        scored = [r for r in rows if not math.isnan(r[2])]
        if not scored:
            raise InputError(f"metric {metric}: no candidate has a value on the tuning queries (every one is 0/0)")
        best_n = max(scored, key=lambda r: (r[2], -r[0]))[0]
        best = candidates[best_n]
        held_queries = {q: queries[q] for q in held_ids}
        runner.first_stages(held_queries, counts, "held-out")
        held_result = runner.run(best, held_queries, counts, "held-out")
    held_qrels = _qrels_of(judged, held_ids)
    held_report = evaluate(
        held_qrels, held_result, [metric], conventions=conventions, judged_threshold=judged_threshold
    )
    summary = held_report.summarize(resamples=resamples, confidence=confidence, seed=seed)
    row = summary[(summary["stage"] == held_result.final_stage) & (summary["metric"] == metric)].iloc[0]
    held_values = held_report.values(str(row["run"]), metric, held_result.final_stage)
    measured = held_values.dropna().to_numpy(dtype=np.float64)
    below = len(measured) < MIN_N["bootstrap"]
    flat = not below and all_equal(measured)
    if flat:
        warn_degenerate(f"tune, held-out {metric} ({len(measured)} queries, each {measured[0]:.4f})")
    held = HeldOut(
        metric,
        float(row["mean"]),
        math.nan if below else float(row["ci_low"]),
        math.nan if below else float(row["ci_high"]),
        int(row["n"]),
        int(row["n_nan"]),
        float(confidence),
        n_queries=len(held_ids),
        not_measured=tuple(q for q in held_ids if q not in set(held_values.index)),
        degenerate=flat,
    )
    cache_frame = pd.DataFrame(counts, columns=["candidate", "stage", "role", "from_cache", "computed"])
    sums = cache_frame.groupby("candidate", sort=False)[["from_cache", "computed"]].sum()
    per_candidate = {str(c): (int(f), int(k)) for c, f, k in sums.itertuples()}  # candidate -> (cached, computed)
    table = pd.DataFrame(
        [
            {
                "setting": s.label(),
                "method": s.method,
                "alpha": s.alpha,
                "weights": s.weights,
                "rrf_k": s.rrf_k,
                "depth": s.depth,
                "budget": s.budget,
                "reranker": s.reranker,
                "value": value,
                "n": count,
                "from_cache": per_candidate[str(n)][0],
                "computed": per_candidate[str(n)][1],
                "best": n == best_n,
            }
            for n, s, value, count in rows
        ]
    )
    settings = {
        "metric": metric,
        "search": search,
        "trials": trials,
        "seed": seed,
        "split": split if isinstance(split, float) else "given",
        "grouping": {"by": "normalised text" + (" and the groups given" if groups is not None else ""), **split_facts},
        "resamples": resamples,
        "confidence": confidence,
        "retrievers": [r.name for r in space.retrievers],
        "rerankers": [r.name for r in space.rerankers],
    }
    return Tuning(
        metric=metric,
        table=table,
        best=best,
        tuning_value=float(rows[best_n][2]),
        held_out=held,
        held_out_report=held_report,
        held_out_result=held_result,
        cache=cache_frame,
        split=(tuple(tuning_ids), tuple(held_ids)),
        settings=settings,
    )


class _Runner:
    """Runs the settings of one space through the harness: the retrievers once at the largest depth, then each
    setting's pipeline (cut views of them at a smaller depth), every run with the same cache."""

    def __init__(self, space: Space, corpus: frozenset[str] | None, cache: Any, options: dict[str, Any]) -> None:
        self.space, self.corpus, self.cache, self.options = space, corpus, cache, options
        self.top = max(space.depth)
        self._outputs: dict[str, StageOutput] = {}
        self._queries: dict[str, str] = {}

    def first_stages(self, queries: dict[str, str], counts: list[tuple[str, str, str, int, int]], who: str) -> None:
        """Each retriever alone at the largest depth, on ``queries``: what the cut views read."""
        for r in self.space.retrievers:
            result = Pipeline(r, depth=self.top, budget=1, corpus=self.corpus).run(
                queries, cache=self.cache, **self.options
            )
            self._outputs[r.name] = result.stages[r.name]
            _count(result, counts, who)
        self._queries = queries

    def run(
        self, setting: Setting, queries: dict[str, str], counts: list[tuple[str, str, str, int, int]], who: str
    ) -> PipelineResult:
        inputs = [
            r if setting.depth == self.top else _Cut(r, self._outputs[r.name], self._queries, self.top)
            for r in self.space.retrievers
        ]
        if setting.method is None:
            first = inputs[0]
        elif setting.method == "wsum":
            first = fuse(*inputs, method="wsum", weights=setting.weights)
        else:
            first = fuse(*inputs, method="rrf", rrf_k=setting.rrf_k if setting.rrf_k is not None else RRF_K)
        rerankers = self.space.rerankers if setting.reranker else ()
        pipeline = Pipeline(first, *rerankers, depth=setting.depth, budget=setting.budget, corpus=self.corpus)
        result = pipeline.run(queries, cache=self.cache, **self.options)
        _count(result, counts, who)
        return result


def _count(result: PipelineResult, counts: list[tuple[str, str, str, int, int]], who: str) -> None:
    for name, out in result.stages.items():
        ran = int((~out.skipped).sum())
        counts.append((who, name, out.role, out.cache_hits, ran - out.cache_hits))


@contextlib.contextmanager
def _cache_dir(cache: Any) -> Iterator[Any]:
    if cache is not None:
        yield cache
        return
    with tempfile.TemporaryDirectory(prefix="rag_eval-tune-") as folder:
        yield folder


def _inputs(
    given: Collection | Mapping[str, str], qrels: Qrels | Mapping[str, Mapping[str, int]] | None
) -> tuple[dict[str, str], Qrels, frozenset[str] | None]:
    if isinstance(given, Collection):
        judged = given.qrels if qrels is None else qrels
        queries, corpus = dict(given.queries), frozenset(given.corpus)
    elif isinstance(given, Mapping):
        if qrels is None:
            raise InputError("qrels: needed to tune on queries (a Collection brings its own)")
        queries, corpus, judged = dict(given), None, qrels
    else:
        raise InputError(
            f"collection_or_queries must be a Collection or {{query_id: text}}, not {type(given).__name__}"
        )
    if len(queries) < 2:
        raise InputError(
            f"queries: tuning needs two queries or more (a tuning and a held-out part), not {len(queries)}"
        )
    if not isinstance(judged, Qrels):
        if not isinstance(judged, Mapping):
            raise InputError(f"qrels must be a Qrels or {{query_id: {{doc_id: grade}}}}, not {type(judged).__name__}")
        judged = Qrels.from_dict(judged)
    return queries, judged, corpus


def _metric(metric: Any) -> str:
    if not isinstance(metric, str) or not metric.strip():
        raise InputError(f"metric must be one metric name (e.g. 'recall@budget'), not {metric!r}")
    base, at, cut = metric.strip().rpartition("@")
    if at and cut.lower() in ("budget", "depth"):
        return f"{parse_metric(base + '@1')!s}"[: -len("@1")] + f"@{cut.lower()}"
    return str(parse_metric(metric))


def _split(
    split: Any, queries: Mapping[str, str], seed: int, groups: Mapping[str, Any] | None = None
) -> tuple[list[str], list[str], dict[str, Any]]:
    """The tuning and held-out query ids, and what the split rests on (see the module's docstring): queries of one
    group (one normalised text, or one key of ``groups``) stay on one side."""
    from ..data.groups import group_split, query_groups, straddling

    ids = sorted(queries)
    labels = query_groups(ids, queries, groups)
    if isinstance(split, (str, os.PathLike)):
        return _saved_split(os.fspath(split), queries, seed, groups, ids, labels)
    if isinstance(split, numbers.Real) and not isinstance(split, bool):
        share = check_share(split, "split", why=" (the tuning share of the queries)")
        return group_split(ids, labels, share, seed, what="split")
    if isinstance(split, (tuple, list)) and len(split) == 2 and not any(isinstance(p, str) for p in split):
        parts = [list(p) for p in split]
        known = set(ids)
        for part, name in zip(parts, ("tuning", "held-out"), strict=True):
            if not part:
                raise InputError(f"split: the {name} part is empty")
            unknown = next((q for q in part if q not in known), None)
            if unknown is not None:
                raise InputError(f"split: {name} query {unknown!r} is not among the queries")
            if len(set(part)) != len(part):
                raise InputError(f"split: the {name} part names a query twice")
        both = set(parts[0]) & set(parts[1])
        if both:
            raise InputError(f"split: query {sorted(both)[0]!r} is in both the tuning and the held-out part")
        of = dict(zip(ids, labels.tolist(), strict=True))
        pair = straddling(parts[0], parts[1], of)
        if pair is not None:
            raise InputError(
                f"split: tuning query {pair[0]!r} and held-out query {pair[1]!r} are one group (the same text after "
                "normalisation, or one group key): a held-out query must not be asked in the tuning part"
            )
        sizes = np.bincount(labels)
        facts = {
            "groups": len(sizes),
            "grouped_queries": int(sizes[sizes > 1].sum()),
            "largest_group": int(sizes.max()),
            "tuning": len(parts[0]),
            "held_out": len(parts[1]),
        }
        return parts[0], parts[1], facts
    raise InputError(
        f"split must be a share in (0, 1), (tuning_ids, held_out_ids) or a saved tuning.json, not {split!r}"
    )


def _saved_split(
    path: str, queries: Mapping[str, str], seed: int, groups: Mapping[str, Any] | None, ids: list[str], labels: Any
) -> tuple[list[str], list[str], dict[str, Any]]:
    """The split a saved result (``rag-eval tune -o OUT``'s ``tuning.json``) records, checked against how it was
    made: a seeded share is drawn again (its seed and share, these queries and groups) and must give the same two
    parts; a given split must still be disjoint, known and hold no group on both sides."""
    import json

    from ..data.groups import group_split
    from ..data.records import differ

    try:
        with open(path, "rb") as file:
            record = json.loads(file.read())
        settings, parts = record["settings"], record["split"]
        tuning, held = list(parts["tuning"]), list(parts["held_out"])
        made = settings["split"]
        recorded_seed = settings["seed"]
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=path) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(
            f"not a saved tuning result (tuning.json with 'settings' and 'split'): {type(exc).__name__} {exc}",
            source=path,
        ) from None
    if made == "given":
        try:
            return _split((tuning, held), queries, seed, groups)
        except InputError as exc:
            raise InputError(exc.problem, source=path) from None
    if isinstance(made, bool) or not isinstance(made, (int, float)) or not isinstance(recorded_seed, int):
        raise InputError(f"its split {made!r} (seed {recorded_seed!r}) is not a share and a seed", source=path)
    again, again_held, facts = group_split(ids, labels, float(made), recorded_seed, what=path)
    if set(again) != set(tuning) or set(again_held) != set(held):
        raise InputError(
            f"its split is not the one its record gives (share {made}, seed {recorded_seed}, grouped by "
            f"{(settings.get('grouping') or {}).get('by', 'query id')}) over these queries: tuning part: "
            + (differ(tuning, again, have_name="the file", want_name="the draw") or "the same")
            + "; held-out part: "
            + (differ(held, again_held, have_name="the file", want_name="the draw") or "the same"),
            source=path,
        )
    return again, again_held, facts


def _candidates(space: Space, search: str, trials: int | None, seed: int) -> list[Setting]:
    every = space.settings()
    check_choice(search, "search", SEARCHES)
    if search == "grid":
        if trials is not None:
            raise InputError("trials: the number of settings a random search draws; a grid tries every one")
        return every
    if trials is None:
        raise InputError("trials: a random search needs the number of settings to draw")
    trials = check_int(trials, "trials")
    if trials > len(every):
        raise InputError(f"trials={trials}, but the space holds {len(every)} settings (a grid tries them all)")
    drawn = np.random.default_rng([seed, 1]).choice(len(every), size=trials, replace=False)
    return [every[i] for i in sorted(drawn.tolist())]


def _qrels_of(qrels: Qrels, ids: Sequence[str]) -> Qrels:
    """The judgements of the queries ``ids`` (a query without any stays without)."""
    wanted = set(ids)
    return Qrels.from_dict({q: dict(g) for q, g in qrels.judgements.items() if q in wanted})
