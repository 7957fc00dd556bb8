"""Issue 27, class 10: every name a user gives is escaped for the medium it lands in (rag_eval/_escape.py). One
hostile set of names goes through every output: Markdown (report.md, the gate's, a Report's), JUnit XML, CSV,
matplotlib plots, the HTML report and its diff (in Chromium too, marker ``browser``) and the terminal."""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
import warnings
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
import xmlschema

import rag_eval
from rag_eval import Hit, Pipeline, gate
from rag_eval._escape import (
    _UNSEEN,
    markdown_cell,
    markdown_code,
    plot_text,
    spreadsheet_cell,
    visible,
    xml_text,
)
from rag_eval.adapters import functions
from rag_eval.cli import main
from rag_eval.renderers import format_report
from rag_eval.renderers.html_report import render_html, side_of

from .conftest import ROOT
from .test_html_report import _open_offline, browser, data_of, drill_of  # noqa: F401 - the Chromium fixture, shared

# the one hostile set: names a JavaScript object inherits, names matplotlib reads as markup or hides, Markdown's
# block and table syntax, HTML, entities, control characters and escape sequences, a tab, a spreadsheet formula,
# quotes, emoji, right-to-left text with a bidirectional override, and a 500-character name
HOSTILE = (
    "constructor",
    "__proto__",
    "toString",
    "_dense",
    "cost $5 or $6",
    "a|b",
    "x\r# injected",
    "y\n## head",
    "<script>alert(1)</script>",
    "&amp;",
    "\x00nul",
    "\x1b[31mred",
    "tab\there",
    "=1+1",
    '"quoted"',
    "\U0001f642 \u05e9\u05dc\u05d5\u05dd \u202eevil",
    "L" * 500,
)
# a TREC file (a result folder's runs and qrels) separates its fields by whitespace: these are the names it can hold
WRITABLE = tuple(h for h in HOSTILE if not any(c.isspace() for c in h))
XSD = ROOT / "tests" / "data" / "junit" / "junit-10.xsd"


def shown(name: str) -> str:
    """What a reader sees of ``name`` in a line of Markdown: line breaks as spaces, control characters visible."""
    return visible(re.sub(r"\r\n|\r|\n", " ", name))


# ----- the escapers, name by name -------------------------------------------------------------------------------


def test_visible_leaves_no_control_character_and_keeps_the_rest():
    for name in (*HOSTILE, "\ud800lone", "\u2028sep\x7f\x85"):
        text = visible(name)
        assert _UNSEEN.search(text) is None
        assert [c for c in text if c not in "\\xuntr0123456789abcdef"] == [
            c for c in name if not _UNSEEN.match(c) and c not in "\\xuntr0123456789abcdef"
        ]
    assert visible("\x1b[31mred") == "\\x1b[31mred" and visible("x\r\ny") == "x\\r\\ny"
    assert visible("\u202eevil \ud800") == "\\u202eevil \\ud800" and visible("a\nb\tc", keep="\n\t") == "a\nb\tc"
    assert visible("\U0001f642 \u05e9\u05dc\u05d5\u05dd") == "\U0001f642 \u05e9\u05dc\u05d5\u05dd"


def _markdown():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")


def _inline_text(token, allowed=()) -> str:
    """The text a reader sees of an inline token; fails on any markup in it (HTML, emphasis, code, links) but the
    ``allowed`` (the writer's own)."""
    kinds = {child.type for child in token.children}
    assert kinds <= {"text", "softbreak", *allowed}, kinds
    return "".join(child.content for child in token.children)


def test_a_markdown_cell_renders_as_the_name_and_nothing_else():
    md = _markdown()
    for name in (*HOSTILE, "# h", "1. one", "- item", "---", "**b** _i_ `c` [l](x) ~~s~~", "a\\$b"):
        cell = markdown_cell(name)
        assert "\r" not in cell and "\n" not in cell
        tokens = md.parse(f"| name | n |\n|---|---|\n| {cell} | 1 |\n")
        rows = [t for t in tokens if t.type == "tr_open"]
        assert len(rows) == 2, name  # the header and one row: nothing ended the row early
        cells = [_inline_text(t) for t in tokens if t.type == "inline"]
        assert cells == ["name", "n", shown(name), "1"]
        # as a line of its own (a heading's or a paragraph's text): one paragraph, no heading, list or rule
        tokens = md.parse(cell + "\n")
        assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"], name
        assert _inline_text(tokens[1]) == shown(name)


def test_a_markdown_code_block_holds_any_text():
    md = _markdown()
    for text in ("card ```\n```\nafter", "````x````", "plain"):
        tokens = md.parse(markdown_code(text) + "after the block\n")
        assert tokens[0].type == "fence" and tokens[0].content == text + "\n"
        assert [t.type for t in tokens[1:]] == ["paragraph_open", "inline", "paragraph_close"]


def test_xml_text_reads_back_as_written():
    for name in (*HOSTILE, "\ud800lone", "\ufffe\uffff"):
        element = ET.Element("case", {"name": xml_text(name)})
        element.text = xml_text(name)
        back = ET.fromstring(ET.tostring(element, encoding="unicode"))
        assert back.get("name") == xml_text(name) and back.text == xml_text(name)
    assert xml_text("\x00nul\x0b\r") == "\\x00nul\\x0b\\r" and xml_text("tab\there\n") == "tab\there\n"


def test_a_spreadsheet_cell_never_starts_a_formula():
    for name in (*HOSTILE, "+1", "-1", "@SUM(A1)", "\tx", "\rx"):
        cell = spreadsheet_cell(name)
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r"))
        assert cell in (name, "'" + name)
    assert spreadsheet_cell("=1+1") == "'=1+1" and spreadsheet_cell("a=1") == "a=1"


# ----- reports in memory: gate Markdown, JUnit, terminal, CSV --------------------------------------------------


def _report(hits: dict[str, int], run: str):
    qrels = {q: {f"r{i}": 1 for i in range(10)} for q in hits}
    ranking = {q: [f"r{i}" for i in range(j)] + [f"n{i}" for i in range(10 - j)] for q, j in hits.items()}
    return rag_eval.evaluate(
        rag_eval.Qrels.from_dict(qrels), {run: rag_eval.Run.from_ranking(ranking)}, ["P@10"], judged_threshold=0
    )


@pytest.fixture(scope="module")
def pair():
    """A baseline and a candidate over the hostile query ids, the system named ``cost $5 or $6``: every query
    drops, by 0.1 to 0.4 (the larger drop first in the hostile set's order)."""
    base = _report(dict.fromkeys(HOSTILE, 5), "cost $5 or $6")
    drop = {h: 5 - (1 + i % 4) for i, h in enumerate(HOSTILE)}
    return base, _report(drop, "cost $5 or $6")


@pytest.fixture(scope="module")
def verdict(pair):
    return gate(*pair, ["P@10:0.05"], test="t")


def test_the_gate_markdown_holds_each_query_in_its_cell(verdict):
    (rule,) = verdict.rules
    text = verdict.to_markdown(worst=len(HOSTILE))
    tokens = _markdown().parse(text)
    headings = [_inline_text(tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == ["Retrieval gate: REGRESSION (exit 1)", "P@10 max drop 0.05: regression"]  # none injected
    worse = [shown(w.query_id) for w in rule.worse]
    assert sorted(w.query_id for w in rule.worse) == sorted(HOSTILE)
    cells = [_inline_text(t, ("strong_open", "strong_close")) for t in tokens if t.type == "inline"]
    at = cells.index("query")
    rows = [cells[i : i + 4] for i in range(at + 4, at + 4 + 4 * len(HOSTILE), 4)]
    assert [r[0] for r in rows] == worse
    assert "cost $5 or $6" in cells  # the system, its dollars not math


def test_the_gate_junit_is_valid_xml_naming_each_query(verdict, tmp_path):
    text = verdict.to_junit(worst=len(HOSTILE))
    root = ET.fromstring(text)
    xmlschema.XMLSchema(str(XSD)).validate(str(_write(tmp_path / "junit.xml", text)))
    (case,) = root.iter("testcase")
    assert case.get("name") == "P@10 max drop 0.05 (cost $5 or $6)"
    body = case.find("failure").text
    for name in HOSTILE:
        assert xml_text(name) in body
    assert "\x00" not in text and "\x1b" not in text


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


def test_the_gate_on_a_terminal_shows_escape_sequences_escaped(pair, tmp_path, capsys):
    base, cand = tmp_path / "base.parquet", tmp_path / "cand.parquet"
    pair[0].save(base)
    pair[1].save(cand)
    junit, markdown = tmp_path / "gate.xml", tmp_path / "gate.md"
    code = main(
        ["gate", str(base), str(cand), "--rule", "P@10:0.05", "--test", "t"]
        + ["--junit", str(junit), "--markdown", str(markdown)]
    )
    out = capsys.readouterr()
    assert code == 1
    assert _UNSEEN.sub("", out.out.replace("\n", "")) == out.out.replace("\n", "")  # no raw control character
    assert _UNSEEN.search(out.err.replace("\n", "")) is None
    assert "\\x1b[31mred" in out.out and "\\x00nul" in out.out
    ET.parse(junit)
    assert "\\x1b\\[31mred" in markdown.read_text(encoding="utf-8")


def test_evaluate_prints_names_escaped_and_csv_as_data(tmp_path, capsys):
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.trec"
    qrels.write_text("".join(f"{q} 0 d1 1\n" for q in WRITABLE), encoding="utf-8", newline="")
    run.write_text("".join(f"{q} Q0 d1 1 1.0 r\n" for q in WRITABLE), encoding="utf-8", newline="")
    argv = ["evaluate", str(qrels), str(run), "-m", "P@1", "--per-query", "--judged-threshold", "0"]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert _UNSEEN.search(out.out.replace("\n", "")) is None and _UNSEEN.search(out.err.replace("\n", "")) is None
    assert "\\x1b[31mred" in out.out and "\\x00nul" in out.out
    assert main([*argv, "--format", "csv", "--no-card"]) == 0  # CSV is data: every id as it is, read back
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out, newline="")))
    assert {r["query_id"] for r in rows} == set(WRITABLE)


def test_csv_reads_back_every_name(pair):
    text = format_report(pair[0], "csv", per_query=True)
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert {r["query_id"] for r in rows} == set(HOSTILE)
    assert {r["run"] for r in rows} == {"cost $5 or $6"}


def test_the_pool_spreadsheet_view_quotes_and_defuses_every_name(tmp_path):
    run = rag_eval.Run.from_ranking({q: ["d1", "d2"] for q in WRITABLE}, name="cost$5or$6")  # a pool is TREC-safe
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no corpus, no queries: the join warnings are expected
        pooled = rag_eval.pool([run], depth=2, texts={"d1": "=HYPERLINK(1)\r# x", "d2": "-2"})
    pooled.to_csv(tmp_path / "pool.csv")
    with open(tmp_path / "pool.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * len(WRITABLE)  # no row split by a carriage return
    assert {r["query_id"] for r in rows} == {spreadsheet_cell(h) for h in WRITABLE}
    assert {r["text"] for r in rows} == {"'=HYPERLINK(1)\r# x", "'-2"}


# ----- pipelines: result folders (report.md, CSV, plots) and the HTML report --------------------------------------

STAGES = ("_dense", "cost $5 or $6")


def _pipeline_report(ids, rerank, run: str):
    queries = {q: f"question {i} {q}" for i, q in enumerate(ids)}
    order = {q: i for i, q in enumerate(ids)}

    def search(query, k):
        i = int(query.split()[1])
        return [Hit(f"d{(i + j) % 40:02d}", 20.0 - j, f"chunk {(i + j) % 40} <b>&</b>") for j in range(20)]

    pipeline = Pipeline(
        functions.retriever(search, name=STAGES[0]),
        functions.reranker(rerank, name=STAGES[1]),
        depth=20,
        budget=3,
    )
    result = pipeline.run(queries, progress=False)
    # every query but "constructor" has relevant chunks: its drill-down has no fates (the object-lookup bug)
    qrels = {q: {f"d{order[q] % 40:02d}": 2, f"d{(order[q] + 2) % 40:02d}": 1} for q in ids if q != "constructor"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a small hand-made set: the judged-share warnings are expected
        report = rag_eval.evaluate(qrels, {run: result})
    return report, result, qrels


def keep(query, hits):
    return [h.doc_id for h in hits]


def drop_first(query, hits):
    """The candidate: the top chunk moved below the budget for every other query."""
    ids = [h.doc_id for h in hits]
    return ids[1:4] + ids[:1] + ids[4:] if int(query.split()[1]) % 2 == 0 else ids


class Collect(HTMLParser):
    """The page's inline SVG texts, its data block and the diff rows' data-query attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.svg_text: list[str] = []
        self.data = ""
        self.rows: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "text":
            self._in = "svg"
            self.svg_text.append("")
        elif tag == "script" and attrs.get("id") == "rag-data":
            self._in = "data"
        elif tag == "tr" and "data-query" in attrs:
            self.rows.append(attrs["data-query"])

    def handle_endtag(self, tag):
        if tag in ("text", "script"):
            self._in = None

    def handle_data(self, data):
        if self._in == "svg":
            self.svg_text[-1] += data
        elif self._in == "data":
            self.data += data


@pytest.fixture(scope="module")
def page():
    base, base_result, qrels = _pipeline_report(HOSTILE, keep, "run <b>|x")
    cand, cand_result, _ = _pipeline_report(HOSTILE, drop_first, "run <b>|x")
    sides = [
        side_of(base, results=base_result, qrels=qrels, name="_baseline $1"),
        side_of(cand, results=cand_result, qrels=qrels, name="_candidate $2"),
    ]
    return render_html(sides), base


def test_the_html_report_keeps_every_name_as_data(page):
    html, _ = page
    found = Collect()
    found.feed(html)
    data = data_of(html)
    assert json.loads(found.data)["ids"] == data["ids"] and set(data["ids"]) == set(HOSTILE)
    assert {q for q in data["ids"] if drill_of(data, q)["fates"]} == set(HOSTILE) - {"constructor"}
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # the diff's rows: the attribute reads back as the id, but for what HTML itself changes (CR, NUL); the page's
    # script maps those back (asAttribute in report.html.j2)
    normal = {h.replace("\r", "\n").replace("\x00", "\ufffd"): h for h in HOSTILE}
    assert found.rows and all(r in normal or r in HOSTILE for r in found.rows)


def test_the_html_plots_show_each_label_as_text(page):
    html, _ = page
    found = Collect()
    found.feed(html)
    texts = set(found.svg_text)
    assert plot_text("_dense").replace("\\$", "$") in texts  # in the legend, behind a zero-width space
    assert "cost $5 or $6" in texts  # not math: the dollars are text
    assert "_baseline $1: run <b>|x" in {t.replace("\u200b", "") for t in texts}  # the recall plot's title


def test_a_result_folder_with_hostile_names(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig), close(fig)))
    report, result, qrels = _pipeline_report(WRITABLE, keep, "run <b>|x")
    md = report.save_folder(tmp_path / "f", qrels=qrels, runs={"run <b>|x": result}, plots=True)
    # report.md: the headings are the document's own, each stage's name in its cell
    tokens = _markdown().parse(md.read_text(encoding="utf-8"))
    headings = [_inline_text(tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == ["f", "run <b>|x", "Plots", "Metric card"]
    cells = {_inline_text(t) for before, t in itertools.pairwise(tokens) if before.type == "td_open"}
    assert set(STAGES) <= cells
    said = next(_inline_text(t) for t in tokens if t.type == "inline" and t.content.startswith("Where the"))
    assert "reranked out by cost $5 or $6" in said  # the reranker's name, its dollars escaped for GitHub's math
    assert "reranked out by cost \\$5 or \\$6" in md.read_text(encoding="utf-8")
    # CSV: the csv module reads back every id
    with open(tmp_path / "f" / "per_query.csv", newline="", encoding="utf-8") as f:
        assert {r["query_id"] for r in csv.DictReader(f)} == set(WRITABLE) - {"constructor"}  # it has no qrels
    # the plots: every stage in the legend, the dollars as text
    recall = figures[0]
    legend = [t.get_text() for t in recall.axes[0].get_legend().get_texts()]
    assert legend == [plot_text(s) for s in STAGES] + ["depth 20", "budget(3)"]
    svg = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        recall.savefig(svg, format="svg")
    assert ">cost $5 or $6<" in svg.getvalue() and ">\u200b_dense<" in svg.getvalue()


def test_a_comparison_plot_labels_every_system():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {
        name: rag_eval.Run.from_ranking({"q1": ["d1", "d2"], "q2": ["d2", "d1"]})
        for name in ("_dense", "cost $5 or $6", "\x1b[31mred")
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = rag_eval.evaluate({"q1": {"d1": 1}, "q2": {"d1": 1}}, runs, ["P@1"], judged_threshold=0)
        comparison = rag_eval.compare(report, baseline="_dense", permutations=50)
    ax = comparison.plot()
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert sorted(ticks) == sorted(plot_text(f"{s}: precision@1") for s in ("cost $5 or $6", "\x1b[31mred"))
    assert ax.get_xlabel() == plot_text("difference from _dense")
    plt.close(ax.figure)


# ----- in the browser ------------------------------------------------------------------------------------------


@pytest.mark.browser
def test_the_drill_down_opens_every_hostile_query_in_chromium(browser, page, tmp_path_factory):  # noqa: F811
    path = tmp_path_factory.mktemp("escaping") / "diff.html"
    path.write_text(page[0], encoding="utf-8")
    context, tab, requests, dialogs, errors = _open_offline(browser, path)
    try:
        for name in HOSTILE:
            tab.evaluate("id => window.ragEvalOpenQuery(id)", name)
            detail = tab.locator("#query-detail")
            assert detail.evaluate("e => e.dataset.query") == name
            has_fates = tab.locator("#query-detail table.fates").count() == 1
            assert has_fates == (name != "constructor"), name
        tab.click("nav button[data-view=diff]")  # a regressed row opens its query, whatever HTML made of its id
        rows = tab.locator("table.regressed-queries tr.regressed")
        assert rows.count() >= 4
        for i in range(rows.count()):
            rows.nth(i).click()
            opened = tab.locator("#query-detail").evaluate("e => e.dataset.query")
            assert opened in HOSTILE
            tab.click("nav button[data-view=diff]")
        assert requests == [] and dialogs == [] and errors == []
    finally:
        context.close()
