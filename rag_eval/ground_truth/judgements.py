"""Judgements: the append-only log that the labelling page writes, and merging logs into qrels.

A log is JSON lines, one judgement a line::

    {"query_id": "q1", "doc_id": "d7", "grade": 2, "assessor": "alice", "time": "2026-11-05T09:12:33.481Z",
     "scale": [0, 3], "pool": {"id": "3f2a...", "depth": 10, "strategy": "depth", "systems": ["bm25", "dense"]}}

Each judgement is one whole line appended and fsync'd before :meth:`JudgementLog.append` returns
(:func:`rag_eval._files.append`: every write's length checked, a failed append truncated back), so a process killed
at any moment, or a disk that fills, keeps every judgement it reported as written and never a torn line in the
middle of the log. A failure to write is a :class:`~rag_eval.errors.HarnessError` naming the log and the cause, and
the judgement is not in the log. A last line cut short by a kill (no newline, not a whole record) is ignored with a
warning when the log is read, and cut off before the next append; any other bad line is an :class:`~rag_eval.errors.InputError` naming the file and line. A later judgement
by the same assessor of the same (query, doc) pair supersedes the earlier one: that is how "back" and a new grade
work, and the log keeps both.

:func:`merge` folds qrels and logs into new qrels. Where grades differ for a pair, nothing is overwritten
silently: every such pair is listed in :attr:`Merged.conflicts`, and the grade that goes into the qrels is

- the existing qrels grade, where the qrels given to :func:`merge` judge the pair (the labelling page never
  changes a grade it was not asked for);
- otherwise the lower median of the assessors' latest grades (``resolve="median"``, the default: with two
  assessors the lower grade, with three the middle one), or their ``"max"`` or ``"min"``.

:func:`cohen_kappa` measures the assessors' agreement beyond chance on the pairs both judged; :attr:`Merged.kappa`
gives it on the grades and at the relevance threshold, for every two assessors.
"""

from __future__ import annotations

import json
import math
import os
import threading
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._files import append, file_lock, write_output
from ..data._ids import check_writable
from ..data.qrels import Qrels
from ..errors import HarnessError, InputError, TornLine

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_SCALE",
    "Agreement",
    "Judgement",
    "JudgementLog",
    "Kappa",
    "Merged",
    "cohen_kappa",
    "merge",
    "write_qrels",
]

DEFAULT_SCALE = (0, 3)
Resolve = Literal["median", "max", "min"]
# column names of Merged.conflicts that are not assessors: an assessor may not be called so
RESERVED_NAMES = frozenset({"query_id", "doc_id", "grade", "qrels"})
_POOL_KEYS = ("id", "depth", "strategy", "systems")


@dataclass(frozen=True)
class Judgement:
    """One line of a log: who graded which pair how, when, on which scale, from which pool."""

    query_id: str
    doc_id: str
    grade: int
    assessor: str
    time: str  # ISO 8601, UTC, milliseconds: 2026-11-05T09:12:33.481Z
    scale: tuple[int, int] = DEFAULT_SCALE
    pool: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        # checked when made (by hand, by append, or from a log line), so a log never holds a grade of True or 2.0
        object.__setattr__(self, "scale", _check_scale(self.scale))
        problem = _problem(self)
        if problem:
            raise _BadRecord(problem)

    def to_json(self) -> str:
        record: dict[str, Any] = {
            "query_id": self.query_id,
            "doc_id": self.doc_id,
            "grade": self.grade,
            "assessor": self.assessor,
            "time": self.time,
            "scale": list(self.scale),
        }
        if self.pool is not None:
            record["pool"] = dict(self.pool)
        return json.dumps(record, ensure_ascii=False)

    @property
    def pair(self) -> tuple[str, str]:
        return (self.query_id, self.doc_id)


class JudgementLog:
    """An append-only judgement log (JSON lines). :meth:`open` it to append, :meth:`read` it to merge.

    Judgements are kept in file order in :attr:`judgements`; :meth:`latest` gives each assessor's last word
    on each pair. Several processes may append to one log: each judgement is appended whole under the exclusive
    lock on ``<log>.lock``, which also covers cutting off a torn last line.
    """

    def __init__(self, path: str | os.PathLike[str], judgements: Iterable[Judgement] = ()) -> None:
        self.path = Path(path)
        self._judgements: list[Judgement] = list(judgements)
        self._lock = threading.Lock()
        self._lock_path = self.path.with_name(self.path.name + ".lock")

    # ----- opening ------------------------------------------------------------------------------------------
    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> JudgementLog:
        """Read an existing log; every bad line (but a torn last one, ignored with a warning) names file and line."""
        if not Path(path).exists():
            raise InputError("no such file", source=os.fspath(path))
        return cls.open(path)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> JudgementLog:
        """Open a log to append to, reading what it holds already; a missing file is an empty log (created by
        the first :meth:`append`)."""
        log = cls(path)
        if log.path.exists():
            if log.path.is_dir():
                raise InputError("is a directory, not a file", source=os.fspath(path))
            try:
                data = log.path.read_bytes()
            except OSError as exc:
                raise InputError(f"cannot read: {exc.strerror or exc}", source=os.fspath(path)) from None
            log._judgements, torn, _ = _parse(data, os.fspath(path))
            if torn:
                warnings.warn(
                    f"{path}: the last line is cut short (a kill while writing?) and is ignored; "
                    "it is cut off before the next judgement is written",
                    TornLine,
                    stacklevel=2,
                )
        return log

    # ----- reading ------------------------------------------------------------------------------------------
    @property
    def judgements(self) -> tuple[Judgement, ...]:
        return tuple(self._judgements)

    def __len__(self) -> int:
        return len(self._judgements)

    def __iter__(self) -> Iterator[Judgement]:
        return iter(self.judgements)

    def __repr__(self) -> str:
        return f"JudgementLog({str(self.path)!r}, {len(self)} judgements, assessors={self.assessors})"

    @property
    def assessors(self) -> list[str]:
        return sorted({j.assessor for j in self._judgements})

    def latest(self, assessor: str | None = None) -> dict[tuple[str, str, str], Judgement]:
        """``{(assessor, query_id, doc_id): judgement}``: each assessor's last judgement of each pair (the later
        line wins), for one assessor or all."""
        out: dict[tuple[str, str, str], Judgement] = {}
        for j in self._judgements:
            if assessor is None or j.assessor == assessor:
                out[(j.assessor, j.query_id, j.doc_id)] = j
        return out

    # ----- writing ------------------------------------------------------------------------------------------
    def append(
        self,
        query_id: str,
        doc_id: str,
        grade: int,
        *,
        assessor: str,
        scale: tuple[int, int] = DEFAULT_SCALE,
        pool: Mapping[str, Any] | None = None,
        time: str | None = None,
    ) -> Judgement:
        """Write one judgement (one line, flushed and fsync'd) and return it. ``pool`` is a pool's
        provenance (``Pool.provenance``); its id, depth, strategy and systems are recorded."""
        judgement = Judgement(
            query_id,
            doc_id,
            grade,
            assessor,
            time or _now(),
            scale,
            None if pool is None else {k: pool[k] for k in _POOL_KEYS if k in pool},
        )
        line = (judgement.to_json() + "\n").encode()
        with self._lock:
            try:
                with file_lock(self._lock_path, exclusive=True):
                    append(self.path, line, whole=_is_whole_record)
            except OSError as exc:
                cause = exc.strerror or str(exc) or type(exc).__name__
                error = HarnessError(
                    f"judgement log {self.path}: cannot store the judgement of query {query_id!r}, "
                    f"doc {doc_id!r}: {cause}; it is not in the log (every earlier one is): free "
                    "some space or make the folder writable, then judge it again"
                )
                error.errno = exc.errno  # type: ignore[attr-defined] - the cause, for a server's status code
                raise error from None
            self._judgements.append(judgement)
        return judgement


def _is_whole_record(tail: bytes) -> bool:
    """Whether the bytes after a log's last newline are a whole judgement (written without its newline)."""
    try:
        _judgement_of(json.loads(tail.decode("utf-8")))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return True


# ----- merging ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    """Agreement of two assessors on the pairs both judged: Cohen's kappa on the grades (unweighted) and on
    relevant/not relevant at the threshold. A kappa is None where it cannot be computed, and ``reason`` says why."""

    assessors: tuple[str, str]
    n: int  # pairs judged by both
    observed: float | None  # share of those pairs given the same grade
    kappa: float | None
    binary_kappa: float | None
    reason: str | None = None


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa of the assessors of a merge. With exactly two assessors (who judged some pairs in
    common) ``value`` and ``binary`` are their kappas; otherwise they are None and ``reason`` says why.
    ``pairwise`` holds one :class:`Agreement` for every two assessors (the only kappas with three or more)."""

    value: float | None
    binary: float | None
    n: int
    threshold: int
    pairwise: tuple[Agreement, ...] = ()
    reason: str | None = None

    def to_frame(self) -> pd.DataFrame:
        """One row per two assessors: ``assessor_a, assessor_b, n, observed, kappa, binary_kappa, reason``."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "assessor_a": a.assessors[0],
                    "assessor_b": a.assessors[1],
                    "n": a.n,
                    "observed": a.observed,
                    "kappa": a.kappa,
                    "binary_kappa": a.binary_kappa,
                    "reason": a.reason,
                }
                for a in self.pairwise
            ],
            columns=["assessor_a", "assessor_b", "n", "observed", "kappa", "binary_kappa", "reason"],
        )

    def __repr__(self) -> str:
        if self.value is None:
            return f"Kappa(None: {self.reason})"
        return (
            f"Kappa({self.value:.3f} on grades, {self.binary:.3f} at grade >= {self.threshold}, n={self.n})"
            if self.binary is not None
            else f"Kappa({self.value:.3f}, n={self.n})"
        )


@dataclass(frozen=True)
class Merged:
    """What :func:`merge` returns: the merged ``qrels``, the ``conflicts`` and the assessors' ``kappa``."""

    qrels: Qrels
    grades: Mapping[tuple[str, str], Mapping[str, int]] = field(repr=False)  # pair -> {assessor: latest grade}
    base: Mapping[tuple[str, str], int] = field(repr=False)  # pair -> grade in the qrels given
    assessors: tuple[str, ...]
    resolve: Resolve
    threshold: int

    @cached_property
    def conflicts(self) -> pd.DataFrame:
        """Every pair whose grades differ (between assessors, or between an assessor and the qrels given):
        ``query_id, doc_id, grade`` (what went into :attr:`qrels`), ``qrels`` (the grade in the qrels given,
        or missing), then one column per assessor (missing where that assessor did not judge the pair)."""
        import pandas as pd

        rows = []
        for pair, by_assessor in self.grades.items():
            values = set(by_assessor.values())
            if pair in self.base:
                values.add(self.base[pair])
            if len(values) > 1:
                row: dict[str, Any] = {
                    "query_id": pair[0],
                    "doc_id": pair[1],
                    "grade": self.qrels[pair[0]][pair[1]],
                    "qrels": self.base.get(pair),
                }
                row.update(by_assessor)
                rows.append(row)
        columns = ["query_id", "doc_id", "grade", "qrels", *self.assessors]
        frame = pd.DataFrame(rows, columns=columns)
        for name in columns[2:]:
            frame[name] = frame[name].astype("Int64")
        return frame

    @cached_property
    def kappa(self) -> Kappa:
        """Cohen's kappa on the pairs judged by two assessors (see :class:`Kappa`)."""
        if len(self.assessors) < 2:
            return Kappa(
                None,
                None,
                0,
                self.threshold,
                reason=f"{len(self.assessors)} assessor(s): kappa needs two who judged the same pairs",
            )
        pairwise = tuple(self._agreement(a, b) for a, b in combinations(self.assessors, 2))
        if len(self.assessors) > 2:
            return Kappa(
                None,
                None,
                0,
                self.threshold,
                pairwise,
                reason=f"{len(self.assessors)} assessors: see .pairwise for every two of them",
            )
        only = pairwise[0]
        return Kappa(only.kappa, only.binary_kappa, only.n, self.threshold, pairwise, only.reason)

    def _agreement(self, a: str, b: str) -> Agreement:
        both = [(g[a], g[b]) for g in self.grades.values() if a in g and b in g]
        if not both:
            return Agreement((a, b), 0, None, None, None, reason=f"{a} and {b} judged no pair in common")
        x, y = zip(*both)
        kappa = cohen_kappa(x, y)
        binary = cohen_kappa([int(v >= self.threshold) for v in x], [int(v >= self.threshold) for v in y])
        observed = sum(p == q for p, q in both) / len(both)
        reason = None
        if math.isnan(kappa) or math.isnan(binary):
            reason = (
                f"on the {len(both)} pair(s) {a} and {b} both judged, chance agreement is 1 (every grade "
                "the same category), so kappa is undefined"
            )
        return Agreement(
            (a, b),
            len(both),
            observed,
            None if math.isnan(kappa) else kappa,
            None if math.isnan(binary) else binary,
            reason,
        )

    def __repr__(self) -> str:
        return (
            f"Merged({self.qrels!r}, {len(self.assessors)} assessor(s), {len(self.conflicts)} conflict(s), "
            f"{self.kappa!r})"
        )


def merge(
    qrels: Qrels | Mapping[str, Mapping[str, int]] | None,
    *logs: JudgementLog | str | os.PathLike[str],
    resolve: Resolve = "median",
    threshold: int = 1,
) -> Merged:
    """Merge judgement logs into ``qrels`` (or into nothing). Each assessor's latest judgement of a pair counts
    (the later line in a log; across logs, the later ``time``, then the later log given). A pair the qrels judge
    keeps its qrels grade; otherwise the assessors' grades are combined by ``resolve`` (``"median"``: the lower
    median). Differences are listed in :attr:`Merged.conflicts`, never resolved silently. ``threshold`` is the
    lowest relevant grade for the binary kappa."""
    if resolve not in ("median", "max", "min"):
        raise ValueError(f"resolve must be 'median', 'max' or 'min', not {resolve!r}")
    if not isinstance(threshold, int) or isinstance(threshold, bool):
        raise ValueError(f"threshold must be an int, not {threshold!r}")
    base_qrels = qrels if qrels is None or isinstance(qrels, Qrels) else Qrels.from_dict(qrels)
    opened = [log if isinstance(log, JudgementLog) else JudgementLog.read(log) for log in logs]

    latest: dict[tuple[str, str, str], tuple[datetime, int, Judgement]] = {}
    for order, log in enumerate(opened):
        for j in log.judgements:
            key = (j.assessor, j.query_id, j.doc_id)
            when = _parse_time(j.time)
            kept = latest.get(key)
            # a later line of the same log always supersedes; across logs, the later time (ties: the later log)
            if kept is None or kept[1] == order or (when, order) >= (kept[0], kept[1]):
                latest[key] = (when, order, j)
    grades: dict[tuple[str, str], dict[str, int]] = {}
    for (assessor, q, d), (_, _, j) in latest.items():
        grades.setdefault((q, d), {})[assessor] = j.grade
    assessors = tuple(sorted({a for a, _, _ in latest}))
    clash = RESERVED_NAMES & set(assessors)
    if clash:
        raise ValueError(f"assessor name {sorted(clash)[0]!r} is reserved (a column of Merged.conflicts)")

    merged = base_qrels.to_dict() if base_qrels is not None else {}
    base = {(q, d): g for q, docs in merged.items() for d, g in docs.items()}
    for (q, d), by_assessor in grades.items():
        if (q, d) not in base:
            merged.setdefault(q, {})[d] = _combine(list(by_assessor.values()), resolve)
    return Merged(
        Qrels.from_dict(merged),
        {p: dict(sorted(g.items())) for p, g in grades.items()},
        base,
        assessors,
        resolve,
        threshold,
    )


def cohen_kappa(a: Sequence[int], b: Sequence[int]) -> float:
    """Cohen's kappa of two raters' labels of the same items, unweighted: ``(p_o - p_e) / (1 - p_e)``, where
    ``p_o`` is the share of items given the same label and ``p_e`` the agreement expected by chance from each
    rater's own label frequencies (Cohen 1960). NaN where ``p_e`` is 1 (both raters gave every item one and the
    same label: kappa is undefined)."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"the two raters labelled {len(a)} and {len(b)} items; kappa needs the same items")
    if not a:
        raise ValueError("kappa needs at least one item labelled by both raters")
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    count_a, count_b = Counter(a), Counter(b)
    expected = sum(count_a[c] * count_b[c] for c in count_a) / (n * n)
    if expected >= 1.0:
        return math.nan
    return (observed - expected) / (1.0 - expected)


def write_qrels(qrels: Qrels, path: str | os.PathLike[str]) -> None:
    """Write TREC qrels (``qid 0 docid grade``) atomically (:func:`rag_eval._files.atomic_write`: a temporary
    file, fsync'd, renamed over ``path``, the folder fsync'd), so that ``path`` is at every moment either the old
    file or the whole new one; a symlink is written through. A failure (a full disk) is an InputError naming the
    file; the file keeps its old content.

    An id that a TREC line cannot give back (empty, holding whitespace, or a query id starting with ``#``: the
    line would be read back as a comment) is an InputError naming it, raised before anything is written: ``path`` keeps its old content."""
    path = Path(path)
    lines = []
    for q, docs in qrels.judgements.items():
        check_writable([q], "query id", str(path))
        check_writable(docs, f"query {q!r}: doc id", str(path), starts_line=False)
        lines.extend(f"{q} 0 {d} {g}\n" for d, g in docs.items())
    write_output(path, "".join(lines).encode("utf-8"))


# ----- helpers --------------------------------------------------------------------------------------------------


def _combine(values: list[int], resolve: Resolve) -> int:
    if resolve == "max":
        return max(values)
    if resolve == "min":
        return min(values)
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]  # the lower median: an actual grade, the lower one of two


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_time(text: str) -> datetime:
    when = datetime.fromisoformat(text)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _check_scale(scale: Sequence[int]) -> tuple[int, int]:
    if (
        not isinstance(scale, (tuple, list))
        or len(scale) != 2
        or any(not isinstance(v, int) or isinstance(v, bool) for v in scale)
        or scale[0] >= scale[1]
    ):
        raise _BadRecord(f"scale must be two ints (lowest, highest grade), lowest < highest, not {scale!r}")
    return (scale[0], scale[1])


def _problem(j: Judgement) -> str | None:
    """What is wrong with a judgement, or None."""
    for name in ("query_id", "doc_id", "assessor"):
        value = getattr(j, name)
        if not isinstance(value, str) or not value.strip():
            return f"{name} must be a non-empty string, not {value!r}"
    if j.assessor != j.assessor.strip() or j.assessor in RESERVED_NAMES:
        return (
            f"assessor {j.assessor!r} is not a usable name (no surrounding spaces; not one of {sorted(RESERVED_NAMES)})"
        )
    if not isinstance(j.grade, int) or isinstance(j.grade, bool):
        return f"grade {j.grade!r} is not an integer"
    low, high = j.scale
    if not low <= j.grade <= high:
        return f"grade {j.grade} is outside the scale {low}..{high}"
    try:
        _parse_time(j.time)
    except (TypeError, ValueError):
        return f"time {j.time!r} is not an ISO 8601 time"
    if j.pool is not None and not isinstance(j.pool.get("id", ""), str):
        return "pool.id must be a string"
    return None


def _parse(data: bytes, source: str) -> tuple[list[Judgement], bool, bool]:
    """The judgements of a log file; whether its last line is torn (ignored); whether its last, whole record
    lacks a newline."""
    lines = data.split(b"\n")  # the last element is what follows the last newline: empty, or unterminated
    judgements: list[Judgement] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        unterminated = number == len(lines)
        try:
            record = json.loads(raw.decode("utf-8"))
            judgement = _judgement_of(record)
        except UnicodeDecodeError as exc:
            if unterminated:
                return judgements, True, False
            raise InputError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})", source=source, line=number) from None
        except (json.JSONDecodeError, _BadRecord) as exc:
            if unterminated:  # no newline after it: cut short by a kill
                return judgements, True, False
            problem = f"not valid JSON ({exc.msg})" if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise InputError(problem, source=source, line=number) from None
        judgements.append(judgement)
        if unterminated:
            return judgements, False, True
    return judgements, False, False


class _BadRecord(InputError):
    """A judgement that cannot be: raised as is by Judgement and append, given a file and line by a log's reader."""


def _judgement_of(record: object) -> Judgement:
    if not isinstance(record, dict):
        raise _BadRecord("expected a JSON object (a judgement)")
    for key in ("query_id", "doc_id", "assessor", "time"):
        if not isinstance(record.get(key), str):
            raise _BadRecord(f"field {key!r} is missing or not a string (is this a judgement log?)")
    grade = record.get("grade")
    if isinstance(grade, bool) or not isinstance(grade, int):
        raise _BadRecord(f"grade {grade!r} is not an integer")
    scale = record.get("scale", list(DEFAULT_SCALE))
    pool = record.get("pool")
    if pool is not None and not isinstance(pool, dict):
        raise _BadRecord("field 'pool' must be an object or null")
    return Judgement(record["query_id"], record["doc_id"], grade, record["assessor"], record["time"], scale, pool)
