"""The context budget: what the generator consumes, as a number of chunks (``5``) or of tokens (``"512tok"``).

Token counting is pluggable: any callable ``str -> int``. The default, :func:`count_tokens`, needs no download:
it counts words and punctuation marks (``\\w+`` runs and single other non-space characters), which tracks
BERT-style word-piece counts within about 10-20% on English prose. Plug a Hugging Face tokenizer installed
locally with ``tokenizer=lambda text: len(tok.encode(text, add_special_tokens=False))``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .hits import Hit

_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Words plus punctuation marks: the default token counter (no model, no download)."""
    return len(_TOKEN.findall(text))


@dataclass(frozen=True)
class Budget:
    """``chunks`` chunks, or ``tokens`` tokens (the longest prefix of the ranking whose token counts fit)."""

    chunks: int | None = None
    tokens: int | None = None

    @classmethod
    def parse(cls, value: int | str | Budget) -> Budget:
        if isinstance(value, Budget):
            return value
        if isinstance(value, bool):
            raise ValueError(f"budget must be a number of chunks or 'Ntok', not {value!r}")
        if isinstance(value, int):
            if value < 1:
                raise ValueError(f"a budget of chunks must be 1 or more, not {value}")
            return cls(chunks=value)
        if isinstance(value, str):
            match = re.fullmatch(r"\s*(\d+)\s*tok(?:ens?)?\s*", value)
            if match and int(match[1]) >= 1:
                return cls(tokens=int(match[1]))
        raise ValueError(f"budget must be a number of chunks (e.g. 5) or of tokens (e.g. '512tok'), not {value!r}")

    def __str__(self) -> str:
        return f"budget({self.chunks})" if self.chunks is not None else f"budget({self.tokens}tok)"

    def cut(self, hits: Sequence[Hit], tokenizer: Callable[[str], int]) -> int:
        """How many of ``hits`` (in ranked order) the generator receives."""
        if self.chunks is not None:
            return min(self.chunks, len(hits))
        used = 0
        for i, hit in enumerate(hits):
            if hit.tokens is not None:
                size = hit.tokens
            elif hit.text is not None:
                size = tokenizer(hit.text)
            else:
                raise ValueError(f"hit {hit.doc_id!r} has neither text nor a token count: a token budget cannot count it")
            used += size
            if used > self.tokens:
                return i
        return len(hits)
