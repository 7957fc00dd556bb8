"""What every plot rag_eval draws shares: Okabe and Ito's colour-blind-safe palette, the fates' colours taken from
it, legends outside the data area and titles that say what a plot shows (``docs/html-report.md``, "Plots").

matplotlib is imported by the functions that need it, never at import time.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FATE_COLOURS", "OKABE_ITO", "PALETTE", "SERIES", "legend_outside", "rc", "text_colour"]

#: the palette's name, as the plots' tests check it
PALETTE = "Okabe-Ito"
#: Okabe and Ito's eight colours (https://jfly.uni-koeln.de/color/), told apart with any common colour blindness
OKABE_ITO = {
    "black": "#000000",
    "orange": "#e69f00",
    "sky blue": "#56b4e9",
    "bluish green": "#009e73",
    "yellow": "#f0e442",
    "blue": "#0072b2",
    "vermillion": "#d55e00",
    "reddish purple": "#cc79a7",
}
#: the order a plot's series take them: the darker ones first (yellow is faint as a line on white)
SERIES = tuple(
    OKABE_ITO[n]
    for n in ("blue", "orange", "bluish green", "vermillion", "reddish purple", "sky blue", "yellow", "black")
)
#: where relevant items went: delivered bluish green, the losses in the warm colours, failed in blue
FATE_COLOURS = {
    "delivered": OKABE_ITO["bluish green"],
    "reranked_out": OKABE_ITO["orange"],
    "cut_by_budget": OKABE_ITO["yellow"],
    "below_depth": OKABE_ITO["reddish purple"],
    "never_retrieved": OKABE_ITO["vermillion"],
    "failed": OKABE_ITO["blue"],
}


def rc() -> dict[str, Any]:
    """matplotlib settings for ``matplotlib.rc_context``: the series in :data:`SERIES` order."""
    from cycler import cycler  # matplotlib's own dependency

    return {"axes.prop_cycle": cycler(color=list(SERIES))}


def legend_outside(ax: Any, *, below: bool = False, ncol: int = 1, **kwargs: Any) -> Any:
    """The axes' legend right of the data area (or ``below`` it, under the x label), so that it covers nothing;
    ``fig.tight_layout()`` and ``savefig(bbox_inches="tight")`` keep it in the figure."""
    if below:
        from matplotlib.transforms import offset_copy

        under = offset_copy(ax.transAxes, fig=ax.figure, y=-0.45, units="inches")  # under the x label
        return ax.legend(
            loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=under, ncol=ncol, frameon=False, **kwargs
        )
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False, **kwargs)


def text_colour(fill: str) -> str:
    """Black or white, whichever reads better on ``fill`` (a ``#rrggbb`` colour), by its relative luminance."""
    channels = [int(fill[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return "black" if luminance > 0.179 else "white"
