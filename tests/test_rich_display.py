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
    # the verdict first, in words and in colour, then the detail under its heading
    assert shown.startswith("<p><strong>Verdict: ")
    assert "<p>against &#x27;dense&#x27;: randomization test, holm correction" in shown
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


# ----- the answer first (issue 30): a pipeline's funnel, a comparison's and a gate's verdict, then the detail -----


def _pipeline_report():
    from rag_eval import Hit, Pipeline
    from rag_eval.adapters import functions

    corpus = [f"d{i}" for i in range(1, 9)]
    qrels = {f"q{i}": {"d1": 1, f"d{i + 2}": 2} for i in range(6)}  # d8 (q5's) lies beyond the depth

    def search(query, k):
        return [Hit(d, float(10 - j)) for j, d in enumerate(corpus)]

    def reverse(query, hits):
        return [h.doc_id for h in reversed(hits)]

    pipeline = Pipeline(
        functions.retriever(search, name=ODD), functions.reranker(reverse, name="flip"), depth=6, budget=2
    )
    result = pipeline.run({q: f"question {q}" for q in qrels}, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rag_eval.RagEvalWarning)
        return evaluate(qrels, {"p": result})


def test_a_pipeline_report_opens_with_its_funnel_then_the_summary():
    from rag_eval.reports.funnel import funnel

    report = _pipeline_report()
    found = funnel(report)
    steps = found.steps_of("p")
    relevant, delivered = int(steps[0]["items"]), int(steps[-1]["items"])
    assert relevant == 12  # two relevant items a query, six queries
    shown = report._repr_html_()
    assert shown.startswith("<p><strong>Where the relevant items went: p</strong>: ")
    assert f"{delivered} of {relevant} relevant items" in shown
    assert shown.index("Where the relevant items went") < shown.index("<p>rag_eval ") < shown.rindex("<td>recall@depth")
    assert "lost 1: ranked below the depth (6) by &#x27;&lt;b&gt;bm25&lt;/b&gt; &amp; |x|&#x27;" in shown  # q5's d7
    assert "<b>bm25" not in shown
    recall = report.mean("p", "recall@depth", ODD)
    assert f"{recall:.3f} [" in shown  # the first stage's headline, with its interval
    md = report._repr_markdown_()
    assert md.startswith("### Where the relevant items went: p\n")
    assert f"| returned by '&lt;b&gt;bm25&lt;/b&gt; &amp; \\|x\\|' within depth 6 | {int(steps[1]['items'])} |" in md
    assert md.index("| step | relevant items |") < md.index("| run | stage | metric |")


def test_a_report_of_plain_runs_has_no_funnel_and_shows_its_table_first():
    shown = _report()._repr_html_()
    assert shown.startswith("<p>rag_eval ") and "Where the relevant items went" not in shown


def test_a_comparison_opens_with_its_verdict_in_words_and_colour():
    comparison = compare(_report(), baseline="dense", metrics=["ndcg@2", "precision@1"], permutations=200)
    table = comparison.table.set_index("metric")
    assert bool(table.loc["ndcg@2", "rejected"]) is False  # 6 queries: not enough for a randomization test
    md = comparison._repr_markdown_()
    lines = md.splitlines()
    assert lines[0] == "**Verdict: 0 of 2 differences significant after holm correction at alpha 0.05**"
    assert lines[2].startswith("- **not significant**: &lt;b&gt;bm25&lt;/b&gt; &amp; \\|x\\| vs dense, ndcg@2: ")
    assert f"{table.loc['ndcg@2', 'diff']:+.4f}" in lines[2]
    assert md.index("Verdict") < md.index("| system | metric |")
    # a significant win: twelve queries, read by the metric's direction (better), coloured and worded
    qrels = {f"q{i}": {"d1": 1, "d2": 0} for i in range(12)}
    good = Run.from_ranking({q: ["d1", "d2"] for q in qrels}, name="good")
    poor = Run.from_ranking({q: ["d2", "d1"] if q not in ("q0", "q1") else ["d1", "d2"] for q in qrels}, name="poor")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rag_eval.RagEvalWarning)
        both = evaluate(qrels, [poor, good], ["P@1"])
        won = compare(both, baseline="poor", permutations=200)
        lost = compare(both, baseline="good", permutations=200)
    shown = won._repr_html_()
    assert shown.startswith("<p><strong>Verdict: 1 of 1 differences significant after holm correction")
    assert '<li><strong style="color:#009e73">better</strong>: good vs poor, precision@1: +0.8333 [' in shown
    assert '<strong style="color:#d55e00">worse</strong>: poor vs good, precision@1: -0.8333 [' in lost._repr_html_()


def test_a_gate_result_opens_with_its_verdict():
    qrels = {f"q{i}": {"d1": 1, "d2": 0} for i in range(12)}
    good = Run.from_ranking({q: ["d1", "d2"] for q in qrels}, name="sys")
    poor = Run.from_ranking({q: ["d2", "d1"] for q in qrels}, name="sys")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rag_eval.RagEvalWarning)
        result = rag_eval.gate(evaluate(qrels, good, ["P@1"]), evaluate(qrels, poor, ["P@1"]), ["P@1:0.05"])
    assert result.verdict == "regression"
    shown = result._repr_html_()
    assert shown.startswith('<p>Retrieval gate: <strong style="color:#d55e00">REGRESSION</strong> (exit 1)</p>')
    assert shown.index("REGRESSION") < shown.index("<table>")
    assert result._repr_markdown_().startswith("## Retrieval gate: REGRESSION (exit 1)")
