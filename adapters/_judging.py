"""What the model judges share (LangChain chat models, LlamaIndex LLMs): the prompt, batches with a concurrency
limit, a timeout per call, and the strict reading of each answer into a grade or that item's failure.

Nothing here imports a framework.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from ..errors import InputError
from ..stages.judges import (
    DEFAULT_SCALE,
    PARSER_VERSION,
    UMBRELA_PROMPT,
    BaseJudge,
    JudgeGrade,
    JudgeItem,
    check_prompt,
    check_scale,
    parse_grade,
    prompt_hash,
    render_prompt,
)
from ._common import max_concurrency as _max_concurrency
from ._common import run_sync

Answer = Any  # what a framework answered for one prompt, or the exception it raised


class PromptJudge(BaseJudge):
    """A judge that asks a model one prompt per item and reads the grade from its answer (:func:`parse_grade`).

    Subclasses say how to ask one prompt (:meth:`_invoke`, :meth:`_ainvoke`), how to read an answer's text
    (:meth:`_text`) and, where the framework batches, how to ask many (:meth:`_batch`, :meth:`_abatch`: one answer
    or exception per prompt, in order). With ``timeout`` every call goes through the async path, each prompt
    awaited at most ``timeout`` seconds (an item that takes longer fails with a TimeoutError: the model's own
    thread, if it has one, is not stopped, and its late answer is dropped)."""

    description = "a model judge prompted per item (UMBRELA-style by default)"

    def __init__(
        self,
        name: str,
        *,
        prompt: str | None,
        timeout: float | None,
        max_concurrency: int | None,
        version: str | None = None,
    ) -> None:
        super().__init__(name, version=version)
        self.prompt = check_prompt(UMBRELA_PROMPT if prompt is None else prompt, f"judge {name!r}")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise InputError(f"judge {name!r}: timeout must be None or a number of seconds > 0, not {timeout!r}")
        self.timeout = None if timeout is None else float(timeout)
        self.max_concurrency = _max_concurrency(name, max_concurrency)

    def config(self) -> dict[str, Any]:
        # the timeout and the concurrency change which items fail, never a grade: not in the fingerprint
        return {"model": self.model_config(), "prompt": prompt_hash(self.prompt), "parser": PARSER_VERSION}

    @abstractmethod
    def model_config(self) -> Any:
        """The model's identity and parameters, as the fingerprint covers them."""

    # ----- asking -----------------------------------------------------------------------------------------
    @abstractmethod
    def _invoke(self, prompt: str) -> Answer: ...

    @abstractmethod
    async def _ainvoke(self, prompt: str) -> Answer: ...

    @abstractmethod
    def _text(self, answer: Answer) -> str:
        """The text of an answer, or a TypeError when it has none."""

    def _batch(self, prompts: list[str]) -> list[Answer]:
        """One answer (or the exception raised) per prompt: by default each prompt on a thread pool of
        ``max_concurrency`` threads (4 when unset)."""
        workers = self.max_concurrency or 4
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(workers, max(1, len(prompts)))) as pool:
            futures = [pool.submit(self._invoke, p) for p in prompts]
            return [_settle(f) for f in futures]

    async def _abatch(self, prompts: list[str]) -> list[Answer]:
        """One answer (or the exception raised) per prompt: by default :meth:`_ainvoke` for each, at most
        ``max_concurrency`` at once."""
        return await self._gathered(prompts, None)

    async def _gathered(self, prompts: list[str], timeout: float | None) -> list[Answer]:
        limit = asyncio.Semaphore(self.max_concurrency or max(1, len(prompts)))

        async def one(prompt: str) -> Answer:
            async with limit:
                try:
                    if timeout is None:
                        return await self._ainvoke(prompt)
                    return await asyncio.wait_for(self._ainvoke(prompt), timeout)
                except TimeoutError:
                    return TimeoutError(f"no answer within the timeout of {timeout:g} s")
                except Exception as exc:  # noqa: BLE001 - the item's fault, recorded as its failure
                    return exc

        return list(await asyncio.gather(*(one(p) for p in prompts)))

    # ----- grading ----------------------------------------------------------------------------------------
    def grade(self, items: Sequence[JudgeItem], *, scale: tuple[int, int] = DEFAULT_SCALE) -> list[JudgeGrade]:
        scale = check_scale(scale)
        prompts = [render_prompt(self.prompt, item, scale) for item in items]
        if not prompts:
            return []
        if self.timeout is not None:
            answers = run_sync(lambda: self._gathered(prompts, self.timeout))
        else:
            answers = self._batch(prompts)
        return self._grades(answers, len(prompts), scale)

    async def agrade(self, items: Sequence[JudgeItem], *, scale: tuple[int, int] = DEFAULT_SCALE) -> list[JudgeGrade]:
        scale = check_scale(scale)
        prompts = [render_prompt(self.prompt, item, scale) for item in items]
        if not prompts:
            return []
        if self.timeout is not None:
            answers = await self._gathered(prompts, self.timeout)
        else:
            answers = await self._abatch(prompts)
        return self._grades(answers, len(prompts), scale)

    def _grades(self, answers: list[Answer], expected: int, scale: tuple[int, int]) -> list[JudgeGrade]:
        if len(answers) != expected:  # a framework's batch that lost answers: no item's grade can be told
            return [
                JudgeGrade.failed(f"the model's batch gave {len(answers)} answers for {expected} prompts")
            ] * expected
        out = []
        for answer in answers:
            if isinstance(answer, BaseException):
                out.append(JudgeGrade.failed(answer))
                continue
            try:
                out.append(JudgeGrade(grade=parse_grade(self._text(answer), scale)))
            except (InputError, TypeError) as exc:
                out.append(JudgeGrade.failed(str(exc)))
        return out


def _settle(future: concurrent.futures.Future[Answer]) -> Answer:
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - the item's fault
        return exc
