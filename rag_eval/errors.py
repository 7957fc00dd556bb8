"""The errors rag_eval raises on purpose.

Every problem with a user's input is an :class:`InputError` that names where it is (file and line, or query
and field) and what is wrong, so that the CLI can print one line and exit 2 instead of a traceback.
"""

from __future__ import annotations

__all__ = ["InputError", "RagEvalError"]


class RagEvalError(Exception):
    """Base class of the errors rag_eval raises on purpose."""


class InputError(RagEvalError, ValueError):
    """Bad input: a file, line, query or field that cannot be used, and why.

    ``str(error)`` reads ``source:line: problem`` (or ``source: problem`` when no line applies).
    """

    def __init__(self, problem: str, *, source: str | None = None, line: int | None = None) -> None:
        self.problem = problem
        self.source = source
        self.line = line
        super().__init__(self._format())

    def _format(self) -> str:
        where = self.source or ""
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        return f"{where}: {self.problem}" if where else self.problem
