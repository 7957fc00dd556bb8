"""``rag-eval tune``: search pipeline settings on labels, with the best one's value on held-out queries (see
docs/cli.md and docs/tuning.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import InputError
from ._common import SHARE, count, option, say, shared, show

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    tn = commands.add_parser(
        "tune",
        help="tune fusion weights, depth, budget or a reranker on labels, with held-out validation",
        description="Search pipeline settings on a BEIR-layout collection: the retrievers (default bm25 and dense) "
        "fused by wsum (alpha) or rrf (rrf_k), the depth, the budget, a reranker on or off (--space NAME=VALUES). "
        "The best setting by one metric (-m once; default recall@budget) on a seeded tuning split of the queries "
        "is reported with its value on the held-out rest and a bootstrap interval; the whole grid is printed and, "
        "with -o, written with a plot. Each setting runs through the stage cache: only what changed is computed. "
        "See docs/tuning.md. The built-ins need the models extra.",
    )
    shared(tn, "beir", required=True)
    shared(tn, "split")
    tn.add_argument(
        "--space",
        action="append",
        metavar="NAME=VALUES",
        help="a setting and its values, repeatable: alpha=0:1:0.1 (A:B:STEP), rrf_k=10,60, method=rrf,wsum, "
        "weights=0.5/0.5,0.7/0.3, depth=20,100, budget=3,5, reranker=on,off",
    )
    tn.add_argument(
        "--retriever",
        action="append",
        dest="retrievers",
        metavar="NAME",
        help="bm25, dense, or package.module:function (the collection in, a Retriever out); repeatable, two or "
        "more are fused (default: bm25 and dense)",
    )
    tn.add_argument(
        "--reranker",
        metavar="NAME",
        help="minilm, or package.module:function (the collection in, a Reranker out): what reranker=on adds",
    )
    shared(tn, "metric")
    option(
        tn,
        "--tune-share",
        number=SHARE,
        default="0.5",
        metavar="SHARE",
        help="the share of the queries (seeded draw) to tune on; the rest are held out (default 0.5)",
    )
    tn.add_argument(
        "--groups",
        metavar="FILE",
        help="query_id<TAB>group lines (or a JSON object): queries of one group stay on one side of the split, as "
        "queries asked twice (one normalised text) always do",
    )
    tn.add_argument(
        "--split-from",
        metavar="TUNING_JSON",
        help="reuse the split a saved result (OUT/tuning.json) records, checked against its seed and share first",
    )
    tn.add_argument("--search", choices=["grid", "random"], default="grid", help="every setting, or --trials drawn")
    option(tn, "--trials", number=count(), metavar="N", help="settings a random search draws (seeded)")
    shared(tn, "depth", help="candidates asked of the first stage, when --space has no depth (default 100)")
    shared(tn, "budget")
    shared(tn, "seed")
    shared(tn, "resamples")
    shared(tn, "cache")
    shared(tn, "out", help="a folder to write the grid (tuning.csv), the result (tuning.json) and the plot to")
    shared(tn, "no_plots")


def run(args: argparse.Namespace) -> int:
    from ..data.collection import Collection
    from ..data.groups import read_groups
    from ..drivers.tuning import Space, parse_space, tune

    metrics = args.metrics or ["recall@budget"]
    if len(metrics) != 1:
        raise InputError(f"tune optimises one metric: give -m once, not {len(metrics)} times")
    spec = parse_space(args.space or [])
    if args.depth is not None and "depth" in spec:
        raise InputError("give the depth once: --depth, or depth= in --space")
    if args.budget != "5" and "budget" in spec:
        raise InputError("give the budget once: --budget, or budget= in --space")
    spec.setdefault("depth", args.depth if args.depth is not None else 100)
    spec.setdefault("budget", int(args.budget) if args.budget.isascii() and args.budget.isdigit() else args.budget)
    collection = Collection.from_beir(args.beir, split=args.split)
    out = Path(args.out) if args.out is not None else None
    cache = args.cache if args.cache is not None else (str(out / "cache") if out is not None else None)
    stages = _Stages(collection, cache, max(spec["depth"]) if isinstance(spec["depth"], list) else spec["depth"])
    retrievers = [stages.make(name, "retriever") for name in args.retrievers or ["bm25", "dense"]]
    rerankers = [stages.make(args.reranker, "reranker")] if args.reranker is not None else []
    from ..builtin.pipelines import BATCH_SIZE

    found = tune(
        Space(retrievers, rerankers=rerankers, **spec),
        collection,
        metric=metrics[0],
        split=args.split_from if args.split_from is not None else args.tune_share,
        groups=None if args.groups is None else read_groups(args.groups),
        search=args.search,
        trials=args.trials,
        seed=args.seed,
        cache=cache,
        resamples=args.resamples,
        batch_size=BATCH_SIZE,
    )
    shown = found.table[["setting", "value", "n", "from_cache", "computed", "best"]]
    show(shown.to_string(index=False, float_format=lambda v: f"{v:.4f}") + "\n\n" + found.render() + "\n")
    if out is not None:
        _write(found, out, plots=not args.no_plots)
        say(f"tuning of {len(found.table)} settings -> {out}")
    return 0


class _Stages:
    """The retrievers and rerankers --retriever and --reranker name: a built-in one (its parts made once, over the
    collection and the cache) or package.module:function called with the collection."""

    def __init__(self, collection: Any, cache: str | None, depth: int) -> None:
        self._collection, self._cache, self._depth = collection, cache, depth
        self._parts: Any = None

    def make(self, name: str, kind: str) -> Any:
        if ":" in name:
            import importlib

            module, _, attribute = name.partition(":")
            try:
                function = getattr(importlib.import_module(module), attribute)
            except (ImportError, AttributeError) as exc:
                raise InputError(f"--{kind} {name!r}: cannot load it: {exc}") from None
            return function(self._collection)
        builtin = {"retriever": ("bm25", "dense"), "reranker": ("minilm",)}[kind]
        if name not in builtin:
            raise InputError(f"--{kind} {name!r}: a built-in one ({', '.join(builtin)}) or package.module:function")
        if self._parts is None:
            from ..builtin.pipelines import Parts

            self._parts = Parts(self._collection, self._cache)
        return self._parts.rerank() if name == "minilm" else getattr(self._parts, name)(self._depth)


def _write(found: Any, out: Path, *, plots: bool) -> None:
    """The grid, the result and the plot, all three or none (docs/cli.md)."""
    import json
    from dataclasses import asdict

    from .._escape import csv_text
    from .._files import all_or_none, write_output

    record = {
        "best": found.best.label(),
        "tuning_value": found.tuning_value,
        # what the held-out value rests on too (n of the held-out queries, NaN, min n); no interval: null
        "held_out": {k: (None if v != v else v) for k, v in asdict(found.held_out).items()},
        "cache_hits": found.cache_hits,
        "computed": found.computed,
        "settings": found.settings,
        "split": {"tuning": list(found.split[0]), "held_out": list(found.split[1])},
    }
    with all_or_none(out):
        write_output(out / "tuning.csv", csv_text(found.table).encode("utf-8"))
        write_output(out / "tuning.json", (json.dumps(record, indent=1, default=str) + "\n").encode("utf-8"))
        if plots:
            found.plot(out / "tuning.svg")
