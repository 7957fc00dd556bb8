"""A drift (:func:`rag_eval.statistics.drift`) as one self-contained HTML page: the paired change in recall@budget
with its n and method, the counts per cause and per stage, the queries most affected and the items with their
causes (``rag-eval drift ... -o drift.html``; docs/drift.md). The page reads the Drift's own tables and computes
nothing; its body (drift_body.html.j2) is also the report's Drift view; it shares the report's styles
(report.css.j2), inline, and opens offline. Needs the ``html`` extra."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._files import write_output
from ..errors import InputError
from ._jinja import environment

if TYPE_CHECKING:
    from ..statistics.snapshot_drift import Drift

__all__ = ["ITEMS_SHOWN", "drift_context", "render_drift", "write_drift_html"]

ITEMS_SHOWN = 1000  # items listed on the page, in the Drift's order (all of them: --format csv)
_FEATURE = "the drift's HTML page (rag-eval drift -o)"


def _number(value: float, form: str) -> str:
    return "n/a" if math.isnan(value) else format(value, form)


def drift_context(found: Drift, *, top: int = 10) -> dict[str, Any]:
    """What drift_body.html.j2 shows of ``found``, read from its own tables: the paired change in recall@budget as
    text, the counts per cause and per stage, the ``top`` queries most affected, at most :data:`ITEMS_SHOWN` items
    (the drift page's and the report's Drift view's)."""
    items = found.to_frame()
    shown = items.head(ITEMS_SHOWN).to_dict("records")
    low, high = found.ci
    return {
        "verdict": found.verdict(),
        "before": _number(found.recall_before, ".4f"),
        "after": _number(found.recall_after, ".4f"),
        "diff": _number(found.diff, "+.4f"),
        "ci": "no interval" if math.isnan(low) else f"[{low:+.4f}, {high:+.4f}]",
        "confidence": f"{found.confidence:.0%}",
        "p": _number(found.p, ".4g"),
        **found.tables(top),
        "items": shown,
        "more": len(items) - len(shown),
    }


def render_drift(found: Drift, *, title: str | None = None, top: int = 10) -> str:
    """The page of ``found``, as a str: ``top`` queries most affected, at most :data:`ITEMS_SHOWN` items."""
    template = environment(_FEATURE).get_template("drift.html.j2")
    return str(template.render(title=title or "drift between two snapshots", drift=drift_context(found, top=top)))


def write_drift_html(path: str | os.PathLike[str], found: Drift, *, title: str | None = None, top: int = 10) -> Path:
    """Write the page of ``found`` to ``path`` (whole or not at all); returns the path."""
    out = Path(path)
    if out.is_dir():
        raise InputError("is a folder: give the HTML file to write", source=str(out))
    page = render_drift(found, title=title, top=top)
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_output(out, page.encode("utf-8"))
