"""Drift between two snapshots of one pipeline on one query set: for every relevant item delivered (within the
budget) before and not after, and the reverse, its cause, with a paired test of the change in recall@budget.
See docs/drift.md.

Causes, decided in this order for a lost item (``after`` and ``before`` swapped for a gained one):

- ``removed``: gone from the after corpus; ``chunking_changed`` when chunk maps say its source document is still
  there, cut into other chunks (those overlapping its span are named);
- ``content_changed``: its content hash (:func:`rag_eval.data.traces.content_id`) differs;
- ``crowded_out``: at the stage where it fell out, documents new to the corpus now rank above it, enough of them
  that without them it would have stayed (``rank - new above < cut``);
- ``stage_changed``: that stage's fingerprint differs, and the new documents do not explain the move;
- ``undetermined``: what was given cannot decide it (the reason is said): no guess.

The module lives with the statistics (layer 5) because the verdict carries a paired test.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._markdown import markdown_cell
from ..data.collection import Collection
from ..data.qrels import Qrels
from ..data.spans import ChunkRef
from ..data.traces import content_id
from ..errors import InputError
from ..stages.result import PipelineResult, StageOutput
from .paired import method_label, min_n, p_value, pair, paired_interval

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CAUSES", "Drift", "drift"]

CAUSES = ("crowded_out", "content_changed", "removed", "stage_changed", "chunking_changed", "undetermined")
# a gained item's cause, read the other way round (before and after swapped)
GAINED_AS = {"removed": "added", "crowded_out": "crowding_gone"}
ITEM_COLUMNS = ["direction", "query_id", "doc_id", "grade", "stage", "cause", "detail"]
METRIC = "recall@budget"
SHOWN_IDS = 5


@dataclass(frozen=True, eq=False)
class Drift:
    """What :func:`drift` returns.

    - ``items``: one row per relevant item delivered on one side only: ``direction`` ("lost": delivered before and
      not after; "gained": the reverse), ``query_id, doc_id, grade``, ``stage`` (where it fell out or came in;
      None when undetermined before a stage is reached), ``cause`` (:data:`CAUSES`; for a gained item ``added``
      and ``crowding_gone`` read ``removed`` and ``crowded_out`` the other way round) and ``detail`` (what the
      verdict rests on);
    - ``recall_before``, ``recall_after``: mean recall@budget over the paired queries; ``diff``, its paired mean
      change (after - before) with ``ci`` (``method``, ``confidence``) and ``p``; ``n`` paired, ``left_out`` in
      words; ``inputs``: what was compared (corpora, chunk maps, fingerprints), in words."""

    items: pd.DataFrame
    recall_before: float
    recall_after: float
    diff: float
    ci: tuple[float, float]
    p: float
    n: int
    left_out: str
    method: str
    confidence: float
    inputs: tuple[str, ...]

    def to_frame(self) -> pd.DataFrame:
        """The items, one row each (:attr:`items`)."""
        return self.items.copy()

    def by_cause(self) -> pd.DataFrame:
        """``direction, cause, items``: how many items each cause explains, most first."""
        counts = self.items.groupby(["direction", "cause"], sort=False).size().reset_index(name="items")
        return counts.sort_values(["direction", "items"], ascending=[False, False], kind="stable", ignore_index=True)

    def by_stage(self) -> pd.DataFrame:
        """``direction, stage, cause, items``: where the items fell out (came in), by cause."""
        frame = self.items.assign(stage=self.items["stage"].fillna("(none)"))
        counts = frame.groupby(["direction", "stage", "cause"], sort=False).size().reset_index(name="items")
        return counts.sort_values(["direction", "items"], ascending=[False, False], kind="stable", ignore_index=True)

    def queries(self, top: int = 10) -> pd.DataFrame:
        """``query_id, lost, gained, net``: the ``top`` queries with the most items lost net of those gained."""
        import pandas as pd

        items = self.items
        lost = items.loc[items["direction"] == "lost", "query_id"].value_counts()
        gained = items.loc[items["direction"] == "gained", "query_id"].value_counts()
        frame = pd.DataFrame({"lost": lost, "gained": gained}).fillna(0).astype(np.int64)
        frame["net"] = frame["lost"] - frame["gained"]
        frame = frame.rename_axis("query_id").reset_index()
        return frame.sort_values(["net", "lost", "query_id"], ascending=[False, False, True], ignore_index=True).head(
            top
        )

    def tables(self, top: int = 10) -> dict[str, Any]:
        """What the change rests on (n paired, left out, method, the inputs compared) and its tables as records
        (counts per cause and per stage, the ``top`` queries most affected): what the JSON output and the pages
        show beside the numbers, each formatting those its own way."""
        return {
            "n": self.n,
            "left_out": self.left_out,
            "method": self.method,
            "inputs": list(self.inputs),
            "by_cause": self.by_cause().to_dict("records"),
            "by_stage": self.by_stage().to_dict("records"),
            "queries": self.queries(top).to_dict("records"),
        }

    def causes(self) -> str:
        """One phrase: how many relevant items were lost, by cause, and how many gained (what a gate's failed rule
        names as its drift)."""
        lost = self.items[self.items["direction"] == "lost"]
        counts = ", ".join(f"{c} {n}" for c, n in lost["cause"].value_counts().items())
        gained = len(self.items) - len(lost)
        return f"{len(lost)} relevant item(s) lost" + (f" ({counts})" if counts else "") + f", {gained} gained"

    def verdict(self) -> str:
        """One line: the change in recall@budget with its interval and test, and what it rests on."""
        low, high = self.ci
        interval = "no interval" if np.isnan(low) else f"{self.confidence:.0%} CI [{low:+.4f}, {high:+.4f}]"
        p = "p n/a" if np.isnan(self.p) else f"p {self.p:.4g}"
        return (
            f"{METRIC} {self.recall_before:.4f} -> {self.recall_after:.4f} ({self.diff:+.4f}, {interval}, {p}; "
            f"{self.method}; {self.left_out})"
        )

    def to_text(self, top: int = 10) -> str:
        lines = [self.verdict(), ""]
        lines += [f"{r['direction']:>6}  {r['cause']:<16} {r['items']}" for r in self.by_cause().to_dict("records")]
        lines += ["", "by stage:"]
        lines += [
            f"{r['direction']:>6}  {r['stage']:<16} {r['cause']:<16} {r['items']}"
            for r in self.by_stage().to_dict("records")
        ]
        lines += ["", "queries most affected (lost, gained, net):"]
        lines += [
            f"  {r['query_id']}: {r['lost']}, {r['gained']}, {r['net']:+d}"
            for r in self.queries(top).to_dict("records")
        ]
        lines += ["", "inputs: " + "; ".join(self.inputs)]
        return "\n".join(lines)

    def to_markdown(self, top: int = 10) -> str:
        out = [f"**{markdown_cell(self.verdict())}**", "", "| direction | cause | items |", "|---|---|---:|"]
        out += [f"| {r['direction']} | {r['cause']} | {r['items']} |" for r in self.by_cause().to_dict("records")]
        out += ["", "| direction | stage | cause | items |", "|---|---|---|---:|"]
        out += [
            f"| {r['direction']} | {markdown_cell(str(r['stage']))} | {r['cause']} | {r['items']} |"
            for r in self.by_stage().to_dict("records")
        ]
        out += ["", "| query | lost | gained | net |", "|---|---:|---:|---:|"]
        out += [
            f"| {markdown_cell(str(r['query_id']))} | {r['lost']} | {r['gained']} | {r['net']:+d} |"
            for r in self.queries(top).to_dict("records")
        ]
        out += ["", "Inputs: " + markdown_cell("; ".join(self.inputs))]
        return "\n".join(out)

    def __repr__(self) -> str:
        lost = int((self.items["direction"] == "lost").sum())
        return f"Drift({lost} lost, {len(self.items) - lost} gained; {self.verdict()})"


Corpus = Collection | Mapping[str, str] | None
Chunks = Mapping[str, ChunkRef] | None


def drift(
    before: PipelineResult,
    after: PipelineResult,
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    *,
    corpus_before: Corpus = None,
    corpus_after: Corpus = None,
    chunks_before: Chunks = None,
    chunks_after: Chunks = None,
    test: str = "randomization",
    confidence: float = 0.95,
    permutations: int = 10000,
    resamples: int = 10000,
    seed: int = 0,
) -> Drift:
    """The relevant items (grade > 0) delivered within the budget by one snapshot and not the other, each with its
    cause (module doc), and the paired change in recall@budget (after - before; ``test`` one of
    :data:`rag_eval.statistics.paired.TESTS` or "bootstrap"). ``corpus_*``: ``{doc_id: content}`` or a
    Collection (its chunks' content): which documents exist and their content hash; without them presence and
    content are read from the hits the stages returned (their ids and texts), and what that cannot decide is
    "undetermined". ``chunks_*``: ``{chunk_id: ChunkRef}`` (:func:`rag_eval.stages.chunk_map`) tell a re-chunked
    item from a removed one. Stages are paired by position (both pipelines must have as many)."""
    import pandas as pd

    from ..reports.evaluation import evaluate

    for name, value in (("before", before), ("after", after)):
        if not isinstance(value, PipelineResult):
            raise TypeError(f"{name} must be a PipelineResult (what Pipeline.run or from_traces returns)")
    if len(before.stages) != len(after.stages):
        raise InputError(
            f"the snapshots have {len(before.stages)} and {len(after.stages)} stages: drift pairs stages by position",
            source="drift",
        )
    if not isinstance(qrels, Qrels):
        qrels = Qrels.from_dict(qrels)
    texts_b, texts_a = _texts(corpus_before), _texts(corpus_after)
    snap_b, snap_a = _Snapshot(before, texts_b, chunks_before), _Snapshot(after, texts_a, chunks_after)
    judged = qrels.to_frame()
    relevant = judged[judged["grade"] > 0]
    common = sorted(set(before.queries) & set(after.queries))
    relevant = relevant[relevant["query_id"].isin(common)]
    del_b = snap_b.delivered_set(relevant)
    del_a = snap_a.delivered_set(relevant)
    rows: list[tuple[Any, ...]] = []
    for direction, frm, to, keys in (
        ("lost", snap_b, snap_a, del_b - del_a),
        ("gained", snap_a, snap_b, del_a - del_b),
    ):
        grades = relevant.set_index(["query_id", "doc_id"])["grade"]
        for q, d in sorted(keys):
            stage, cause, detail = _cause(q, d, frm, to)
            if direction == "gained":
                cause = GAINED_AS.get(cause, cause)
            rows.append((direction, q, d, int(grades.loc[(q, d)]), stage, cause, detail))
    items = pd.DataFrame(rows, columns=ITEM_COLUMNS)
    with warnings.catch_warnings():  # the per-side evaluation's notes are the runs' own, said by their reports
        warnings.simplefilter("ignore")
        values_b = evaluate(qrels, {"before": before}, metrics=[METRIC]).values("before", METRIC, before.final_stage)
        values_a = evaluate(qrels, {"after": after}, metrics=[METRIC]).values("after", METRIC, after.final_stage)
    paired = pair(values_a, values_b, allow_unpaired=True, names=("after", "before"))
    diff = paired.diff
    ok = paired.n >= min_n(test)
    low, high = (
        paired_interval(test, diff, confidence=confidence, resamples=resamples, permutations=permutations, seed=seed)
        if ok
        else (np.nan, np.nan)
    )
    p = p_value(test, paired.x, paired.y, permutations=permutations, seed=seed, resamples=resamples) if ok else np.nan
    inputs = (
        snap_b.described("before"),
        snap_a.described("after"),
        f"stages paired by position: {', '.join(_pairs(before, after))}",
    )
    return Drift(
        items=items,
        recall_before=float(paired.y.mean()) if paired.n else np.nan,
        recall_after=float(paired.x.mean()) if paired.n else np.nan,
        diff=float(diff.mean()) if paired.n else np.nan,
        ci=(float(low), float(high)),
        p=float(p),
        n=paired.n,
        left_out=paired.left_out() + ("" if ok else f"; fewer than {min_n(test)}: no interval"),
        method=method_label(test),
        confidence=confidence,
        inputs=inputs,
    )


def _pairs(before: PipelineResult, after: PipelineResult) -> list[str]:
    return [b if b == a else f"{b} ~ {a}" for b, a in zip(before.stages, after.stages, strict=True)]


def _texts(corpus: Corpus) -> dict[str, str] | None:
    if corpus is None:
        return None
    if isinstance(corpus, Collection):
        return {d: chunk.content for d, chunk in corpus.corpus.items()}
    if not isinstance(corpus, Mapping):
        raise TypeError(f"a corpus is a Collection or {{doc_id: content}}, not {type(corpus).__name__}")
    return {str(d): str(t) for d, t in corpus.items()}


class _Stage:
    """One stage's rankings as ``{query: [doc ids]}`` and the cut that counts (the budget for the last stage, the
    whole output otherwise), with the texts its hits carried."""

    def __init__(self, out: StageOutput, cut: np.ndarray | None) -> None:
        offsets, hits = out.hit_columns()
        docs = np.asarray(hits.field("doc_id").to_numpy(zero_copy_only=False), dtype=object)
        ok = np.flatnonzero(~out.failed)
        ids = out.query_ids
        lengths = np.diff(offsets)
        self.name, self.fingerprint = out.name, out.fingerprint
        self.ranking = {ids[r]: docs[offsets[r] : offsets[r + 1]].tolist() for r in ok.tolist()}
        cuts = lengths if cut is None else cut
        self.cut = {ids[r]: int(cuts[r]) for r in ok.tolist()}
        texts = hits.field("text") if "text" in [f.name for f in hits.type] else None
        self.texts: dict[str, str] = {}
        if texts is not None and texts.null_count < len(texts):
            known = np.asarray(texts.is_valid().to_numpy(zero_copy_only=False), bool)
            values = texts.to_numpy(zero_copy_only=False)
            self.texts = dict(zip(docs[known].tolist(), values[known].tolist(), strict=True))


class _Snapshot:
    def __init__(self, result: PipelineResult, texts: dict[str, str] | None, chunks: Chunks) -> None:
        self.result, self.texts, self.chunks = result, texts, chunks
        final = result.final_stage
        self.stages = [
            _Stage(out, out.delivered(result.pipeline.budget, result.pipeline.tokenizer) if name == final else None)
            for name, out in result.stages.items()
        ]
        self.seen: set[str] = set()
        self.hit_texts: dict[str, str] = {}
        for stage in self.stages:
            for ranking in stage.ranking.values():
                self.seen.update(ranking)
            self.hit_texts.update(stage.texts)
        self.by_doc: dict[str, list[tuple[str, ChunkRef]]] = {}
        for chunk, ref in (chunks or {}).items():
            self.by_doc.setdefault(ref.doc_id, []).append((chunk, ref))

    def delivered_set(self, relevant: pd.DataFrame) -> set[tuple[str, str]]:
        final = self.stages[-1]
        got = {(q, d) for q, ranking in final.ranking.items() for d in ranking[: final.cut[q]]}
        return got & set(zip(relevant["query_id"], relevant["doc_id"], strict=True))

    def content(self, doc: str) -> str | None:
        if self.texts is not None:
            return self.texts.get(doc)
        return self.hit_texts.get(doc)

    def described(self, side: str) -> str:
        corpus = (
            f"corpus given ({len(self.texts)} documents)"
            if self.texts is not None
            else "no corpus (presence and content read from the hits returned)"
        )
        chunks = f"chunk map ({len(self.chunks)} chunks)" if self.chunks is not None else "no chunk map"
        return f"{side}: {self.result.pipeline!r}, {corpus}, {chunks}"


def _cause(q: str, d: str, frm: _Snapshot, to: _Snapshot) -> tuple[str | None, str, str]:
    """``(stage, cause, detail)`` of item ``(q, d)``, delivered by ``frm`` and not by ``to``."""
    present: bool | None
    if to.texts is not None:
        present = d in to.texts
    else:
        present = True if any(d in s.ranking.get(q, ()) for s in to.stages) else None
    if present is None:
        return None, "undetermined", "in no ranking of the query and no corpus given: removed or fallen past the depth"
    if not present:
        return _gone(d, frm, to)
    old, new = frm.content(d), to.content(d)
    if old is None or new is None:
        side = "before" if old is None else "after"
        return None, "undetermined", f"its content {side} is unknown (no corpus given, no text in the hits)"
    if content_id(old) != content_id(new):
        return None, "content_changed", f"content {content_id(old)} -> {content_id(new)}"
    for s_from, s_to in zip(frm.stages, to.stages, strict=True):
        was, now = s_from.ranking.get(q), s_to.ranking.get(q)
        if was is None or now is None:
            return s_to.name, "undetermined", f"stage {s_to.name!r} failed on the query on one side"
        if d not in was[: s_from.cut[q]] or d in now[: s_to.cut[q]]:
            continue
        cut = s_to.cut[q]
        rank = now.index(d) if d in now else None
        above = now[:rank] if rank is not None else now
        new_above = [x for x in above if not _in(frm, x)]
        basis = "absent from the corpus before" if frm.texts is not None else "in no ranking before"
        if rank is not None:
            explained = rank - len(new_above) < cut
            where = f"at rank {rank + 1}"
        else:  # fell past the stage's output: enough new documents to push it from its old place past the cut
            explained = len(new_above) >= cut - was.index(d)
            where = f"past its output of {len(now)}"
        if new_above and explained:
            shown = ", ".join(new_above[:SHOWN_IDS]) + (", ..." if len(new_above) > SHOWN_IDS else "")
            return (
                s_to.name,
                "crowded_out",
                f"{len(new_above)} new document(s) ({basis}) above it, now {where}, cut {cut}: {shown}",
            )
        if s_from.fingerprint != s_to.fingerprint:
            return (
                s_to.name,
                "stage_changed",
                f"fingerprint {s_from.fingerprint[:12]} -> {s_to.fingerprint[:12]}; now {where}, cut {cut}"
                + (f"; {len(new_above)} new document(s) above it do not account for it" if new_above else ""),
            )
        return (
            s_to.name,
            "undetermined",
            f"moved at stage {s_to.name!r} (same fingerprint, same content), now {where}, cut {cut}, and "
            f"{len(new_above)} new document(s) above it do not account for it",
        )
    return None, "undetermined", "no stage in which it fell out (rankings differ only past the cut?)"


def _in(snap: _Snapshot, doc: str) -> bool:
    """Whether ``doc`` existed in ``snap`` (its corpus, or any of its rankings)."""
    return doc in snap.texts if snap.texts is not None else doc in snap.seen


def _gone(d: str, frm: _Snapshot, to: _Snapshot) -> tuple[str | None, str, str]:
    if frm.chunks is None or to.chunks is None:
        return None, "removed", "absent from the corpus after (no chunk maps given: a re-chunking reads as removal)"
    ref = frm.chunks.get(d)
    if ref is None:
        return None, "undetermined", "absent from the corpus after, and not in the before chunk map"
    now = to.by_doc.get(ref.doc_id, [])
    if not now:
        return None, "removed", f"absent from the corpus after, and so is its source document {ref.doc_id!r}"
    if ref.start is not None and ref.end is not None:
        overlap = [
            c for c, r in now if r.start is not None and r.end is not None and r.start < ref.end and ref.start < r.end
        ]
        span = f"its span [{ref.start}, {ref.end}) of {ref.doc_id!r} now falls in"
    else:
        overlap, span = [c for c, _ in now], f"its document {ref.doc_id!r} is now cut into"
    shown = ", ".join(overlap[:SHOWN_IDS]) + (", ..." if len(overlap) > SHOWN_IDS else "")
    return None, "chunking_changed", f"{span} {len(overlap)} other chunk(s): {shown}"
