"""The judging run: a judge grades every item of a pool into a judgement log, resumably.

The rules (items, grades to the log, resuming, failures, human grades, batches): ``docs/judges.md``, "The judging
run"."""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import inspect
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._checks import check_int
from ..data import Qrels
from ..errors import FailingJudge, InputError
from ..stages.judges import Judge, JudgeGrade, JudgeItem, check_scale
from .judgement_log import JudgementLog
from .pooling import Pool

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FAILING_SHARE", "JudgingRun", "grade_batches", "judge", "load_judge"]

FAILING_SHARE = 0.5  # a judge failing on more than this share of the items it was asked is announced
_FAILURE_COLUMNS = ["query_id", "doc_id", "error"]

Human = Qrels | Mapping[str, Mapping[str, int]] | JudgementLog | str | os.PathLike[str]


@dataclass(frozen=True)
class JudgingRun:
    """What a judging run did. ``graded``: items graded and written by this run; ``from_log``: items the log held
    already under this judge (not asked again); ``failed``: items that failed (in :attr:`failures`, asked again
    next time); ``skipped``: items people graded, left out with ``human=``; ``calls``: the judge's ``grade`` /
    ``agrade`` calls made. ``grades``: ``{(query_id, doc_id): grade}`` of every pool item this judge graded, from
    the log and from this run."""

    judge: str
    fingerprint: str
    scale: tuple[int, int]
    log: str
    pool: str
    items: int
    graded: int
    from_log: int
    failed: int
    skipped: int
    calls: int
    grades: Mapping[tuple[str, str], int] = field(repr=False)
    failures: pd.DataFrame = field(repr=False)
    description: str | None = None  # what the judge says of itself (the built-in: that it is weak)

    @property
    def complete(self) -> bool:
        """Whether every item not skipped has the judge's grade (nothing failed)."""
        return self.failed == 0

    def summary(self) -> str:
        """One line: who graded what, how many from the log, how many failed."""
        said = f" [{self.description}]" if self.description else ""
        return (
            f"judge {self.judge!r} ({self.fingerprint}) on pool {self.pool}: {self.items} items, {self.graded} graded "
            f"now, {self.from_log} from the log, {self.failed} failed, {self.skipped} graded by people and skipped "
            f"-> {self.log}{said}"
        )


def judge(
    pool: Pool | str | os.PathLike[str],
    judge: Judge,
    *,
    log: JudgementLog | str | os.PathLike[str],
    scale: tuple[int, int] = (0, 3),
    batch_size: int = 16,
    concurrency: int = 1,
    human: Human | None = None,
    progress: bool = True,
) -> JudgingRun:
    """Grade every item of ``pool`` with ``judge`` into the judgement ``log`` (see the module's rules): resumable,
    each batch's grades written as it returns, failures kept per item. ``pool``: a :class:`Pool` or its file;
    ``log``: a :class:`JudgementLog` or its path (created when missing); ``scale``: the pool's grades (low, high);
    ``human``: people's grades whose items are not asked. Returns a :class:`JudgingRun`."""
    import pandas as pd
    from tqdm.auto import tqdm

    the_pool = pool if isinstance(pool, Pool) else Pool.load(pool)
    the_log = log if isinstance(log, JudgementLog) else JudgementLog.open(log)
    scale = check_scale(scale)
    name, fingerprint = _identity(judge)
    batch_size = check_int(batch_size, "batch_size", high=None)
    concurrency = check_int(concurrency, "concurrency", high=None)

    stored = _stored(the_log, name, fingerprint, scale)
    if stored:  # this judge's grades in the log and the pool's items: a log of another pool is said
        from ..data.joins import join

        join(
            [f"{q}\t{d}" for q, d in stored],
            {f"{i.query_id}\t{i.doc_id}" for i in the_pool.items},
            what=f"judge {name!r}'s graded (query, doc) pairs in {the_log.path}",
            where=f"pool {the_pool.id}",
            consequence="a log of another pool? Its other grades are kept, not used for this pool",
        )
    people = _human_pairs(human) if human is not None else set()
    todo: list[JudgeItem] = []
    from_log = skipped = 0
    grades: dict[tuple[str, str], int] = {}
    for item in the_pool.items:
        pair = (item.query_id, item.doc_id)
        if pair in stored:
            from_log += 1
            grades[pair] = stored[pair]
        elif pair in people:
            skipped += 1
        else:
            todo.append(_judge_item(item))

    failures: list[tuple[str, str, str]] = []
    graded = 0
    provenance = the_pool.provenance
    mark = {"fingerprint": fingerprint}

    def store(batch: Sequence[JudgeItem], answers: Sequence[JudgeGrade]) -> None:
        nonlocal graded
        for item, answer in zip(batch, answers, strict=True):
            if answer.grade is None:
                failures.append((item.query_id, item.doc_id, str(answer.error)))
                continue
            extra = {} if answer.confidence is None else {"confidence": answer.confidence}
            the_log.append(
                item.query_id,
                item.doc_id,
                answer.grade,
                assessor=name,
                scale=scale,
                pool=provenance,
                judge={**mark, **extra},
            )
            grades[(item.query_id, item.doc_id)] = answer.grade
            graded += 1
        bar.update(len(batch))

    with tqdm(total=len(todo), desc=f"judging with {name}", unit="item", disable=not progress or not todo) as bar:
        calls = grade_batches(judge, todo, scale, batch_size=batch_size, concurrency=concurrency, store=store)

    if todo and len(failures) > FAILING_SHARE * len(todo):
        query_id, doc_id, error = failures[0]
        warnings.warn(
            f"judge {name!r} failed on {len(failures)} of the {len(todo)} items it was asked (first: query "
            f"{query_id!r}, doc {doc_id!r}: {error}); the failed items are not in the log and are asked again on the "
            "next run",
            FailingJudge,
            stacklevel=2,
        )
    frame = pd.DataFrame(failures, columns=_FAILURE_COLUMNS, dtype=object)
    return JudgingRun(
        judge=name,
        fingerprint=fingerprint,
        scale=scale,
        log=os.fspath(the_log.path),
        pool=the_pool.id,
        items=len(the_pool.items),
        graded=graded,
        from_log=from_log,
        failed=len(failures),
        skipped=skipped,
        calls=calls,
        grades=grades,
        failures=frame,
        description=_description(judge),
    )


def grade_batches(
    judge: Judge,
    items: Sequence[JudgeItem],
    scale: tuple[int, int],
    *,
    batch_size: int,
    concurrency: int,
    store: Callable[[Sequence[JudgeItem], Sequence[JudgeGrade]], None],
) -> int:
    """Ask ``judge`` to grade ``items`` in batches of ``batch_size``, ``concurrency`` batches at once (through
    ``agrade`` where the judge has it, else on threads), each batch's grades given to ``store(batch, grades)`` in
    the items' order; a batch that raises or answers wrongly is asked again item by item. Returns the calls made."""
    batches = list(_chunks(list(items), batch_size))
    calls = 0
    if concurrency == 1 or len(batches) <= 1:
        for batch in batches:
            answers, asked = _graded(judge, batch, scale)
            calls += asked
            store(batch, answers)
    elif callable(getattr(judge, "agrade", None)):
        calls += _run_async(judge, batches, scale, concurrency, store)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as threads:
            futures = [threads.submit(_graded, judge, batch, scale) for batch in batches]
            try:
                for batch, future in zip(batches, futures, strict=True):  # in order: a log reads as the pool
                    answers, asked = future.result()
                    calls += asked
                    store(batch, answers)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    return calls


def load_judge(spec: str) -> Judge:
    """The judge named by ``package.module:attribute`` (what ``rag-eval judge --judge`` takes): a judge object; a
    callable taking no argument that returns a judge, or a function (query, text) -> grade; or such a function
    itself, wrapped as a function judge named after it (:func:`rag_eval.adapters.functions.judge`). The module is
    imported as Python would, else from the current directory."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name.strip() or not attribute.strip():
        raise InputError(f"--judge {spec!r}: expected package.module:function")
    try:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name.partition(".")[0] or os.getcwd() in sys.path:
                raise
            sys.path.insert(0, os.getcwd())  # a module of the user's beside them, as `python -m` would find it
            module = importlib.import_module(module_name)
        found = getattr(module, attribute)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"--judge {spec!r}: cannot load it: {exc}") from None
    if isinstance(found, Judge):
        return found
    if not callable(found):
        raise InputError(f"--judge {spec!r} is a {type(found).__name__}, not a judge or a function")
    required = _positional(found)
    if required >= 2:
        return _function_judge(found, attribute)
    if required == 1:
        raise InputError(
            f"--judge {spec!r} takes 1 argument: expected a callable taking none (returning a judge) or a function "
            "(query, text) -> grade"
        )
    made = found()
    if isinstance(made, Judge):
        return made
    if callable(made) and _positional(made) >= 2:
        return _function_judge(made, getattr(made, "__name__", attribute))
    raise InputError(
        f"--judge {spec!r} returned a {type(made).__name__}: expected a judge (name, fingerprint, grade) or a "
        "function (query, text) -> grade"
    )


def _positional(fn: Any) -> int:
    """How many positional arguments ``fn`` requires (0 when its signature cannot be read)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 0
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in kinds and p.default is inspect.Parameter.empty for p in parameters)


def _function_judge(fn: Any, name: str) -> Judge:
    from ..adapters.functions import judge as function_judge

    return function_judge(fn, name=name)


# ----- helpers --------------------------------------------------------------------------------------------------


def _identity(judge: object) -> tuple[str, str]:
    if not isinstance(judge, Judge):
        raise InputError(
            f"expected a judge (with name, fingerprint and grade(items, *, scale)), not {type(judge).__name__}: "
            "wrap a function with rag_eval.adapters.functions.judge(fn, name=...)"
        )
    name, fingerprint = judge.name, judge.fingerprint
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise InputError(f"a judge's name must be a non-empty string without surrounding spaces, not {name!r}")
    if not isinstance(fingerprint, str) or not fingerprint.strip():
        raise InputError(f"judge {name!r}: its fingerprint must be a non-empty string, not {fingerprint!r}")
    return name, fingerprint


def _description(judge: object) -> str | None:
    said = getattr(judge, "description", None)
    return said if isinstance(said, str) and said.strip() else None


def _stored(log: JudgementLog, name: str, fingerprint: str, scale: tuple[int, int]) -> dict[tuple[str, str], int]:
    """The grades the log holds by this judge: ``{pair: grade}`` (its latest of each pair); the same name under
    another fingerprint or scale, or a person of that name, is an error."""
    mine = [j for j in log.judgements if j.assessor == name]
    person = next((j for j in mine if j.judge is None), None)
    if person is not None:
        raise InputError(
            f"judgement log {log.path}: {name!r} is a person's name there (query {person.query_id!r}, doc "
            f"{person.doc_id!r} has no judge fingerprint): give the judge another name"
        )
    other = next((j for j in mine if j.judge is not None and j.judge.get("fingerprint") != fingerprint), None)
    if other is not None and other.judge is not None:
        theirs = other.judge.get("fingerprint")
        raise InputError(
            f"judgement log {log.path}: judge {name!r} graded there with fingerprint {theirs!r}, "
            f"and this judge's fingerprint is {fingerprint!r}: its model, parameters, prompt or code changed. A name "
            "means one judge in a log: give this one a new name (e.g. with a version), or use another log"
        )
    scaled = next((j for j in mine if j.scale != scale), None)
    if scaled is not None:
        raise InputError(
            f"judgement log {log.path}: judge {name!r} graded there on the scale {scaled.scale[0]}..{scaled.scale[1]}, "
            f"not {scale[0]}..{scale[1]}: grade on the pool's scale, or use another log"
        )
    return {(j.query_id, j.doc_id): j.grade for j in mine}


def _human_pairs(human: Human) -> set[tuple[str, str]]:
    """The (query, doc) pairs people graded: in qrels or a mapping, or in a log (its judgements without a judge)."""
    if isinstance(human, (str, os.PathLike)):
        path = os.fspath(human)
        try:  # a judgement log (each line has an assessor and a time), else qrels in any format Qrels reads
            human = JudgementLog.load(path)
        except InputError:
            human = Qrels.load(path)
    if isinstance(human, JudgementLog):
        return {j.pair for j in human.judgements if j.judge is None}
    if isinstance(human, Qrels):
        return {(q, d) for q in human.query_ids for d in human[q]}
    if isinstance(human, Mapping):
        return {(str(q), str(d)) for q, docs in human.items() for d in docs}
    raise InputError(f"human must be qrels, a {{query: {{doc: grade}}}} mapping or a judgement log, not {human!r}")


def _judge_item(item: Any) -> JudgeItem:
    missing = [what for what, value in (("query text", item.query), ("chunk text", item.text)) if value is None]
    if missing:
        raise InputError(
            f"pool item query {item.query_id!r}, doc {item.doc_id!r} has no {' and no '.join(missing)}: a judge reads "
            "both; pool with the texts (rag_eval.pool(..., queries=, texts=), pipeline results, or rag-eval pool "
            "--beir)"
        )
    return JudgeItem(item.query_id, item.doc_id, item.query, item.text)


def _chunks(items: list[JudgeItem], size: int) -> Iterator[list[JudgeItem]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _checked(answers: object, batch: Sequence[JudgeItem], scale: tuple[int, int]) -> list[JudgeGrade]:
    """A judge's answers for a batch, one JudgeGrade per item; a TypeError/ValueError when they are not that."""
    if not isinstance(answers, Sequence) or isinstance(answers, (str, bytes)):
        raise TypeError(f"grade returned {type(answers).__name__}, not a list of JudgeGrade")
    if len(answers) != len(batch):
        raise ValueError(f"grade returned {len(answers)} grades for {len(batch)} items")
    out = []
    for answer in answers:
        if not isinstance(answer, JudgeGrade):
            raise TypeError(f"grade returned {answer!r:.100}, not a JudgeGrade")
        if answer.grade is not None and not scale[0] <= answer.grade <= scale[1]:
            answer = JudgeGrade.failed(f"grade {answer.grade} is off the scale {scale[0]}..{scale[1]}")
        out.append(answer)
    return out


def _graded(judge: Judge, batch: list[JudgeItem], scale: tuple[int, int]) -> tuple[list[JudgeGrade], int]:
    """The batch's grades, and how many calls they took: the batch whole, or, when it raises or answers wrongly,
    item by item (each item's failure its own)."""
    try:
        return _checked(judge.grade(batch, scale=scale), batch, scale), 1
    except Exception as exc:  # noqa: BLE001 - the batch's fault: find whose
        if len(batch) == 1:
            return [JudgeGrade.failed(exc)], 1
    out = []
    for item in batch:
        try:
            out.extend(_checked(judge.grade([item], scale=scale), [item], scale))
        except Exception as exc:  # noqa: BLE001 - this item's fault
            out.append(JudgeGrade.failed(exc))
    return out, 1 + len(batch)


async def _agraded(judge: Any, batch: list[JudgeItem], scale: tuple[int, int]) -> tuple[list[JudgeGrade], int]:
    try:
        return _checked(await judge.agrade(batch, scale=scale), batch, scale), 1
    except Exception as exc:  # noqa: BLE001 - as in _graded
        if len(batch) == 1:
            return [JudgeGrade.failed(exc)], 1
    out = []
    for item in batch:
        try:
            out.extend(_checked(await judge.agrade([item], scale=scale), [item], scale))
        except Exception as exc:  # noqa: BLE001
            out.append(JudgeGrade.failed(exc))
    return out, 1 + len(batch)


def _run_async(judge: Any, batches: list[list[JudgeItem]], scale: tuple[int, int], concurrency: int, store: Any) -> int:
    """``concurrency`` batches at once through ``agrade``, each stored as it returns; the calls made."""
    from .._sync import run_sync

    calls = 0

    async def all_batches() -> None:
        nonlocal calls
        limit = asyncio.Semaphore(concurrency)

        async def one(batch: list[JudgeItem]) -> None:
            nonlocal calls
            async with limit:
                answers, asked = await _agraded(judge, batch, scale)
            calls += asked
            store(batch, answers)

        await asyncio.gather(*(one(batch) for batch in batches))

    run_sync(all_batches)
    return calls
