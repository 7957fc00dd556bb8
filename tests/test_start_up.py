"""Start-up (issue 28): ``rag-eval evaluate`` on runs loads what it uses only (no pandas, pyarrow, ground-truth tools,
stages, HTML or folder writers), and the summary it prints without pandas is ``format_report``'s table, character
for character."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

from rag_eval import Qrels, Report, Run, evaluate
from rag_eval.renderers import format_report
from rag_eval.renderers.formats import format_summary_table

from .conftest import ROOT

EXAMPLES = ROOT / "rag_eval" / "examples"
EXAMPLE = [str(EXAMPLES / "qrels.txt"), str(EXAMPLES / "bm25.trec"), str(EXAMPLES / "bm25_rerank.trec")]
NOT_FOR_RUNS = ("pandas", "pyarrow", "rag_eval.ground_truth", "rag_eval.stages", "rag_eval.statistics")
NOT_FOR_TEXT = ("rag_eval.renderers.html_report", "rag_eval.renderers.result_folder")


def _loaded_by(code: str) -> list[str]:
    """The modules loaded by ``code`` in a fresh interpreter (its last line prints them)."""
    code += "\nimport json, sys; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/").stdout
    return json.loads(out.splitlines()[-1])


def _heavy(loaded: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in loaded if any(m == p or m.startswith(p + ".") for p in prefixes)]


@pytest.mark.parametrize("format", ["table", "json"])
def test_the_evaluate_command_loads_no_pandas_nor_tools_it_does_not_use(format):
    argv = ["evaluate", *EXAMPLE, "-m", "ndcg@5", "-m", "judged@5", "--format", format]
    loaded = _loaded_by(
        "import contextlib, io\nfrom rag_eval.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    assert main({argv!r}) == 0"
    )
    assert "rag_eval.reports.evaluation" in loaded and "numpy" in loaded
    # json prints the summary through pandas (and pandas 3 its str columns through pyarrow); the table without it
    assert _heavy(loaded, (NOT_FOR_RUNS[2:] if format == "json" else NOT_FOR_RUNS) + NOT_FOR_TEXT) == []


def test_a_face_loads_its_modules_on_first_use():
    loaded = _loaded_by("import rag_eval.reports, rag_eval.renderers, rag_eval.data")
    assert _heavy(loaded, ("rag_eval.reports.evaluation", "rag_eval.renderers.formats", "rag_eval.data.qrels")) == []
    loaded = _loaded_by("from rag_eval.reports import DEFAULT_METRICS")
    assert "rag_eval.reports.evaluation" in loaded
    assert _heavy(loaded, NOT_FOR_RUNS + ("rag_eval.data.queryset", "rag_eval.data.spans", "rag_eval.renderers")) == []


def _example() -> Report:
    return evaluate(
        Qrels.load(EXAMPLE[0]),
        {"bm25": Run.load(EXAMPLE[1]), "bm25_rerank": Run.load(EXAMPLE[2])},
        ["recall@20", "recall@5", "precision@5", "ndcg@5", "mrr@5", "judged@5"],
    )


def _nan_and_odd_names() -> Report:
    """A run sharing no query with the qrels (every value 0, judged@5 NaN: a NaN mean), names with a tab, a line
    break, a carriage return and wide characters, and a geometric mean."""
    qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}})
    runs = {
        "tab\there": Run.from_ranking({"x9": ["d1"]}, name="a"),
        "line\nbreak\rreturn": Run.from_ranking({"q1": ["d2", "d1"], "q2": ["d3"]}, name="b"),
        "日本語-run-with-a-rather-long-name": Run.from_ranking({"q1": ["d1"], "q2": ["d4", "d3"]}, name="c"),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the run sharing no query is announced: not what is tested here
        return evaluate(qrels, runs, ["judged@5", "gm_map", "P@1", "ndcg@10"])


def _trec_eval_conventions() -> Report:
    qrels = Qrels.from_dict({f"q{i}": {f"d{j}": (i + j) % 3 for j in range(6)} for i in range(40)})
    run = Run.from_scores({f"q{i}": {f"d{j}": float((i * j) % 7) for j in range(8)} for i in range(39)}, name="r")
    return evaluate(qrels, run, ["map", "ndcg_cut_10", "recip_rank", "bpref"], conventions="trec_eval")


def _weighted_by_a_query_set() -> Report:
    """A report with a QuerySet: its summary has the traffic-weighted columns, which the table does not show."""
    from rag_eval import QuerySet

    report = _trec_eval_conventions()
    return report.with_query_set(QuerySet({f"q{i}": f"question {i}" for i in range(40)}))


def _text_metrics_only() -> Report:
    qrels = Qrels.from_dict({"q1": {"d1": 1}})
    return evaluate(qrels, Run.from_ranking({"q1": ["d1", "d2"]}, name="r"), ["relstring@3"])


@pytest.mark.parametrize(
    "make", [_example, _nan_and_odd_names, _trec_eval_conventions, _weighted_by_a_query_set, _text_metrics_only]
)
@pytest.mark.parametrize(("resamples", "seed"), [(1000, 0), (17, 5)])
def test_the_summary_table_is_format_report_s_table(make, resamples, seed):
    report = make()
    text = format_summary_table(report, resamples=resamples, seed=seed)
    assert text == format_report(report, "table", resamples=resamples, seed=seed)
    assert text.endswith("\n")


def test_the_summary_table_shows_nan_and_escapes_names_as_pandas_does():
    text = format_summary_table(_nan_and_odd_names())
    lines = text.splitlines()
    assert lines[0].split() == ["run", "metric", "mean", "std", "ci_low", "ci_high", "n", "n_nan"]
    judged = next(line for line in lines if line.lstrip().startswith("tab\\there") and "judged@5" in line)
    assert judged.split()[2:] == ["NaN", "NaN", "NaN", "NaN", "0", "2"]  # both queries counted, each 0/0
    assert any(line.lstrip().startswith("line\\nbreak\\rreturn ") for line in lines)
    assert len({len(line) for line in lines}) == 1  # every column right-aligned to one width
