"""The labelling session: one assessor labelling one pool into one qrels file, whatever serves it.

:class:`LabellingSession` holds what is judged: the pool, the judgement log ``OUT.judgements.jsonl``
(:func:`log_path_for`) and the qrels that ``OUT`` held before this labelling began. Each grade is appended to the
log (fsync'd, every write's length checked: :mod:`rag_eval._files`), then ``OUT`` is rewritten atomically as those
qrels merged with the log, so that a kill at any moment loses nothing and ``OUT`` is always a whole TREC qrels file.
A grade is acknowledged only once it is in the log; one that could not be stored (a full disk) is a
:class:`RequestError` 507 Insufficient Storage (500 for another cause) with a message that the page shows, and the
log stays readable: free space and go on. ``OUT`` is resolved first (a symlink is written through, and its log sits
beside the file it points to), so two names of one file share one log and one lock; temporary files left by a
killed server are removed at start. Starting again resumes at the first pool item this assessor has not judged.
Skips are not written: a skipped item stays unjudged and comes back. ``order="impact"`` serves the pool in impact
order (:func:`rag_eval.ground_truth.ordering.impact_order`: the items whose grade would most change the comparison
of its systems first, across queries, each weighted by a judge's ``uncertainty`` where given); ``"pool"`` (the
default) in the pool's own order.

What the session refuses is a :class:`RequestError` carrying the HTTP status the server answers with; the server
itself (:mod:`.server`) and the HTTP checks in front of it (:mod:`._handler`) live apart.
"""

from __future__ import annotations

import errno
import json
import os
import re
import threading
from collections.abc import Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any

from .._checks import check_choice
from .._files import remove_temporaries, target_of
from ..data.joins import user_stacklevel
from ..data.near_miss import warn_near_misses
from ..data.qrels import Qrels
from ..errors import HarnessError, InputError
from ..ground_truth import JudgementLog, Merged, Pool, merge, write_qrels
from ..ground_truth.judgement_log import RESERVED_NAMES

__all__ = ["ORDERS", "LabellingSession", "RequestError", "check_scale", "log_path_for", "parse_scale"]

CONTEXT_LIMIT = 200  # judged chunks shown beside an item, at most
SNIPPET = 600  # characters of a judged chunk's text shown in the context
ORDERS = ("pool", "impact")  # the orders a pool can be served in: its own, or impact_order's
GRADE_WORDS = {0: "not relevant", 1: "on topic, does not answer", 2: "partly answers", 3: "answers"}


def log_path_for(out: str | os.PathLike[str]) -> Path:
    """Where the judgement log of qrels file ``OUT`` lives: ``OUT.judgements.jsonl`` beside it."""
    out = Path(out)
    return out.with_name(out.name + ".judgements.jsonl")


def parse_scale(text: str) -> tuple[int, int]:
    """``"0..3"`` -> ``(0, 3)``; a scale the page can take by keyboard: 0 <= lowest < highest <= 9."""
    low, sep, high = text.partition("..")
    if not sep or not _DIGIT.fullmatch(low.strip()) or not _DIGIT.fullmatch(high.strip()):
        raise InputError(f"--scale {text!r}: expected LOW..HIGH, e.g. 0..3 (one ASCII digit each)")
    scale = (int(low), int(high))
    if not scale[0] < scale[1]:
        raise InputError(f"--scale {text!r}: expected LOW..HIGH with 0 <= LOW < HIGH <= 9 (one key per grade)")
    return scale


def check_scale(scale: object) -> tuple[int, int]:
    """A labelling scale: two ints ``(low, high)``, ``0 <= low < high <= 9`` (one key per grade, no bool)."""
    if (
        not isinstance(scale, (tuple, list))
        or len(scale) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) for v in scale)
        or not 0 <= scale[0] < scale[1] <= 9
    ):
        raise InputError(
            f"scale {scale!r}: expected two ints (low, high) with 0 <= low < high <= 9 (one key per grade)"
        )
    return (scale[0], scale[1])


_DIGIT = re.compile(r"[0-9]")


class RequestError(Exception):
    """A request the session refuses: an HTTP status and a message for the JSON error."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class LabellingSession:
    """One assessor labelling one pool into one qrels file. Thread-safe; every judgement is on disk when
    :meth:`judge` returns."""

    def __init__(
        self,
        pool: Pool,
        out: str | os.PathLike[str],
        *,
        assessor: str,
        scale: tuple[int, int] = (0, 3),
        order: str = "pool",
        uncertainty: Mapping[tuple[str, str], float] | None = None,
    ) -> None:
        if not isinstance(pool, Pool):  # a Pool holds only ids that a TREC qrels line gives back (pool.py)
            raise TypeError(f"pool must be a Pool (rag_eval.pool or Pool.load), not {type(pool).__name__}")
        check_choice(order, "--order", ORDERS)
        if order == "impact":
            from ..ground_truth.ordering import impact_order

            pool = impact_order(pool, uncertainty=uncertainty)
        elif uncertainty is not None:
            raise InputError("a judge's uncertainty orders a pool only in impact order (--order impact)")
        self.pool = pool
        self.out = target_of(out)  # a symlink's target: one file, one log, whichever name it is given by
        self.log_path = log_path_for(self.out)
        self.assessor = assessor
        self.scale = check_scale(scale)
        if (
            not isinstance(assessor, str)
            or not assessor
            or assessor != assessor.strip()
            or assessor in RESERVED_NAMES  # the columns of Merged.conflicts
        ):
            raise InputError(f"--assessor {assessor!r} is not a usable name")
        self._lock = threading.Lock()
        remove_temporaries(self.out)  # left by a server killed while replacing OUT
        self.log = JudgementLog.open(self.log_path)
        # OUT as found, less the pairs the log judges (an earlier session wrote those there): the qrels this
        # labelling started from, whose grades it never changes. Pairs a model judge decided (OUT's graded-by
        # record) are not people's grades: they are served to the assessor like unjudged ones, and a person's grade
        # of one replaces the judge's (ground_truth.merge: a person's grade always wins)
        logged = {j.pair for j in self.log}
        found, self.out_format = _read_out(self.out)
        if len(found):  # pool ids written like OUT's but not the same: said, never merged
            judged = found.to_dict()
            for ids, pooled, known in (
                ("query id(s)", {item.query_id for item in pool.items}, judged.keys()),
                ("doc id(s)", {item.doc_id for item in pool.items}, {d for docs in judged.values() for d in docs}),
            ):
                warn_near_misses(
                    pooled,
                    known,
                    subject="the pool",
                    ids=ids,
                    other=f"one of {self.out.name}",
                    left_name="pool",
                    right_name="qrels",
                    consequence="they are different ids, so their items are labelled as pairs of their own",
                    stacklevel=user_stacklevel(),
                )
        self._graded_by = found.graded_by
        by_judges = set().union(*(j.pairs for j in found.graded_by.judges)) if found.graded_by else set()
        self.base: dict[str, dict[str, int]] = {}  # people's grades in OUT: locked
        self.judge_base: dict[str, dict[str, int]] = {}  # a judge's grades in OUT: open to the assessor
        for q, docs in found.to_dict().items():
            for d, g in docs.items():
                if (q, d) not in logged:
                    (self.judge_base if (q, d) in by_judges else self.base).setdefault(q, {})[d] = g
        self.index = {(item.query_id, item.doc_id): i for i, item in enumerate(pool.items)}
        self.by_query: dict[str, list[int]] = {}
        for i, item in enumerate(pool.items):
            self.by_query.setdefault(item.query_id, []).append(i)
        self.mine: dict[tuple[str, str], int] = {}
        self.others: dict[tuple[str, str], dict[str, int]] = {}
        for (assessor_name, q, d), j in self.log.latest().items():
            if assessor_name == assessor:
                self.mine[(q, d)] = j.grade
            else:
                self.others.setdefault((q, d), {})[assessor_name] = j.grade
        self.judged = {i for i, item in enumerate(pool.items) if self._grade_of(i) is not None}
        self.not_saved: dict[int, str] = {}  # item -> why its grade could not be stored (until stored)
        self.out_behind: str | None = None  # why OUT could not be rewritten last time (None: up to date)
        if len(self.log):
            self._write_out()  # a kill between the log and OUT left OUT one judgement behind: catch up

    # ----- reading ------------------------------------------------------------------------------------------
    def _grade_of(self, i: int) -> int | None:
        item = self.pool.items[i]
        pair = (item.query_id, item.doc_id)
        mine = self.mine.get(pair)
        return mine if mine is not None else self.base.get(item.query_id, {}).get(item.doc_id)

    def state(self, after: int | None = None) -> dict[str, Any]:
        """Progress, and ``next``: the first unjudged item (after ``after``, wrapping round; None when all are)."""
        n = len(self.pool.items)
        if after is not None and not 0 <= after < n:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"after={after} is not an item index (0..{n - 1})")
        with self._lock:
            order = range(n) if after is None else [*range(after + 1, n), *range(after + 1)]
            following = next((i for i in order if i not in self.judged), None)
            judged = len(self.judged)
        shown = ("id", "depth", "strategy", "systems", "order")  # "order" only where the pool has one
        provenance = {k: v for k, v in self.pool.provenance.items() if k in shown}
        low, high = self.scale
        return {
            "pool": provenance,
            "assessor": self.assessor,
            "scale": [low, high],
            "grades": [{"grade": g, "label": self._grade_word(g)} for g in range(low, high + 1)],
            "total": n,
            "judged": judged,
            "remaining": n - judged,
            "next": following,
            "done": judged == n,
            "queries": len(self.by_query),
            "out": str(self.out),
            "log": str(self.log_path),
        }

    def _grade_word(self, grade: int) -> str:
        if self.scale == (0, 3):
            return GRADE_WORDS[grade]
        return "not relevant" if grade == self.scale[0] else "fully relevant" if grade == self.scale[1] else ""

    def item(self, i: int) -> dict[str, Any]:
        """Item ``i`` with this assessor's grade, the qrels' grade, other assessors' grades, and the query's
        judged context (other pooled chunks graded, and the qrels' judgements of the query)."""
        n = len(self.pool.items)
        if not 0 <= i < n:
            raise RequestError(HTTPStatus.NOT_FOUND, f"no item {i}: the pool has items 0..{n - 1}")
        item = self.pool.items[i]
        pair = (item.query_id, item.doc_id)
        with self._lock:
            mine = self.mine.get(pair)
            base = self.base.get(item.query_id, {})
            context = []
            for j in self.by_query[item.query_id]:
                other = self.pool.items[j]
                if j == i:
                    continue
                grade = self.mine.get((other.query_id, other.doc_id))
                source = "you"
                if grade is None and other.doc_id in base:
                    grade, source = base[other.doc_id], "qrels"
                if grade is not None:
                    context.append(
                        {
                            "index": j,
                            "doc_id": other.doc_id,
                            "grade": grade,
                            "by": source,
                            "text": None if other.text is None else other.text[:SNIPPET],
                        }
                    )
            pooled = {self.pool.items[j].doc_id for j in self.by_query[item.query_id]}
            for doc, grade in base.items():
                if doc not in pooled:
                    context.append({"index": None, "doc_id": doc, "grade": grade, "by": "qrels", "text": None})
            others = dict(self.others.get(pair, {}))
        queries = list(self.by_query)
        return {
            "index": i,
            "query_id": item.query_id,
            "doc_id": item.doc_id,
            "query": item.query,
            "text": item.text,
            "ranks": dict(item.ranks),
            "query_number": queries.index(item.query_id) + 1,
            "queries": len(queries),
            "grade": mine,
            "qrels_grade": base.get(item.doc_id),
            "locked": item.doc_id in base,
            "others": others,
            "context": context[:CONTEXT_LIMIT],
            "context_more": max(0, len(context) - CONTEXT_LIMIT),
        }

    # ----- writing ------------------------------------------------------------------------------------------
    def judge(self, body: object) -> dict[str, Any]:
        """Record ``{"index": N, "grade": G}`` (``query_id`` and ``doc_id`` optional, checked against item N;
        or the pair alone): to the log, then to OUT. Returns the judgement and the state after item N."""
        if not isinstance(body, dict):
            raise RequestError(HTTPStatus.BAD_REQUEST, 'expected a JSON object {"index": N, "grade": G}')
        i = self._index_of(body)
        grade = body.get("grade")
        low, high = self.scale
        if isinstance(grade, bool) or not isinstance(grade, int):
            raise RequestError(HTTPStatus.BAD_REQUEST, f"grade must be an integer {low}..{high}, not {grade!r}")
        if not low <= grade <= high:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"grade {grade} is outside the scale {low}..{high}")
        item = self.pool.items[i]
        with self._lock:
            if item.doc_id in self.base.get(item.query_id, {}):
                raise RequestError(
                    HTTPStatus.CONFLICT,
                    f"query {item.query_id!r}, doc {item.doc_id!r} is graded "
                    f"{self.base[item.query_id][item.doc_id]} in {self.out}; the page does not "
                    "change the grades it started from",
                )
            try:
                judgement = self.log.append(
                    item.query_id,
                    item.doc_id,
                    grade,
                    assessor=self.assessor,
                    scale=self.scale,
                    pool=self.pool.provenance,
                )
            except HarnessError as exc:  # not stored: the page says so, the item stays unjudged
                self.not_saved[i] = str(exc)
                raise RequestError(_storage_status(exc), f"not saved: {exc}") from None
            self.not_saved.pop(i, None)
            self.mine[(item.query_id, item.doc_id)] = grade
            self.judged.add(i)
            try:
                self._write_out()
            except InputError as exc:  # the grade is in the log (kept); OUT catches up on the next write or start
                self.out_behind = exc.problem
                raise RequestError(
                    _storage_status(exc),
                    f"the grade is saved in {self.log_path}, but {self.out} could not be rewritten "
                    f"({exc.problem}); it is brought up to date once space is freed",
                ) from None
        return {"judgement": json.loads(judgement.to_json()), "index": i, "state": self.state(after=i)}

    def _index_of(self, body: dict[str, Any]) -> int:
        n = len(self.pool.items)
        index = body.get("index")
        pair = (body.get("query_id"), body.get("doc_id"))
        if pair != (None, None):
            if not all(isinstance(p, str) for p in pair):
                raise RequestError(HTTPStatus.BAD_REQUEST, "query_id and doc_id must both be strings")
            found = self.index.get(pair)  # type: ignore[arg-type]
            if found is None:
                raise RequestError(
                    HTTPStatus.BAD_REQUEST, f"query {pair[0]!r}, doc {pair[1]!r} is not in pool {self.pool.id}"
                )
            if index is not None and index != found:
                raise RequestError(HTTPStatus.BAD_REQUEST, f"item {index!r} is not query {pair[0]!r}, doc {pair[1]!r}")
            return found
        if isinstance(index, bool) or not isinstance(index, int):
            raise RequestError(HTTPStatus.BAD_REQUEST, f"index must be an integer 0..{n - 1}, not {index!r}")
        if not 0 <= index < n:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"no item {index}: the pool has items 0..{n - 1}")
        return index

    def merged(self) -> Merged:
        """The qrels OUT holds now: those it started from, merged with the log (see ``ground_truth.merge``); a
        judge's grade that the assessor graded again gives way to the assessor's, and who decided each pair kept is
        carried over (OUT's graded-by record)."""
        combined = {q: dict(docs) for q, docs in self.base.items()}
        for q, docs in self.judge_base.items():
            for d, g in docs.items():
                if (q, d) not in self.mine:
                    combined.setdefault(q, {})[d] = g
        if not combined:
            return merge(None, self.log)
        kept = [(q, d) for q, docs in combined.items() for d in docs]
        graded_by = self._graded_by.restricted(kept) if self._graded_by is not None else None
        return merge(Qrels(combined, graded_by=graded_by), self.log)

    def _write_out(self) -> None:
        write_qrels(self.merged().qrels, self.out, format=self.out_format)
        self.out_behind = None

    def storage_problem(self) -> str | None:
        """What the session could not store, in one line naming the file (rag-eval label then exits 2), or None."""
        if self.not_saved:
            n, why = len(self.not_saved), next(iter(self.not_saved.values()))
            return f"{self.log_path}: {n} grade(s) not saved ({why}); grade them again once it can be written"
        if self.out_behind is not None:
            return (
                f"{self.out}: not brought up to date ({self.out_behind}); every grade is in {self.log_path}, and "
                "starting again writes it"
            )
        return None


#: the formats OUT is rewritten in, as found (a new or empty OUT is written as TREC qrels)
WRITTEN = ("trec", "beir")


def _read_out(out: Path) -> tuple[Qrels, str]:
    """The qrels OUT holds, read as ``rag-eval pool --qrels`` reads qrels (:meth:`Qrels.load`: TREC, BEIR TSV with
    a header, JSONL, Parquet; with its graded-by record where one is beside it), and the format OUT is rewritten
    in: its own, TREC or BEIR TSV (JSONL and Parquet are refused, naming the formats that are written); none, and
    TREC, when OUT does not exist or is empty."""
    if not out.exists():
        return Qrels({}), "trec"
    if out.is_file() and not out.read_bytes().strip():
        return Qrels({}), "trec"
    found, form = Qrels.load_with_format(out)
    if form not in WRITTEN:
        raise InputError(
            f"a {form.upper() if form == 'jsonl' else form.capitalize()} qrels file: labelling rewrites OUT in its "
            "own format, which must be TREC qrels or a BEIR TSV with a header; give one of those (or a new file), "
            "and the JSONL or Parquet qrels to rag-eval pool --qrels",
            source=str(out),
        )
    return found, form


def _storage_status(exc: Exception) -> int:
    """507 when the disk is full (or over quota), 500 for any other failure to store."""
    full = getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
    return HTTPStatus.INSUFFICIENT_STORAGE if full else HTTPStatus.INTERNAL_SERVER_ERROR
