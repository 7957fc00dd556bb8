"""The generator stage (rag_eval.stages.generator): the delivered context under the budget, the prompt with numbered
chunks, failures kept per item (NaN, never wrong), latency and tokens, batches and threads, and the answer cache: a
rerun makes no call, a change of template or context asks again, a torn line is dropped, a SIGKILL loses at most the
call under way."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from rag_eval import Hit, InputError, Pipeline
from rag_eval.adapters import functions
from rag_eval.errors import FailingGenerator, TornLine
from rag_eval.stages.generator import (
    DEFAULT_PROMPT,
    Answers,
    Generation,
    Generator,
    delivered_contexts,
    generate_answers,
    render_prompt,
)

from .conftest import ROOT


class Echo(Generator):
    """Answers with the text of the chunk numbered in the question ("#2" -> chunk 2's text); counts its calls; fails
    on a question holding "boom"; reports tokens (words)."""

    def __init__(self, name="echo"):
        super().__init__(name)
        self.calls = 0
        self.batches = 0
        self.prompts = []
        self._lock = threading.Lock()

    def config(self):
        return {"rule": "echo chunk #n"}

    def generate(self, prompt):
        with self._lock:
            self.calls += 1
            self.prompts.append(prompt)
        if "boom" in prompt:
            raise RuntimeError("model fell over")
        question = prompt.rsplit("Question: ", 1)[1]
        n = question.split("#", 1)[1].split()[0]
        found = [line for line in prompt.splitlines() if line.startswith(f"[{n}] ")]
        text = found[0][len(f"[{n}] ") :] if found else "no idea"
        return Generation(text, tokens_in=len(prompt.split()), tokens_out=len(text.split()))


CONTEXTS = {
    "q1": (Hit("d1", text="Denver Broncos"), Hit("d2", text="Carolina Panthers")),
    "q2": (Hit("d3", text="Levi's Stadium"), Hit("d1", text="Denver Broncos")),
    "q3": (Hit("d9", text="x"),),
    "q4": None,
}
QUESTIONS = {"q1": "who? #2", "q2": "where? #1", "q3": "boom #1", "q4": "never asked #1"}


def test_prompt_numbers_the_chunks_in_delivered_order():
    prompt = render_prompt("Who won?", [("d1", "Denver Broncos"), ("d2", "Carolina")])
    assert "[1] Denver Broncos\n\n[2] Carolina" in prompt
    assert prompt.endswith("Question: Who won?\nAnswer:")
    assert render_prompt("Q?", [("d1", "t {x}")], "{question}|{context}", "<{doc_id}:{number}:{text}>") == (
        "Q?|<d1:1:t {x}>"  # braces in texts are text, not fields
    )
    assert render_prompt("Q?", [], "{question}|{context}") == "Q?|"
    with pytest.raises(InputError, match=r"the prompt: has no \{context\}"):
        generate_answers(Echo(), CONTEXTS, questions=QUESTIONS, prompt="{question}")
    with pytest.raises(InputError, match=r"the prompt: names the field\(s\) \['query'\]"):
        generate_answers(Echo(), CONTEXTS, questions=QUESTIONS, prompt="{query} {question} {context}")
    with pytest.raises(InputError, match=r"the chunk template: has no \{text\}"):
        generate_answers(Echo(), CONTEXTS, questions=QUESTIONS, chunk="[{number}]")


def test_answers_failures_latency_tokens_and_grades():
    gen = Echo()
    answers = generate_answers(gen, CONTEXTS, questions=QUESTIONS)
    assert isinstance(answers, Answers) and list(answers) == ["q1", "q2", "q3", "q4"]
    assert gen.calls == 3 and answers.calls == 3  # q4's retrieval failed: not asked
    assert answers["q1"].text == "Carolina Panthers" and answers["q2"].text == "Levi's Stadium"
    assert answers["q1"].context_ids == ("d1", "d2")
    assert answers["q1"].tokens_out == 2 and answers["q1"].tokens_in == len(gen.prompts[0].split())
    assert answers["q1"].latency > 0 and not answers["q1"].cached
    assert answers["q3"].text is None and answers["q3"].error == "RuntimeError: model fell over"
    assert answers["q4"].skipped and answers["q4"].error == "not run: retrieval failed on this query"
    assert answers.failures == {"q3": "RuntimeError: model fell over", "q4": "not run: retrieval failed on this query"}
    grades = answers.grade({"q1": ["Carolina Panthers"], "q2": "the Denver Broncos", "q3": ["x"], "q4": ["y"]})
    assert grades.exact_match.tolist()[:2] == [1.0, 0.0]
    assert math.isnan(grades.f1[2]) and math.isnan(grades.f1[3]) and grades.failed == 2
    frame = answers.to_frame()
    assert frame.columns.tolist() == [
        "query_id", "answer", "error", "skipped", "cached", "latency", "tokens_in", "tokens_out", "n_context",
        "context_ids",
    ]  # fmt: skip
    assert frame["n_context"].tolist() == [2, 2, 1, 0]
    assert frame["tokens_out"].isna().tolist() == [False, False, True, True]


def test_a_rerun_from_the_cache_makes_no_call_and_a_change_asks_again(tmp_path):
    first = generate_answers(Echo(), CONTEXTS, questions=QUESTIONS, cache=tmp_path)
    again = Echo()
    with pytest.warns(FailingGenerator, match="failed on 1 of the 1 queries"):  # q3 alone asked, and failing
        second = generate_answers(again, CONTEXTS, questions=QUESTIONS, cache=tmp_path)
    assert again.calls == 1 and second.calls == 1  # only q3, whose failure was not stored
    assert second.cache_hits == 2
    for q in ("q1", "q2"):
        assert second[q].cached and (second[q].text, second[q].latency) == (first[q].text, first[q].latency)
        assert (second[q].tokens_in, second[q].tokens_out) == (first[q].tokens_in, first[q].tokens_out)
    ok = {q: c for q, c in CONTEXTS.items() if q in ("q1", "q2")}
    third = Echo()
    generate_answers(third, ok, questions=QUESTIONS, cache=tmp_path)
    assert third.calls == 0
    changed_prompt = Echo()
    generate_answers(
        changed_prompt, ok, questions=QUESTIONS, cache=tmp_path, prompt="C:\n{context}\nQuestion: {question}"
    )
    assert changed_prompt.calls == 2
    reordered = Echo()
    generate_answers(reordered, {"q1": CONTEXTS["q1"][::-1]}, questions=QUESTIONS, cache=tmp_path)
    assert reordered.calls == 1  # other context order: another prompt
    other_text = Echo()
    generate_answers(
        other_text, {"q1": (Hit("d1", text="Denver"), CONTEXTS["q1"][1])}, questions=QUESTIONS, cache=tmp_path
    )
    assert other_text.calls == 1  # same ids, another chunk text
    other_model = Echo()
    other_model.config = lambda: {"rule": "another"}  # another fingerprint: another log
    generate_answers(other_model, ok, questions=QUESTIONS, cache=tmp_path)
    assert other_model.calls == 2


def test_a_torn_line_is_dropped_with_one_warning_and_asked_again(tmp_path):
    generate_answers(Echo(), CONTEXTS, questions=QUESTIONS, cache=tmp_path)
    (log,) = tmp_path.glob("answers-echo-*.jsonl")
    lines = log.read_bytes().splitlines(keepends=True)
    assert len(lines) == 2
    log.write_bytes(lines[0] + lines[1][:25])  # the second answer cut short by a kill
    gen = Echo()
    with pytest.warns(TornLine, match="1 damaged line"):
        answers = generate_answers(gen, CONTEXTS, questions=QUESTIONS, cache=tmp_path)
    assert gen.calls == 2 and answers.cache_hits == 1  # the torn answer and q3
    records = [json.loads(line) for line in log.read_bytes().splitlines()]
    assert [r["query_id"] for r in records] == ["q1", "q2"]  # the torn tail cut away, the answer appended whole


def test_batches_threads_and_a_batch_that_fails_whole():
    class Batched(Echo):
        def generate_batch(self, prompts):
            self.batches += 1
            if any("boom" in p for p in prompts):
                raise RuntimeError("the whole batch failed")
            return [self.generate(p) for p in prompts]

    many = {f"q{i}": (Hit("d", text=f"answer {i}"),) for i in range(40)}
    questions = {q: f"what #1 {q}" for q in many}
    gen = Batched()
    answers = generate_answers(gen, many, questions=questions, batch_size=8, concurrency=3)
    assert list(answers) == list(many)
    assert all(answers[f"q{i}"].text == f"answer {i}" for i in range(40))
    assert gen.batches == 5 and answers.calls == 5
    gen = Batched()
    answers = generate_answers(gen, CONTEXTS, questions=QUESTIONS, batch_size=4)
    assert gen.batches == 1 and gen.calls == 3  # the batch failed whole: each prompt asked alone
    assert answers["q1"].text == "Carolina Panthers" and answers["q3"].error == "RuntimeError: model fell over"


def test_most_failing_is_said_once_and_bad_returns_are_the_items_failure():
    class Bad(Generator):
        def generate(self, prompt):
            return 42

    with pytest.warns(FailingGenerator, match=r"failed on 3 of the 3 queries .* not wrong"):
        answers = generate_answers(Bad("bad"), CONTEXTS, questions=QUESTIONS)
    assert answers["q1"].error.startswith("the generator returned a int, not a str or a Generation")


def test_hits_without_text_take_it_from_texts_or_are_refused_before_any_call():
    gen = Echo()
    contexts = {"q1": (Hit("d1"), Hit("d2"))}
    with pytest.raises(InputError, match=r"query 'q1': chunk 'd1' has no text \(and 1 more\): pass texts="):
        generate_answers(gen, contexts, questions=QUESTIONS)
    assert gen.calls == 0
    answers = generate_answers(gen, contexts, questions=QUESTIONS, texts={"d1": "one", "d2": "two"})
    assert answers["q1"].text == "two"
    with pytest.raises(InputError, match="query 'q1': no question text"):
        generate_answers(gen, contexts, questions={"q2": "x"}, texts={"d1": "a", "d2": "b"})
    with pytest.raises(TypeError, match="expected a rag_eval Generator"):
        generate_answers(lambda p: p, contexts, questions=QUESTIONS)  # type: ignore[arg-type]


def test_the_delivered_context_of_a_pipeline_is_what_fits_the_budget():
    docs = {"d1": "alpha one", "d2": "beta two", "d3": "gamma three", "d4": "delta four"}

    def search(query, k):
        if "fail" in query:
            raise RuntimeError("index down")
        return [Hit(d, 1.0 / (i + 1), text=docs[d]) for i, d in enumerate(["d3", "d1", "d4", "d2"])][:k]

    result = Pipeline(functions.retriever(search, name="bm25"), depth=4, budget=2).run(
        {"a": "first #2", "b": "second #3", "c": "fail"}, progress=False
    )
    contexts = delivered_contexts(result)
    assert [h.doc_id for h in contexts["a"]] == ["d3", "d1"] and contexts["c"] is None
    gen = Echo()
    answers = generate_answers(gen, result)
    assert answers["a"].text == "alpha one"
    assert answers["b"].text == "no idea"  # chunk 3 is beyond the budget: never shown
    assert answers["c"].skipped and gen.calls == 2
    tokens = Pipeline(functions.retriever(search, name="bm25"), depth=4, budget="5tok").run(
        {"a": "x #1"}, progress=False
    )
    assert [h.doc_id for h in delivered_contexts(tokens)["a"]] == ["d3", "d1"]  # 2 + 2 words fit 5, a third not
    with pytest.raises(InputError, match="no stage 'rerank'"):
        delivered_contexts(tokens, stage="rerank")


CHILD = """
import sys, time
from rag_eval import Hit
from rag_eval.stages.generator import Generator, generate_answers

class Slow(Generator):
    def generate(self, prompt):
        with open(sys.argv[2], "a") as log:
            log.write(prompt.rsplit("Question: ", 1)[1].split()[0] + "\\n")
        time.sleep(0.05)
        return "ok " + prompt[-20:]

contexts = {f"q{i:03d}": (Hit("d", text=f"text {i}"),) for i in range(200)}
generate_answers(Slow("slow"), contexts, questions={q: q + " ?" for q in contexts}, cache=sys.argv[1])
"""


@pytest.mark.sigkill
def test_resumption_after_sigkill_asks_only_what_was_not_stored(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    cache, calls = tmp_path / "cache", tmp_path / "calls.txt"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    for attempt in range(3):
        child = subprocess.Popen([sys.executable, str(script), str(cache), str(calls)], env=env, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while time.time() < deadline and (not calls.exists() or len(calls.read_text().split()) < 20 * (attempt + 1)):
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        _, err = child.communicate()
        assert b"Traceback" not in err, err.decode()
    asked = calls.read_text().split()
    assert len(asked) - len(set(asked)) <= 3  # at most the call under way at each kill asked again
    (log,) = cache.glob("answers-slow-*.jsonl")
    stored = {json.loads(line)["query_id"] for line in log.read_bytes().splitlines() if line.endswith(b"}")}
    assert len(stored) >= len(set(asked)) - 3

    class Counting(Generator):
        calls = 0

        def generate(self, prompt):
            type(self).calls += 1
            return "ok " + prompt[-20:]

    contexts = {f"q{i:03d}": (Hit("d", text=f"text {i}"),) for i in range(200)}
    gen = Counting("slow")
    gen.__class__.__qualname__ = "Slow"  # the child's class: the same fingerprint
    gen.__class__.__module__ = "__main__"
    with warnings_allowed():
        answers = generate_answers(gen, contexts, questions={q: q + " ?" for q in contexts}, cache=cache)
    assert Counting.calls == 200 - len(stored)
    assert answers.cache_hits == len(stored) and not answers.failures


class warnings_allowed:
    """A torn last line (the kill landed mid-write) is warned: allowed here, checked elsewhere."""

    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("ignore", TornLine)

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)


def test_default_prompt_has_both_fields():
    assert "{question}" in DEFAULT_PROMPT and "{context}" in DEFAULT_PROMPT
