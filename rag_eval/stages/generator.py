"""The generator stage: each query's delivered context (what fits the budget, in order) under a prompt template, to
a model that answers; answers cached and resumed, failures kept per item, latency per call, tokens where reported.

The protocol (:class:`Generator`), the prompt, the cache and what a failure is: ``docs/answers.md``. Adapters for
frameworks: ``rag_eval.adapters`` (``functions.generator``, ``langchain.generator``, ``llamaindex.generator``,
``haystack.generator``); the built-in offline model: :mod:`rag_eval.builtin.generator`.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import math
import os
import string
import threading
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .._checks import check_int
from .._files import append, file_lock
from ..errors import FailingGenerator, HarnessError, InputError, TornLine
from ..metrics.answers import ANSWER_COLUMNS
from .hits import Hit
from .result import PipelineResult

if TYPE_CHECKING:
    import pandas as pd

    from ..metrics.answers import AnswerGrades

__all__ = [
    "ANSWER_COLUMNS",
    "DEFAULT_CHUNK",
    "DEFAULT_PROMPT",
    "Answer",
    "Answers",
    "Generation",
    "Generator",
    "check_template",
    "delivered_contexts",
    "generate_answers",
    "render_prompt",
]

#: The default prompt: the question and the numbered chunks, asking for a short answer taken from them.
DEFAULT_PROMPT = """\
Answer the question using the context. Reply with the answer only: a few words, copied from the context where \
possible.

Context:
{context}

Question: {question}
Answer:"""

#: How one chunk is written into ``{context}``: its number (from 1, in delivered order) and its text; chunks are
#: separated by a blank line. ``{doc_id}`` is also available.
DEFAULT_CHUNK = "[{number}] {text}"

_PROMPT_FIELDS = frozenset({"question", "context"})
_CHUNK_FIELDS = frozenset({"number", "text", "doc_id"})
_LOG_VERSION = 1


@dataclass(frozen=True)
class Generation:
    """What a generator returns for one prompt: the text, and the prompt's and the answer's token counts where the
    model reports them (None otherwise)."""

    text: str
    tokens_in: int | None = None
    tokens_out: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"a generation's text must be a str, not {type(self.text).__name__}")
        for name in ("tokens_in", "tokens_out"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise TypeError(f"a generation's {name} must be an int >= 0 or None, not {value!r}")


class Generator(ABC):
    """A model that answers prompts: ``generate(prompt)`` returns a str or a :class:`Generation`.

    ``fingerprint``: a hash of the class, ``version`` and :meth:`config` (change ``version`` when the model behind the
    same settings changes); it keys the answer cache. ``generate_batch(prompts)`` answers several prompts at once
    (one str, Generation or exception per prompt, in order; by default :meth:`generate` for each). A generator that
    holds a resource (a server, a model) frees it in :meth:`close`; it is a context manager."""

    description = "a generator"

    def __init__(self, name: str, *, version: str | None = None) -> None:
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise InputError(f"a generator needs a non-empty name without surrounding spaces, not {name!r}")
        if version is not None and (not isinstance(version, str) or not version.strip()):
            raise InputError(f"generator {name!r}: version must be a non-empty str or None, not {version!r}")
        self.name = name
        self.version = version

    def config(self) -> dict[str, Any]:
        """What identifies this generator's answers besides its class and version (JSON-serialisable)."""
        return {}

    @property
    def fingerprint(self) -> str:
        """Read at every use: a generator's settings may change after it was made."""
        identity = {
            "class": f"{type(self).__module__}.{type(self).__qualname__}",
            "version": self.version,
            "config": self.config(),
        }
        return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:20]

    @abstractmethod
    def generate(self, prompt: str) -> str | Generation: ...

    def generate_batch(self, prompts: Sequence[str]) -> Sequence[str | Generation | BaseException]:
        """One answer per prompt, in order; an exception in place of an answer is that prompt's failure. If this
        raises, or returns another number of answers, each prompt is asked alone (:meth:`generate`)."""
        out: list[str | Generation | BaseException] = []
        for prompt in prompts:
            try:
                out.append(self.generate(prompt))
            except Exception as exc:  # noqa: BLE001 - that prompt's failure
                out.append(exc)
        return out

    def open(self) -> None:
        """Load what the generator needs (a model), before the first call is timed; by default nothing (a
        generator that loads lazily also works: its first latency then includes the load)."""
        return None

    def close(self) -> None:
        """Free what the generator holds (a server, a model); by default nothing."""
        return None

    def __enter__(self) -> Generator:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, fingerprint={self.fingerprint!r})"


# ----- prompts ---------------------------------------------------------------------------------------------------


def check_template(template: str, fields: frozenset[str], required: frozenset[str], where: str) -> str:
    """A format string whose fields are among ``fields`` and include ``required`` (literal braces doubled)."""
    if not isinstance(template, str) or not template.strip():
        raise InputError(f"{where}: must be a non-empty str (a template with {sorted(required)})")
    try:
        found = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise InputError(f"{where}: not a valid template ({exc}); double literal braces: {{{{ }}}}") from None
    unknown = sorted(found - fields)
    if unknown:
        raise InputError(f"{where}: names the field(s) {unknown}: its fields are {sorted(fields)}")
    missing = sorted(required - found)
    if missing:
        raise InputError(f"{where}: has no {', '.join('{' + m + '}' for m in missing)}")
    return template


def render_prompt(
    question: str, chunks: Sequence[tuple[str, str]], prompt: str = DEFAULT_PROMPT, chunk: str = DEFAULT_CHUNK
) -> str:
    """The prompt for one question and its ``chunks`` (``(doc_id, text)`` pairs in delivered order): each chunk
    written by ``chunk``, numbered from 1, separated by a blank line (no chunk: an empty context)."""
    context = "\n\n".join(chunk.format(number=i, text=t, doc_id=d) for i, (d, t) in enumerate(chunks, 1))
    return prompt.format(question=question, context=context)


# ----- answers ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One query's answer: ``text``, or the ``error`` that stopped it (then ``text`` is None; ``skipped`` when the
    generator was not asked: its retrieval failed). ``latency``: seconds of the call (for a batch, its time shared
    equally; for a cached answer, the original call's); tokens where the generator reports them."""

    query_id: str
    text: str | None
    context_ids: tuple[str, ...]
    latency: float = math.nan
    tokens_in: int | None = None
    tokens_out: int | None = None
    error: str | None = None
    cached: bool = False
    skipped: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


class Answers(Mapping[str, Answer]):
    """Every query's :class:`Answer`, in the order asked, with what produced them: the generator's name and
    fingerprint, the prompt and chunk templates, and how many generator calls this run made (``calls``)."""

    def __init__(
        self,
        answers: Mapping[str, Answer],
        *,
        generator: str,
        fingerprint: str,
        prompt: str,
        chunk: str,
        calls: int = 0,
    ) -> None:
        self._answers = dict(answers)
        self.generator, self.fingerprint, self.prompt, self.chunk, self.calls = (
            generator,
            fingerprint,
            prompt,
            chunk,
            calls,
        )

    def __getitem__(self, query_id: str) -> Answer:
        return self._answers[query_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._answers)

    def __len__(self) -> int:
        return len(self._answers)

    @property
    def texts(self) -> dict[str, str | None]:
        """``{query_id: answer text}``, None where it failed (what :func:`~rag_eval.metrics.answers.grade_answers`
        takes)."""
        return {q: a.text for q, a in self._answers.items()}

    @property
    def failures(self) -> dict[str, str]:
        """``{query_id: error}`` of the queries without an answer."""
        return {q: a.error for q, a in self._answers.items() if a.error is not None}

    @property
    def cache_hits(self) -> int:
        return sum(a.cached for a in self._answers.values())

    def grade(self, references: Mapping[str, str | Sequence[str]]) -> AnswerGrades:
        """The answers graded against ``references`` (:func:`~rag_eval.metrics.answers.grade_answers`: a failed
        answer is NaN, counted, never a wrong one)."""
        from ..metrics.answers import grade_answers

        return grade_answers(self.texts, references)

    def to_frame(self) -> pd.DataFrame:
        """One row per query: ``query_id, answer, error, skipped, cached, latency, tokens_in, tokens_out,
        n_context, context_ids`` (a list of the delivered chunks' ids, in order)."""
        import pandas as pd

        rows = [
            (
                a.query_id,
                a.text,
                a.error,
                a.skipped,
                a.cached,
                a.latency,
                a.tokens_in,
                a.tokens_out,
                len(a.context_ids),
                list(a.context_ids),
            )
            for a in self._answers.values()
        ]
        frame = pd.DataFrame(rows, columns=list(ANSWER_COLUMNS))
        for name in ("tokens_in", "tokens_out"):
            frame[name] = frame[name].astype("Int64")
        return frame

    def __repr__(self) -> str:
        return (
            f"Answers({self.generator!r}, {len(self)} queries, {len(self.failures)} failed, "
            f"{self.cache_hits} from the cache, {self.calls} calls)"
        )


# ----- the delivered context -------------------------------------------------------------------------------------


def delivered_contexts(result: PipelineResult, *, stage: str | None = None) -> dict[str, tuple[Hit, ...] | None]:
    """Each query's delivered context: the hits of ``stage`` (the last by default) that fit the pipeline's budget,
    in ranked order (:meth:`StageOutput.delivered <rag_eval.stages.StageOutput.delivered>`); None where the stage
    failed on the query."""
    if not isinstance(result, PipelineResult):
        raise TypeError(f"expected a PipelineResult (what Pipeline.run returns), not {type(result).__name__}")
    name = stage or result.final_stage
    if name not in result.stages:
        raise InputError(f"no stage {name!r} in {result.pipeline} (stages: {', '.join(result.stages)})")
    out = result.stages[name]
    counts = out.delivered(result.pipeline.budget, result.pipeline.tokenizer).tolist()
    outcomes = out.outcomes
    rows = out.rows
    contexts: dict[str, tuple[Hit, ...] | None] = {}
    for qid in result.queries:
        outcome = outcomes[qid]
        contexts[qid] = None if outcome.hits is None else outcome.hits[: counts[rows[qid]]]
    return contexts


# ----- the answer log (the cache) --------------------------------------------------------------------------------


class _AnswerLog:
    """The answers of one generator configuration: a JSON-lines file appended to (fsync'd) after every call, so
    that a killed run loses at most the calls under way; read whole when opened. Keyed by the prompt's key."""

    def __init__(self, directory: Path, generator: Generator, fingerprint: str) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in generator.name)[:60]
        self.path = directory / f"answers-{safe}-{fingerprint}.jsonl"
        self._lock_path = directory / f".answers-{safe}-{fingerprint}.lock"
        self._lock = threading.Lock()
        self.found: dict[str, dict[str, Any]] = {}
        try:  # nothing is made until an answer is stored: a run that stores none leaves no folder or lock
            if self.path.exists():
                with file_lock(self._lock_path, exclusive=False):
                    data = self.path.read_bytes()
            else:
                data = b""
        except OSError as exc:
            raise HarnessError(f"answer cache {self.path}: cannot read it: {exc.strerror or exc}") from None
        torn = 0
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            record = _record(line)
            if record is None:
                torn += 1
            else:
                self.found[record["key"]] = record
        if torn:
            warnings.warn(
                f"answer cache {self.path}: {torn} damaged line(s) dropped (cut short by a kill, or not an answer): "
                "their queries are asked again",
                TornLine,
                stacklevel=4,
            )

    def put(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        data = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with file_lock(self._lock_path, exclusive=True):
                    append(self.path, data, whole=lambda tail: _record(tail) is not None)
            except OSError as exc:
                raise HarnessError(
                    f"answer cache {self.path}: cannot store answers: {exc.strerror or exc}; free some space or make "
                    "the folder writable, then run again: stored answers are reused (this is not the generator's "
                    "fault)"
                ) from None


def _record(line: bytes) -> dict[str, Any] | None:
    """A whole, well-typed answer record, or None."""
    try:
        record = json.loads(line.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if (
        not isinstance(record, dict)
        or record.get("v") != _LOG_VERSION
        or not isinstance(record.get("key"), str)
        or not isinstance(record.get("answer"), str)
        or not isinstance(record.get("latency"), (int, float))
        or isinstance(record.get("latency"), bool)
        or not record["latency"] >= 0
    ):
        return None
    for name in ("tokens_in", "tokens_out"):
        value = record.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            return None
    return record


def _key(fingerprint: str, prompt_template: str, chunk: str, prompt: str, context_ids: Sequence[str]) -> str:
    """What an answer is cached under: the generator's fingerprint, the prompt and chunk templates, the context
    ids, and the rendered prompt (the question and the chunks' texts)."""
    parts = json.dumps([fingerprint, prompt_template, chunk, list(context_ids), prompt], ensure_ascii=False)
    return hashlib.sha256(parts.encode()).hexdigest()[:24]


# ----- the run ---------------------------------------------------------------------------------------------------


@dataclass
class _Item:
    query_id: str
    prompt: str
    context_ids: tuple[str, ...]
    key: str
    answer: Answer | None = field(default=None)


def generate_answers(
    generator: Generator,
    contexts: PipelineResult | Mapping[str, Sequence[Hit] | None],
    *,
    questions: Mapping[str, str] | None = None,
    prompt: str = DEFAULT_PROMPT,
    chunk: str = DEFAULT_CHUNK,
    texts: Mapping[str, str] | None = None,
    stage: str | None = None,
    cache: str | os.PathLike[str] | None = None,
    batch_size: int = 1,
    concurrency: int = 1,
) -> Answers:
    """Answer every query from its context with ``generator``.

    ``contexts``: a :class:`PipelineResult` (its delivered contexts, :func:`delivered_contexts`; its queries are the
    questions) or ``{query_id: hits}`` (in the order to show them; None: no context because retrieval failed, the
    query is skipped). ``questions``: ``{query_id: text}`` (required with a mapping). ``prompt``: a template with
    ``{question}`` and ``{context}``; ``chunk``: how each chunk is written (``{number}``, ``{text}``, ``{doc_id}``).
    A hit without text takes it from ``texts`` (``{doc_id: text}``); one found in neither is an InputError before
    any call. ``cache``: a directory; answers already there (same generator fingerprint, templates, context ids and
    prompt) are reused with no call, new ones appended after each call. ``batch_size`` prompts per call of
    :meth:`Generator.generate_batch`; ``concurrency`` calls at once (threads). See docs/answers.md."""
    if not isinstance(generator, Generator):
        raise TypeError(f"expected a rag_eval Generator (see rag_eval.adapters), not {type(generator).__name__}")
    prompt = check_template(prompt, _PROMPT_FIELDS, _PROMPT_FIELDS, "the prompt")
    chunk = check_template(chunk, _CHUNK_FIELDS, frozenset({"text"}), "the chunk template")
    batch_size = check_int(batch_size, "batch_size", high=None)
    concurrency = check_int(concurrency, "concurrency", high=None)
    if isinstance(contexts, PipelineResult):
        questions = contexts.queries if questions is None else questions
        contexts = delivered_contexts(contexts, stage=stage)
    if not isinstance(contexts, Mapping):
        raise TypeError(f"contexts must be a PipelineResult or {{query_id: hits}}, not {type(contexts).__name__}")
    if questions is None or not isinstance(questions, Mapping):
        raise InputError("give questions= ({query_id: text}) with a mapping of contexts")
    fingerprint = generator.fingerprint
    items, answers = _items(contexts, questions, texts, prompt, chunk, fingerprint)
    log = _AnswerLog(Path(os.fspath(cache)), generator, fingerprint) if cache is not None else None
    todo = []
    for item in items:
        record = log.found.get(item.key) if log is not None else None
        if record is None:
            todo.append(item)
            continue
        item.answer = Answer(
            item.query_id,
            record["answer"],
            item.context_ids,
            float(record["latency"]),
            record.get("tokens_in"),
            record.get("tokens_out"),
            cached=True,
        )
    if todo:
        generator.open()
    calls = _run(generator, todo, log, batch_size, concurrency)
    for item in items:
        assert item.answer is not None
        answers[item.query_id] = item.answer
    ordered = {q: answers[q] for q in contexts}
    result = Answers(
        ordered, generator=generator.name, fingerprint=fingerprint, prompt=prompt, chunk=chunk, calls=calls
    )
    asked = [a for a in ordered.values() if not a.skipped and not a.cached]
    failed = [a for a in asked if a.error is not None]
    if asked and len(failed) * 2 > len(asked):
        warnings.warn(
            f"generator {generator.name!r} failed on {len(failed)} of the {len(asked)} queries it was asked (first: "
            f"query {failed[0].query_id!r}: {failed[0].error}); their answers are missing (NaN), not wrong",
            FailingGenerator,
            stacklevel=2,
        )
    return result


def _items(
    contexts: Mapping[str, Sequence[Hit] | None],
    questions: Mapping[str, str],
    texts: Mapping[str, str] | None,
    prompt: str,
    chunk: str,
    fingerprint: str,
) -> tuple[list[_Item], dict[str, Answer]]:
    """The prompts to answer, and the answers already known (queries skipped: their retrieval failed). Every
    missing question or chunk text is an InputError before any call."""
    items: list[_Item] = []
    skipped: dict[str, Answer] = {}
    no_text: list[tuple[str, str]] = []
    for qid, hits in contexts.items():
        if not isinstance(qid, str):
            raise InputError(f"query id {qid!r} is a {type(qid).__name__}, not a str", source="contexts")
        question = questions.get(qid)
        if not isinstance(question, str) or not question.strip():
            raise InputError(f"query {qid!r}: no question text (a non-empty str) in questions", source="contexts")
        if hits is None:
            skipped[qid] = Answer(qid, None, (), error="not run: retrieval failed on this query", skipped=True)
            continue
        pairs = []
        for hit in hits:
            if not isinstance(hit, Hit):
                raise InputError(f"query {qid!r}: a context holds Hit objects, not {type(hit).__name__}")
            text = hit.text if hit.text is not None else (texts or {}).get(hit.doc_id)
            if text is None:
                no_text.append((qid, hit.doc_id))
                continue
            pairs.append((hit.doc_id, text))
        ids = tuple(d for d, _ in pairs)
        rendered = render_prompt(question, pairs, prompt, chunk)
        items.append(_Item(qid, rendered, ids, _key(fingerprint, prompt, chunk, rendered, ids)))
    if no_text:
        qid, doc = no_text[0]
        more = f" (and {len(no_text) - 1} more)" if len(no_text) > 1 else ""
        raise InputError(
            f"query {qid!r}: chunk {doc!r} has no text{more}: pass texts={{doc_id: text}} (a corpus) for hits "
            "returned without their text",
            source="contexts",
        )
    return items, skipped


def _run(generator: Generator, todo: list[_Item], log: _AnswerLog | None, batch_size: int, concurrency: int) -> int:
    """Ask the generator for every item (batches of ``batch_size`` on ``concurrency`` threads), each batch's
    answers logged as it ends; returns the number of calls made."""
    batches = [todo[i : i + batch_size] for i in range(0, len(todo), batch_size)]
    calls = [0]
    counter = threading.Lock()

    def count(n: int = 1) -> None:
        with counter:
            calls[0] += n

    def work(batch: list[_Item]) -> None:
        _answer_batch(generator, batch, count)
        if log is not None:
            log.put([_as_record(item) for item in batch if item.answer is not None and item.answer.ok])

    if concurrency == 1 or len(batches) <= 1:
        for batch in batches:
            work(batch)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(concurrency, len(batches))) as pool:
            for future in [pool.submit(work, b) for b in batches]:
                future.result()  # a HarnessError of the log stops the run (what was stored stays)
    return calls[0]


def _answer_batch(generator: Generator, batch: list[_Item], count: Callable[[int], None]) -> None:
    if len(batch) == 1:
        _answer_one(generator, batch[0], count)
        return
    start = time.perf_counter()
    try:
        count(1)
        returned = list(generator.generate_batch([item.prompt for item in batch]))
    except Exception:  # noqa: BLE001 - asked again prompt by prompt, so that a fault is charged to its own item
        returned = []
    if len(returned) != len(batch):
        for item in batch:
            _answer_one(generator, item, count)
        return
    share = (time.perf_counter() - start) / len(batch)
    for item, value in zip(batch, returned, strict=True):
        item.answer = _as_answer(item, value, share)


def _answer_one(generator: Generator, item: _Item, count: Callable[[int], None]) -> None:
    start = time.perf_counter()
    try:
        count(1)
        value: Any = generator.generate(item.prompt)
    except Exception as exc:  # noqa: BLE001 - this item's failure, kept
        value = exc
    item.answer = _as_answer(item, value, time.perf_counter() - start)


def _as_answer(item: _Item, value: Any, latency: float) -> Answer:
    if isinstance(value, BaseException):
        error = f"{type(value).__name__}: {value}".rstrip(": ") or type(value).__name__
        return Answer(item.query_id, None, item.context_ids, latency, error=error)
    if isinstance(value, str):
        value = Generation(value)
    if not isinstance(value, Generation):
        error = f"the generator returned a {type(value).__name__}, not a str or a Generation: {value!r:.200}"
        return Answer(item.query_id, None, item.context_ids, latency, error=error)
    return Answer(item.query_id, value.text, item.context_ids, latency, value.tokens_in, value.tokens_out)


def _as_record(item: _Item) -> dict[str, Any]:
    answer = item.answer
    assert answer is not None
    return {
        "v": _LOG_VERSION,
        "key": item.key,
        "query_id": item.query_id,
        "context_ids": list(item.context_ids),
        "answer": answer.text,
        "latency": answer.latency,
        "tokens_in": answer.tokens_in,
        "tokens_out": answer.tokens_out,
    }
