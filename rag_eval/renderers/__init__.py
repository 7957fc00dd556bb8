"""Layer 6, the renderers: a Report (or a Comparison) as text, CSV, JSON or markdown (:mod:`.formats`), as
trec_eval prints it (:mod:`.trec_eval`), as one HTML file (:mod:`.html_report`) or as a result folder
(:mod:`.result_folder`). They read the Report's public API and compute no metric. See docs/html-report.md and
docs/result-folders.md."""

from .formats import FORMATS, format_comparison, format_report
from .html_report import write_html
from .result_folder import load_manifest, write_folder
from .trec_eval import format_trec_eval

__all__ = [
    "FORMATS",
    "format_comparison",
    "format_report",
    "format_trec_eval",
    "load_manifest",
    "write_folder",
    "write_html",
]
