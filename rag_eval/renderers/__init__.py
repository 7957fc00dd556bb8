"""Layer 6, the renderers: a Report (or a Comparison) as text, CSV, JSON or markdown (:mod:`.formats`), as
trec_eval prints it (:mod:`.trec_eval`), as one HTML file (:mod:`.html_report`) or as a result folder
(:mod:`.result_folder`). They read the Report's public API and compute no metric. See docs/html-report.md and
docs/result-folders.md."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .formats import FORMATS, format_comparison, format_report
    from .html_report import write_html
    from .result_folder import load_manifest, load_results, write_folder
    from .trec_eval import format_trec_eval

# each name and its module: imported on first use (PEP 562), so that a command printing text loads no HTML or folder
# writer (nor the stages they read)
_EXPORTS = {
    "FORMATS": ".formats",
    "format_comparison": ".formats",
    "format_report": ".formats",
    "format_trec_eval": ".trec_eval",
    "load_manifest": ".result_folder",
    "load_results": ".result_folder",
    "write_folder": ".result_folder",
    "write_html": ".html_report",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "FORMATS",
    "format_comparison",
    "format_report",
    "format_trec_eval",
    "load_manifest",
    "load_results",
    "write_folder",
    "write_html",
]
