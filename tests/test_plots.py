"""Plots that hide no data (rag_eval.renderers.plots, Comparison.plot, Tuning.plot): each rendered with matplotlib's
Agg, then read from its artists' window extents: no two text boxes overlap, no legend covers a bar, a point or an
error bar, every plot has a title, and the colours are Okabe-Ito's."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

import rag_eval  # noqa: E402
from rag_eval import Hit, Pipeline, Run, compare, evaluate  # noqa: E402
from rag_eval._plot_style import FATE_COLOURS, OKABE_ITO, PALETTE, SERIES, text_colour  # noqa: E402
from rag_eval.adapters import functions  # noqa: E402
from rag_eval.renderers.plots import FATES, Panel, card_panels, figures  # noqa: E402

# Okabe & Ito (2008), "Color Universal Design": the eight colours as published
PUBLISHED = {
    "#000000",
    "#e69f00",
    "#56b4e9",
    "#009e73",
    "#f0e442",
    "#0072b2",
    "#d55e00",
    "#cc79a7",
}

CORPUS = {f"d{i:02d}": f"chunk {i}" for i in range(40)}
QUERIES = {f"q{i}": f"question {i}" for i in range(12)}
# three relevant chunks a query: its own (first), one at rank ~6, one beyond the depth for a third of the queries
QRELS = {
    f"q{i}": {f"d{i:02d}": 2, f"d{(i + 5) % 40:02d}": 1, f"d{(i + 30 if i % 3 else i + 3) % 40:02d}": 1}
    for i in range(12)
}
DEPTH, BUDGET = 20, 3


def search(query, k):
    n = int(query.split()[1])
    order = sorted(CORPUS, key=lambda d: ((int(d[1:]) - n) % 40, d))
    return [Hit(d, float(40 - j)) for j, d in enumerate(order)]


def swap(query, hits):
    ids = [h.doc_id for h in hits]
    return ids[1:6][::-1] + ids[:1] + ids[6:] if int(query.split()[1]) % 2 else ids


@pytest.fixture(scope="module")
def report():
    two = Pipeline(
        functions.retriever(search, name="kw"), functions.reranker(swap, name="rr"), depth=DEPTH, budget=BUDGET
    )
    one = Pipeline(functions.retriever(search, name="kw"), depth=DEPTH, budget=BUDGET)
    results = {"kw>>rr": two.run(QUERIES, progress=False), "kw": one.run(QUERIES, progress=False)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rag_eval.RagEvalWarning)  # a small hand-made set: judged share, caps
        return evaluate(QRELS, results)


def _texts(fig, renderer):
    """Every text drawn, with its window extent: titles, axis labels, tick labels in view, annotations, legend
    entries."""
    found = [t for t in fig.texts if t.get_text().strip()]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        found += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        found += list(ax.texts)
        for axis, (lo, hi), at in ((ax.xaxis, sorted(ax.get_xlim()), 0), (ax.yaxis, sorted(ax.get_ylim()), 1)):
            found += [
                t
                for t in axis.get_ticklabels(which="both")
                if lo - 1e-9 <= t.get_position()[at] <= hi + 1e-9 and t.get_visible()
            ]
        legend = ax.get_legend()
        if legend is not None:
            found += list(legend.get_texts())
    return [(t.get_text(), t.get_window_extent(renderer)) for t in found if t.get_visible() and t.get_text().strip()]


def _data_boxes(ax, renderer):
    """The window extent of each bar, line, point set and error bar of the axes (reference lines left out: they
    span the axes; empty artists too: they draw nothing)."""
    boxes = [p.get_window_extent(renderer) for p in ax.patches]
    boxes += [c.get_datalim(ax.transData) for c in ax.collections]  # points, error bars: where their data is
    for line in ax.lines:
        if line.get_transform() is not ax.transData or not len(line.get_xdata()):
            continue  # axvline / axhline, or an empty series
        boxes.append(line.get_window_extent(renderer))
    return [b for b in boxes if np.isfinite(b.extents).all()]


def _colours(ax):
    found = [to_hex(p.get_facecolor()) for p in ax.patches]
    found += [to_hex(line.get_color()) for line in ax.lines]
    for c in ax.collections:
        found += [to_hex(x) for x in c.get_facecolor()] + [to_hex(x) for x in c.get_edgecolor()]
    return set(found)


def check_reads_well(fig):
    """No two text boxes overlap; no legend box overlaps a data box; every axes has a title (or the figure a
    suptitle); every colour of the data is an Okabe-Ito colour. Returns the texts and their boxes."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = _texts(fig, renderer)
    assert len(texts) > 5
    overlapping = [(a, b) for i, (a, box_a) in enumerate(texts) for b, box_b in texts[i + 1 :] if box_a.overlaps(box_b)]
    assert overlapping == []
    for ax in fig.axes:
        legend = ax.get_legend()
        data = _data_boxes(ax, renderer)
        assert data, "each axes draws data"
        if legend is not None:
            box = legend.get_window_extent(renderer)
            assert not any(box.overlaps(d) for d in data)
        assert ax.get_title() or (fig._suptitle is not None and fig._suptitle.get_text())
        assert _colours(ax) <= PUBLISHED | {"#ffffff"}, _colours(ax) - PUBLISHED
    return texts


def test_the_palette_is_okabe_ito():
    assert PALETTE == "Okabe-Ito"
    assert set(OKABE_ITO.values()) == PUBLISHED and len(SERIES) == 8 and set(SERIES) == PUBLISHED
    assert SERIES[0] == "#0072b2"  # blue first: yellow, faint on white, comes last but one
    assert set(FATE_COLOURS) == set(FATES) and set(FATE_COLOURS.values()) <= PUBLISHED
    assert len(set(FATE_COLOURS.values())) == len(FATES)  # each fate its own colour
    assert FATE_COLOURS["delivered"] == OKABE_ITO["bluish green"]
    assert text_colour(OKABE_ITO["blue"]) == "white" and text_colour(OKABE_ITO["yellow"]) == "black"


def test_the_report_s_plots_read_well(report):
    made = figures(card_panels("report", report))
    assert sorted(made) == ["loss", "recall", "scatter"]
    try:
        recall = check_reads_well(made["recall"])
        # one panel a pipeline, each titled by it, the legend naming its stages and marks
        assert [ax.get_title() for ax in made["recall"].axes] == ["kw>>rr", "kw"]
        assert made["recall"]._suptitle.get_text().startswith("recall@k of each stage")
        labels = [t.get_text() for t in made["recall"].axes[0].get_legend().get_texts()]
        assert labels == ["kw", "rr", "depth 20", "budget(3)"]
        assert ("budget(3)" in [t for t, _ in recall]) is True
        lines = made["recall"].axes[0].get_lines()
        assert [to_hex(line.get_color()) for line in lines[:2]] == list(SERIES[:2])

        check_reads_well(made["loss"])
        ax = made["loss"].axes[0]
        assert ax.get_title().startswith("where the relevant items went")
        assert [t.get_text() for t in ax.get_yticklabels()] == ["kw", "kw>>rr"]  # the first pipeline on top
        colours = {c.get_label(): to_hex(c.patches[0].get_facecolor()) for c in ax.containers}
        assert colours["delivered"] == FATE_COLOURS["delivered"]
        assert colours["reranked out by rr"] == FATE_COLOURS["reranked_out"]
        # the bars are the report's shares: delivered of kw>>rr, the top bar (position 1)
        delivered = next(c for c in ax.containers if c.get_label() == "delivered")
        assert delivered.patches[1].get_width() == pytest.approx(report.mean("kw>>rr", "loss.delivered", "rr"))

        texts = check_reads_well(made["scatter"])
        ax = made["scatter"].axes[0]
        counts = [t.get_text() for t in ax.texts]
        x = report.values("kw>>rr", "recall@depth", "kw")
        expected = [f"n={n}" for _, n in sorted(x.round(6).value_counts().items()) if n >= 3]
        assert counts == expected and counts  # one label a distinct value, the number of queries at it
        assert sum(t.startswith("n=") for t, _ in texts) == 2 * len(counts)  # both panels, all shown
    finally:
        for fig in made.values():
            plt.close(fig)


def _fake(xs):
    """A report stand-in holding per-query values only: a two-stage pipeline whose first stage's recall@depth
    takes the values ``xs`` (the scatter reads nothing else)."""
    rows = [("p", "a", q, "recall@depth", x) for q, x in enumerate(xs)]
    rows += [("p", "b", q, "ndcg@budget", 0.5) for q in range(len(xs))]
    per_query = pd.DataFrame(rows, columns=["run", "stage", "query_id", "metric", "value"])
    empty = pd.DataFrame({"run": [], "metric": [], "mean": []})
    return SimpleNamespace(
        per_query=per_query, summary=empty, recall_curves=pd.DataFrame({"run": [], "stage": [], "k": []})
    )


def test_coincident_values_get_one_label_and_close_ones_do_not_overlap():
    """2/3 computed two ways is one value (one label, n=6, not "n=6n=6"); 0.50 and 0.51 are two labels set one
    above the other."""
    xs = [2 / 3] * 3 + [0.6666667] * 3 + [0.5] * 4 + [0.51] * 4 + [0.0] * 3 + [1.0] * 3
    panel = Panel("p", _fake(xs), "p", {"a": "first", "b": "reranker"}, depth=10, budget="budget(3)", budget_chunks=3)
    made = figures([panel])
    assert list(made) == ["scatter"]
    fig = made["scatter"]
    try:
        check_reads_well(fig)
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.texts] == ["n=3", "n=4", "n=4", "n=6", "n=3"]
        renderer = fig.canvas.get_renderer()
        half, near = ax.texts[1].get_window_extent(renderer), ax.texts[2].get_window_extent(renderer)
        assert near.y0 >= half.y1  # moved up a row
        assert ax.title.get_window_extent(renderer).y0 >= near.y1  # and the title above it
    finally:
        plt.close(fig)


def test_the_comparison_plot_keeps_its_legend_off_the_intervals():
    good = Run.from_ranking({f"q{i}": ["d1", "d2"] for i in range(12)}, name="good")
    poor = Run.from_ranking({f"q{i}": ["d2", "d1"] if i % 3 else ["d1", "d2"] for i in range(12)}, name="poor")
    qrels = {f"q{i}": {"d1": 1, "d2": 0} for i in range(12)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rag_eval.RagEvalWarning)
        comparison = compare(evaluate(qrels, [poor, good], ["ndcg@2", "P@1", "mrr@2"]), permutations=200)
    ax = comparison.plot()
    try:
        check_reads_well(ax.figure)
        assert ax.get_title() == "difference from poor, with its 95% interval"
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["significant", "not significant"]
        legend = ax.get_legend().get_window_extent()
        assert legend.x0 >= ax.get_window_extent().x1  # right of the axes
    finally:
        plt.close(ax.figure)


def test_the_tuning_plot_reads_well():
    from rag_eval import Space, tune
    from rag_eval.examples import BEIR_FOLDER

    collection = rag_eval.Collection.from_beir(BEIR_FOLDER)

    def overlap(query, k):
        asked = set(query.lower().split())
        scored = [
            (d, float(len(asked & set(f"{c.title} {c.content}".lower().split())))) for d, c in collection.corpus.items()
        ]
        return sorted(scored, key=lambda x: -x[1])[:k]

    def length(query, k):
        return sorted(((d, -float(len(c.content))) for d, c in collection.corpus.items()), key=lambda x: -x[1])[:k]

    space = Space(
        [functions.retriever(overlap, name="words"), functions.retriever(length, name="short")],
        alpha=[0.0, 0.5, 1.0],
        depth=5,
        budget=3,
    )
    found = tune(space, collection)
    fig = found.plot()
    try:
        check_reads_well(fig)
        ax = fig.axes[0]
        assert ax.get_title() == "recall@budget of each candidate on the tuning queries; the best one held out"
        assert [float(v) for v in ax.get_lines()[0].get_ydata()] == pytest.approx(found.table["value"].tolist())
    finally:
        plt.close(fig)
