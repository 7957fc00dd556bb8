"""The judgement log: the append-only JSON lines that the labelling page writes, one judgement a line.

The format, the write and read rules and a judge's lines: ``docs/labelling.md``, "File formats"; merging logs into
qrels is :func:`rag_eval.ground_truth.merge`."""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._files import append, file_lock
from ..data.columns import GRADE_LIMIT
from ..data.fields import At, iso_time
from ..errors import HarnessError, InputError, TornLine

__all__ = ["DEFAULT_SCALE", "RESERVED_NAMES", "Judgement", "JudgementLog"]

DEFAULT_SCALE = (0, 3)
# column names of Merged.conflicts that are not assessors: an assessor may not be called so
RESERVED_NAMES = frozenset({"query_id", "doc_id", "grade", "qrels"})
_POOL_KEYS = ("id", "depth", "strategy", "systems", "order")


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
    judge: Mapping[str, Any] | None = None  # a model judge's grade: {"fingerprint": str[, "confidence": float]}

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
        if self.judge is not None:
            record["judge"] = dict(self.judge)
        return json.dumps(record, ensure_ascii=False)

    @property
    def pair(self) -> tuple[str, str]:
        return (self.query_id, self.doc_id)

    @property
    def by_judge(self) -> bool:
        """Whether a model judge gave this grade (a person's judgement has no ``judge`` object)."""
        return self.judge is not None

    @property
    def confidence(self) -> float | None:
        """A model judge's confidence in its grade, in [0, 1], where it gave one."""
        return None if self.judge is None else self.judge.get("confidence")


class JudgementLog:
    """An append-only judgement log (JSON lines). :meth:`open` it to append, :meth:`load` it to merge.

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
    def load(cls, path: str | os.PathLike[str]) -> JudgementLog:
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

    @property
    def judges(self) -> dict[str, str]:
        """``{name: fingerprint}`` of the model judges in the log (the last fingerprint each name wrote)."""
        return {j.assessor: j.judge["fingerprint"] for j in self._judgements if j.judge is not None}

    def one_judge(self, name: str) -> str:
        """The fingerprint of the model judge ``name``, checked to be the only one its judgements record: a name
        graded under two fingerprints (its model, prompt or code changed; logs concatenated) is two judges, and
        an InputError naming the log, where one judge is asked for (its agreement, its uncertainty)."""
        found = sorted({j.judge["fingerprint"] for j in self._judgements if j.assessor == name and j.judge is not None})
        if len(found) > 1:
            raise InputError(
                f"judge {name!r} graded in this log under {len(found)} fingerprints ({', '.join(map(repr, found))}): "
                "its model, parameters, prompt or code changed between them, so its grades are of several judges; "
                "give each its own name, or keep one fingerprint's lines",
                source=str(self.path),
            )
        return found[0] if found else ""

    @property
    def people(self) -> list[str]:
        """The assessors that are not model judges."""
        return sorted({j.assessor for j in self._judgements if j.judge is None})

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
        judge: Mapping[str, Any] | None = None,
    ) -> Judgement:
        """Write one judgement (one line, flushed and fsync'd) and return it. ``pool`` is a pool's
        provenance (``Pool.provenance``); its id, depth, strategy and systems are recorded. ``judge`` marks a model
        judge's grade: ``{"fingerprint": str}``, with ``"confidence"`` (a number in [0, 1]) where it gives one."""
        judgement = Judgement(
            query_id,
            doc_id,
            grade,
            assessor,
            time or _now(),
            scale,
            None if pool is None else {k: pool[k] for k in _POOL_KEYS if k in pool},
            None if judge is None else dict(judge),
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
                error.errno = exc.errno  # type: ignore[attr-defined]  # the cause, for a server's status code
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


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_time(text: str) -> datetime:
    """A judgement's time as an aware UTC datetime (UTC where it has no offset); an InputError where it is not
    ISO 8601 or leaves years 1 to 9999 once in UTC."""
    return iso_time(text, "time", At())


def _check_scale(scale: Sequence[int]) -> tuple[int, int]:
    if (
        not isinstance(scale, (tuple, list))
        or len(scale) != 2
        or any(not isinstance(v, int) or isinstance(v, bool) for v in scale)
        or scale[0] >= scale[1]
    ):
        raise _BadRecord(f"scale must be two ints (lowest, highest grade), lowest < highest, not {scale!r}")
    if scale[0] <= -GRADE_LIMIT or scale[1] >= GRADE_LIMIT:
        raise _BadRecord(f"scale {list(scale)!r} is out of range (grades must lie within +-{GRADE_LIMIT})")
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
    except InputError as exc:
        return exc.problem
    if j.pool is not None and not isinstance(j.pool.get("id", ""), str):
        return "pool.id must be a string"
    if j.judge is not None:
        if not isinstance(j.judge, Mapping):
            return f"judge must be an object with the judge's fingerprint, not {j.judge!r}"
        fingerprint = j.judge.get("fingerprint")
        if not isinstance(fingerprint, str) or not fingerprint.strip():
            return f"judge.fingerprint must be a non-empty string, not {fingerprint!r}"
        confidence = j.judge.get("confidence")
        if confidence is not None and (
            isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 <= confidence <= 1.0
        ):
            return f"judge.confidence must be a number in [0, 1] or absent, not {confidence!r}"
    return None


def _parse(data: bytes, source: str) -> tuple[list[Judgement], bool, bool]:
    """The judgements of a log file; whether its last line is torn (ignored); whether its last, whole record
    lacks a newline."""
    lines = data.split(b"\n")  # the last element is what follows the last newline: empty, or unterminated
    judgements: list[Judgement] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        # cut short by a kill: no newline after it, and the start of a JSON object that does not parse (a whole
        # object is no torn line, nor is what does not start as a judgement's line does: both are refused)
        torn = number == len(lines) and raw.lstrip().startswith(b"{")
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            if torn:
                return judgements, True, False
            raise InputError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})", source=source, line=number) from None
        except json.JSONDecodeError as exc:
            if torn:
                return judgements, True, False
            problem = f"not valid JSON ({exc.msg})"
            if not raw.lstrip().startswith(b"{"):
                problem += (
                    ": a judgement log holds one JSON object a line (qrels are merge's first argument, "
                    "--qrels in rag-eval merge)"
                )
            raise InputError(problem, source=source, line=number) from None
        except ValueError:  # an integer of over 4300 digits (Python's limit on int from text)
            problem = "a number of more than 4300 digits (out of range for every field)"
            raise InputError(problem, source=source, line=number) from None
        try:
            judgement = _judgement_of(record)
        except _BadRecord as exc:
            raise InputError(str(exc), source=source, line=number) from None
        judgements.append(judgement)
        if number == len(lines):
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
    judge = record.get("judge")
    if judge is not None and not isinstance(judge, dict):
        raise _BadRecord("field 'judge' must be an object (a model judge's fingerprint) or absent")
    return Judgement(
        record["query_id"], record["doc_id"], grade, record["assessor"], record["time"], scale, pool, judge
    )
