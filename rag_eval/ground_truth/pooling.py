"""Pooling: what to label next. The union of the top ``depth`` of every system and stage compared, less what the
qrels already judge.

Strategies, the saved format and the id rules: ``docs/labelling.md``, "1. Pool" and "File formats"."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import numbers
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .._checks import check_int
from .._escape import spreadsheet_cell
from .._files import remove_temporaries, write_output
from ..data.ids import check_writable, unwritable_reason
from ..data.qrels import Qrels
from ..data.run import Run
from ..errors import InputError
from ..stages import PipelineResult

if TYPE_CHECKING:
    import pandas as pd

    from ..data.input_files import InputFile
    from ..stages import StageOutput

__all__ = ["Pool", "PoolItem", "pool"]

Strategy = Literal["depth", "rrf"]
RRF_K = 60
_CSV_COLUMNS = ("query_id", "doc_id", "systems", "ranks", "rrf", "query", "text", "pool_id", "depth", "strategy")
_CSV_HEADER = ",".join(_CSV_COLUMNS[:4]) + ","
Systems = Sequence[Run | PipelineResult] | Mapping[str, Run | PipelineResult]


@dataclass(frozen=True)
class PoolItem:
    """One (query, chunk) pair to judge: who returned it, at which rank (1-based), and the texts where known."""

    query_id: str
    doc_id: str
    ranks: Mapping[str, int]  # system -> rank, in the order the systems were given
    rrf: float  # sum of 1 / (60 + rank) over the systems
    query: str | None = None
    text: str | None = None

    def __post_init__(self) -> None:
        for name in ("query_id", "doc_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise InputError(f"pool item: {name} must be a non-empty str, not {value!r}")
        where = f"pool item (query {self.query_id!r}, doc {self.doc_id!r})"
        if not isinstance(self.ranks, Mapping) or not self.ranks:
            raise InputError(f"{where}: ranks must map each system that returned it to a rank")
        for system, rank in self.ranks.items():
            if not isinstance(system, str) or not system:
                raise InputError(f"{where}: system {system!r} is not a non-empty str")
            check_int(rank, f"{where}: the rank by {system!r}", high=None)
        if (
            isinstance(self.rrf, bool)
            or not isinstance(self.rrf, numbers.Real)
            or not math.isfinite(self.rrf)
            or self.rrf < 0
        ):
            raise InputError(f"{where}: rrf must be a finite number >= 0, not {self.rrf!r}")
        for name in ("query", "text"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InputError(f"{where}: {name} must be a str or None, not {type(value).__name__}")

    @property
    def systems(self) -> tuple[str, ...]:
        return tuple(self.ranks)

    @property
    def best_rank(self) -> int:
        return min(self.ranks.values())


@dataclass(frozen=True)
class Pool:
    """The items to judge, query by query (queries in the order the systems first name them), with how they were
    pooled. ``already_judged`` counts the pooled pairs left out because the qrels judged them. ``order``, when
    not None, says how the items were reordered after pooling (a JSON object with a ``"by"`` key, e.g. what
    :func:`~rag_eval.ground_truth.ordering.impact_order` records); it is part of the provenance and of the id."""

    items: tuple[PoolItem, ...]
    depth: int
    strategy: Strategy
    systems: tuple[str, ...]
    already_judged: int = 0
    id: str = field(default="")
    order: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "depth", check_int(self.depth, "pool depth"))
        if self.strategy not in ("depth", "rrf"):
            raise InputError(f"pool strategy must be 'depth' or 'rrf', not {self.strategy!r}")
        if not isinstance(self.systems, tuple) or any(not isinstance(n, str) or not n for n in self.systems):
            raise InputError(f"pool systems must be a tuple of non-empty str, not {self.systems!r}")
        object.__setattr__(
            self, "already_judged", check_int(self.already_judged, "pool already_judged", low=0, high=None)
        )
        if not isinstance(self.id, str):
            raise InputError(f"pool id must be a str, not {self.id!r}")
        if not isinstance(self.items, tuple) or any(not isinstance(i, PoolItem) for i in self.items):
            raise InputError("pool items must be a tuple of PoolItem")
        _check_trec_ids(self.items, "pool")
        if self.order is not None:
            _check_order(self.order)
        if not self.id:
            object.__setattr__(self, "id", self._fingerprint())

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[PoolItem]:
        return iter(self.items)

    def __repr__(self) -> str:
        return (
            f"Pool({len(self.items)} items, {len(self.query_ids)} queries, depth={self.depth}, "
            f"strategy={self.strategy!r}, systems={list(self.systems)}, id={self.id!r})"
        )

    @property
    def query_ids(self) -> list[str]:
        return list(dict.fromkeys(item.query_id for item in self.items))

    @property
    def provenance(self) -> dict[str, Any]:
        """What a judgement records about the pool it came from (``order`` only where the pool has one)."""
        provenance: dict[str, Any] = {
            "id": self.id,
            "depth": self.depth,
            "strategy": self.strategy,
            "systems": list(self.systems),
            "already_judged": self.already_judged,
        }
        if self.order is not None:
            provenance["order"] = json.loads(json.dumps(self.order))
        return provenance

    def _fingerprint(self) -> str:
        digest = hashlib.sha256(json.dumps([self.depth, self.strategy, list(self.systems)]).encode())
        if self.order is not None:  # a pool without an order keeps the id it always had
            digest.update(json.dumps(self.order, sort_keys=True).encode())
        for item in self.items:
            digest.update(json.dumps([item.query_id, item.doc_id, dict(item.ranks)]).encode())
        return digest.hexdigest()[:12]

    # ----- views and files ----------------------------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """One row per item: ``query_id, doc_id, systems, ranks``, then ``query`` and ``text`` where any is known,
        then ``rrf``. ``systems`` is a tuple of names; ``ranks`` a ``{system: rank}`` dict."""
        import pandas as pd

        columns: dict[str, list[Any]] = {
            "query_id": [i.query_id for i in self.items],
            "doc_id": [i.doc_id for i in self.items],
            "systems": [i.systems for i in self.items],
            "ranks": [dict(i.ranks) for i in self.items],
        }
        if any(i.query is not None for i in self.items):
            columns["query"] = [i.query for i in self.items]
        if any(i.text is not None for i in self.items):
            columns["text"] = [i.text for i in self.items]
        columns["rrf"] = [i.rrf for i in self.items]
        return pd.DataFrame(
            {name: pd.Series(values, dtype=object) for name, values in columns.items()}
            | {"rrf": pd.Series(columns["rrf"], dtype=float)}
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """One JSON object per item, with the pool's provenance on every line. Every id round-trips: a Pool holds no
        id that a JSON line or the TREC qrels of its labelling could not give back (see the module doc)."""
        provenance = self.provenance
        lines = [
            json.dumps(
                {
                    "query_id": i.query_id,
                    "doc_id": i.doc_id,
                    "systems": list(i.systems),
                    "ranks": dict(i.ranks),
                    "rrf": i.rrf,
                    "query": i.query,
                    "text": i.text,
                    "pool": provenance,
                },
                ensure_ascii=False,
            )
            for i in self.items
        ]
        _write_atomically(Path(path), "".join(line + "\n" for line in lines))

    def to_csv(self, path: str | os.PathLike[str]) -> None:
        """A spreadsheet view: ``systems`` joined with ``;``, ``ranks`` as JSON, the pool id on every row; a text
        cell that a spreadsheet would read as a formula (``=``, ``+``, ``-``, ``@`` first) behind a ``'``."""
        import io

        rows = [
            [
                spreadsheet_cell(i.query_id),
                spreadsheet_cell(i.doc_id),
                spreadsheet_cell(";".join(i.systems)),
                json.dumps(dict(i.ranks)),
                repr(i.rrf),
                spreadsheet_cell(i.query or ""),
                spreadsheet_cell(i.text or ""),
                self.id,
                self.depth,
                self.strategy,
            ]
            for i in self.items
        ]
        # the csv module leaves a field with a lone "\r" unquoted under "\n" line ends: then every field is quoted
        for quoting in (csv.QUOTE_MINIMAL, csv.QUOTE_ALL):
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n", quoting=quoting)
            writer.writerows([_CSV_COLUMNS, *rows])
            if "\r" not in out.getvalue():
                break
        _write_atomically(Path(path), out.getvalue())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Pool:
        """Read a pool written by :meth:`save`; every problem names the file and line."""
        from ..data.input_files import read_input

        file = read_input(path)
        number, opening = next(file.lines(), (1, ""))
        if opening.startswith(_CSV_HEADER):  # the spreadsheet view: it loses the pool's systems and texts' nulls
            raise file.error(
                "this is a pool's CSV view (Pool.to_csv, for spreadsheets), which is not read back: give the "
                "pool's JSONL file (Pool.save; rag-eval pool -o POOL.jsonl)",
                number,
            )
        items: list[PoolItem] = []
        header: dict[str, Any] | None = None
        seen: set[tuple[str, str]] = set()
        for number, record in file.json_objects():
            item, provenance = _item_of(record, file, number)
            for what, value, first in (("query id", item.query_id, True), ("doc id", item.doc_id, False)):
                reason = unwritable_reason(value, starts_line=first)
                if reason is not None:
                    raise file.error(f"{what} {value!r} {reason}: it cannot be labelled into TREC qrels", number)
            if header is None:
                header = provenance
            elif provenance != header:
                raise file.error(
                    f"pool {provenance.get('id')!r} differs from line 1's {header.get('id')!r}: "
                    "one file holds one pool",
                    number,
                )
            if (item.query_id, item.doc_id) in seen:
                raise file.error(f"query {item.query_id!r}, doc {item.doc_id!r} is pooled twice", number)
            seen.add((item.query_id, item.doc_id))
            items.append(item)
        assert header is not None  # read_input refuses a file without content lines
        try:
            made = cls(
                tuple(items),
                header["depth"],
                header["strategy"],
                tuple(header["systems"]),
                already_judged=header.get("already_judged") or 0,
                id=header["id"],
                order=header.get("order"),
            )
        except InputError as exc:
            raise file.error(f"field 'pool': {exc}", 1) from None
        if made.id != made._fingerprint():  # the id is the hash of what the pool holds: checked when read
            raise file.error(
                f"the pool id {made.id!r} it records is not that of the items and settings it holds "
                f"({made._fingerprint()!r}): the file was edited after Pool.save, so the judgements recording that id "
                "are not of this pool; pool again",
                1,
            )
        return made


def pool(
    runs: Systems,
    *,
    depth: int,
    qrels: Qrels | Mapping[str, Mapping[str, int]] | None = None,
    strategy: Strategy = "depth",
    queries: Mapping[str, str] | None = None,
    texts: Mapping[str, Any] | None = None,
) -> Pool:
    """Pool the top ``depth`` of every system compared, less the pairs ``qrels`` already judge.

    ``runs`` is a list of runs (named by ``Run.name``) or pipeline results, or a ``{name: run or result}``
    mapping. Each stage of a pipeline result is a system of its own, named ``"name/stage"``, and brings its
    query texts and chunk texts. ``queries`` ({query id: text}) and ``texts`` ({doc id: text, or a
    :class:`~rag_eval.data.collection.Chunk` as in ``Collection.corpus``) fill in the texts for plain runs.
    Ranks follow each run's own order (trec_eval's tie rule for a run ranked by score).
    """
    depth = check_int(depth, "depth")
    if strategy not in ("depth", "rrf"):
        raise InputError(f"strategy must be 'depth' or 'rrf', not {strategy!r}")
    judged = qrels if qrels is None or isinstance(qrels, Qrels) else Qrels.from_dict(qrels)
    rankings, query_texts, doc_texts = _systems(runs, depth)
    query_texts.update(queries or {})
    for doc, value in (texts or {}).items():
        if not isinstance(value, str):  # a Chunk shows its title and text, as a retriever indexed them
            value = getattr(value, "content", None) or getattr(value, "text", None)
        doc_texts.setdefault(doc, value)

    by_query: dict[str, dict[str, dict[str, int]]] = {}
    for system, ranking in rankings.items():
        for query, docs in ranking.items():
            # what the labelling writes is TREC qrels: refuse, naming the system, an id that cannot come back
            check_writable([query], "query id", f"pool: system {system!r}")
            check_writable(docs, f"query {query!r}: doc id", f"pool: system {system!r}", starts_line=False)
            pooled = by_query.setdefault(query, {})
            for rank, doc in enumerate(docs, start=1):
                pooled.setdefault(doc, {}).setdefault(system, rank)
    _announce_joins(by_query, queries, texts)
    if judged is not None and len(judged):  # the runs' ids written like the qrels' but not the same: said
        _announce_near_misses(by_query, judged)
    items: list[PoolItem] = []
    already = 0
    for query, pooled in by_query.items():
        known = judged[query] if judged is not None and query in judged else {}
        chosen = []
        for doc, ranks in pooled.items():
            if doc in known:
                already += 1
                continue
            rrf = sum(1.0 / (RRF_K + r) for r in ranks.values())
            chosen.append(PoolItem(query, doc, ranks, rrf, query_texts.get(query), doc_texts.get(doc)))
        if strategy == "rrf":
            chosen.sort(key=lambda i: (-i.rrf, i.doc_id))
        else:
            chosen.sort(key=lambda i: (i.best_rank, -len(i.ranks), i.doc_id))
        items.extend(chosen)
    return Pool(tuple(items), depth, strategy, tuple(rankings), already_judged=already)


# ----- helpers --------------------------------------------------------------------------------------------------


def _announce_near_misses(by_query: Mapping[str, Mapping[str, object]], judged: Qrels) -> None:
    """Query and doc ids of the runs that the qrels write another way (case, Unicode normalisation, whitespace,
    leading zeros): ``NearMissIds``, once per kind of id (:mod:`rag_eval.data.near_miss`); never merged."""
    from ..data.joins import user_stacklevel
    from ..data.near_miss import warn_near_misses

    judged_docs = {d for q in judged.query_ids for d in judged[q]}
    for ids, pooled, known in (
        ("query id(s)", by_query.keys(), judged.query_ids),
        ("doc id(s)", {d for docs in by_query.values() for d in docs}, judged_docs),
    ):
        warn_near_misses(
            pooled,
            known,
            subject="pool",
            ids=ids,
            other="one of the qrels",
            left_name="run",
            right_name="qrels",
            consequence="they are different ids, so those pairs are pooled as unjudged",
            stacklevel=user_stacklevel(),
        )


def _announce_joins(
    by_query: Mapping[str, Mapping[str, object]], queries: Mapping[str, str] | None, texts: Mapping[str, Any] | None
) -> None:
    """The pool's doc ids joined with the ``texts`` given (a corpus), its query ids with the ``queries`` given:
    matched k of n, said when short (:func:`rag_eval.data.joins.join`); no doc id in the corpus is an error (every
    item would be labelled without its text: the wrong corpus, or ids spelled another way)."""
    from ..data.joins import join

    if texts is not None:
        docs = np.fromiter((d for pooled in by_query.values() for d in pooled), dtype=object)
        join(
            docs,
            texts.keys(),
            what="pooled doc ids",
            where=f"the corpus given ({len(texts)} chunks)",
            required=True,
            consequence="the items not matched have no text to label",
        )
    if queries is not None:
        join(
            list(by_query),
            queries.keys(),
            what="pooled query ids",
            where=f"the queries given ({len(queries)})",
            required=bool(queries),
            consequence="the items of the queries not matched are shown without their question",
        )


def _systems(
    runs: Systems, depth: int
) -> tuple[dict[str, dict[str, list[str]]], dict[str, str], dict[str, str | None]]:
    """``{system: {query: top-depth doc ids}}`` with the query and chunk texts that pipeline results carry."""
    if isinstance(runs, (Run, PipelineResult)):
        runs = [runs]
    if isinstance(runs, Mapping):
        named = list(runs.items())
    elif isinstance(runs, Sequence) and not isinstance(runs, (str, bytes)):
        named = [
            (r.name if isinstance(r, Run) else repr(r.pipeline) if isinstance(r, PipelineResult) else "?", r)
            for r in runs
        ]
    else:
        raise TypeError("runs must be a list of Runs or pipeline results, or a {name: run or result} mapping")
    if not named:
        raise ValueError("nothing to pool: give at least one run or pipeline result")
    rankings: dict[str, dict[str, list[str]]] = {}
    query_texts: dict[str, str] = {}
    doc_texts: dict[str, str | None] = {}

    def add(system: str, ranking: dict[str, list[str]]) -> None:
        if system in rankings:
            raise ValueError(f"two systems are named {system!r}; pass a {{name: run}} mapping to name them")
        rankings[system] = ranking

    for name, system in named:
        if isinstance(system, Run):
            add(name, {q: [d for d, _ in system.ranking(q)[:depth]] for q in system.query_ids})
        elif isinstance(system, PipelineResult):
            query_texts.update(system.queries)
            for stage, out in system.stages.items():
                ranking, texts = _top_of(out, depth)
                for doc, text in texts.items():
                    doc_texts.setdefault(doc, text)
                add(f"{name}/{stage}", ranking)
        else:
            raise TypeError(f"system {name!r} is a {type(system).__name__}, not a Run or a pipeline result")
    return rankings, query_texts, doc_texts


def _top_of(out: StageOutput, depth: int) -> tuple[dict[str, list[str]], dict[str, str]]:
    """A stage's top ``depth`` doc ids per answered query (a failed query has no hits and is left out), and the
    first text seen of each of those chunks, read from the stage's columns (whole columns to lists, no Hit)."""
    import pyarrow as pa

    from ..stages.hit_table import field_or_none

    offsets, hits = out.hit_columns()
    lengths = np.diff(offsets)
    top = np.minimum(lengths, depth)
    rank = np.arange(int(offsets[-1])) - np.repeat(offsets[:-1], lengths)
    kept = pa.array(rank < np.repeat(top, lengths))
    docs = hits.field("doc_id").filter(kept).to_pylist()
    bounds = np.zeros(len(top) + 1, np.int64)
    np.cumsum(top, out=bounds[1:])
    b = bounds.tolist()
    ids = out.query_ids
    ranking = {ids[i]: docs[b[i] : b[i + 1]] for i in np.flatnonzero(~out.failed).tolist()}
    text = field_or_none(hits, "text")
    texts: dict[str, str] = {}
    if text is not None and text.null_count < len(text):
        with_text = text.filter(kept)
        valid = with_text.is_valid()
        pairs = zip(
            reversed(hits.field("doc_id").filter(kept).filter(valid).to_pylist()),
            reversed(with_text.filter(valid).to_pylist()),
            strict=True,
        )
        texts = dict(pairs)  # reversed: the first text of a chunk is the one kept
    return ranking, texts


def _item_of(record: dict[str, Any], file: InputFile, number: int) -> tuple[PoolItem, dict[str, Any]]:
    kind: type[object]
    for key, kind in (("query_id", str), ("doc_id", str), ("ranks", dict), ("pool", dict)):
        if not isinstance(record.get(key), kind):
            raise file.error(f"field {key!r} is missing or not a {kind.__name__} (is this a pool file?)", number)
    ranks = record["ranks"]
    if not ranks or any(not isinstance(r, int) or isinstance(r, bool) or r < 1 for r in ranks.values()):
        raise file.error("field 'ranks' must map each system to a rank >= 1", number)
    provenance = record["pool"]
    for key, kind in (("id", str), ("depth", int), ("strategy", str), ("systems", list)):
        if not isinstance(provenance.get(key), kind):
            raise file.error(f"field 'pool.{key}' is missing or not a {kind.__name__}", number)
    texts = {}
    for key in ("query", "text"):
        value = record.get(key)
        if value is not None and not isinstance(value, str):
            raise file.error(f"field {key!r} must be a string or null", number)
        texts[key] = value
    rrf = sum(1.0 / (RRF_K + r) for r in ranks.values())
    try:
        item = PoolItem(record["query_id"], record["doc_id"], ranks, rrf, texts["query"], texts["text"])
    except InputError as exc:
        raise file.error(str(exc), number) from None
    return item, provenance


def _check_order(order: object) -> None:
    """A pool's ``order``: a JSON object (JSON values only) naming in ``"by"`` how the items were ordered."""
    if not isinstance(order, Mapping) or not isinstance(order.get("by"), str) or not order["by"]:
        raise InputError(f"pool order must be a JSON object with a non-empty 'by' string, not {order!r}")
    try:
        json.dumps(order, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"pool order must hold JSON values only: {exc}") from None


def _check_trec_ids(items: Sequence[PoolItem], where: str) -> None:
    """Refuse the first query or doc id of ``items`` that cannot round-trip through a TREC qrels line."""
    for item in items:
        if unwritable_reason(item.query_id) is not None:
            check_writable([item.query_id], "query id", where)
        if unwritable_reason(item.doc_id, starts_line=False) is not None:
            check_writable([item.doc_id], f"query {item.query_id!r}: doc id", where, starts_line=False)


def _write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` whole and durably (:func:`rag_eval._files.write_output`: an InputError naming it on a
    failure, which leaves its old content); a temporary left by an earlier, killed writer is removed first."""
    remove_temporaries(path)
    write_output(path, text.encode("utf-8"))
