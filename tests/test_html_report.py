"""The HTML report (rag-eval report, Report.to_html; docs/html-report.md): one self-contained file, its numbers
those of the report, data escaped, the drill-down cut to its depth, the diff of two folders listing the regressed
queries; then the page itself in Debian's headless Chromium with the network off (marker ``browser``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from rag_eval import Hit, Pipeline, Report, evaluate
from rag_eval.adapters import functions
from rag_eval.metrics import direction as direction_of
from rag_eval.renderers.html_report import DRILL_EXTRA, FATE_COLOURS, render_html, side_from_folder, side_of, write_html
from rag_eval.reports.funnel import funnel

SCRIPT_CHUNK = "<script>alert('chunk')</script> & <b>bold</b>"
CORPUS = {f"d{i:02d}": f"chunk {i} on topic {i % 4}" for i in range(30)}
CORPUS["d05"] = SCRIPT_CHUNK
QUERIES = {f"q{i}": f"question {i} on topic {i % 4}" for i in range(8)}
QUERIES["q7"] = "</script><script>alert('query')</script>"
# each query: two relevant chunks near its own number (one within the budget after the first stage), one judged 0
QRELS = {f"q{i}": {f"d{i:02d}": 2, f"d{i + 4:02d}": 1, f"d{i + 1:02d}": 0} for i in range(8)}
DEPTH, BUDGET = 20, 3


def search(query, k):
    """Chunks in the order of their distance from the query's number (ties by id): a query's own chunk first."""
    n = int(query.split()[1]) if query.startswith("question") else 7
    order = sorted(CORPUS, key=lambda d: ((int(d[1:]) - n) % 30, d))
    return [Hit(d, float(30 - j), CORPUS[d]) for j, d in enumerate(order)]


def keep(query, hits):
    return [h.doc_id for h in hits]


def reverse_top(query, hits):
    """The candidate's regression: for the even queries, the first five reversed (the grade-2 chunk falls out of
    the budget); the odd ones as the baseline has them."""
    ids = [h.doc_id for h in hits]
    if query.startswith("question") and int(query.split()[1]) % 2 == 0:
        return ids[:5][::-1] + ids[5:]
    return ids


REGRESSED = ["q0", "q2", "q4", "q6"]


def _pipeline_folder(folder: Path, rerank) -> tuple[Report, object]:
    pipeline = Pipeline(
        functions.retriever(search, name="keyword"),
        functions.reranker(rerank, name="rerank"),
        depth=DEPTH,
        budget=BUDGET,
    )
    result = pipeline.run(QUERIES, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a small hand-made set: the judged-share and capped warnings are expected
        report = evaluate(QRELS, {"kw": result})
    report.save_folder(folder, qrels=QRELS, runs={"kw": result}, plots=False)
    return report, result


def folder_side(folder: Path):
    return side_from_folder(Report.load_folder(folder), folder)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    base, base_result = _pipeline_folder(root / "baseline", keep)
    cand, _ = _pipeline_folder(root / "candidate", reverse_top)
    one = base.to_html(root / "one.html", results=base_result, qrels=QRELS)
    both = write_html(root / "diff.html", [folder_side(root / "baseline"), folder_side(root / "candidate")])
    return {
        "root": root,
        "base": base,
        "cand": cand,
        "base_result": base_result,
        "one": one,
        "diff": both,
    }


class Rows(HTMLParser):
    """The page's ``<tr>`` rows: their attributes and the text of each cell."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[dict[str, str], list[str]]] = []
        self.table: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.table.append(dict(attrs).get("class", ""))
        elif tag == "tr":
            self.rows.append(({**dict(attrs), "table": self.table[-1] if self.table else ""}, []))
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1][1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table" and self.table:
            self.table.pop()

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def rows_of(page: str, table: str) -> list[tuple[dict[str, str], list[str]]]:
    parser = Rows()
    parser.feed(page)
    return [(a, cells) for a, cells in parser.rows if a["table"] == table and ("data-metric" in a or "data-query" in a)]


def data_of(page: str) -> dict:
    """The Queries view's listing (ids, questions, values, fate filters), with its drill-down shards (``shards``)."""
    found = re.search(r'<script type="application/json" id="rag-data">(.*?)</script>', page, re.DOTALL)
    assert found
    data = json.loads(found.group(1))
    blocks = re.findall(
        r'<script type="application/json" class="rag-shard" data-shard="(\d+)">(.*?)</script>', page, re.DOTALL
    )
    assert [int(k) for k, _ in blocks] == list(range(len(blocks)))
    data["shards"] = [json.loads(b) for _, b in blocks]
    return data


def drill_of(data: dict, query: str) -> dict:
    """One query's drill-down, read back from its shard: ``ranks`` (list -> doc ids), ``grades`` ((side, doc) ->
    grade), ``fates`` ((doc, fate, cut_by) rows), its full question."""
    p = data["ids"].index(query)
    shard = data["shards"][p // data["shard"]]
    i = p - shard["first"]
    docs = shard["docs"]
    ranks = {j: [docs[d] for d in r["d"][r["o"][i] : r["o"][i + 1]]] for j, r in enumerate(shard["ranks"]) if r}
    g = shard.get("grades") or {"s": [], "q": [], "d": [], "g": []}
    grades = {(s, docs[d]): v for s, q, d, v in zip(g["s"], g["q"], g["d"], g["g"], strict=True) if q == i}
    f = shard.get("fates") or {k: [] for k in "sqrdgfc"}
    fates = [
        (docs[d], data["fates"][fate], c)
        for q, d, fate, c in zip(f["q"], f["d"], f["f"], f["c"], strict=True)
        if q == i
    ]
    return {"ranks": ranks, "grades": grades, "fates": fates, "question": shard["questions"][i] or data["text"][p]}


class Marked(HTMLParser):
    """Every element's tag, attributes and text, with the class of the table it sits in."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], list[str]]] = []
        self._open: list[int] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs), []))
        if tag not in ("meta", "input", "br", "img"):
            self._open.append(len(self.elements) - 1)

    def handle_endtag(self, tag):
        while self._open:
            if self.elements[self._open.pop()][0] == tag:
                break

    def handle_data(self, data):
        for i in self._open:
            self.elements[i][2].append(data)


def elements(page: str, tag: str, **attrs: str) -> list[tuple[dict[str, str], str]]:
    """The ``tag`` elements whose attributes hold ``attrs`` (a class among their classes), with their text."""
    parser = Marked()
    parser.feed(page)
    out = []
    wanted = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
    for t, a, text in parser.elements:
        if t != tag:
            continue
        if all((v in (a.get(k) or "").split()) if k == "class" else a.get(k) == v for k, v in wanted.items()):
            out.append((a, " ".join(" ".join(text).split())))
    return out


def test_the_summary_numbers_are_the_reports(made):
    page = made["one"].read_text()
    summary = made["base"].summary
    shown = {(a["data-run"], a["data-stage"], a["data-metric"]): (a, cells) for a, cells in rows_of(page, "summary")}
    assert len(shown) == len(summary) > 10
    for r in summary.to_dict("records"):
        attrs, cells = shown[(r["run"], r["stage"], r["metric"])]
        if np.isnan(r["mean"]):
            assert cells[3] == "n/a"
            continue
        assert float(attrs["data-mean"]) == r["mean"]  # every digit
        assert cells[3] == f"{r['mean']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        assert [int(c) for c in cells[4:7]] == [r["n"], r["n_nan"], r["n_failed"]]
    # recall@depth of the first stage: every query has both relevant chunks within 20 of its number
    assert shown[("kw", "keyword", "recall@depth")][1][3].startswith("1.000 ")
    # the flat table is one click away (in a <details>), with its CSV built from every digit of the summary
    assert re.search(r'<details class="flat">\s*<summary>every row, flat', page)
    csv = json.loads(re.search(r'id="rag-summaries">(.*?)</script>', page, re.DOTALL).group(1))[0]
    assert csv["columns"] == list(summary.columns)
    assert [r[csv["columns"].index("mean")] for r in csv["rows"]][:3] == summary["mean"].tolist()[:3]
    # latency and the card are there too
    assert "p95 s/query" in page and "content hashes: qrels sha256:" in page


def test_the_pivot_has_the_stages_as_columns_in_pipeline_order(made):
    page = made["one"].read_text()
    summary = made["base"].summary.set_index(["stage", "metric"])
    assert [a["data-run"] for a, _ in elements(page, "table", class_="pivot")] == ["kw"]
    columns = re.search(r'<table class="pivot".*?<thead><tr>(.*?)</tr></thead>', page, re.DOTALL).group(1)
    assert re.findall(r"<th[^>]*>([^<]*)</th>", columns) == ["metric", "keyword", "rerank"]
    table = page[page.index('<table class="pivot"') : page.index("</table>", page.index('<table class="pivot"'))]
    cells = {}
    for metric, row in re.findall(r'<tr data-metric="([^"]*)">(.*?)</tr>', table, re.DOTALL):
        for stage, mean, text in re.findall(r'data-stage="([^"]*)" data-mean="([^"]*)">([^<]*)<small>', row):
            cells[(stage, metric)] = (mean, text.strip())
    assert list(dict.fromkeys(m for _, m in cells))[:2] == ["recall@depth", "recall@budget"]  # report's order
    for (stage, metric), r in summary.iterrows():  # every cell the summary's row: every digit, interval, n
        mean, text = cells[(stage, metric)]
        if np.isnan(r["mean"]):
            assert mean == "" and text == "n/a"
            continue
        assert float(mean) == r["mean"] and text == f"{r['mean']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
    assert len(cells) == len(summary)


def test_the_first_screen_shows_the_funnel_of_funnel(made):
    page = made["one"].read_text()
    f = funnel(made["base"])
    steps = [
        (int(a["data-order"]), int(a["data-items"]), int(a["data-lost"]), text)
        for a, text in elements(page, "tr", class_="step")
    ]
    assert [s[:3] for s in steps] == [(r.order, r.items, r.lost) for r in f.steps.itertuples()]
    assert [(s[0], s[1]) for s in steps] == [(0, 16), (1, 16), (2, 8), (3, 8)]  # by hand: 2 relevant a query
    assert steps[2][3].startswith("ranked within budget(3) by 'rerank' 8 (50%)")
    losses = [
        (int(a["data-order"]), a["data-fate"], int(a["data-items"]), text)
        for a, text in elements(page, "li", class_="loss")
    ]
    assert losses == [(r.order, r.fate, r.items, f"−{r.items} {r.cause}") for r in f.losses.itertuples()]
    assert losses == [(2, "reranked_out", 8, "−8 cut by 'rerank'")]  # each query's grade-1 chunk, 5th after rerank
    heads = {
        (a["data-stage"], a["data-metric"]): (float(a["data-mean"]), text)
        for a, text in elements(page, "tr", class_="headline")
    }
    for r in f.headlines.itertuples():
        mean, text = heads[(r.stage, r.metric)]
        assert mean == r.mean and text.endswith(f"{r.mean:.3f} [{r.low:.3f}, {r.high:.3f}] {r.n}")
    assert list(heads) == [
        ("keyword", "recall@depth"),
        ("rerank", "ndcg@budget"),
        ("rerank", "mrr@budget"),
        ("rerank", "recall@budget"),
    ]
    # the funnel comes first: before the pivot, the flat table and the plots
    assert (
        page.index('id="funnel"') < page.index('class="pivot"') < page.index('class="flat"') < page.index("plot-recall")
    )
    assert 'id="verdict"' not in page  # one report: nothing to compare


def test_the_file_is_self_contained(made):
    for path in (made["one"], made["diff"]):
        page = path.read_text()
        assert "http://" not in page and "https://" not in page and "//cdn" not in page
        assert not re.search(r"""\b(src|href)\s*=\s*["'](?!#)""", page)  # only in-page references (#id)
        assert "<link" not in page and "@import" not in page and not re.search(r"url\((?!#)", page)
        assert page.count("<svg") == 3  # recall@k, the loss chart, the scatter: inline
        # the listing, its one drill-down shard, the summaries (CSV), the colours, the page's own script
        assert page.count("<script") == 5 and len(data_of(page)["shards"]) == 1
        assert not path.with_name(path.name + ".drill").exists()  # small: nothing beside the page


def test_chunk_and_query_text_is_escaped(made):
    page = made["one"].read_text()
    assert "alert('chunk')" not in page.replace("\\u0027", "'").split("rag-data")[0]
    assert "<script>alert" not in page and "</script><script>alert" not in page
    data = data_of(page)
    shard = data["shards"][0]
    texts = dict(zip(shard["docs"], shard["texts"], strict=True))
    assert texts["d05"] == SCRIPT_CHUNK  # stays the text it was, for textContent
    assert data["text"][data["ids"].index("q7")] == QUERIES["q7"] == drill_of(data, "q7")["question"]
    # each chunk id (and its text) once a shard
    assert len(shard["docs"]) == len(set(shard["docs"]))


def test_the_drill_down_is_cut_to_its_depth(made, tmp_path):
    data = data_of(made["one"].read_text())
    assert data["depth"] == BUDGET + DRILL_EXTRA == 13
    lengths = {len(r) for q in data["ids"] for r in drill_of(data, q)["ranks"].values()}
    assert lengths == {13}  # the stages returned 20 each
    assert [lst["label"] for lst in data["lists"]] == ["keyword", "rerank"]
    q0 = drill_of(data, "q0")
    assert q0["ranks"][0][:3] == ["d00", "d01", "d02"]
    assert q0["grades"][(0, "d01")] == 0  # judged 0 is a grade, not unjudged
    assert {(d, fate) for d, fate, _ in q0["fates"]} == {("d00", "delivered"), ("d04", "reranked_out")}
    assert ("d04", "reranked_out", "rerank") in q0["fates"]  # named by what cut it
    # the list's values: the report's, in thousandths (the 3 decimals shown)
    ndcg = made["base"].values("kw", "ndcg@budget", "rerank")
    assert data["values"][1] == [round(ndcg[q] * 1000) for q in data["ids"]]
    # a smaller depth keeps fewer hits and so fewer chunks
    side = folder_side(made["root"] / "baseline")
    small = data_of(render_html([side], drill_depth=2, plots=False))
    assert {len(r) for q in small["ids"] for r in drill_of(small, q)["ranks"].values()} == {2}
    assert len(small["shards"][0]["docs"]) < len(data["shards"][0]["docs"])
    # a folder holds no texts: ids only, and the page says how to add them
    assert set(small["shards"][0]["texts"]) == {None} and "--beir" in render_html([side], plots=False)


def test_the_fate_filters_name_each_loss_and_count_it(made):
    data = data_of(made["one"].read_text())
    filters = {f["label"]: f for f in data["filters"]}
    assert set(filters) == {"'rerank' cut a relevant chunk", "no relevant chunk delivered"}
    cut = filters["'rerank' cut a relevant chunk"]
    positions = np.cumsum(cut["q"]).tolist()  # delta-coded
    assert [data["ids"][p] for p in positions] == sorted(QUERIES) and cut["n"] == [1] * 8
    assert filters["no relevant chunk delivered"]["q"] == []  # every query got its grade-2 chunk


def test_the_diff_of_two_folders_lists_the_regressed_queries(made):
    page = made["diff"].read_text()
    a, b = made["base"], made["cand"]
    change = b.values("kw", "ndcg@budget", "rerank") - a.values("kw", "ndcg@budget", "rerank")
    expected = sorted(q for q, d in change.items() if d < 0)
    assert expected == REGRESSED  # reversing the top five lowers nDCG@3; the odd queries did not change
    listed = [attrs["data-query"] for attrs, _ in rows_of(page, "regressed-queries")]
    assert sorted(listed) == expected
    first = rows_of(page, "regressed-queries")[0][1]
    assert first[4] == f"{change.min():+.3f}"
    stages = {(a_["data-stage"], a_["data-metric"]): cells for a_, cells in rows_of(page, "diff-stages")}
    ndcg = stages[("rerank", "ndcg@budget")]
    assert (
        ndcg[3] == f"{a.mean('kw', 'ndcg@budget', 'rerank'):.3f}"
        and ndcg[4] == f"{b.mean('kw', 'ndcg@budget', 'rerank'):.3f}"
    )
    assert ndcg[6:9] == ["0", "4", "4"]  # no win, four ties, four losses
    assert ndcg[5].startswith(f"{change.mean():+.3f} [")
    assert stages[("keyword", "recall@depth")][6:9] == ["0", "8", "0"]  # the first stage did not change
    assert rows_of(page, "improved-queries") == []


def test_the_verdict_says_which_differences_are_significant_after_correction(made):
    from rag_eval.statistics.paired import correct, t_test

    def blind(query, k):
        """search, without each query's grade-1 chunk: recall@depth falls by 0.5 on every query"""
        n = int(query.split()[1]) if query.startswith("question") else 7
        return [h for h in search(query, k) if h.doc_id != f"d{n + 4:02d}"]

    stages = (functions.retriever(blind, name="keyword"), functions.reranker(keep, name="rerank"))
    worse = Pipeline(*stages, depth=DEPTH, budget=BUDGET).run(QUERIES, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate(QRELS, {"kw": worse})
    sides = [
        side_of(made["base"], results=made["base_result"], qrels=QRELS, name="main"),
        side_of(report, results=worse, qrels=QRELS, name="branch"),
    ]
    page = render_html(sides, plots=False)
    # the statistics, row by row: the paired t-test, Holm's correction over every row with a p-value
    a, b = made["base"], report
    rows = rows_of(page, "diff-stages")
    keys = [(attrs["data-stage"], attrs["data-metric"]) for attrs, _ in rows]
    ps = []
    for stage, metric in keys:
        x, y = a.values("kw", metric, stage), b.values("kw", metric, stage)
        both = x.to_frame("a").join(y.to_frame("b")).dropna()
        ps.append(t_test(both["b"].to_numpy(), both["a"].to_numpy()) if direction_of(metric) != "none" else np.nan)
    adjusted = correct(np.array(ps), "holm")
    expected = {k for k, p in zip(keys, adjusted, strict=True) if p < 0.05}
    # by hand: every query loses its grade-1 chunk at the first stage (recall@depth 1 -> 0.5, never retrieved 0 ->
    # 0.5: worse), so the reranker no longer cuts it (reranked out 0.5 -> 0: better), and the best order of what it
    # was given holds less (cand_ndcg up)
    assert expected == {
        ("keyword", "recall@depth"),
        ("rerank", "loss.never_retrieved"),
        ("rerank", "loss.reranked_out"),
        ("rerank", "cand_ndcg@budget"),
    }
    verdict = elements(page, "section", id="verdict")
    assert len(verdict) == 1
    named = {
        (r["data-stage"], r["data-metric"]): (r["class"], text) for r, text in elements(page, "li") if "data-p" in r
    }
    assert set(named) == expected
    for (stage, metric), (tone, text) in named.items():
        change = (b.values("kw", metric, stage) - a.values("kw", metric, stage)).mean()
        way = "better" if (change > 0) == (direction_of(metric) == "higher") else "worse"
        assert tone == way and text.startswith(f"{way} {metric} of kw / {stage}")  # in words, not colour alone
    assert named[("keyword", "recall@depth")][0] == named[("rerank", "loss.never_retrieved")][0] == "worse"
    assert named[("rerank", "loss.reranked_out")][0] == "better"  # lower is better: a fall
    assert "4 of" in verdict[0][1] and "differences are significant" in verdict[0][1]
    assert "2 better 2 worse" in verdict[0][1]
    tested = int(np.sum(~np.isnan(adjusted)))
    assert (
        verdict[0][0]["data-tests"] == str(tested)
        and f"Holm's correction over the {tested} differences" in verdict[0][1]
    )
    # the Diff tab: the same verdict in each row, with its corrected p-value
    for (attrs, cells), key, p in zip(rows, keys, adjusted, strict=True):
        head = ["run", "stage", "metric", "main", "branch", "diff", "wins", "ties", "losses", "verdict", "p"]
        row = dict(zip(head, cells, strict=False))
        assert (row["verdict"] in ("better", "worse")) == (key in expected)
        assert row["p"] == ("n/a" if np.isnan(p) else "< 0.0001" if p < 1e-4 else f"{p:.2g}")
        if key not in expected and not np.isnan(p):
            assert row["verdict"] == "no significant change" and attrs["class"] == "neutral"
    # the verdict is in the page before the funnel, both before everything else
    assert page.index('id="verdict"') < page.index('id="funnel"') < page.index('class="pivot"')


def test_a_pipeline_in_one_folder_only_is_named_in_the_verdict(made):
    plain = Pipeline(functions.retriever(search, name="keyword"), depth=DEPTH, budget=BUDGET).run(
        QUERIES, progress=False
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate(QRELS, {"kw": made["base_result"], "alone": plain})
    sides = [
        side_of(made["base"], results=made["base_result"], qrels=QRELS, name="main"),
        side_of(report, results={"kw": made["base_result"], "alone": plain}, qrels=QRELS, name="branch"),
    ]
    page = render_html(sides, plots=False)
    notes = [text for a, text in elements(page, "p", class_="verdict-note")]
    assert "pipeline 'alone' is in branch only: not compared" in notes
    # both sides' funnels: the lone pipeline's too, named by its side
    blocks = [(a["data-side"], a["data-pipeline"]) for a, _ in elements(page, "div", class_="funnel-block")]
    assert blocks == [("0", "kw"), ("1", "kw"), ("1", "alone")]


def test_plots_read_well(made):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rag_eval.renderers.plots import card_panels, figures

    side = folder_side(made["root"] / "baseline")
    fig = figures(card_panels(side.name, side.report))["loss"]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    label = ax.xaxis.label.get_window_extent(renderer)
    assert legend.y1 < label.y0 < ax.get_window_extent(renderer).y0  # under the axes and the x label: no bar covered
    colours = {t.get_label(): matplotlib.colors.to_hex(t.patches[0].get_facecolor()) for t in ax.containers}
    assert colours["delivered"] == FATE_COLOURS["delivered"] == "#009e73"  # Okabe-Ito's bluish green
    r, g, b = matplotlib.colors.to_rgb(colours["delivered"])
    assert g > r and g > b  # green
    for fate in ("never retrieved", "below depth", "reranked out by rerank"):
        r, g, b = matplotlib.colors.to_rgb(colours[fate])
        assert r > g and r > b  # warm: none of the losses green or blue
    plt.close(fig)
    # the scatter: jittered, with counts
    page = render_html([side])
    assert page.count("<svg") == 3 and 'id="plot-scatter"' in page
    assert "n=8" in page  # all eight queries at recall@depth 1


def test_cli_report_and_bad_input(made, tmp_path):
    command = [sys.executable, "-m", "rag_eval.cli", "report"]
    out = tmp_path / "r.html"
    done = subprocess.run(
        [
            *command,
            str(made["root"] / "baseline"),
            str(made["root"] / "candidate"),
            "-o",
            str(out),
            "--drill-depth",
            "4",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert data_of(out.read_text())["depth"] == 4 and 'id="view-diff"' in out.read_text()
    for bad, says in (
        ([str(tmp_path / "nowhere"), "-o", str(out)], "no such result folder"),
        ([str(made["root"] / "baseline"), "-o", str(out), "--drill-depth", "0"], "--drill-depth"),
        ([str(made["root"] / "one.html"), "-o", str(out)], "result folder"),
    ):
        done = subprocess.run([*command, *bad], capture_output=True, text=True, check=False)
        assert done.returncode == 2 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_missing_jinja2_names_the_extra(made, monkeypatch):
    monkeypatch.setitem(sys.modules, "jinja2", None)
    side = folder_side(made["root"] / "baseline")
    with pytest.raises(ImportError, match=re.escape("pip install 'rag-eval-stages[html]'")):
        render_html([side], plots=False)


@pytest.mark.slow
def test_the_scifact_page_stays_under_10_mb(tmp_path):
    """SciFact's 300 test queries, bm25 and bm25 >> a function reranker (three stage rankings), depth 100, budget
    10: the page with every shown chunk's text stays under 10 MB (5.45 MB measured on 2026-12-02)."""
    from .conftest import DATASETS, need_shared

    scifact = need_shared(DATASETS / "scifact")
    plug = tmp_path / "plug"
    plug.mkdir()
    (plug / "scifact_pipe.py").write_text(
        "from rag_eval import Pipeline\n"
        "from rag_eval.adapters import functions\n"
        "from rag_eval.builtin.pipelines import Parts\n\n\n"
        "def bm25_shortest(collection, depth=100, budget=10, cache_dir=None):\n"
        "    def shortest(query, hits):\n"
        "        ids = [h.doc_id for h in hits]\n"
        "        return sorted(ids[:20], key=lambda d: (len(collection.corpus[d].text), d)) + ids[20:]\n\n"
        "    parts = Parts(collection, cache_dir)\n"
        "    reranker = functions.reranker(shortest, name='shortest')\n"
        "    return Pipeline(parts.bm25(depth), reranker, depth=depth, budget=budget)\n"
    )
    cli = [sys.executable, "-m", "rag_eval.cli"]
    folder, out = tmp_path / "scifact", tmp_path / "scifact.html"
    bench = [*cli, "bench", "--beir", str(scifact), "--pipeline", "bm25", "--pipeline", "scifact_pipe:bm25_shortest"]
    env = {**os.environ, "PYTHONPATH": str(plug)}
    done = subprocess.run(
        [*bench, "--budget", "10", "--no-plots", "-o", str(folder)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    done = subprocess.run(
        [*cli, "report", str(folder), "-o", str(out), "--beir", str(scifact)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    size = out.stat().st_size
    assert 1_000_000 < size < 10_000_000
    data = data_of(out.read_text(encoding="utf-8"))
    assert data["depth"] == 20 and len(data["ids"]) == 300 and len(data["lists"]) == 3
    assert data["drill"]["inline"] and len(data["shards"]) == 2  # 256 queries a shard, all in the page
    for shard in data["shards"]:
        assert len(shard["docs"]) == len(set(shard["docs"])) and None not in shard["texts"]


def _bench():
    """benchmarks/bench_html_report.py (the synthetic report of N queries), loaded by its path."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_html_report.py"
    spec = importlib.util.spec_from_file_location("bench_html_report", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_page_of_100000_queries_stays_under_10_mb(tmp_path):
    """100,000 queries, two stages ranking 20 chunks each, built with NumPy: the page (the list, every query's
    values and fates) stays under 10 MB; the drill-down goes beside it, one small script a shard."""
    from rag_eval.renderers.html_queries import SHARD_QUERIES

    bench = _bench()
    n = 100_000
    report, rankings, qrels, questions = bench.synthetic(n)
    side = side_of(report, qrels=qrels)
    side.runs, side.queries = rankings, questions
    out = write_html(tmp_path / "big.html", [side], plots=False)
    assert out.stat().st_size < 10_000_000
    beside = sorted((tmp_path / "big.html.drill").glob("shard-*.js"))
    assert len(beside) == -(-n // SHARD_QUERIES) == 391
    page = out.read_text(encoding="utf-8")
    data = data_of(page)
    assert (
        len(data["ids"]) == n
        and data["shards"] == []
        and data["drill"] == {"inline": False, "folder": "big.html.drill", "count": 391}
    )
    assert data["text"][5] == questions["q000005"]
    # a shard read back: the first query's two rankings, to the drill depth (20: each stage's whole ranking)
    script = beside[0].read_text(encoding="utf-8")
    assert script.startswith("window.ragEvalShard(0,") and script.endswith(");\n")
    shard = json.loads(script[len("window.ragEvalShard(0,") : -3])
    data["shards"] = [shard]
    first = drill_of(data, "q000000")
    for j, (_, stage) in enumerate(rankings):
        assert first["ranks"][j] == [d for d, _ in rankings[(report.runs[0], stage)].ranking("q000000")]
    fates = report.loss_items[report.loss_items["query_id"] == "q000000"]
    assert sorted((d, f) for d, f, _ in first["fates"]) == sorted(zip(fates["doc_id"], fates["fate"], strict=True))
    # the funnel on the first screen is funnel()'s
    f = funnel(report)
    steps = [int(a["data-items"]) for a, _ in elements(page, "tr", class_="step")]
    assert steps == f.steps["items"].tolist() and steps[0] == 2 * n


# ----- in the browser ------------------------------------------------------------------------------------------

ARTEFACTS = Path(__file__).resolve().parent.parent / "build" / "artefacts" / "html-report"


@pytest.fixture(scope="module")
def browser():
    from .chromium import chromium

    with chromium() as launched:
        yield launched


def _open_offline(browser, path: Path):
    """A page on ``path`` with the network off: every request but the file's own is recorded and aborted."""
    context = browser.new_context(offline=True, viewport={"width": 1400, "height": 1000})
    url = path.resolve().as_uri()
    requests: list[str] = []
    dialogs: list[str] = []

    def route(r):
        if r.request.url == url:
            r.continue_()
        else:
            requests.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("request", lambda req: req.url != url and requests.append(req.url))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_load_state("load")
    return context, page, requests, dialogs, errors


@pytest.mark.browser
def test_the_page_offline_drill_down(browser, made):
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    context, page, requests, dialogs, errors = _open_offline(browser, made["one"])
    try:
        assert page.locator("#view-summary").is_visible()
        assert page.locator("#plot-recall svg").count() == 1
        page.screenshot(path=str(ARTEFACTS / "summary.png"), full_page=True)
        assert page.locator("#funnel").is_visible()
        page.click("nav button[data-view=queries]")
        rows = page.locator("#query-table tbody tr[data-pos]")
        assert rows.count() == len(QUERIES)
        page.fill("#query-search", "topic 1")
        assert rows.count() == 2  # q1 and q5
        page.fill("#query-search", "")
        page.click("#query-table td.qid button:text-is('q5')")
        detail = page.locator("#query-detail")
        assert detail.get_attribute("data-query") == "q5"
        assert detail.locator(".stage").count() == 2
        assert detail.locator(".stage[data-list='0'] li.hit").count() == BUDGET + DRILL_EXTRA
        first = detail.locator(".stage[data-list='0'] li.hit").first
        assert first.locator(".doc").inner_text() == "d05"
        assert first.locator(".text").inner_text() == SCRIPT_CHUNK  # shown as text, not run
        assert first.locator(".grade").inner_text() == "grade 2"
        assert detail.locator(".stage[data-list='0'] li.hit").nth(3).locator(".grade").inner_text() == "unjudged"
        assert "reranked out" in detail.locator("table.fates").inner_text()
        page.screenshot(path=str(ARTEFACTS / "queries.png"), full_page=True)
        # the id column stays in view with a query open, left of the list
        cell = page.locator("#query-table tr.open td.qid").bounding_box()
        box = page.locator("#queries-list").bounding_box()
        assert box["x"] <= cell["x"] and cell["x"] + cell["width"] <= box["x"] + box["width"]
        # sorting by a stage's value: the lowest first
        page.locator("#query-table th.value button").last.click()
        values = [float(v) for v in page.locator("#query-table tbody tr[data-pos] td:nth-child(3)").all_inner_texts()]
        assert values == sorted(values) and len(values) == len(QUERIES)
        # the fate filter: queries where the reranker cut a relevant chunk (all eight here)
        page.select_option("#query-filter", label="queries where 'rerank' cut a relevant chunk (8)")
        assert rows.count() == len(QUERIES)
        page.click("nav button[data-view=card]")
        assert "conventions" in page.locator("#view-card").inner_text()
        page.screenshot(path=str(ARTEFACTS / "card.png"), full_page=True)
        assert requests == [] and dialogs == [] and errors == []
    finally:
        context.close()
    assert all((ARTEFACTS / n).stat().st_size > 1000 for n in ("summary.png", "queries.png", "card.png"))


@pytest.mark.browser
def test_the_page_offline_diff(browser, made):
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    context, page, requests, dialogs, errors = _open_offline(browser, made["diff"])
    try:
        page.click("nav button[data-view=diff]")
        rows = page.locator("table.regressed-queries tr.regressed")
        assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.query)")) == REGRESSED
        page.screenshot(path=str(ARTEFACTS / "diff.png"), full_page=True)
        rows.first.click()  # a regressed query opens in the drill-down, both folders' stages side by side
        assert page.locator("#view-queries").is_visible()
        assert page.locator("#query-detail .stage").count() == 4
        page.screenshot(path=str(ARTEFACTS / "diff-query.png"), full_page=True)
        assert requests == [] and dialogs == [] and errors == []
    finally:
        context.close()
    assert (ARTEFACTS / "diff.png").stat().st_size > 1000
