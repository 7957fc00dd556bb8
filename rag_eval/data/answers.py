"""Reference answers per query: ``{query_id: (answer, ...)}``, any one of them right (SQuAD's rule), read from a
column, a JSONL field or SQuAD's own formats. Every problem names the file and line (or the row). See docs/answers.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from .input_files import InputFile, PathLike, read_input
from .source import Source

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ReferenceAnswers"]


class ReferenceAnswers(Mapping[str, tuple[str, ...]]):
    """The reference answers of each query, in the order given (repeats kept, as SQuAD keeps its annotators').

    A query's answers are alternatives: a grade is the best over them (:mod:`rag_eval.metrics.answers`). Each answer
    is a non-empty str; each query has at least one. Build it from ``{query_id: answers}`` (a str or a sequence of
    str), or with :meth:`from_jsonl`, :meth:`from_squad` or :meth:`from_frame`. Immutable."""

    __slots__ = ("_answers", "source")

    def __init__(self, answers: Mapping[str, str | Sequence[str]], *, source: Source | None = None) -> None:
        if not isinstance(answers, Mapping):
            raise TypeError(f"answers must be a mapping {{query_id: answers}}, not {type(answers).__name__}")
        where = source.path if source is not None else "reference answers"
        self._answers = {_query_id(q, where, None): _answer_list(a, where, None, q) for q, a in answers.items()}
        if not self._answers:
            raise InputError("no reference answers", source=where)
        self.source = source

    # ----- constructors -------------------------------------------------------------------------------------
    @classmethod
    def from_jsonl(cls, path: PathLike, *, field: str = "answers", id_field: str = "query_id") -> ReferenceAnswers:
        """One JSON object a line with the query id in ``id_field`` and its answers in ``field``: a str, a list of
        str, or a list of objects with a ``"text"`` (SQuAD's, and ``answers.jsonl`` of a SQuAD folder). A query
        on two lines, a missing field or an empty answer is an InputError naming the file and line."""
        file = read_input(path)
        out: dict[str, tuple[str, ...]] = {}
        for number, record in file.json_objects():
            if id_field not in record or field not in record:
                missing = id_field if id_field not in record else field
                raise file.error(
                    f"missing key {missing!r} (the {'query id' if missing == id_field else 'answers'})", number
                )
            qid = _query_id(record[id_field], file.path, number)
            if qid in out:
                raise file.error(f"query {qid!r} is on two lines (give all its answers on one)", number)
            out[qid] = _answer_list(record[field], file.path, number, qid)
        return cls._made(out, file)

    @classmethod
    def from_squad(cls, path: PathLike) -> ReferenceAnswers:
        """The answers of SQuAD: a folder holding ``answers.jsonl`` (as ``../shared/datasets/squad-dev-v1.1``, the
        file :meth:`SpanLabels.from_squad <rag_eval.SpanLabels.from_squad>` reads for spans), that file itself, or
        the official ``dev-v1.1.json`` (``data`` > ``paragraphs`` > ``qas`` > ``answers``)."""
        where = Path(os.fspath(path))
        if where.is_dir():
            where = where / "answers.jsonl"
        file = read_input(where)
        if file.first_line().lstrip().startswith('{"data"') or not file.name.endswith(".jsonl"):
            return cls._from_official(file)
        return cls.from_jsonl(where, field="answers", id_field="query_id")

    @classmethod
    def _from_official(cls, file: InputFile) -> ReferenceAnswers:
        try:
            document = json.loads(file.text())
        except json.JSONDecodeError as exc:
            raise file.error(f"not valid JSON ({exc.msg})", exc.lineno) from None
        if not isinstance(document, dict) or not isinstance(document.get("data"), list):
            raise file.error("not SQuAD's JSON: expected an object with a 'data' list (or answers.jsonl)")
        out: dict[str, tuple[str, ...]] = {}
        for a, article in enumerate(document["data"]):
            for p, paragraph in enumerate(_items(article, "paragraphs", file, f"data[{a}]")):
                for k, qa in enumerate(_items(paragraph, "qas", file, f"data[{a}].paragraphs[{p}]")):
                    at = f"data[{a}].paragraphs[{p}].qas[{k}]"
                    if not isinstance(qa, dict) or "id" not in qa or "answers" not in qa:
                        raise file.error(f"{at}: a question needs 'id' and 'answers'")
                    qid = _query_id(qa["id"], f"{file.path}: {at}", None)
                    if qid in out:
                        raise file.error(f"{at}: question id {qid!r} appears twice")
                    out[qid] = _answer_list(qa["answers"], f"{file.path}: {at}", None, qid)
        return cls._made(out, file)

    @classmethod
    def from_frame(
        cls, frame: pd.DataFrame, *, column: str = "answer", id_column: str = "query_id"
    ) -> ReferenceAnswers:
        """A table with the query id in ``id_column`` and an answer in ``column`` (a str, or a list of str): a
        query's rows are its alternatives, in row order. A missing column, a null or empty answer names the row."""
        for name in (id_column, column):
            if name not in frame.columns:
                raise InputError(f"no column {name!r} (columns: {list(frame.columns)})", source="reference answers")
        out: dict[str, list[str]] = {}
        for row, (qid, value) in enumerate(zip(frame[id_column].tolist(), frame[column].tolist(), strict=True)):
            where = f"reference answers, row {row}"
            key = _query_id(qid, where, None)
            if not isinstance(value, str) and hasattr(value, "tolist"):
                value = value.tolist()  # a NumPy array of a list column
            out.setdefault(key, []).extend(_answer_list(value, where, None, key))
        return cls(out)

    @classmethod
    def _made(cls, answers: dict[str, tuple[str, ...]], file: InputFile) -> ReferenceAnswers:
        if not answers:
            raise file.error("no reference answers in the file")
        made = cls.__new__(cls)
        made._answers = answers
        made.source = Source.of(file)
        return made

    # ----- reading ------------------------------------------------------------------------------------------
    def __getitem__(self, query_id: str) -> tuple[str, ...]:
        return self._answers[query_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._answers)

    def __len__(self) -> int:
        return len(self._answers)

    def __repr__(self) -> str:
        where = f", from {self.source.path!r}" if self.source else ""
        return f"ReferenceAnswers({len(self)} queries{where})"


def _items(record: Any, key: str, file: InputFile, at: str) -> Iterable[Any]:
    if not isinstance(record, dict) or not isinstance(record.get(key), list):
        raise file.error(f"{at}: expected an object with a {key!r} list")
    items: list[Any] = record[key]
    return items


def _query_id(value: Any, where: str, line: int | None) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"a query id must be a non-empty str, not {value!r}", source=where, line=line)
    return value


def _answer_list(value: Any, where: str, line: int | None, qid: str) -> tuple[str, ...]:
    """A query's answers: a str, or a list of str or of ``{"text": str}`` objects; none empty, at least one."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise InputError(
            f"query {qid!r}: the answers must be a str or a non-empty list, not {value!r:.80}", source=where, line=line
        )
    out = []
    for item in items:
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str) or not text.strip():
            raise InputError(
                f"query {qid!r}: an answer must be a non-empty str (or an object with one in 'text'), not {item!r:.80}",
                source=where,
                line=line,
            )
        out.append(text)
    return tuple(out)
