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
from rag_eval.renderers.html_report import DRILL_EXTRA, FATE_COLOURS, render_html, side_from_folder, write_html

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
    found = re.search(r'<script type="application/json" id="rag-data">(.*?)</script>', page, re.DOTALL)
    assert found
    return json.loads(found.group(1))


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
    # latency and the card are there too
    assert "p95 s/query" in page and "content hashes: qrels sha256:" in page


def test_the_file_is_self_contained(made):
    for path in (made["one"], made["diff"]):
        page = path.read_text()
        assert "http://" not in page and "https://" not in page and "//cdn" not in page
        assert not re.search(r"""\b(src|href)\s*=\s*["'](?!#)""", page)  # only in-page references (#id)
        assert "<link" not in page and "@import" not in page and not re.search(r"url\((?!#)", page)
        assert page.count("<svg") == 3  # recall@k, the loss chart, the scatter: inline
        assert page.count("<script") == 3  # the data, the colours, the page's own script; nothing from the data


def test_chunk_and_query_text_is_escaped(made):
    page = made["one"].read_text()
    assert "alert('chunk')" not in page.replace("\\u0027", "'").split("rag-data")[0]
    assert "<script>alert" not in page and "</script><script>alert" not in page
    data = data_of(page)
    texts = dict(zip(data["docs"], data["texts"], strict=True))
    assert texts["d05"] == SCRIPT_CHUNK  # stays the text it was, for textContent
    assert {q["id"]: q["text"] for q in data["queries"]}["q7"] == QUERIES["q7"]
    # each chunk id (and its text) once
    assert len(data["docs"]) == len(set(data["docs"]))


def test_the_drill_down_is_cut_to_its_depth(made, tmp_path):
    data = data_of(made["one"].read_text())
    assert data["depth"] == BUDGET + DRILL_EXTRA == 13
    lengths = {len(r) for q in data["queries"] for r in q["ranks"].values()}
    assert lengths == {13}  # the stages returned 20 each
    assert [lst["label"] for lst in data["lists"]] == ["keyword", "rerank"]
    q0 = next(q for q in data["queries"] if q["id"] == "q0")
    assert [data["docs"][i] for i in q0["ranks"]["0"][:3]] == ["d00", "d01", "d02"]
    assert data["grades"][0]["q0"][str(data["docs"].index("d01"))] == 0  # judged 0 is a grade, not unjudged
    fates = {(data["docs"][f[2]], f[4]) for f in data["fates"]["q0"]}
    assert fates == {("d00", "delivered"), ("d04", "reranked_out")}
    # a smaller depth keeps fewer hits and so fewer texts
    side = folder_side(made["root"] / "baseline")
    small = data_of(render_html([side], drill_depth=2, plots=False))
    assert {len(r) for q in small["queries"] for r in q["ranks"].values()} == {2}
    assert len(small["docs"]) < len(data["docs"])
    # a folder holds no texts: ids only, and the page says how to add them
    assert set(small["texts"]) == {None} and "--beir" in render_html([side], plots=False)


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


def test_plots_read_well(made):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rag_eval.renderers.html_report import _loss_figure

    side = folder_side(made["root"] / "baseline")
    fig = _loss_figure(plt, [side])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    label = ax.xaxis.label.get_window_extent(renderer)
    assert legend.y1 < label.y0 < ax.get_window_extent(renderer).y0  # under the axes and the x label: no bar covered
    colours = {t.get_label(): matplotlib.colors.to_hex(t.patches[0].get_facecolor()) for t in ax.containers}
    assert colours["delivered"] == FATE_COLOURS["delivered"]
    r, g, _ = matplotlib.colors.to_rgb(colours["delivered"])
    assert g > r  # green
    for fate in ("never retrieved", "below depth", "reranked out"):
        r, g, b = matplotlib.colors.to_rgb(colours[fate])
        assert r > g >= b  # warm
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
    assert data["depth"] == 20 and len(data["queries"]) == 300 and len(data["lists"]) == 3
    assert len(data["docs"]) == len(set(data["docs"])) and None not in data["texts"]


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
        page.click("nav button[data-view=queries]")
        assert page.locator("#query-table tbody tr").count() == len(QUERIES)
        page.fill("#query-search", "topic 1")
        assert page.locator("#query-table tbody tr").count() == 2  # q1 and q5
        page.fill("#query-search", "")
        page.click("#query-table tbody tr[data-query=q5]")
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
        # sorting by a stage's value: the lowest first
        page.click("#query-table th[data-key='1']")
        values = [float(v) for v in page.locator("#query-table tbody tr td:nth-child(4)").all_inner_texts()]
        assert values == sorted(values)
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
