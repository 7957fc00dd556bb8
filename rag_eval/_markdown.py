"""Markdown tables whose cells are text, each through :func:`rag_eval._escape.markdown_cell` (entities,
Markdown's punctuation backslashed, line breaks as spaces): the notebook displays and report.md
(docs/result-folders.md)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from ._escape import markdown_cell

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["html_table", "markdown_cell", "markdown_table"]


def markdown_table(frame: pd.DataFrame, *, heading: str | None = None) -> str:
    """``frame`` as a Markdown table (every cell through :func:`markdown_cell`), under an escaped heading line."""
    lines = [markdown_cell(heading), ""] if heading else []
    lines.append("| " + " | ".join(markdown_cell(c) for c in frame.columns) + " |")
    lines.append("|" + "---|" * len(frame.columns))
    lines += ["| " + " | ".join(markdown_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def html_table(frame: pd.DataFrame, *, heading: str) -> str:
    """``frame`` as an HTML table (values escaped by pandas, floats to 4 decimals) under an escaped heading: the
    notebook display of a Report and of a Comparison."""
    table: str = frame.to_html(index=False, escape=True, float_format=lambda v: f"{v:.4f}")
    return f"<p>{html.escape(heading)}</p>" + table
