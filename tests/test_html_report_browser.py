"""Issue 30's "done when" for the HTML report, in Debian's headless Chromium (Playwright; marker ``browser``): the
demo's page and a two-folder diff (``rag-eval report A B``; both built without a model: tests/html_pages.py), each
at 1280x800 and 1920x1080, with the network off. The funnel (and the diff's verdict) lie in the first viewport; the
page never scrolls sideways; the Queries list keeps its id column in view and uncovered with a query open; no two
texts of a plot overlap; axe-core (axe-playwright-python, its bundled axe.min.js) finds no serious or critical
violation in any view; Tab reaches every control of the tabs and of the Queries view, Enter and Space switch
tabs, and Tab and Enter open a query. Every violation axe reports, of any impact, is kept in
build/artefacts/html-report-browser/."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .chromium import chromium, missing_in_test

pytestmark = pytest.mark.browser

SIZES = {"1280": (1280, 800), "1920": (1920, 1080)}
ARTEFACTS = Path(__file__).resolve().parent.parent / "build" / "artefacts" / "html-report-browser"
TABS = "[role=tab], nav button[data-view]"
# what a keyboard user can act on: the page's own controls (a row or cell made focusable counts too)
CONTROLS = "button, input, select, textarea, summary, a[href], [role=tab], [tabindex]:not([tabindex='-1'])"


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def pages(browser, tmp_path_factory):  # after the browser: no folder is built where the test skips
    from .html_pages import demo_folders

    return demo_folders(tmp_path_factory.mktemp("html-browser"))


def open_page(browser, path: Path, size: str):
    """The page at ``size`` with the network off (any request but the file's own is aborted and recorded)."""
    width, height = SIZES[size]
    context = browser.new_context(offline=True, viewport={"width": width, "height": height})
    url = path.resolve().as_uri()
    problems: list[str] = []

    def route(r):
        if r.request.url == url:
            r.continue_()
        else:
            problems.append(f"request {r.request.url}")
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda e: problems.append(f"page error {e}"))
    page.set_default_timeout(15_000)
    page.goto(url)
    page.wait_for_load_state("load")
    return context, page, problems


def box(page, selector: str) -> dict:
    """The element's bounding box and the viewport's size (one element: the selector must match it alone)."""
    assert page.locator(selector).count() == 1, f"expected one {selector} on the page"
    return page.eval_on_selector(
        selector,
        "e => { const r = e.getBoundingClientRect(); return {left: r.left, top: r.top, right: r.right, "
        "bottom: r.bottom, width: r.width, height: r.height, vw: document.documentElement.clientWidth, "
        "vh: window.innerHeight}; }",
    )


def assert_in_first_viewport(page, selector: str) -> None:
    b = box(page, selector)
    assert b["width"] > 0 and b["height"] > 0, f"{selector} is not shown: {b}"
    within = b["left"] >= 0 and b["top"] >= 0 and b["right"] <= b["vw"] + 0.5 and b["bottom"] <= b["vh"] + 0.5
    assert within, f"{selector} is not within the first viewport ({b['vw']}x{b['vh']}): {b}"


def assert_no_horizontal_overflow(page, where: str) -> None:
    widths = page.evaluate(
        "() => ({scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth})"
    )
    assert widths["scroll"] <= widths["client"], f"the page scrolls sideways {where}: {widths}"


def tab(page, name: str):
    """The tab (a view's button) whose text begins with ``name``."""
    found = page.locator(TABS).filter(has_text=re.compile(rf"^\s*{name}", re.IGNORECASE))
    assert found.count() >= 1, f"no tab {name!r} among {page.locator(TABS).all_inner_texts()}"
    return found.first


def panel_shown(page, tab_locator) -> bool:
    """Whether the view the tab controls (its aria-controls, else #view-<data-view>) is shown."""
    return tab_locator.evaluate(
        "t => { const id = t.getAttribute('aria-controls') || ('view-' + t.dataset.view); "
        "const p = document.getElementById(id); return !!p && p.checkVisibility(); }"
    )


def open_a_query(page) -> str:
    """Switch to the Queries view, open the third query of the list, wait until it is open; its id."""
    tab(page, "Queries").click()
    cells = page.locator("#queries-list .qid:not(th)")
    cells.first.wait_for()
    assert cells.count() >= 3, "the Queries list shows fewer than three query ids"
    qid = cells.nth(2).inner_text().strip()
    cells.nth(2).click()
    wait_until_open(page, qid)
    return qid


def wait_until_open(page, qid: str) -> None:
    """Until the drill-down shows ``qid`` (#query-detail's data-query) or its row in the list is marked open."""
    page.wait_for_function(
        "qid => { const d = document.getElementById('query-detail'); if (d && d.dataset.query === qid) return true;"
        " return [...document.querySelectorAll('#queries-list .qid:not(th)')].some(c => c.textContent.trim() === qid &&"
        " !!c.closest('[aria-selected=true], [aria-current=true], .open, .selected')); }",
        arg=qid,
    )


def plot_overlaps(page) -> list[str]:
    """Each pair of texts of one shown inline SVG plot whose boxes overlap (by more than half a pixel each way)."""
    return page.evaluate(
        """() => {
          const found = [];
          document.querySelectorAll("svg").forEach((svg, s) => {
            if (!svg.checkVisibility()) return;
            const boxes = [...svg.querySelectorAll("text")]
              .map(t => [t.textContent.trim(), t.getBoundingClientRect()])
              .filter(([text, r]) => text && r.width > 0 && r.height > 0);
            for (let i = 0; i < boxes.length; i++) {
              for (let j = i + 1; j < boxes.length; j++) {
                const [a, p] = boxes[i], [b, q] = boxes[j];
                const w = Math.min(p.right, q.right) - Math.max(p.left, q.left);
                const h = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
                if (w > 0.5 && h > 0.5) {
                  const where = svg.closest("[id]") ? svg.closest("[id]").id : "svg " + s;
                  found.push(`${where}: "${a}" and "${b}" overlap by ${w.toFixed(1)}x${h.toFixed(1)} px`);
                }
              }
            }
          });
          return found;
        }"""
    )


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("which", ["demo", "diff"])
def test_the_first_screen_answers_and_nothing_scrolls_sideways(browser, pages, which, size):
    context, page, problems = open_page(browser, pages[which], size)
    try:
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTEFACTS / f"{which}-{size}-first.png"))
        assert_in_first_viewport(page, "#funnel")
        if which == "diff":
            assert_in_first_viewport(page, "#verdict")
        assert_no_horizontal_overflow(page, "on the first screen")
        for view in page.locator(TABS).all_inner_texts():
            tab(page, view.strip()).click()
            assert_no_horizontal_overflow(page, f"in the view {view.strip()!r}")
        open_a_query(page)
        assert_no_horizontal_overflow(page, "with a query open")
        assert problems == []
    finally:
        context.close()


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("which", ["demo", "diff"])
def test_the_queries_list_keeps_its_id_column_with_a_query_open(browser, pages, which, size):
    context, page, problems = open_page(browser, pages[which], size)
    try:
        qid = open_a_query(page)
        page.screenshot(path=str(ARTEFACTS / f"{which}-{size}-query.png"))
        cell = page.evaluate_handle(
            "qid => [...document.querySelectorAll('#queries-list .qid:not(th)')]"
            ".find(c => c.textContent.trim() === qid)",
            qid,
        )
        assert cell.evaluate("c => !!c"), f"the open query {qid!r} is no longer in the list"
        seen = cell.evaluate(
            """c => {
              const r = c.getBoundingClientRect();
              const vw = document.documentElement.clientWidth, vh = window.innerHeight;
              const x = (Math.max(r.left, 0) + Math.min(r.right, vw)) / 2;
              const y = (Math.max(r.top, 0) + Math.min(r.bottom, vh)) / 2;
              const top = document.elementFromPoint(x, y);
              // a scrolling or clipping box around the list (scrolled sideways, say) hides what lies outside it
              const clipped = [];
              for (let a = c.parentElement; a && a !== document.documentElement; a = a.parentElement) {
                const style = getComputedStyle(a);
                if (style.overflowX === "visible" && style.overflowY === "visible") continue;
                const o = a.getBoundingClientRect();
                const out = r.left < o.left - 0.5 || r.right > o.right + 0.5;
                if (out || r.top < o.top - 0.5 || r.bottom > o.bottom + 0.5)
                  clipped.push(a.tagName + "#" + a.id + "." + a.className);
              }
              return {box: [r.left, r.top, r.right, r.bottom], vw: vw, vh: vh, on_top: !!top && c.contains(top),
                      top: top ? top.tagName + "#" + top.id + "." + top.className : null, clipped: clipped};
            }"""
        )
        left, top, right, bottom = seen["box"]
        assert left >= 0 and top >= 0 and right <= seen["vw"] + 0.5 and bottom <= seen["vh"] + 0.5, seen
        assert seen["on_top"], f"the id cell of {qid!r} is covered: {seen}"
        assert seen["clipped"] == [], f"the id cell of {qid!r} is cut off by a scrolling box: {seen}"
        assert problems == []
    finally:
        context.close()


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("which", ["demo", "diff"])
def test_no_two_texts_of_a_plot_overlap(browser, pages, which, size):
    context, page, problems = open_page(browser, pages[which], size)
    try:
        views = [v.strip() for v in page.locator(TABS).all_inner_texts()]
        checked = 0
        overlaps: list[str] = []
        for view in views:
            tab(page, view).click()
            checked += page.evaluate(
                "() => [...document.querySelectorAll('svg')].filter(s => s.checkVisibility()"
                " && s.querySelector('text')).length"
            )
            overlaps += [f"{view}: {o}" for o in plot_overlaps(page)]
        assert checked >= 2, f"fewer than two plots with texts shown in the views {views}"
        assert overlaps == []
        assert problems == []
    finally:
        context.close()


def axe_violations(page) -> list[dict]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        {
            "id": v["id"],
            "impact": v["impact"],
            "help": v["help"],
            "nodes": [{"target": n["target"], "html": n["html"][:200]} for n in v["nodes"]],
        }
        for v in results.response["violations"]
    ]


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("which", ["demo", "diff"])
def test_axe_finds_no_serious_or_critical_violation(browser, pages, which, size):
    try:
        import axe_playwright_python  # noqa: F401
    except ImportError:
        missing_in_test("the Python package axe-playwright-python is not installed")
    context, page, problems = open_page(browser, pages[which], size)
    seen: dict[str, list[dict]] = {}
    try:
        for view in [v.strip() for v in page.locator(TABS).all_inner_texts()]:
            tab(page, view).click()
            seen[view] = axe_violations(page)
        open_a_query(page)
        seen["a query open"] = axe_violations(page)
        serious = [
            f"{view}: {v['id']} ({v['impact']}: {v['help']}) at {[n['target'] for n in v['nodes']][:5]}"
            for view, found in seen.items()
            for v in found
            if v["impact"] in ("serious", "critical")
        ]
        assert serious == []
        assert problems == []
    finally:
        context.close()
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        (ARTEFACTS / f"axe-{which}-{size}.json").write_text(json.dumps(seen, indent=1))


def tab_walk(page, scope: str, limit: int = 600) -> list[str]:
    """The shown controls in ``scope`` (a selector list) that pressing Tab from the page's start never focuses,
    each named by its tag and text. Tabs of an ARIA tab list with a roving tabindex count as reached when one of
    them is (the arrow keys move between them: checked by the caller)."""
    count = page.evaluate(
        """([scope, controls]) => {
          let n = 0;
          document.querySelectorAll("[data-kbd]").forEach(e => e.removeAttribute("data-kbd"));
          document.querySelectorAll(scope).forEach(root => root.querySelectorAll(controls).forEach(e => {
            if (e.checkVisibility() && !e.disabled && !e.hasAttribute("data-kbd")) e.setAttribute("data-kbd", n++);
          }));
          document.activeElement && document.activeElement.blur();
          return n;
        }""",
        [scope, CONTROLS],
    )
    assert count > 0, f"no control shown in {scope}"
    reached: set[str] = set()
    for _ in range(limit):
        page.keyboard.press("Tab")
        mark = page.evaluate("() => document.activeElement && document.activeElement.getAttribute('data-kbd')")
        if mark is not None:
            reached.add(mark)
        if len(reached) == count:
            break
    return page.evaluate(
        """reached => [...document.querySelectorAll("[data-kbd]")]
          .filter(e => !reached.includes(e.getAttribute("data-kbd")))
          .filter(e => !(e.getAttribute("role") === "tab" && e.tabIndex < 0 &&
                         [...e.closest("[role=tablist]").querySelectorAll("[role=tab]")]
                           .some(t => reached.includes(t.getAttribute("data-kbd")))))
          .map(e => e.tagName.toLowerCase() + " " + JSON.stringify((e.textContent || e.getAttribute("aria-label")
                    || e.getAttribute("placeholder") || e.id || "").trim().slice(0, 40)))""",
        sorted(reached),
    )


# the query id of the row holding the focus (the focused element or its nearest ancestor holding one .qid), or null
FOCUSED_QUERY = """() => {
  for (let e = document.activeElement; e && e.closest("#queries-list"); e = e.parentElement) {
    const ids = e.matches(".qid:not(th)") ? [e] : [...e.querySelectorAll(".qid:not(th)")];
    if (ids.length === 1) return ids[0].textContent.trim();
    if (ids.length > 1) return null;
  }
  return null;
}"""


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("which", ["demo", "diff"])
def test_the_tabs_and_the_queries_view_work_from_the_keyboard(browser, pages, which, size):
    context, page, problems = open_page(browser, pages[which], size)
    try:
        tabs = page.locator(TABS)
        names = [v.strip() for v in tabs.all_inner_texts()]
        assert len(names) >= 3, names
        queries, first = tab(page, "Queries"), tabs.first
        # Enter on the Queries tab shows its view; Space on the first tab brings the first view back
        queries.focus()
        page.keyboard.press("Enter")
        assert panel_shown(page, queries) and not panel_shown(page, first)
        first.focus()
        page.keyboard.press(" ")
        assert panel_shown(page, first) and not panel_shown(page, queries)
        roving = page.locator("[role=tablist] [role=tab][tabindex='-1']").count() > 0
        if roving:  # an ARIA tab list: the arrow keys move between its tabs
            first.focus()
            page.keyboard.press("ArrowRight")
            assert page.evaluate("() => document.activeElement.getAttribute('role')") == "tab"
            assert page.evaluate("() => document.activeElement.textContent.trim()") == names[1]
        # a query opens from the keyboard: Tab from the page's start into the list's rows, then Enter
        queries.focus()
        page.keyboard.press("Enter")
        page.locator("#queries-list .qid:not(th)").first.wait_for()
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        qid = None
        for _ in range(200):
            page.keyboard.press("Tab")
            qid = page.evaluate(FOCUSED_QUERY)
            if qid is not None:
                break
        assert qid is not None, "Tab never reaches a row of the Queries list"
        page.keyboard.press("Enter")
        wait_until_open(page, qid)
        # Tab reaches every control of the tab bar and of the Queries view, with a query open
        scope = "nav, [role=tablist], #view-queries, #" + (queries.get_attribute("aria-controls") or "view-queries")
        assert tab_walk(page, scope) == []
        assert problems == []
    finally:
        context.close()
