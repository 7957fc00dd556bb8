"""The README and the getting-started page as a newcomer reads them: every code block in them runs as written, and
what they quote is recorded.

The README holds the ten-line example and the pipeline example; the tour that continues it (the complete example
with LangChain and LlamaIndex, saved reports, benchmarks, comparisons, pooling, labelling, judges) and the extras'
table live in ``docs/getting-started.md``, the benchmark figures in ``docs/performance.md``. Each document's blocks
run on their own (a namespace, a bash session and a working folder per document). How the blocks are run (the
convention is written here, and shown in the documents' source):

- ```` ```python ```` blocks run **in order, in one shared namespace**, like the cells of a notebook: a later block
  may use what an earlier one defined (such a block says so in its first comment, e.g. "continuing the complete
  example above"). A block whose first line is ``# <name>.py`` is a file of the user's (``my_pipelines.py``): it
  is written to the working folder under that name, not executed, for a later ``sh`` block to import.
- ```` ```sh ```` blocks run **in order, in one bash session** (``set -euo pipefail``), so a variable set in one
  (``EXAMPLES=$(python -m rag_eval.examples)``) serves the next; ``python`` and ``rag-eval`` are this venv's.
- ```` ```text ```` blocks (usage synopses, a program's output) are never run.
- A block preceded by ``<!-- readme-test: not run (REASON) -->`` is not run (installs, servers, minutes of work);
  one preceded by ``<!-- readme-test: needs ../shared -->`` runs only where ``../shared/datasets`` exists next to
  the repository. No other marker is accepted.

Both kinds run in a subprocess whose working folder is a fresh temporary folder (what the blocks write lands
there, never in the repository), deliberately not the repository root: the README's blocks find the bundled files
through ``rag_eval.examples``, so they must work for a user who installed the wheel, from any folder, and running
them elsewhere than the root checks exactly that. ``../shared`` is linked beside that folder so that the
``needs ../shared`` blocks see the same relative path as from the repository root. Subprocesses inherit the test
environment (its telemetry switches). Every warning a Python block raises is recorded: the complete example must
raise none, the others none but ``LowJudgedShare`` (the TREC example's qrels judge few chunks, and the README says
so).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TOUR = ROOT / "docs" / "getting-started.md"  # the README's tour, the extras' table and the set-up commands
PERFORMANCE = ROOT / "docs" / "performance.md"  # every ratio and the runs they come from
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SHARED = ROOT.parent / "shared"
MARKER = re.compile(r"<!--\s*readme-test:\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\S*)\s*$")
RUN_LANGUAGES = {"python", "sh"}
LANGUAGES = RUN_LANGUAGES | {"text"}
FILE_BLOCK = re.compile(r"#\s*([A-Za-z_][\w]*\.py)\s*$")


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int  # the README line of the block's first code line (1-based)
    marker: str | None  # the readme-test marker right before the fence, if any

    @property
    def runs(self) -> bool:
        if self.language not in RUN_LANGUAGES or (self.marker or "").startswith("not run"):
            return False
        return self.marker != "needs ../shared" or (SHARED / "datasets").is_dir()

    @property
    def file_name(self) -> str | None:
        first = self.code.splitlines()[0] if self.code else ""
        match = FILE_BLOCK.fullmatch(first.strip()) if self.language == "python" else None
        return match.group(1) if match else None


def readme_blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, in order, each with the readme-test marker on the last non-blank line
    before its fence."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.fullmatch(before.strip())
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        blocks.append(
            Block(opening.group(1), "\n".join(lines[i + 1 : end]) + "\n", i + 2, marker.group(1) if marker else None)
        )
        i = end + 1
    return blocks


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
TOUR_BLOCKS = readme_blocks(TOUR.read_text(encoding="utf-8"))
#: each document whose blocks run, by its path in the repository, with its blocks
DOCUMENTS = {"README.md": BLOCKS, "docs/getting-started.md": TOUR_BLOCKS}

DRIVER = r"""
import json, sys, traceback, warnings
from pathlib import Path

blocks = json.loads(Path(sys.argv[1]).read_text())
source = sys.argv[2]
namespace = {"__name__": "__main__"}
for block in blocks:
    print(f"\n::block {block['line']}", flush=True)
    if block["file"]:
        Path(block["file"]).write_text(block["code"])
        continue
    code = compile("\n" * (block["line"] - 1) + block["code"], source, "exec")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec(code, namespace)
        except BaseException:
            traceback.print_exc()
            print(f"::failed {block['line']}", flush=True)
            sys.exit(1)
    seen = [[w.category.__name__, str(w.message)[:300]] for w in caught]
    print("::warnings " + json.dumps(seen), flush=True)
"""


def _environment(tmp_path: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "MPLBACKEND": "Agg",
        "HF_HUB_OFFLINE": "1",
        "COLUMNS": "200",  # pandas prints wide tables whole, as in a terminal
    }


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    if SHARED.is_dir():
        (tmp_path / "shared").symlink_to(SHARED, target_is_directory=True)
    return work


def _outputs(stdout: str) -> dict[int, str]:
    """The driver's output, split per block (keyed by the block's README line)."""
    parts = re.split(r"^::block (\d+)$", stdout, flags=re.M)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def _python_run(
    tmp_path_factory: pytest.TempPathFactory, document: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The Python blocks of one document, run in order in one namespace."""
    tmp_path = tmp_path_factory.mktemp("readme_python")
    work = _workdir(tmp_path)
    chosen = [b for b in DOCUMENTS[document] if b.language == "python" and b.runs]
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps([{"line": b.line, "code": b.code, "file": b.file_name} for b in chosen]))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    done = subprocess.run(
        [sys.executable, str(driver), str(spec), document],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
        env=_environment(tmp_path),
    )
    return done, work


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    return _python_run(tmp_path_factory, "README.md")


@pytest.fixture(scope="module")
def tour_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    return _python_run(tmp_path_factory, "docs/getting-started.md")


RUNS = {"README.md": "readme_run", "docs/getting-started.md": "tour_run"}


def _block_with(text: str, language: str = "python", blocks: list[Block] = TOUR_BLOCKS) -> Block:
    found = [b for b in blocks if b.language == language and text in b.code]
    assert len(found) == 1, f"expected one {language} block with {text!r}, found {len(found)}"
    return found[0]


@pytest.mark.slow
@pytest.mark.parametrize("document", sorted(DOCUMENTS))
def test_every_python_block_runs_as_written(document, request):
    done, work = request.getfixturevalue(RUNS[document])
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    outputs = _outputs(done.stdout)
    ran = [b for b in DOCUMENTS[document] if b.language == "python" and b.runs]
    assert ran, f"{document} has Python blocks that run"
    assert sorted(outputs) == sorted(b.line for b in ran)
    for block in ran:
        if block.file_name:
            assert (work / block.file_name).read_text() == block.code
            continue
        warned = json.loads(outputs[block.line].rsplit("::warnings ", 1)[1].splitlines()[0])
        kinds = {kind for kind, _ in warned}
        if "InMemoryVectorStore" in block.code:  # the complete example of the tour
            # the reranker changes neither recall@3 nor MRR@3 on any question: those two intervals have zero width,
            # said once (and in the prose after the example); nothing else may warn
            assert [kind for kind, _ in warned] == ["DegenerateInterval"], f"{document}:{block.line} warned: {warned}"
            assert "recall@budget" in warned[0][1] and "mrr@budget" in warned[0][1] and "ndcg" not in warned[0][1]
            assert "`compare` warns that those intervals have zero width (`DegenerateInterval`)" in " ".join(
                (ROOT / document).read_text(encoding="utf-8").split()
            )
        else:
            # a reranker cannot change recall at its input's depth: compare says that interval has zero width
            zero = [text for kind, text in warned if kind == "DegenerateInterval"]
            assert all("rerank vs bm25, recall@20 " in text for text in zero), zero
            assert kinds <= {"LowJudgedShare", "DegenerateInterval"}, f"{document}:{block.line} warned: {warned}"


@pytest.mark.slow
def test_the_complete_example_prints_what_the_tour_says(tour_run):
    """The prose after the complete example quotes its numbers: they are the ones it prints."""
    done, _ = tour_run
    assert done.returncode == 0, done.stderr[-4000:]
    example = _block_with("InMemoryVectorStore")
    out = _outputs(done.stdout)[example.line]
    assert "vectors %5 >> coverage %budget(3)" in out
    rows = {
        (line.split()[1], line.split()[2]): float(line.split()[3])
        for line in out.splitlines()
        if re.match(r"^\d+\s+(vectors|coverage)\s", line)
    }
    assert rows[("vectors", "recall@depth")] == pytest.approx(0.86)
    compared = {line.split()[1]: line.split() for line in out.splitlines() if line.startswith("mine/coverage")}
    ndcg = compared["ndcg@budget"]
    assert ndcg[2:5] == ["10", "0", "0"]  # n, n_nan and the queries on one side only
    assert ndcg[5:7] == ["0.8374", "0.8102"] and ndcg[-1] == "2/7/1" and ndcg[-4] == "0.75"
    prose = TOUR.read_text(encoding="utf-8")
    assert "finds 86% of the relevant passages" in prose
    assert "nDCG@3 from 0.810 to 0.837, winning on 2 questions, losing on 1 and tying on 7" in prose
    assert "(p = 0.75)" in prose


@pytest.mark.slow
def test_the_readme_picture_is_what_the_pipeline_example_prints(readme_run):
    """The stage-aware report the README shows first (a ``text`` block) is the pipeline example's output, and the
    sentence before it quotes that output's numbers."""
    done, _ = readme_run
    assert done.returncode == 0, done.stderr[-4000:]
    example = _block_with("functions.reranker(shortest", blocks=BLOCKS)
    printed = _outputs(done.stdout)[example.line].split("::warnings")[0].strip()
    picture = next(b for b in BLOCKS if b.language == "text" and b.code.startswith("stage "))
    assert picture.line < example.line
    assert [line.rstrip() for line in picture.code.strip().splitlines()] == printed.splitlines()
    rows = {tuple(line.split()[:2]): float(line.split()[2]) for line in printed.splitlines()[1:]}
    assert rows[("words", "recall@depth")] == 0.95 and rows[("short", "loss.reranked_out")] == 0.51
    prose = " ".join(README.read_text(encoding="utf-8").split())
    assert "finds 95% of the relevant passages within its 10 candidates" in prose
    assert "pushes half of them out of the 3 the model gets" in prose


@pytest.mark.slow
def test_the_tour_saves_and_loads_a_report_reuses_the_cache_and_pools(tour_run):
    done, work = tour_run
    assert done.returncode == 0, done.stderr[-4000:]
    outputs = _outputs(done.stdout)
    assert outputs[_block_with('Report.load("report.parquet")').line].split("::warnings")[0].strip() == "True"
    assert outputs[_block_with('cache="cache/"').line].split("::warnings")[0].strip().splitlines()[0] == "10"
    assert outputs[_block_with("judged_all = rag_eval.pool").line].split("::warnings")[0].split() == ["41", "0", "50"]
    assert (work / "report.parquet").is_file() and (work / "pool.jsonl").is_file() and (work / "cache").is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("document", sorted(DOCUMENTS))
def test_every_sh_block_runs_as_written(document, tmp_path):
    work = _workdir(tmp_path)
    blocks = DOCUMENTS[document]
    for block in blocks:  # the user's files the commands import
        if block.file_name and block.runs:
            (work / block.file_name).write_text(block.code)
    chosen = [b for b in blocks if b.language == "sh" and b.runs]
    assert chosen, f"{document} has sh blocks that run"
    script = ["set -euo pipefail"]
    for block in chosen:
        script += [f"echo '::block {block.line}'", block.code]
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=900,
        env=_environment(tmp_path),
    )
    last = re.findall(r"^::block (\d+)$", done.stdout, flags=re.M)
    assert done.returncode == 0, (
        f"{document} line {last[-1] if last else '?'}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    assert [int(x) for x in last] == [b.line for b in chosen]
    if document == "README.md":  # rag-eval evaluate on the bundled TREC files
        assert "ndcg@5" in done.stdout and "recall@20" in done.stdout
    else:
        assert (work / "pool.jsonl").is_file() and (work / "my-qrels.txt").is_file()
        assert (work / "bench-out" / "tiny").is_dir() and (work / "bench-out" / "mine").is_dir()
        assert "ndcg@5" in done.stdout and "against 'bm25'" in done.stdout


@pytest.mark.parametrize("document", sorted(DOCUMENTS))
def test_every_block_has_a_known_language_and_marker(document):
    blocks = DOCUMENTS[document]
    assert blocks, f"{document} has code blocks"
    for block in blocks:
        assert block.language in LANGUAGES, f"{document} line {block.line}: block language {block.language!r}"
        marker = block.marker
        assert marker is None or marker == "needs ../shared" or re.fullmatch(r"not run \(.+\)", marker), (
            f"{document} line {block.line}: unknown marker {marker!r}"
        )
        if marker is not None:
            assert block.language in RUN_LANGUAGES, f"{document}:{block.line}: a marker on a {block.language} block"
    # the parser itself: a marker binds to the next fence only, and blocks keep their line numbers
    parsed = readme_blocks(
        "x\n<!-- readme-test: not run (why) -->\n\n```sh\nmake demo\n```\n```python\nprint(1)\n```\n"
    )
    assert [(b.language, b.code, b.line, b.marker) for b in parsed] == [
        ("sh", "make demo\n", 5, "not run (why)"),
        ("python", "print(1)\n", 8, None),
    ]
    assert not parsed[0].runs and parsed[1].runs


#: the pages whose ``text`` blocks show a command's usage: the README's and the command-line reference's
SYNOPSIS_PAGES = ("README.md", "docs/getting-started.md", "docs/cli.md", "docs/compare.md")


def test_every_option_a_usage_synopsis_names_exists():
    """The ``text`` blocks that show a command's usage name only options its parser has (``--help`` lists them)."""
    synopses = [
        (page, b)
        for page in SYNOPSIS_PAGES
        for b in readme_blocks((ROOT / page).read_text(encoding="utf-8"))
        if b.language == "text" and b.code.startswith("rag-eval ")
    ]
    assert {b.code.split()[1] for _, b in synopses} >= {"evaluate", "compare"}
    for page, block in synopses:
        command = block.code.split()[1]
        done = subprocess.run(
            [str(Path(sys.executable).parent / "rag-eval"), command, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        known = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", done.stdout))
        named = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", block.code))
        assert named <= known, f"{page} line {block.line}: rag-eval {command} has no {sorted(named - known)}"


@pytest.mark.parametrize("document", sorted(DOCUMENTS))
def test_most_blocks_run(document):
    """The markers are for installs, servers and long runs: most blocks are run, and every Python block is."""
    runnable = [b for b in DOCUMENTS[document] if b.language in RUN_LANGUAGES]
    assert all(b.marker is None for b in runnable if b.language == "python")
    assert sum(b.marker is None for b in runnable) >= len(runnable) - 4


@pytest.mark.parametrize("page", [README, PERFORMANCE], ids=["README.md", "docs/performance.md"])
def test_every_ratio_the_readme_quotes_is_recorded_in_results(page):
    text, results = page.read_text(encoding="utf-8"), RESULTS.read_text(encoding="utf-8")
    quoted = re.findall(r"(?<![\d.])(\d+\.\d+)\s?[x×]", text)
    assert quoted, f"{page.name} quotes the speed-ups"
    recorded = set(re.findall(r"(?<![\d.])(\d+\.\d+)\s?[x×]", results))
    assert set(quoted) <= recorded, f"ratios in {page.name} that RESULTS.md does not record: {set(quoted) - recorded}"


def test_the_readme_quotes_one_headline_ratio():
    """The README quotes one ratio, and links to the page that gives every size (docs/performance.md)."""
    readme = README.read_text(encoding="utf-8")
    assert len(re.findall(r"(?<![\d.])(\d+\.\d+)\s?[x×]", readme)) == 1
    assert "(docs/performance.md)" in readme


def test_the_readme_cites_the_latest_recorded_run_with_its_date_and_command():
    """The README cites the run its ratio comes from; docs/performance.md, which gives every size, cites it too and
    the latest recorded run, each with its date and command."""
    readme, results = README.read_text(encoding="utf-8"), RESULTS.read_text(encoding="utf-8")
    performance = PERFORMANCE.read_text(encoding="utf-8")
    dates = re.findall(r"^#+ .*\((\d{4}-\d{2}-\d{2})", results, flags=re.M)
    latest = max(dates)
    cited = re.search(r"The latest recorded run, on (\d{4}-\d{2}-\d{2}) \(`([^`]+)`", performance)
    assert cited, "docs/performance.md names the latest recorded run"
    assert cited.group(1) == latest
    flat = " ".join(results.split())
    assert " ".join(cited.group(2).split()) in flat  # its command, as recorded (a line may wrap it)
    for text in (readme, performance):
        first = re.search(r"recorded in\s+`benchmarks/RESULTS.md` on (\d{4}-\d{2}-\d{2}) \(`([^`]+)`", text)
        assert first and first.group(1) in dates
        assert " ".join(first.group(2).split()) in flat


def test_the_readme_links_resolve():
    readme = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme)
    for needed in ("docs/naming.md", "docs/result-folders.md", "docs/metrics.md", "docs/bad-input.md"):
        assert needed in targets
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


def test_the_install_section_matches_pyproject():
    """The README names the distribution; the extras' table of docs/getting-started.md names every extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    readme, tour = README.read_text(encoding="utf-8"), TOUR.read_text(encoding="utf-8")
    for text in (readme, tour):
        assert f"The distribution is **`{project['name']}`**" in text
        assert f"pip install {project['name']}" in text
    assert "(docs/getting-started.md#install)" in readme
    install = tour.split("## Install", 1)[1].split("\n## ", 1)[0]
    table = {m[0]: m[1] for m in re.findall(r"^\| `([a-z]+)` \| ([^|]+) \|", install, flags=re.M)}
    extras = project["optional-dependencies"]
    assert list(table) == list(extras)  # every extra, in pyproject's order
    for extra, requirements in extras.items():
        said = table[extra].lower()
        for requirement in requirements:
            name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0).lower()
            if name == project["name"]:  # an extra made of others: each of them named
                inner = re.search(r"\[(.*)\]", requirement).group(1).split(",")
                assert all(f"`{e.strip()}`" in said for e in inner), (extra, requirement)
            elif extra != "dev":  # dev lists the test tools by their main names only
                assert name in said, f"the getting-started page's [{extra}] row does not say it brings {name}"


def test_the_bundled_beir_folder():
    """The complete example's collection, read as a user would (values counted by hand from the files)."""
    import warnings

    import rag_eval
    from rag_eval.examples import BEIR_FOLDER, FOLDER

    assert BEIR_FOLDER == FOLDER / "tiny-beir" and (FOLDER / "qrels.txt").is_file()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every judged passage is in the corpus: no JudgedDocsNotInCorpus
        collection = rag_eval.Collection.from_beir(BEIR_FOLDER)
    assert collection.name == "tiny-beir"
    assert len(collection.corpus) == 30 and list(collection.corpus)[:2] == ["bike-01", "bike-02"]
    assert collection.corpus["bike-03"].content.startswith("Bicycle tyres To fix a puncture")
    assert list(collection.queries) == [f"q{i}" for i in range(1, 11)]  # q11 is not judged in test.tsv
    assert collection.queries["q8"] == "my coffee tastes bitter"
    judged = {q: dict(collection.qrels[q]) for q in collection.qrels.query_ids}
    assert sum(len(d) for d in judged.values()) == 56
    assert {g for d in judged.values() for g in d.values()} == {0, 1, 2, 3}
    assert judged["q10"] == {
        "kitchen-02": 3,
        "coffee-05": 2,
        "plant-06": 0,
        "bike-04": 0,
        "bread-05": 0,
        "coffee-06": 0,
    }
    assert all(max(d.values()) == 3 for d in judged.values())  # every question has an answer in the corpus


def test_python_m_rag_eval_examples_prints_the_folder_from_anywhere(tmp_path):
    from rag_eval.examples import FOLDER

    done = subprocess.run(
        [sys.executable, "-m", "rag_eval.examples"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == FOLDER


def test_the_wheel_ships_every_example_file():
    """Every data file under rag_eval/examples matches a package-data glob of pyproject.toml (setuptools ships
    only what they name), so a user who installed the wheel has the files the README reads."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["rag_eval.examples"]
    folder = ROOT / "rag_eval" / "examples"
    files = [
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts
    ]
    assert "tiny-beir/qrels/test.tsv" in files
    unshipped = [f for f in files if not any(fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert not unshipped, f"not in package-data: {unshipped}"
