"""A test collection: a corpus of chunks, the queries, and the qrels. Read from a BEIR-layout folder."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, JudgedDocsNotInCorpus
from .ids import IdCheck
from .input_files import read_input, warn
from .qrels import Qrels


@dataclass(frozen=True)
class Chunk:
    """One retrievable unit: its title and text (indexed together, as BEIR does) and free metadata."""

    title: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def content(self) -> str:
        """What a retriever indexes: the title and the text, as BEIR joins them."""
        return f"{self.title} {self.text}".strip() if self.title else self.text


@dataclass(frozen=True)
class Collection:
    """``corpus`` (chunk id -> Chunk, in file order), ``queries`` (query id -> text) and ``qrels``."""

    name: str
    corpus: dict[str, Chunk]
    queries: dict[str, str]
    qrels: Qrels

    @classmethod
    def from_beir(cls, folder: str | os.PathLike[str], *, split: str = "test") -> Collection:
        """Read ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``; only the queries the qrels judge
        are kept (BEIR's queries file holds every split's)."""
        root = Path(folder)
        qrels_path = root / "qrels" / f"{split}.tsv"
        for path in (root / "corpus.jsonl", root / "queries.jsonl", qrels_path):
            if not path.exists():
                raise InputError(
                    "missing (a BEIR folder holds corpus.jsonl, queries.jsonl, qrels/<split>.tsv)", source=str(path)
                )
        records, ids = _records(root / "corpus.jsonl")
        corpus = {
            i: Chunk(str(r.get("title") or ""), str(r.get("text") or ""), r.get("metadata") or {})
            for i, r in zip(ids, records, strict=True)
        }
        qrels = Qrels.from_beir(qrels_path)
        judged = set(qrels.query_ids)
        records, ids = _records(root / "queries.jsonl", need_text=True)
        queries = {i: str(r["text"]) for i, r in zip(ids, records, strict=True) if i in judged}
        missing = judged.difference(queries)
        if missing:
            raise InputError(
                f"{len(missing)} judged queries have no text, e.g. {sorted(missing)[:3]}",
                source=str(root / "queries.jsonl"),
            )
        judged_docs = {d for q in qrels.query_ids for d in qrels[q]}
        absent = sorted(judged_docs.difference(corpus))
        if absent:
            warn(
                f"{qrels_path}: {len(absent)} judged doc id(s) are not in corpus.jsonl (e.g. {absent[0]!r}); "
                "no retriever can return them, so recall stays below 1 on their queries",
                JudgedDocsNotInCorpus,
            )
        return cls(root.name, corpus, queries, qrels)

    def limit(self, n: int | None) -> Collection:
        """The first ``n`` queries (in file order) and their qrels; the whole corpus."""
        if n is None or n >= len(self.queries):
            return self
        kept = dict(list(self.queries.items())[:n])
        qrels = Qrels.from_dict({q: dict(self.qrels[q]) for q in kept if q in self.qrels})
        return Collection(self.name, self.corpus, kept, qrels)


def _records(path: Path, need_text: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of a BEIR JSONL file and their ``_id`` as str (ints converted with one warning; an int and a
    str that become one id are an InputError naming both lines, as in every reader)."""
    file = read_input(path)
    records: list[dict[str, Any]] = []
    numbers: list[int] = []
    for number, record in file.json_objects():
        if "_id" not in record:
            raise file.error("expected a JSON object with an '_id'", number)
        if need_text and not isinstance(record.get("text"), str):
            raise file.error("expected a 'text' string", number)
        records.append(record)
        numbers.append(number)
    values = np.empty(len(records), dtype=object)
    values[:] = [r["_id"] for r in records]
    with IdCheck(file.path) as check:
        ids = check.array(values, "id", unit="line", labels=numbers, line=True)
    return records, ids.tolist()
