"""Judges (rag_eval.stages.judges, the adapters' judge(), rag_eval.ground_truth.judging, rag-eval judge): the
protocol, strict parsing of a model's grade, LangChain's own fake chat models (malformed answers, timeouts,
exceptions), a LlamaIndex CustomLLM, function judges, and the judging run: grades written per batch, resumed after
an interruption (a KeyboardInterrupt after k batches, and a SIGKILL) without asking anything stored again, failures
per item, a systematic failure announced once, the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback

from rag_eval.adapters import functions
from rag_eval.adapters import langchain as lc
from rag_eval.adapters import llamaindex as li
from rag_eval.cli import main
from rag_eval.data import Collection, Run
from rag_eval.errors import FailingJudge, InputError, TornLine
from rag_eval.examples import BEIR_FOLDER
from rag_eval.ground_truth import JudgementLog, Pool, pool
from rag_eval.ground_truth.judging import JudgingRun, judge, load_judge
from rag_eval.stages.judges import (
    UMBRELA_PROMPT,
    Judge,
    JudgeGrade,
    JudgeItem,
    check_prompt,
    parse_grade,
    render_prompt,
    scale_meanings,
)

from .conftest import ROOT

ITEMS = [
    JudgeItem("q1", "d1", "how do I fix a flat bicycle tyre", "Patch the inner tube of a flat tyre with a kit."),
    JudgeItem("q1", "d2", "how do I fix a flat bicycle tyre", "Sourdough bread needs a starter."),
    JudgeItem("q2", "d3", "how long to steep green tea", "Steep green tea for two minutes at 80 degrees."),
    JudgeItem("q2", "d4", "how long to steep green tea", "Water the fern weekly."),
]


def words(text: str) -> set[str]:
    return {w.strip(".,?").lower() for w in text.split() if len(w) > 3}


def overlap_grade(query: str, text: str) -> int:
    """A plain function judge: shared words, capped at 3."""
    return min(3, len(words(query) & words(text)))


def overlap_judge_factory() -> Any:
    """What --judge may name: a callable taking nothing and returning a judge."""
    return functions.judge(overlap_grade, name="overlap")


def not_a_judge() -> int:
    return 3


# -- parsing and the prompt ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "grade"),
    [
        ("##final score: 2", 2),
        ("M: 2\nT: 1\n##final score: 3", 3),
        ("## Final Score: 0", 0),
        ("final score = 1", 1),
        ("##final score: **2**", 2),
        ("3", 3),
        ("  1\n", 1),
        ("**0**", 0),
        ("##final score: 2\n##final score: 2", 2),
    ],
)
def test_a_grade_is_read_from_a_final_score_or_a_lone_integer(answer, grade):
    assert parse_grade(answer, (0, 3)) == grade


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("I think it is relevant", "no '##final score: N' and not a lone integer"),
        ("The passage scores 2 out of 3", "no '##final score: N' and not a lone integer"),
        ("##final score: score", "no '##final score: N' and not a lone integer"),
        ("##final score: 2.5", "the final score is not an integer"),
        ("##final score: 1\n##final score: 3", "several final scores [1, 3]"),
        ("##final score: 7", "grade 7 is off the scale 0..3"),
        ("-1", "grade -1 is off the scale 0..3"),
        ("", "no '##final score: N'"),
    ],
)
def test_anything_else_is_a_failure_quoting_the_answer(answer, problem):
    with pytest.raises(InputError) as caught:
        parse_grade(answer, (0, 3))
    assert problem in str(caught.value) and repr(answer) in str(caught.value)


def test_a_long_malformed_answer_is_quoted_cut_short():
    with pytest.raises(InputError) as caught:
        parse_grade("x" * 500)
    assert "'" + "x" * 200 + "...'" in str(caught.value) and "x" * 201 not in str(caught.value)


def test_the_prompt_is_umbrelas_on_0_to_3_and_adapted_to_other_scales():
    prompt = render_prompt(UMBRELA_PROMPT, ITEMS[0], (0, 3))
    assert "integer scale of 0 to 3" in prompt
    assert "3 = represents that the passage is dedicated to the query and contains the exact answer." in prompt
    assert "Query: how do I fix a flat bicycle tyre\nPassage: Patch the inner tube" in prompt
    assert prompt.endswith("Provide each score in the format of: ##final score: score without providing any reasoning.")
    binary = render_prompt(UMBRELA_PROMPT, ITEMS[0], (0, 1))
    assert "integer scale of 0 to 1" in binary and "1 = represents that the passage contains an answer" in binary
    assert "3 =" not in binary
    assert "1 = represents that the passage has nothing" in scale_meanings((1, 5))
    assert "5 = represents that the passage is dedicated" in scale_meanings((1, 5))
    braces = JudgeItem("q", "d", "what is {query}?", "a dict {'a': 1}")
    assert "Query: what is {query}?\nPassage: a dict {'a': 1}" in render_prompt(UMBRELA_PROMPT, braces, (0, 3))


@pytest.mark.parametrize(
    ("prompt", "problem"),
    [
        ("Grade {query}", "has no {passage}"),
        ("Grade {query} {passage} {grade}", "names ['grade']"),
        ("Grade {query} {passage} {", "not a valid template"),
        ("", "must be a non-empty str"),
    ],
)
def test_a_bad_prompt_is_refused(prompt, problem):
    with pytest.raises(InputError, match="judge 'j'") as caught:
        check_prompt(prompt, "judge 'j'")
    assert problem in str(caught.value)


def test_a_grade_holds_a_grade_or_an_error_never_both():
    assert JudgeGrade(grade=2, confidence=1).confidence == 1.0
    assert JudgeGrade.failed(TimeoutError("slow")).error == "TimeoutError: slow"
    for bad in ({}, {"grade": 1, "error": "x"}, {"grade": True}, {"grade": 1, "confidence": 1.5}, {"error": " "}):
        with pytest.raises(InputError):
            JudgeGrade(**bad)


# -- function judges ---------------------------------------------------------------------------------------------


def test_a_function_judge_grades_each_item_and_keeps_each_failure_its_own():
    def picky(query: str, text: str) -> Any:
        if "fern" in text:
            raise RuntimeError("no ferns")
        if "bread" in text:
            return 9
        return (overlap_grade(query, text), 0.75)

    judge_ = functions.judge(picky, name="picky")
    assert isinstance(judge_, Judge)
    grades = judge_.grade(ITEMS, scale=(0, 3))
    assert [g.grade for g in grades] == [2, None, 2, None]
    assert grades[0].confidence == 0.75
    assert grades[1].error == "the function returned grade 9, off the scale 0..3"
    assert grades[3].error == "RuntimeError: no ferns"
    assert asyncio.run(judge_.agrade(ITEMS, scale=(0, 3))) == grades


def test_a_batch_function_judge_falls_back_to_items_when_the_batch_fails():
    calls: list[int] = []

    def batch(queries: Sequence[str], texts: Sequence[str]) -> list[int]:
        calls.append(len(queries))
        if any("fern" in t for t in texts):
            raise ValueError("fern in the batch")
        return [overlap_grade(q, t) for q, t in zip(queries, texts, strict=True)]

    judge_ = functions.judge(batch, name="batch", batch=True)
    grades = judge_.grade(ITEMS, scale=(0, 3))
    assert calls == [4, 1, 1, 1, 1]  # the batch, then each item alone
    assert [g.grade for g in grades] == [2, 0, 2, None] and grades[3].error == "ValueError: fern in the batch"
    calls.clear()
    assert [g.grade for g in judge_.grade(ITEMS[:3], scale=(0, 3))] == [2, 0, 2] and calls == [3]


def test_an_async_function_judge_runs_from_sync_and_async_code():
    async def grade(query: str, text: str) -> int:
        await asyncio.sleep(0)
        return overlap_grade(query, text)

    judge_ = functions.judge(grade, name="async")
    assert [g.grade for g in judge_.grade(ITEMS, scale=(0, 3))] == [2, 0, 2, 0]
    assert [g.grade for g in asyncio.run(judge_.agrade(ITEMS, scale=(0, 3)))] == [2, 0, 2, 0]


def test_a_function_judges_fingerprint_is_its_code():
    def a(query: str, text: str) -> int:
        return 1

    def b(query: str, text: str) -> int:
        return 2

    assert functions.judge(a, name="x").fingerprint == functions.judge(a, name="y").fingerprint
    assert functions.judge(a, name="x").fingerprint != functions.judge(b, name="x").fingerprint
    assert functions.judge(a, name="x").fingerprint != functions.judge(a, name="x", batch=True).fingerprint
    assert (
        functions.judge(a, name="x", version="1").fingerprint == functions.judge(b, name="x", version="1").fingerprint
    )
    with pytest.raises(InputError, match="non-empty name"):
        functions.judge(a, name=" x")
    with pytest.raises(TypeError, match="expected a function"):
        functions.judge(3, name="x")  # type: ignore[arg-type]


# -- LangChain -----------------------------------------------------------------------------------------------------


def test_a_langchain_chat_model_grades_and_malformed_answers_fail_quoted():
    model = FakeListChatModel(
        responses=["M: 2, T: 2\n##final score: 2", "I think it is relevant", "##final score: 7", "3"]
    )
    judge_ = lc.judge(model)
    assert judge_.name == "FakeListChatModel" and isinstance(judge_, Judge)
    grades = judge_.grade(ITEMS, scale=(0, 3))
    assert [g.grade for g in grades] == [2, None, None, 3]
    assert grades[1].error == "no '##final score: N' and not a lone integer in the answer: 'I think it is relevant'"
    assert grades[2].error == "grade 7 is off the scale 0..3: '##final score: 7'"
    again = asyncio.run(judge_.agrade(ITEMS, scale=(0, 3)))  # abatch: the responses cycle from the start
    assert again == grades


def test_langchain_exceptions_are_per_item_and_content_blocks_are_read():
    messages = iter(
        [AIMessage(content=[{"type": "text", "text": "##final score: "}, {"type": "text", "text": "1"}]), "0"]
    )
    judge_ = lc.judge(GenericFakeChatModel(messages=messages), name="generic", max_concurrency=1)
    grades = judge_.grade(ITEMS[:3], scale=(0, 3))
    assert [g.grade for g in grades] == [1, 0, None]
    assert grades[2].error is not None and "StopIteration" in grades[2].error  # the iterator ran out: that item's


def test_a_langchain_call_slower_than_the_timeout_fails_its_item():
    judge_ = lc.judge(FakeListChatModel(responses=["##final score: 1"], sleep=0.4), name="slow", timeout=0.05)
    start = time.perf_counter()
    grades = judge_.grade(ITEMS[:2], scale=(0, 3))
    assert [g.error for g in grades] == ["TimeoutError: no answer within the timeout of 0.05 s"] * 2
    assert time.perf_counter() - start < 3
    fast = lc.judge(FakeListChatModel(responses=["##final score: 1"]), name="fast", timeout=5)
    assert [g.grade for g in asyncio.run(fast.agrade(ITEMS[:2], scale=(0, 3)))] == [1, 1]


def test_a_langchain_judges_fingerprint_covers_model_and_prompt_not_timeout():
    def fp(**kwargs: Any) -> str:
        model = kwargs.pop("model", FakeListChatModel(responses=["1"]))
        return lc.judge(model, name="j", **kwargs).fingerprint

    assert fp() == fp() == fp(timeout=3, max_concurrency=2)
    assert fp() != fp(model=FakeListChatModel(responses=["2"]))
    assert fp() != fp(prompt="Grade 0-3. {query} | {passage}")
    with pytest.raises(TypeError, match="needs a BaseChatModel"):
        lc.judge(object())
    with pytest.raises(InputError, match="timeout must be None or a number"):
        lc.judge(FakeListChatModel(responses=["1"]), timeout=0)


# -- LlamaIndex ----------------------------------------------------------------------------------------------------


class OverlapLLM(CustomLLM):
    """A LlamaIndex LLM that answers UMBRELA's format from the words the query and passage share."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="overlap-llm")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        query = prompt.split("Query: ", 1)[1].split("\n", 1)[0]
        passage = prompt.split("Passage: ", 1)[1].split("\n", 1)[0]
        return CompletionResponse(text=f"M: 1\n##final score: {overlap_grade(query, passage)}")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_a_llamaindex_llm_grades_sync_and_async():
    judge_ = li.judge(OverlapLLM(), name="overlap-llm", max_concurrency=2)
    assert [g.grade for g in judge_.grade(ITEMS, scale=(0, 3))] == [2, 0, 2, 0]
    assert [g.grade for g in asyncio.run(judge_.agrade(ITEMS, scale=(0, 3)))] == [2, 0, 2, 0]


def test_llamaindexs_mock_llm_echoes_the_prompt_which_is_no_grade():
    grades = li.judge(MockLLM(), timeout=5).grade(ITEMS[:1], scale=(0, 3))
    assert grades[0].grade is None and grades[0].error.startswith("no '##final score: N'")
    assert "Given a query and a passage" in grades[0].error  # the answer, quoted
    with pytest.raises(TypeError, match=r"needs a llama_index\.core\.llms\.LLM"):
        li.judge(FakeListChatModel(responses=["1"]))


# -- the judging run -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def beir_pool() -> Pool:
    collection = Collection.from_beir(BEIR_FOLDER)
    ranking = {q: sorted(collection.corpus)[i : i + 6] for i, q in enumerate(sorted(collection.queries))}
    return pool([Run.from_ranking(ranking, name="a")], depth=6, queries=collection.queries, texts=collection.corpus)


class Counting:
    """A judge of the user's own (duck-typed: no rag_eval base class): overlap grades, a fixed fingerprint, every
    call counted; items whose doc is in ``fail`` fail; it raises ``stop`` after ``stop_after`` calls."""

    def __init__(self, name: str = "counting", fingerprint: str = "fp-1") -> None:
        self.name, self.fingerprint = name, fingerprint
        self.calls: list[list[tuple[str, str]]] = []
        self.fail: set[str] = set()
        self.stop_after: int | None = None

    def grade(self, items: Sequence[JudgeItem], *, scale: tuple[int, int]) -> list[JudgeGrade]:
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            raise KeyboardInterrupt
        self.calls.append([(i.query_id, i.doc_id) for i in items])
        return [
            JudgeGrade.failed(f"no grade for {i.doc_id}")
            if i.doc_id in self.fail
            else JudgeGrade(grade=overlap_grade(i.query, i.text), confidence=0.5)
            for i in items
        ]


def _asked(judge_: Counting) -> list[tuple[str, str]]:
    return [pair for call in judge_.calls for pair in call]


def test_a_run_writes_every_grade_under_the_judges_name_and_fingerprint(tmp_path, beir_pool):
    counting = Counting()
    run = judge(beir_pool, counting, log=tmp_path / "log.jsonl", batch_size=8, progress=False)
    assert isinstance(run, JudgingRun)
    n = len(beir_pool)
    assert (run.items, run.graded, run.from_log, run.failed, run.skipped, run.calls) == (n, n, 0, 0, 0, -(-n // 8))
    assert [len(call) for call in counting.calls] == [8] * (n // 8) + ([n % 8] if n % 8 else [])
    log = JudgementLog.load(tmp_path / "log.jsonl")
    assert len(log) == n and log.assessors == ["counting"] and run.description is None
    first = log.judgements[0]
    assert first.judge == {"fingerprint": "fp-1", "confidence": 0.5} and first.scale == (0, 3)
    assert first.pool is not None and first.pool["id"] == beir_pool.id
    assert {j.pair: j.grade for j in log} == dict(run.grades)
    item = beir_pool.items[0]
    assert run.grades[(item.query_id, item.doc_id)] == overlap_grade(item.query, item.text)

    again = judge(beir_pool, counting, log=tmp_path / "log.jsonl", batch_size=8, progress=False)
    assert (again.graded, again.from_log, again.calls) == (0, n, 0)
    assert len(JudgementLog.load(tmp_path / "log.jsonl")) == n
    assert dict(again.grades) == dict(run.grades)


def test_an_interrupted_run_resumes_asking_nothing_it_stored(tmp_path, beir_pool):
    counting = Counting()
    counting.stop_after = 3
    with pytest.raises(KeyboardInterrupt):
        judge(beir_pool, counting, log=tmp_path / "log.jsonl", batch_size=5, progress=False)
    stored = {j.pair for j in JudgementLog.load(tmp_path / "log.jsonl")}
    assert stored == set(_asked(counting)) and len(stored) == 15  # three batches, each written as it returned
    resumed = Counting()
    run = judge(beir_pool, resumed, log=tmp_path / "log.jsonl", batch_size=5, progress=False)
    assert not stored & set(_asked(resumed))
    assert (run.from_log, run.graded) == (15, len(beir_pool) - 15)
    assert len(JudgementLog.load(tmp_path / "log.jsonl")) == len(beir_pool)


def test_failures_are_kept_per_item_not_written_and_asked_again(tmp_path, beir_pool):
    counting = Counting()
    failing = {beir_pool.items[0].doc_id, beir_pool.items[3].doc_id}
    counting.fail = failing
    run = judge(beir_pool, counting, log=tmp_path / "log.jsonl", progress=False)
    failed = {(i.query_id, i.doc_id) for i in beir_pool.items if i.doc_id in failing}
    assert run.failed == len(failed) == len(run.failures) and run.graded == len(beir_pool) - len(failed)
    assert list(run.failures.columns) == ["query_id", "doc_id", "error"]
    assert set(zip(run.failures.query_id, run.failures.doc_id, strict=True)) == failed
    assert run.failures.error.iloc[0].startswith("no grade for ")
    assert not failed & {j.pair for j in JudgementLog.load(tmp_path / "log.jsonl")}
    counting.fail, counting.calls = set(), []
    again = judge(beir_pool, counting, log=tmp_path / "log.jsonl", progress=False)
    assert set(_asked(counting)) == failed and again.graded == len(failed) and again.complete


def test_a_batch_that_raises_is_asked_again_item_by_item(tmp_path):
    class Brittle(Counting):
        def grade(self, items: Sequence[JudgeItem], *, scale: tuple[int, int]) -> list[JudgeGrade]:
            self.calls.append([(i.query_id, i.doc_id) for i in items])
            if any("fern" in i.text for i in items):
                raise RuntimeError("fern")
            return [JudgeGrade(grade=1)] * (len(items) + (len(items) == 2))  # a wrong count for two items

    texts = {"d1": ITEMS[0].text, "d2": ITEMS[1].text, "d3": ITEMS[2].text, "d4": ITEMS[3].text}
    queries = {"q1": ITEMS[0].query, "q2": ITEMS[2].query}
    small = pool(
        [Run.from_ranking({"q1": ["d1", "d2"], "q2": ["d3", "d4"]}, name="a")], depth=2, queries=queries, texts=texts
    )
    brittle = Brittle()
    run = judge(small, brittle, log=tmp_path / "log.jsonl", batch_size=4, progress=False)
    assert run.calls == 5 and [len(c) for c in brittle.calls] == [4, 1, 1, 1, 1]
    assert (
        run.graded == 3 and list(run.failures.doc_id) == ["d4"] and run.failures.error.iloc[0] == "RuntimeError: fern"
    )


def test_a_judge_failing_on_most_items_is_announced_once(tmp_path, beir_pool):
    counting = Counting()
    counting.fail = {i.doc_id for i in beir_pool.items}
    with pytest.warns(FailingJudge) as caught:
        run = judge(beir_pool, counting, log=tmp_path / "log.jsonl", progress=False)
    assert len(caught) == 1 and run.failed == len(beir_pool) and run.graded == 0
    message = str(caught[0].message)
    assert f"failed on {len(beir_pool)} of the {len(beir_pool)} items" in message and "no grade for" in message


def test_one_name_means_one_judge_in_a_log(tmp_path, beir_pool):
    path = tmp_path / "log.jsonl"
    judge(beir_pool, Counting(), log=path, progress=False)
    with pytest.raises(InputError, match="fingerprint 'fp-1', and this judge's fingerprint is 'fp-2'"):
        judge(beir_pool, Counting(fingerprint="fp-2"), log=path, progress=False)
    with pytest.raises(InputError, match=r"on the scale 0..3, not 0..1"):
        judge(beir_pool, Counting(), log=path, scale=(0, 1), progress=False)
    log = JudgementLog.open(path)
    log.append("q1", "bike-01", 3, assessor="alice")
    with pytest.raises(InputError, match="'alice' is a person's name there"):
        judge(beir_pool, Counting(name="alice"), log=log, progress=False)
    assert judge(beir_pool, Counting(name="other", fingerprint="fp-2"), log=path, progress=False).graded == len(
        beir_pool
    )


def test_items_people_graded_may_be_left_out(tmp_path, beir_pool):
    collection = Collection.from_beir(BEIR_FOLDER)
    people = {(q, d) for q in collection.qrels.query_ids for d in collection.qrels[q]}
    pooled = {(i.query_id, i.doc_id) for i in beir_pool.items}
    counting = Counting()
    run = judge(beir_pool, counting, log=tmp_path / "log.jsonl", human=collection.qrels, progress=False)
    assert run.skipped == len(people & pooled) > 0 and not people & set(_asked(counting))
    log = JudgementLog.open(tmp_path / "people.jsonl")
    item = beir_pool.items[0]
    log.append(item.query_id, item.doc_id, 2, assessor="alice")
    run = judge(beir_pool, Counting(name="c2"), log=tmp_path / "log2.jsonl", human=tmp_path / "people.jsonl")
    assert run.skipped == 1


def test_an_item_without_text_is_an_error_naming_it(tmp_path):
    bare = pool([Run.from_ranking({"q1": ["d1"]}, name="a")], depth=1, queries={"q1": "a question"})
    with pytest.raises(InputError, match="query 'q1', doc 'd1' has no chunk text"):
        judge(bare, Counting(), log=tmp_path / "log.jsonl", progress=False)
    with pytest.raises(InputError, match="expected a judge"):
        judge(bare, overlap_grade, log=tmp_path / "log.jsonl")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="batch_size must be 1 or more"):
        judge(bare, Counting(), log=tmp_path / "log.jsonl", batch_size=0)
    assert not (tmp_path / "log.jsonl").exists()


@pytest.mark.parametrize("kind", ["threads", "async"])
def test_concurrent_batches_give_the_grades_of_one_at_a_time(tmp_path, beir_pool, kind):
    if kind == "threads":
        grader: Any = Counting()
    else:

        async def overlap(query: str, text: str) -> int:
            await asyncio.sleep(0.001)
            return overlap_grade(query, text)

        grader = functions.judge(overlap, name="counting")
    run = judge(beir_pool, grader, log=tmp_path / "log.jsonl", batch_size=3, concurrency=4, progress=False)
    expected = {(i.query_id, i.doc_id): overlap_grade(i.query, i.text) for i in beir_pool.items}
    assert dict(run.grades) == expected and run.graded == len(beir_pool)
    assert {j.pair: j.grade for j in JudgementLog.load(tmp_path / "log.jsonl")} == expected


def test_a_langchain_judge_through_a_whole_run(tmp_path, beir_pool):
    answers = ["##final score: 1", "maybe", "##final score: 3"]
    run = judge(
        beir_pool, lc.judge(FakeListChatModel(responses=answers), name="fake"), log=tmp_path / "l.jsonl", progress=False
    )
    n = len(beir_pool)
    assert run.failed == len([i for i in range(n) if i % 3 == 1])  # the responses cycle in order
    assert sorted(set(run.grades.values())) == [1, 3]
    assert run.failures.error.iloc[0] == "no '##final score: N' and not a lone integer in the answer: 'maybe'"


# -- a SIGKILL mid-run -----------------------------------------------------------------------------------------------

CHILD = """
import os, sys, time
from rag_eval.adapters import functions
from rag_eval.ground_truth import Pool
from rag_eval.ground_truth.judging import judge

def slow(queries, texts):
    with open(os.environ["CALLS"], "a") as out:
        out.write("".join(q + "\\t" + t[:20].replace("\\t", " ") + "\\n" for q, t in zip(queries, texts)))
    time.sleep(0.05)
    return [len(set(q.split()) & set(t.split())) % 4 for q, t in zip(queries, texts)]

judge(Pool.load(sys.argv[1]), functions.judge(slow, name="slow", batch=True, version="1"), log=sys.argv[2],
      batch_size=2, progress=False)
"""


@pytest.mark.sigkill
def test_a_run_killed_with_sigkill_recomputes_nothing_it_stored(tmp_path, beir_pool):
    beir_pool.save(tmp_path / "pool.jsonl")
    (tmp_path / "child.py").write_text(textwrap.dedent(CHILD))
    log, calls = tmp_path / "log.jsonl", tmp_path / "calls.txt"
    env = dict(os.environ, CALLS=str(calls), PYTHONPATH=str(ROOT))
    child = subprocess.Popen(
        [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "pool.jsonl"), str(log)],
        env=env,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 60
    while (not log.exists() or log.read_text().count("\n") < 10) and time.time() < deadline:
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    _, err = child.communicate()
    assert b"Traceback" not in err, err.decode()
    with warnings.catch_warnings():  # a kill in the middle of a line's write leaves it torn: dropped, said
        warnings.simplefilter("ignore", TornLine)
        stored = {j.pair for j in JudgementLog.load(log)}
    assert 10 <= len(stored) < len(beir_pool)  # killed midway
    calls.write_text("")
    resumed: list[tuple[str, str]] = []

    def counted(queries: Sequence[str], texts: Sequence[str]) -> list[int]:
        resumed.extend(zip(queries, texts, strict=True))
        return [len(set(q.split()) & set(t.split())) % 4 for q, t in zip(queries, texts, strict=True)]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornLine)
        run = judge(beir_pool, functions.judge(counted, name="slow", batch=True, version="1"), log=log, progress=False)
    by_texts = {(i.query, i.text): (i.query_id, i.doc_id) for i in beir_pool.items}
    assert not stored & {by_texts[pair] for pair in resumed}  # nothing stored was asked again
    assert run.from_log == len(stored) and run.graded == len(beir_pool) - len(stored) == len(resumed)


# -- the CLI ---------------------------------------------------------------------------------------------------------


def test_the_cli_grades_a_pool_and_resumes(tmp_path, beir_pool, capsys):
    beir_pool.save(tmp_path / "pool.jsonl")
    argv = ["judge", str(tmp_path / "pool.jsonl"), "--judge", "tests.test_judges:overlap_grade", "-o"]
    assert main([*argv, str(tmp_path / "log.jsonl"), "--batch-size", "7"]) == 0
    err = capsys.readouterr().err
    assert "judge 'overlap_grade' " in err and f"{len(beir_pool)} graded now, 0 from the log, 0 failed" in err
    log = JudgementLog.load(tmp_path / "log.jsonl")
    assert len(log) == len(beir_pool) and log.judges == {
        "overlap_grade": functions.judge(overlap_grade, name="o").fingerprint
    }
    assert main([*argv, str(tmp_path / "log.jsonl")]) == 0
    assert f"0 graded now, {len(beir_pool)} from the log" in capsys.readouterr().err
    assert main([*argv, str(tmp_path / "log2.jsonl"), "--judge", "tests.test_judges:overlap_judge_factory"]) == 0
    assert JudgementLog.load(tmp_path / "log2.jsonl").assessors == ["overlap"]


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("tests.test_judges", "expected package.module:function"),
        ("tests.test_judges:nothing_here", "cannot load it"),
        ("no_such_module_here:f", "cannot load it"),
        ("tests.test_judges:ITEMS", "is a list, not a judge or a function"),
        ("tests.test_judges:words", "takes 1 argument"),
        ("tests.test_judges:not_a_judge", "returned a int"),
    ],
)
def test_the_cli_refuses_a_bad_judge_in_one_line(tmp_path, beir_pool, capsys, spec, problem):
    beir_pool.save(tmp_path / "pool.jsonl")
    assert main(["judge", str(tmp_path / "pool.jsonl"), "--judge", spec, "-o", str(tmp_path / "l.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rag-eval: error: ") and problem in err and err.count("\n") == 1


def test_load_judge_takes_a_judge_a_factory_or_a_function():
    assert load_judge("tests.test_judges:overlap_judge_factory").name == "overlap"
    assert load_judge("tests.test_judges:overlap_grade").name == "overlap_grade"
    assert json.dumps(ITEMS[0].query)  # the module stays importable by name
