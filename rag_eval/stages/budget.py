"""The context budget: what the generator consumes, as a number of chunks (``5``) or of tokens (``"512tok"``).

Token counting is pluggable: any callable ``str -> int``. The default, :func:`count_tokens`, needs no download:
it counts words and punctuation marks (``\\w+`` runs and single other non-space characters), which tracks
BERT-style word-piece counts within about 10-20% on English prose. Plug a Hugging Face tokenizer installed
locally with ``tokenizer=lambda text: len(tok.encode(text, add_special_tokens=False))``.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from .._checks import MAX_CUTOFF, check_int
from ..errors import InputError
from .hits import Hit

_TOKEN = re.compile(r"\w+|[^\w\s]")
_TOKENS = re.compile(r"\s*([0-9]+)\s*tok(?:ens?)?\s*")  # ASCII digits: \d would read other scripts' digits


def count_tokens(text: str) -> int:
    """Words plus punctuation marks: the default token counter (no model, no download)."""
    return len(_TOKEN.findall(text))


@dataclass(frozen=True)
class Budget:
    """``chunks`` chunks, or ``tokens`` tokens (the longest prefix of the ranking whose token counts fit).

    Exactly one of the two is given, an int from 1 to :data:`~rag_eval.metrics.grammar.MAX_CUTOFF` (10^9); anything
    else is an :class:`~rag_eval.errors.InputError` when the Budget is made."""

    chunks: int | None = None
    tokens: int | None = None

    def __post_init__(self) -> None:
        if (self.chunks is None) == (self.tokens is None):
            raise InputError(
                f"a budget is a number of chunks or of tokens, exactly one of them: not "
                f"chunks={self.chunks!r}, tokens={self.tokens!r}"
            )
        field = "chunks" if self.chunks is not None else "tokens"
        object.__setattr__(self, field, check_int(getattr(self, field), f"a budget of {field}"))

    @classmethod
    def parse(cls, value: int | str | Budget) -> Budget:
        if isinstance(value, Budget):
            return value
        if isinstance(value, bool):
            raise InputError(f"budget must be a number of chunks or 'Ntok', not {value!r}")
        if isinstance(value, numbers.Integral):
            if value < 1:
                raise InputError(f"a budget of chunks must be 1 or more, not {value}")
            return cls(chunks=value)
        if isinstance(value, str):
            match = _TOKENS.fullmatch(value)
            if match and len(match[1].lstrip("0")) > 10:
                raise InputError(f"a budget of tokens must be at most {MAX_CUTOFF}, not {match[1]}")
            if match and int(match[1]) >= 1:
                return cls(tokens=int(match[1]))
        raise InputError(f"budget must be a number of chunks (e.g. 5) or of tokens (e.g. '512tok'), not {value!r}")

    def __str__(self) -> str:
        return f"budget({self.chunks})" if self.chunks is not None else f"budget({self.tokens}tok)"

    def cut(self, hits: Sequence[Hit], tokenizer: Callable[[str], int]) -> int:
        """How many of ``hits`` (in ranked order) the generator receives. A count the tokenizer returns must be
        an int >= 0 (an InputError names the hit otherwise: a negative count would let everything through)."""
        if self.chunks is not None:
            return min(self.chunks, len(hits))
        limit = cast(int, self.tokens)  # exactly one of chunks and tokens is set (__post_init__)
        used = 0
        for i, hit in enumerate(hits):
            if hit.tokens is not None:
                size = hit.tokens
            elif hit.text is not None:
                size = tokenizer(hit.text)
                if type(size) is not int or size < 0:
                    size = check_int(size, f"the tokenizer's count for hit {hit.doc_id!r}", low=0, high=None)
            else:
                raise InputError(
                    f"hit {hit.doc_id!r} has neither text nor a token count: a token budget cannot count it"
                )
            used += size
            if used > limit:
                return i
        return len(hits)
