"""notebooks/compare_stages.ipynb runs headless, end to end, on result folders given through RAG_EVAL_RESULTS.

The folders are built here with the public API (fixed retrievers and rerankers, no collection, no model), so the
test depends on nothing outside the checkout: a two-stage and a single-stage pipeline in one report, a two-stage
pipeline with a token budget whose reranker fails on one query, and a report of a single-stage pipeline alone.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

import rag_eval
from rag_eval.builtin.outputs import write_report_folder
from rag_eval.stages import Hit, Pipeline, Reranker, Retriever

from .conftest import ROOT

pytestmark = pytest.mark.notebook

NOTEBOOK = ROOT / "notebooks" / "compare_stages.ipynb"
DEMO = ROOT / "demo-report"
CELL_TIMEOUT = 300
JUPYTER_STACK = r"(jupyter_client|jupyter_core|nbclient|nbformat|ipykernel|zmq|tornado|traitlets)(\.|$)"

QUERIES = {f"q{i}": f"question {i}" for i in range(1, 9)}
DOCS = 10  # candidates each query's first stage returns (the depth used below is 8: the last two lie beyond it)


class FixedRetriever(Retriever):
    """Returns the same DOCS hits per query text, whatever the depth asked (those past it count as below the
    depth), with a few tokens each for token budgets."""

    def config(self):
        return {"docs": DOCS}

    def search(self, query, k):
        qid = "q" + query.split()[-1]
        return [Hit(f"{qid}-d{i}", float(DOCS - i), tokens=6) for i in range(DOCS)]


class FixedReranker(Reranker):
    """Moves the relevant candidates to the top for even queries (helps) and reverses odd ones (hurts);
    fails on the queries in ``fail_on``."""

    def __init__(self, name="tiny-rerank", fail_on=(), **kw):
        super().__init__(name, **kw)
        self.fail_on = set(fail_on)

    def config(self):
        return {"fail_on": sorted(self.fail_on)}

    def rerank(self, query, hits):
        qid = "q" + query.split()[-1]
        if qid in self.fail_on:
            raise RuntimeError("reranker down")
        if int(qid[1:]) % 2 == 0:
            relevant = set(QRELS[qid])
            ordered = sorted(hits, key=lambda h: h.doc_id not in relevant)
        else:
            ordered = list(reversed(hits))
        return [h.with_score(float(len(ordered) - i)) for i, h in enumerate(ordered)]


# two or three relevant documents per query, at different ranks of the first stage; q7's d12 is never retrieved,
# q3's d9 lies below the depth, q8 has no relevant document at all (its loss shares are 0/0)
QRELS = {
    "q1": {"q1-d0": 2, "q1-d4": 1},
    "q2": {"q2-d6": 3, "q2-d7": 1},
    "q3": {"q3-d1": 1, "q3-d9": 2},
    "q4": {"q4-d3": 2, "q4-d5": 2, "q4-d0": 1},
    "q5": {"q5-d2": 1},
    "q6": {"q6-d5": 2},
    "q7": {"q7-d0": 1, "q7-d12": 3},
    "q8": {"q8-d3": 0},
}


def _folder(out: Path, pipelines: dict[str, Pipeline], *, answered: bool = False) -> Path:
    qrels = rag_eval.Qrels.from_dict(QRELS)
    results = {name: pipe.run(QUERIES, progress=False) for name, pipe in pipelines.items()}
    report = rag_eval.evaluate(qrels, results)
    if answered:  # the extractive generator (no model) over the one pipeline's delivered context
        from rag_eval.builtin.generator import extractive_generator
        from rag_eval.stages.generator import generate_answers

        (result,) = results.values()
        texts = {f"{q}-d{i}": f"Question {q[1:]} is answered by chunk {i}." for q in QUERIES for i in range(DOCS)}
        answers = generate_answers(extractive_generator(), result, texts=texts)
        report = report.with_answers(answers, {q: ["chunk"] for q in QUERIES}, questions=QUERIES)
    write_report_folder(out, report, results, qrels, title=out.name, facts={}, plots=False)
    assert (out / "report.parquet").is_file()
    return out


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> list[Path]:
    base = tmp_path_factory.mktemp("results")
    return [
        _folder(
            base / "chunks",
            {
                "tiny": Pipeline(FixedRetriever("fixed"), FixedReranker(), depth=8, budget=3),
                "solo": Pipeline(FixedRetriever("fixed"), depth=8, budget=3),
            },
        ),
        _folder(
            base / "tokens",
            {"tiny-tok": Pipeline(FixedRetriever("fixed"), FixedReranker(fail_on={"q5"}), depth=8, budget="20tok")},
        ),
        _folder(base / "single", {"alone": Pipeline(FixedRetriever("fixed"), depth=5, budget=2)}, answered=True),
    ]


def _execute(cwd: Path, notebook: Path = NOTEBOOK):
    """Run every cell in a fresh python3 kernel with ``cwd`` as its working directory; returns the notebook."""
    with warnings.catch_warnings():
        # the Jupyter stack's own deprecation notices (paths, zmq, asyncio, datetime) are not this project's to fix
        for category in (DeprecationWarning, PendingDeprecationWarning):
            warnings.filterwarnings("ignore", category=category, module=JUPYTER_STACK)
        import nbformat
        from nbclient import NotebookClient

        nb = nbformat.read(notebook, as_version=4)
        client = NotebookClient(
            nb,
            timeout=CELL_TIMEOUT,
            kernel_name="python3",
            allow_errors=False,
            resources={"metadata": {"path": str(cwd)}},
        )
        client.execute()
    return nb


def _text(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                parts.append(out.text)
            elif "data" in out:
                parts.append(out.data.get("text/plain", ""))
    return "\n".join(parts)


def _assert_clean(nb) -> None:
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count is not None for c in code)
    for cell in code:
        for out in cell.outputs:
            assert out.output_type != "error", out
            if out.output_type == "stream" and out.name == "stderr":
                assert "Warning" not in out.text, out.text  # the notebook's own code warns about nothing


def test_notebook_is_a_valid_python3_notebook():
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4 and nb.metadata.kernelspec.name == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "RESULT_DIRS" in code[0].source and "RAG_EVAL_RESULTS" in code[0].source
    assert sum(c.cell_type == "markdown" for c in nb.cells) >= 6
    assert all(not c.outputs for c in code), "keep the notebook without outputs"


def test_notebook_runs_on_built_result_folders(folders, tmp_path, monkeypatch):
    chunks, tokens, single = folders
    # both separators: commas and os.pathsep
    monkeypatch.setenv("RAG_EVAL_RESULTS", f"{chunks},{tokens}{os.pathsep}{single}")
    nb = _execute(ROOT / "notebooks")  # the kernel's working directory when Jupyter opens the notebook
    _assert_clean(nb)
    # the answer first (issue 30): the notebook's first output is the first folder's report, opening with its
    # funnel: each pipeline's relevant items, how many reached the model, each loss by its cause
    from rag_eval.reports.funnel import funnel

    first = next(out for c in nb.cells if c.cell_type == "code" for out in c.outputs)
    shown = first.data["text/html"]
    found = funnel(rag_eval.Report.load_folder(chunks))
    assert found.pipelines == ["tiny", "solo"]
    assert shown.startswith("<p><strong>Where the relevant items went: tiny</strong>: ")
    for pipeline in found.pipelines:
        steps = found.steps_of(pipeline)
        said = f"{int(steps[-1]['items'])} of {int(steps[0]['items'])} relevant items"
        assert f"Where the relevant items went: {pipeline}</strong>: {said}" in shown
    assert "never retrieved by &#x27;fixed&#x27;" in shown and "cut by &#x27;tiny-rerank&#x27;" in shown
    assert shown.index("Where the relevant items went") < shown.index("<table border")  # then the summary
    text = _text(nb)
    for name in ("chunks", "tokens", "single", "tiny", "solo", "tiny-tok", "alone", "tiny-rerank"):
        assert name in text, name
    assert "solo: no reranker" in text and "alone: no reranker" in text
    assert "tiny (ndcg@3, fixed -> tiny-rerank)" in text  # a chunk budget: ndcg at its number of chunks
    assert "most helped" in text and "most hurt" in text
    assert "token budget budget(20tok)" in text  # no ndcg@budget for the first stage: ndcg@5 recomputed
    assert "1 failed (query, stage) pairs" in text  # the reranker's fault on q5
    # the side-by-side summary shows each metric's n and n_nan as report.summary does
    for folder in (chunks, tokens, single):
        summary = rag_eval.Report.load(folder / "report.parquet").summary
        for row in summary.itertuples(index=False):
            shown = f"(n={row.n}" + (f", n_nan={row.n_nan})" if row.n_nan else ")")
            assert shown in text, (folder, row.stage, row.metric, shown)
    assert "n_nan=" in text
    pictures = sum("image/png" in out.get("data", {}) for c in nb.cells if c.cell_type == "code" for out in c.outputs)
    assert pictures >= 3  # recall curves, loss attribution, per-query scatter (latency too when measured)
    # display(comparison) shows a table, and its plain text is one line, not the dataclass's fields
    shown = [
        o for c in nb.cells if "display(comparison)" in c.source for o in c.outputs if "text/html" in o.get("data", {})
    ]
    assert shown and all("<table" in o.data["text/html"] for o in shown)
    assert all(o.data["text/html"].startswith("<p><strong>Verdict: ") for o in shown)  # the verdict first
    assert all(o.data["text/plain"].startswith("Comparison(baseline=") for o in shown)
    assert all("DataFrame" not in o.data["text/plain"] and "\n" not in o.data["text/plain"] for o in shown)
    # the answers of the one folder that carries them, as its card has them; the others say how to add them
    record = rag_eval.Report.load_folder(single).card.answers
    assert f"single: generator 'extractive' ({record['fingerprint']}) on the context delivered by alone / fixed" in text
    said = f"{record['queries']} queries: {record['answered']} answered, {record['failed']} failed, 0 not asked"
    assert record["queries"] == 8 and said in text
    for s in record["summary"]:
        assert (
            f"  {s['metric']}: {s['mean']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}] (n={s['n']}, failed 0)" in text
        )
    assert "chunks: no answers (rag-eval answers FOLDER" in text and "tokens: no answers" in text
    # the sections are numbered 1 to 7, in order
    numbers = [int(c.source[3]) for c in nb.cells if c.cell_type == "markdown" and c.source[3:4].isdigit()]
    assert numbers == [1, 2, 3, 4, 5, 6, 7]
    assert "jupyter execute notebooks/compare_stages.ipynb" in nb.cells[0].source


def test_notebook_finds_demo_report_at_the_repository_root_from_notebooks(folders, tmp_path, monkeypatch):
    """The default folder, demo-report, is where `rag-eval demo` writes it (the repository root) while the kernel runs
    in notebooks/: the notebook looks in the working directory, then up to the folder holding pyproject.toml."""
    import shutil

    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    shutil.copy(NOTEBOOK, repo / "notebooks" / NOTEBOOK.name)
    shutil.copytree(folders[0], repo / "demo-report")
    monkeypatch.delenv("RAG_EVAL_RESULTS", raising=False)
    nb = _execute(repo / "notebooks", repo / "notebooks" / NOTEBOOK.name)
    _assert_clean(nb)
    text = _text(nb)
    assert f"demo-report found at {repo / 'demo-report'}" in text
    assert "tiny (ndcg@3, fixed -> tiny-rerank)" in text and "no manifest.json" not in text
    # the folder is checked against its manifest: a changed file stops the notebook, naming it
    from nbclient.exceptions import CellExecutionError

    summary = repo / "demo-report" / "summary.csv"
    summary.write_text(summary.read_text() + "\n")
    with pytest.raises(CellExecutionError) as error:
        _execute(repo / "notebooks", repo / "notebooks" / NOTEBOOK.name)
    assert "summary.csv: its SHA-256 is" in str(error.value)


def test_notebook_says_what_to_do_without_a_result_folder(tmp_path, monkeypatch):
    from nbclient.exceptions import CellExecutionError

    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("RAG_EVAL_RESULTS", str(tmp_path / "empty"))
    with pytest.raises(CellExecutionError) as error:
        _execute(tmp_path)
    assert "no report.parquet" in str(error.value) and "rag-eval demo" in str(error.value)


@pytest.mark.skipif(
    not (DEMO / "report.parquet").is_file(), reason="no ./demo-report (run `make demo` or `rag-eval demo`)"
)
def test_notebook_runs_on_the_demo_folder(monkeypatch):
    monkeypatch.delenv("RAG_EVAL_RESULTS", raising=False)  # the default: demo-report, found from notebooks/
    nb = _execute(ROOT / "notebooks")
    _assert_clean(nb)
    assert "demo-report" in _text(nb)
