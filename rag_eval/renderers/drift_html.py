"""A drift (:func:`rag_eval.statistics.drift`) as one self-contained HTML page: the paired change in recall@budget
with its n and method, the counts per cause and per stage, the queries most affected and the items with their
causes (``rag-eval drift ... -o drift.html``; docs/drift.md). The page reads the Drift's own tables and computes
nothing; it shares the report's styles (report.css.j2), inline, and opens offline. Needs the ``html`` extra."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .._files import write_output
from ..errors import InputError

if TYPE_CHECKING:
    from ..statistics.snapshot_drift import Drift

__all__ = ["ITEMS_SHOWN", "render_drift", "write_drift_html"]

ITEMS_SHOWN = 1000  # items listed on the page, in the Drift's order (all of them: --format csv)
_FEATURE = "the drift's HTML page (rag-eval drift -o)"


def _number(value: float, form: str) -> str:
    return "n/a" if math.isnan(value) else format(value, form)


def render_drift(found: Drift, *, title: str | None = None, top: int = 10) -> str:
    """The page of ``found``, as a str: ``top`` queries most affected, at most :data:`ITEMS_SHOWN` items."""
    from .._optional import require

    jinja2 = require("jinja2", extra="html", feature=_FEATURE)
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rag_eval.renderers", "."),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    items = found.to_frame()
    shown = items.head(ITEMS_SHOWN).to_dict("records")
    low, high = found.ci
    return str(
        env.get_template("drift.html.j2").render(
            title=title or "drift between two snapshots",
            verdict=found.verdict(),
            before=_number(found.recall_before, ".4f"),
            after=_number(found.recall_after, ".4f"),
            diff=_number(found.diff, "+.4f"),
            ci="no interval" if math.isnan(low) else f"[{low:+.4f}, {high:+.4f}]",
            confidence=f"{found.confidence:.0%}",
            p=_number(found.p, ".4g"),
            n=found.n,
            left_out=found.left_out,
            method=found.method,
            inputs=list(found.inputs),
            by_cause=found.by_cause().to_dict("records"),
            by_stage=found.by_stage().to_dict("records"),
            queries=found.queries(top).to_dict("records"),
            items=shown,
            more=len(items) - len(shown),
        )
    )


def write_drift_html(path: str | os.PathLike[str], found: Drift, *, title: str | None = None, top: int = 10) -> Path:
    """Write the page of ``found`` to ``path`` (whole or not at all); returns the path."""
    out = Path(path)
    if out.is_dir():
        raise InputError("is a folder: give the HTML file to write", source=str(out))
    page = render_drift(found, title=title, top=top)
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_output(out, page.encode("utf-8"))
