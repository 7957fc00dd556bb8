"""Generators from frameworks, each with its real object: a plain function (sync, async, batch), LangChain's own fake
chat models, LlamaIndex's MockLLM and a CustomLLM, and a Haystack component made with @component (alone and inside a
Pipeline); answers, token counts, failures per item, batches, and fingerprints that key the answer cache."""

from __future__ import annotations

import pytest

from rag_eval import Hit, InputError
from rag_eval.adapters import functions, haystack, langchain, llamaindex
from rag_eval.stages.fingerprint import Uncacheable
from rag_eval.stages.generator import Generation, generate_answers, render_prompt

CONTEXTS = {"q1": (Hit("d1", text="Denver Broncos"),), "q2": (Hit("d2", text="Levi's Stadium"),)}
QUESTIONS = {"q1": "Who won Super Bowl 50?", "q2": "Where was it played?"}


# ----- functions --------------------------------------------------------------------------------------------------


def test_function_generator_sync_async_batch_and_failures(tmp_path):
    def answer(prompt):
        if "Where" in prompt:
            raise ValueError("no venue")
        return Generation("Denver Broncos", tokens_in=len(prompt.split()), tokens_out=2)

    gen = functions.generator(answer, name="fn")
    answers = generate_answers(gen, CONTEXTS, questions=QUESTIONS, cache=tmp_path)
    assert answers["q1"].text == "Denver Broncos" and answers["q1"].tokens_out == 2
    assert answers["q2"].error == "ValueError: no venue"
    again = generate_answers(
        functions.generator(answer, name="fn"), {"q1": CONTEXTS["q1"]}, questions=QUESTIONS, cache=tmp_path
    )
    assert again.calls == 0 and again.cache_hits == 1  # the same code: the same fingerprint, answered from the cache
    seen = []

    def answer(prompt):  # another function under the same name: another fingerprint
        seen.append(prompt)
        return "Denver Broncos"

    assert generate_answers(functions.generator(answer, name="fn"), {"q1": CONTEXTS["q1"]}, questions=QUESTIONS,
                            cache=tmp_path).calls == 1 and len(seen) == 1  # fmt: skip

    async def aanswer(prompt):
        return "async " + prompt.split("Question: ")[1].split("?")[0]

    assert generate_answers(functions.generator(aanswer, name="a"), CONTEXTS, questions=QUESTIONS)["q2"].text == (
        "async Where was it played"
    )

    def batch(prompts):
        return [p[-10:] for p in prompts]

    gen = functions.generator(batch, name="b", batch=True)
    answers = generate_answers(gen, CONTEXTS, questions=QUESTIONS, batch_size=2)
    assert answers.calls == 1 and answers["q1"].text == "Bowl 50?\nAnswer:"[-10:]

    def miscount(prompts):
        return ["only one"]

    answers = generate_answers(
        functions.generator(miscount, name="m", batch=True), CONTEXTS, questions=QUESTIONS, batch_size=2
    )
    assert answers.calls == 3 and answers["q1"].text == answers["q2"].text == "only one"  # asked again one by one

    with pytest.warns(Warning):
        answers = generate_answers(functions.generator(lambda p: 3, name="int"), CONTEXTS, questions=QUESTIONS)
    assert answers["q1"].error == "TypeError: the function returned a int, not a str or a Generation: 3"
    with pytest.raises(InputError, match="batch must be True or False"):
        functions.generator(batch, name="x", batch="yes")  # type: ignore[arg-type]


def test_a_function_holding_what_cannot_be_described_needs_a_version():
    import threading

    lock = threading.Lock()

    def held(prompt):
        with lock:
            return "x"

    with pytest.raises(Uncacheable):
        functions.generator(held, name="held")
    assert (
        functions.generator(held, name="held", version="1").fingerprint
        != functions.generator(held, name="held", version="2").fingerprint
    )


# ----- LangChain --------------------------------------------------------------------------------------------------


def test_langchain_fake_chat_models():
    from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
    from langchain_core.messages import AIMessage

    model = FakeListChatModel(responses=["Denver Broncos", "Levi's Stadium"])
    gen = langchain.generator(model)
    assert gen.name == "FakeListChatModel"
    answers = generate_answers(gen, CONTEXTS, questions=QUESTIONS)
    assert [answers[q].text for q in ("q1", "q2")] == ["Denver Broncos", "Levi's Stadium"]
    assert answers["q1"].tokens_in is None  # the fake model reports no usage

    usage = {"input_tokens": 31, "output_tokens": 2, "total_tokens": 33}
    messages = iter([AIMessage(content="Denver Broncos", usage_metadata=usage), AIMessage(content="Levi's Stadium")])
    gen = langchain.generator(GenericFakeChatModel(messages=messages), name="generic", max_concurrency=2)
    answers = generate_answers(gen, CONTEXTS, questions=QUESTIONS, batch_size=2)
    assert answers.calls == 1  # one model.batch call
    assert (answers["q1"].text, answers["q1"].tokens_in, answers["q1"].tokens_out) == ("Denver Broncos", 31, 2)
    with pytest.raises(TypeError, match="needs a BaseChatModel"):
        langchain.generator(object())


def test_langchain_fingerprint_follows_the_model_settings_not_its_answers():
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    a = langchain.generator(FakeListChatModel(responses=["x", "y"]))
    b = langchain.generator(FakeListChatModel(responses=["x", "z"]))
    assert a.fingerprint != b.fingerprint
    before = a.fingerprint
    generate_answers(a, CONTEXTS, questions=QUESTIONS)
    assert a.fingerprint == before  # read when wrapped: the fake model's counter moved since


# ----- LlamaIndex -------------------------------------------------------------------------------------------------


def test_llamaindex_mock_llm_and_a_custom_llm_reporting_usage():
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata, MockLLM
    from llama_index.core.llms.callbacks import llm_completion_callback

    gen = llamaindex.generator(MockLLM(max_tokens=3))
    answers = generate_answers(gen, CONTEXTS, questions=QUESTIONS)
    assert answers["q1"].text == "text text text" and gen.name == "MockLLM"

    class Reader(CustomLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="answerer")

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs):
            if "Where" in prompt:
                raise RuntimeError("offline")
            return CompletionResponse(
                text="Denver Broncos", raw={"usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 2}}
            )

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs):
            raise NotImplementedError

    answers = generate_answers(llamaindex.generator(Reader(), name="answerer"), CONTEXTS, questions=QUESTIONS)
    assert answers["q1"].text == "Denver Broncos" and answers["q1"].tokens_out == 2 and answers["q1"].tokens_in > 10
    assert answers["q2"].error == "RuntimeError: offline"
    with pytest.raises(TypeError, match=r"needs a llama_index\.core\.llms\.LLM"):
        llamaindex.generator("not an llm")


# ----- Haystack ---------------------------------------------------------------------------------------------------


def _haystack_reader():
    from haystack import component

    @component
    class Reader:
        """A Haystack generator component: the first line of the context as the reply, with usage in meta."""

        def __init__(self, prefix: str = ""):
            self.prefix = prefix

        @component.output_types(replies=list[str], meta=list[dict])
        def run(self, prompt: str):
            first = prompt.split("[1] ", 1)[1].split("\n", 1)[0]
            usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(first.split())}
            return {"replies": [self.prefix + first], "meta": [{"usage": usage}]}

    return Reader


def test_haystack_component_alone_and_in_a_pipeline():
    from haystack import Pipeline, component

    answerer = _haystack_reader()
    answers = generate_answers(haystack.generator(answerer(), name="hs"), CONTEXTS, questions=QUESTIONS)
    assert answers["q2"].text == "Levi's Stadium" and answers["q2"].tokens_out == 2
    pipe = Pipeline()
    pipe.add_component("answerer", answerer(prefix="A: "))
    gen = haystack.generator(pipe, name="hs", component="answerer")
    assert generate_answers(gen, CONTEXTS, questions=QUESTIONS)["q1"].text == "A: Denver Broncos"
    assert gen.fingerprint != haystack.generator(answerer(), name="hs").fingerprint  # its settings differ
    with pytest.raises(TypeError, match="needs component="):
        haystack.generator(pipe, name="hs")

    @component
    class Ranker:
        @component.output_types(documents=list)
        def run(self, prompt: str):
            return {"documents": []}

    with pytest.raises(TypeError, match="not 'replies'"):
        haystack.generator(Ranker(), name="r")
    with pytest.raises(TypeError, match="has no input 'text'"):
        haystack.generator(answerer(), name="hs", prompt_input="text")


def _first_chunk(messages):
    """MockChatGenerator's response_fn (module level: Haystack serialises it for the fingerprint): the first line of
    the one user message's context."""
    (message,) = messages
    assert message.role.value == "user"  # the prompt arrives as one user message
    return message.text.split("[1] ", 1)[1].split("\n", 1)[0]


def test_haystack_chat_generator_gets_the_prompt_as_one_user_message():
    from haystack import Pipeline, component
    from haystack.components.generators.chat import MockChatGenerator
    from haystack.dataclasses import ChatMessage

    gen = haystack.generator(MockChatGenerator(response_fn=_first_chunk), name="chat")
    assert gen.prompt_input == "messages"  # no 'prompt' input: the chat generator's messages
    answers = generate_answers(gen, CONTEXTS, questions=QUESTIONS)
    assert [answers[q].text for q in ("q1", "q2")] == ["Denver Broncos", "Levi's Stadium"]
    # MockChatGenerator's usage, read from the reply's own meta: words of the prompt and of the reply
    prompt = render_prompt(QUESTIONS["q2"], [("1", "Levi's Stadium")])
    assert answers["q2"].tokens_in == len(prompt.split()) and answers["q2"].tokens_out == 2
    fixed = haystack.generator(MockChatGenerator(responses="Denver"), name="chat")
    assert fixed.fingerprint != gen.fingerprint  # its settings (the responses) differ
    assert generate_answers(fixed, CONTEXTS, questions=QUESTIONS)["q2"].text == "Denver"

    pipe = Pipeline()
    pipe.add_component("llm", MockChatGenerator(response_fn=_first_chunk))
    in_pipe = haystack.generator(pipe, name="chat", component="llm")
    assert generate_answers(in_pipe, CONTEXTS, questions=QUESTIONS)["q1"].text == "Denver Broncos"

    @component
    class StrictChat:
        """A chat generator that takes ChatMessage lists only, as OpenAIChatGenerator does."""

        @component.output_types(replies=list[ChatMessage])
        def run(self, messages: list[ChatMessage]):
            if not all(isinstance(m, ChatMessage) for m in messages):
                raise TypeError("messages must be ChatMessage objects")
            return {"replies": [ChatMessage.from_assistant(f"{len(messages)} message(s)")]}

    strict = generate_answers(haystack.generator(StrictChat(), name="strict"), CONTEXTS, questions=QUESTIONS)
    assert strict["q1"].text == "1 message(s)" and strict["q1"].error is None and strict["q1"].tokens_in is None

    @component
    class Embedder:
        @component.output_types(replies=list[str])
        def run(self, text: str):
            return {"replies": [text]}

    with pytest.raises(TypeError, match="neither a 'prompt' nor a 'messages' input"):
        haystack.generator(Embedder(), name="e")
    assert generate_answers(haystack.generator(Embedder(), name="e", prompt_input="text"), CONTEXTS,
                            questions=QUESTIONS)["q1"].text.endswith("Answer:")  # fmt: skip
