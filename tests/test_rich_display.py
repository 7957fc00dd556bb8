"""Notebook displays: Comparison, Report and MetricCard show as tables (``_repr_html_``, ``_repr_markdown_``) with
every value escaped, and their ``repr`` is one short line, not a wall of dataclass text."""

from __future__ import annotations

import warnings

import rag_eval
from rag_eval import Run, compare, evaluate

QRELS = {f"q{i}": {"d1": 1, "d2": 0} for i in range(1, 7)}
# a name with HTML and Markdown in it: it must show as text
ODD = "<b>bm25</b> & |x|"
GOOD = Run.from_ranking({q: ["d1", "d2"] for q in QRELS}, name=ODD)  # ndcg@2 = 1 on every query
POOR = Run.from_ranking({q: ["d2", "d1"] if q != "q1" else ["d1"] for q in QRELS}, name="dense")


def _report():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rag_eval.RagEvalWarning)
        return evaluate(QRELS, [GOOD, POOR], ["ndcg@2", "P@1"])


def test_report_shows_an_escaped_summary_table():
    report = _report()
    shown = report._repr_html_()
    assert "<table" in shown and "&lt;b&gt;bm25&lt;/b&gt; &amp; |x|" in shown and "<b>bm25" not in shown
    assert "<td>1.0000</td>" in shown  # the mean ndcg@2 of the good run, and its interval
    assert "default conventions" in shown
    md = report._repr_markdown_()
    assert "| &lt;b&gt;bm25&lt;/b&gt; &amp; \\|x\\| | ndcg@2 | 1.0000 | 1.0000 | 1.0000 | 6 | 0 |" in md
    # P@1 of dense: 1 on q1, 0 elsewhere
    assert "| dense | precision@1 | 0.1667 |" in md
    assert repr(report) == f"Report(runs=[{ODD!r}, 'dense'], metrics=['ndcg@2', 'precision@1'], queries=6)"


def test_comparison_shows_an_escaped_table_and_a_one_line_repr():
    comparison = compare(_report(), baseline="dense", metrics=["precision@1"], permutations=200)
    shown = comparison._repr_html_()
    assert shown.startswith("<p>against &#x27;dense&#x27;: randomization test, holm correction")
    assert "<table" in shown and "&lt;b&gt;bm25&lt;/b&gt; &amp; |x|" in shown and "<b>" not in shown
    assert "<td>0.8333</td>" in shown  # the difference in P@1: 1 - 1/6
    md = comparison._repr_markdown_()
    # n 6, n_nan 0, unpaired 0 (issue 27), and no interval: 6 is below the bootstrap's minimum n (10)
    assert "| &lt;b&gt;bm25&lt;/b&gt; &amp; \\|x\\| | precision@1 | 6 | 0 | 0 | 1.0000 | 0.1667 | 0.8333 | none" in md
    assert comparison.to_markdown().startswith("| system | metric |")
    text = repr(comparison)
    assert "\n" not in text and "DataFrame" not in text and len(text) < 250
    assert text.startswith(
        f"Comparison(baseline='dense', systems=[{ODD!r}], metrics=['precision@1'], randomization test"
    )
    significant = int(comparison.table["rejected"].sum())
    assert text.endswith(f"{significant} of 1 significant at alpha 0.05)")


def test_metric_card_shows_its_rendering_escaped():
    card = _report().card
    shown = card._repr_html_()
    assert shown.startswith("<pre>rag_eval ") and "&lt;b&gt;bm25&lt;/b&gt; &amp; |x|" in shown and "<b>" not in shown
    assert f"qrels sha256:{card.hashes.qrels[:12]}" in shown
    assert card._repr_markdown_().startswith("```\nrag_eval ")
    text = repr(card)
    assert "\n" not in text and "InputRecord" not in text
    assert text == (
        f"MetricCard(rag_eval {rag_eval.__version__}, conventions=default, metrics=['ndcg@2', 'precision@1'], "
        f"runs=[{ODD!r}, 'dense'], qrels sha256:{card.hashes.qrels[:12]})"
    )
