"""The one jinja2 Environment of the HTML pages (the report, the drift page): the templates beside this module,
autoescape on, an undefined name an error. jinja2 is the ``html`` extra."""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["environment"]


def environment(feature: str) -> Any:
    """The Environment (made once); ``feature`` names what needs it where jinja2 is not installed."""
    from .._optional import require

    require("jinja2", extra="html", feature=feature)
    return _environment()


@functools.cache
def _environment() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("rag_eval.renderers", "."),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
