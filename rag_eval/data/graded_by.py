"""Who graded a qrels: how many of its judgements came from people and how many from each model judge.

A qrels merged from judgement logs that hold a model judge's grades (:func:`rag_eval.ground_truth.merge`) carries a
:class:`GradedBy`, and every metric card made with it says so (the qrels input's note), so that a number computed
on a judge's grades is never read as one computed on people's. Written as TREC qrels
(:func:`rag_eval.ground_truth.write_qrels`), it travels in a sidecar file ``QRELS.graded-by.json`` beside the qrels
(TREC qrels have no room for it, and trec_eval must still read the file), holding the SHA-256 of the qrels file it
describes: :meth:`rag_eval.Qrels.from_trec` and :meth:`~rag_eval.Qrels.load` read it back when the hash matches,
and warn (:class:`~rag_eval.errors.StaleGradedBy`) when the qrels changed since, ignoring it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._files import write_output
from ..errors import InputError, StaleGradedBy
from .fields import At, count
from .input_files import warn

__all__ = ["GradedBy", "JudgeShare", "sidecar_path"]

SUFFIX = ".graded-by.json"


@dataclass(frozen=True)
class JudgeShare:
    """One model judge's part of a qrels: its name, its fingerprint and the (query, doc) pairs it decided."""

    name: str
    fingerprint: str
    pairs: frozenset[tuple[str, str]]

    @property
    def judgements(self) -> int:
        return len(self.pairs)


@dataclass(frozen=True)
class GradedBy:
    """How many judgements of a qrels people decided (the qrels merged into, and human assessors) and how many
    each model judge decided (pairs no person graded)."""

    people: int
    judges: tuple[JudgeShare, ...] = field(default=())

    def __post_init__(self) -> None:
        if isinstance(self.people, bool) or not isinstance(self.people, int) or self.people < 0:
            raise InputError(f"graded-by: people must be an int >= 0, not {self.people!r}")
        for j in self.judges:
            if not isinstance(j, JudgeShare) or not j.name or not isinstance(j.pairs, frozenset):
                raise InputError(f"graded-by: {j!r} is not a judge's share (name, fingerprint, pairs)")

    def restricted(self, pairs: Iterable[tuple[str, str]]) -> GradedBy:
        """Who decided each of ``pairs`` (a subset of these qrels' pairs: what is left of them after some were
        graded again): the judges keep the pairs of theirs among them, people the rest."""
        kept = set(pairs)
        judges = tuple(JudgeShare(j.name, j.fingerprint, j.pairs & kept) for j in self.judges)
        judges = tuple(j for j in judges if j.pairs)
        return GradedBy(len(kept) - sum(j.judgements for j in judges), judges)

    @property
    def total(self) -> int:
        return self.people + sum(j.judgements for j in self.judges)

    @property
    def by_judges(self) -> int:
        return sum(j.judgements for j in self.judges)

    def note(self) -> str:
        """One line for a metric card: the share of judgements by each judge and by people."""
        total = self.total or 1
        parts = [
            f"{j.name} (fingerprint {j.fingerprint[:12]}) {j.judgements:,} ({j.judgements / total:.1%})"
            for j in self.judges
        ]
        return (
            f"graded in part by model judges: {self.by_judges:,} of {self.total:,} judgements "
            f"({self.by_judges / total:.1%}): "
            + ", ".join(parts)
            + f"; people {self.people:,} ({self.people / total:.1%})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "people": self.people,
            "judges": [
                {
                    "name": j.name,
                    "fingerprint": j.fingerprint,
                    "judgements": j.judgements,
                    "pairs": [list(pair) for pair in sorted(j.pairs)],
                }
                for j in self.judges
            ],
        }

    @classmethod
    def from_dict(cls, record: Any, where: str) -> GradedBy:
        try:
            return cls(
                count(record["people"], "people", At()),
                tuple(
                    JudgeShare(
                        str(j["name"]), str(j["fingerprint"]), frozenset((str(q), str(d)) for q, d in j["pairs"])
                    )
                    for j in record["judges"]
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"not a graded-by record ({type(exc).__name__}: {exc})", source=where) from None


def sidecar_path(qrels_path: str | os.PathLike[str]) -> Path:
    """Where the graded-by record of the qrels file ``qrels_path`` lives: ``QRELS.graded-by.json`` beside it."""
    path = Path(qrels_path)
    return path.with_name(path.name + SUFFIX)


def write_sidecar(qrels_path: str | os.PathLike[str], graded_by: GradedBy | None) -> None:
    """Write the graded-by record of the qrels file just written at ``qrels_path`` (with the SHA-256 of its
    bytes), or remove a record left there when ``graded_by`` names no judge."""
    target = Path(os.path.realpath(qrels_path))  # a symlink's qrels were written through: the record sits by them
    path = sidecar_path(target)
    if graded_by is None or not graded_by.judges:
        path.unlink(missing_ok=True)
        return
    record = {"qrels": target.name, "qrels_sha256": hashlib.sha256(target.read_bytes()).hexdigest()}
    record.update(graded_by.to_dict())
    write_output(path, [(json.dumps(record, indent=1) + "\n").encode()])


def read_sidecar(qrels_path: str, sha256: str) -> GradedBy | None:
    """The graded-by record beside a qrels file, if there is one for these bytes (``sha256``); a record written for
    other bytes is stale: warned about and ignored."""
    if not qrels_path or qrels_path in ("-", "/dev/stdin"):
        return None
    path = sidecar_path(os.path.realpath(qrels_path))
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=os.fspath(path)) from None
    try:
        record = json.loads(text)
    except ValueError as exc:  # (an integer of over 4300 digits too)
        raise InputError(f"not valid JSON ({getattr(exc, 'msg', exc)})", source=os.fspath(path)) from None
    if not isinstance(record, dict):
        raise InputError("expected a JSON object (a graded-by record)", source=os.fspath(path))
    if record.get("qrels_sha256") != sha256:
        warn(
            f"{path}: written for other qrels than {qrels_path} holds now (SHA-256 differs): ignored, so the card "
            "cannot say whether model judges graded part of these qrels; merge again to write a new one",
            StaleGradedBy,
        )
        return None
    return GradedBy.from_dict(record, os.fspath(path))
