"""The screenshots of docs/html-report.md: the demo's page and a two-folder diff, at 1280x800 and 1920x1080, taken
in Debian's headless Chromium (tests/chromium.py, the browser tests' own launch) and written to docs/images/.

    .venv/bin/python docs/screenshots/take.py [--work build/screenshots] [--out docs/images] [--no-demo]

It runs ``rag-eval demo --out WORK/demo-report`` (minutes the first time; a second run reuses the folder's caches
and renders the page anew), builds ``bm25`` alone on the demo's collection (no model: tests/html_pages.py), and
writes ``rag-eval report WORK/bm25 WORK/demo-report --beir WORK/beir``: did the MiniLM reranker help? Each PNG is
one viewport (the first screen; the demo's Queries view with a query open), reduced to a 128-colour palette with
Pillow where it is installed.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # tests/chromium.py and tests/html_pages.py, shared with the browser tests

from tests.chromium import chromium  # noqa: E402
from tests.html_pages import pipeline_folder, report_cli, write_beir  # noqa: E402

SIZES = {1280: (1280, 800), 1920: (1920, 1080)}
COLOURS = 128


def small_png(png: bytes) -> bytes:
    """``png`` as a palette PNG of :data:`COLOURS` colours (Pillow), or as it is without Pillow."""
    try:
        from PIL import Image
    except ImportError:
        print("Pillow is not installed: the screenshots are kept as Chromium wrote them", file=sys.stderr)
        return png
    image = Image.open(io.BytesIO(png)).convert("RGB")
    small = image.quantize(colors=COLOURS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return out.getvalue()


def pages(work: Path, run_demo: bool = True) -> dict[str, Path]:
    """The demo's page (``rag-eval demo``; without ``run_demo``, the one in WORK/demo-report as it is) and the diff
    of bm25 against it (``rag-eval report``)."""
    from rag_eval import Pipeline
    from rag_eval.builtin.demo import DEMO_BUDGET, DEMO_DEPTH, demo_collection
    from rag_eval.builtin.pipelines import Parts

    started = time.perf_counter()
    demo = work / "demo-report"
    rag_eval = Path(sys.executable).with_name("rag-eval")
    if run_demo:
        subprocess.run([str(rag_eval), "demo", "--out", str(demo)], check=True, stdout=subprocess.DEVNULL)
        print(f"rag-eval demo --out {demo}: {time.perf_counter() - started:.0f} s")
    collection, _ = demo_collection()
    bm25 = Pipeline(Parts(collection, None).bm25(DEMO_DEPTH), depth=DEMO_DEPTH, budget=DEMO_BUDGET)
    pipeline_folder(collection, "bm25", bm25, work / "bm25")
    diff = work / "diff.html"
    report_cli(work / "bm25", demo, out=diff, beir=write_beir(collection, work / "beir"))
    return {"demo": demo / "report.html", "diff": diff}


def shoot(browser, page_path: Path, size: int, query: bool = False) -> bytes:
    """One viewport of the page at ``size``, offline; with ``query``, the Queries view with the third query open."""
    width, height = SIZES[size]
    context = browser.new_context(offline=True, viewport={"width": width, "height": height})
    try:
        page = context.new_page()
        page.goto(page_path.resolve().as_uri())
        page.wait_for_load_state("load")
        if query:
            page.locator("[role=tab], nav button[data-view]").filter(has_text="Queries").first.click()
            page.locator("#queries-list .qid:not(th)").nth(2).click()
            page.wait_for_timeout(300)
        return page.screenshot()
    finally:
        context.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "screenshots", help="where the folders go")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images", help="where the PNGs go")
    parser.add_argument("--no-demo", action="store_true", help="take WORK/demo-report as it is (no demo run)")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True)
    print(f"the pages of rag_eval at {commit.stdout.strip() or 'an unknown commit'}")
    made = pages(args.work, run_demo=not args.no_demo)
    shots = [(f"report-{which}-{size}.png", made[which], size, False) for which in made for size in SIZES]
    shots += [(f"report-queries-{size}.png", made["demo"], size, True) for size in SIZES]

    def cannot(reason: str):
        raise SystemExit(f"take.py: no screenshots: {reason}")

    with chromium(cannot) as browser:
        for name, page_path, size, query in shots:
            png = small_png(shoot(browser, page_path, size, query))
            (args.out / name).write_bytes(png)
            print(f"{args.out / name}: {len(png):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
