"""Start-up (issue 28): ``rag-eval evaluate`` on runs loads what it uses only (no pandas, pyarrow, ground-truth tools,
stages, HTML or folder writers; with the table, no pydantic), and the summary it prints without pandas is
``format_report``'s table, and the card it prints without pydantic the card's ``render()``, character for character."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from rag_eval import Conventions, MetricCard, Qrels, Report, Run, evaluate
from rag_eval.renderers import format_report
from rag_eval.renderers.formats import format_summary_table

from .conftest import ROOT

EXAMPLES = ROOT / "rag_eval" / "examples"
EXAMPLE = [str(EXAMPLES / "qrels.txt"), str(EXAMPLES / "bm25.trec"), str(EXAMPLES / "bm25_rerank.trec")]
NOT_FOR_RUNS = ("pandas", "pyarrow", "rag_eval.ground_truth", "rag_eval.stages", "rag_eval.statistics")
NOT_FOR_TEXT = ("rag_eval.renderers.html_report", "rag_eval.renderers.result_folder")
# the table and its card are printed without pydantic (the card's model is made where it is read): issue 28
NOT_FOR_TABLE = ("pydantic", "pydantic_core", "annotated_types", "rag_eval.reports.card")


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
    # json prints the summary through pandas (and pandas 3 its str columns through pyarrow), and the card's JSON
    # through pydantic; the table (and the card printed to stderr) without either
    heavy = NOT_FOR_RUNS[2:] + NOT_FOR_TEXT if format == "json" else NOT_FOR_RUNS + NOT_FOR_TEXT + NOT_FOR_TABLE
    assert _heavy(loaded, heavy) == []


def test_the_table_s_card_is_printed_without_pydantic_and_is_the_card_s_render():
    """``rag-eval evaluate --format table`` prints the card's text without making its pydantic model: the same
    text as ``report.card.render()``, character for character."""
    code = (
        "import contextlib, io, sys\nfrom rag_eval.cli import main\nerr = io.StringIO()\n"
        f"with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):\n"
        f"    assert main({['evaluate', *EXAMPLE, '-m', 'ndcg@5', '-m', 'err@5', '--format', 'table']!r}) == 0\n"
        "assert 'pydantic' not in sys.modules\nimport json\nprint(json.dumps(err.getvalue()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/").stdout
    printed = json.loads(out.splitlines()[-1])
    report = evaluate(
        Qrels.load(EXAMPLE[0]),
        {"bm25": Run.load(EXAMPLE[1]), "bm25_rerank": Run.load(EXAMPLE[2])},
        ["ndcg@5", "err@5"],
    )
    card = report.card.render()
    assert "metric err@5: max_grade not given: the qrels' largest grade, 3" in card
    assert printed.endswith(card + "\n") and printed.startswith("rag-eval: warning: judged share below 0.9")


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


def _condensed() -> Report:
    qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": -1}, "q2": {"d3": 2}})
    run = Run.from_scores({"q1": {"d1": 1.0, "d5": 2.0}, "q2": {"d3": 1.0}, "q3": {"d1": 1.0}}, name="r")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evaluate(qrels, run, ["ndcg@5", "err@5", "gm_map"], conventions=Conventions(unjudged="remove"))


@pytest.mark.parametrize("make", [_example, _nan_and_odd_names, _trec_eval_conventions, _text_metrics_only, _condensed])
def test_a_report_s_card_is_its_draft_validated(make):
    """A report of runs holds its card as plain data (printed without pydantic) until it is read: the card made
    of it holds the same values (pydantic changed none) and prints the same text; what it rests on reads the same."""
    report = make()
    draft = report._draft
    assert draft is not None and report.render_card() == draft.render() and report._draft is draft
    fields = draft.fields()
    card = report.card
    assert report._draft is None and card.model_dump() == fields
    assert card.render() == report.render_card() == draft.render()
    assert card.conventions == draft.conventions and card.preset == fields["preset"]
    assert card.hashes is not None and card.hashes.model_dump() == fields["hashes"]
    saved = card.model_dump_json()  # as a saved report keeps it (NaN shares as null): read back, the same JSON
    assert MetricCard.model_validate_json(saved).model_dump_json() == saved


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


def test_conventions_keep_the_pydantic_model_s_face():
    """Conventions is a frozen dataclass (no pydantic on the evaluate path): its fields, text, dump, JSON on a card
    and refusals are the pydantic model's (the messages: tests/test_bad_input_values.py)."""
    import pickle

    conv = Conventions(max_depth=np.int64(7), ties="doc_id")
    assert conv.model_dump() == {
        "ties": "doc_id",
        "relevance_threshold": 1,
        "gain": "exp",
        "no_relevant": "zero",
        "missing_run": "zero",
        "unjudged": "keep",
        "negative_grades": "nonrelevant",
        "failed": "zero",
        "max_depth": 7,
    }
    assert conv.model_dump(mode="json") == conv.model_dump() and type(conv.max_depth) is int
    assert conv.model_dump_json().startswith('{"ties":"doc_id","relevance_threshold":1,"gain":"exp",')
    assert str(conv).startswith("ties='doc_id' relevance_threshold=1 gain='exp' ") and str(conv).endswith("max_depth=7")
    assert repr(conv).startswith("Conventions(ties='doc_id', relevance_threshold=1, gain='exp', ")
    assert conv == Conventions(ties="doc_id", max_depth=7) != Conventions() and hash(conv) == hash(conv.replace())
    assert pickle.loads(pickle.dumps(conv)) == conv and Conventions.preset("trec_eval") == Conventions(
        gain="linear", missing_run="skip", negative_grades="unjudged"
    )
    with pytest.raises(AttributeError):
        conv.ties = "trec_eval"  # type: ignore[misc]
    # on a card: written as its fields, read back from them, checked as it is made
    card = _condensed().card
    assert json.loads(card.model_dump_json())["conventions"] == Conventions(unjudged="remove").model_dump()
    assert MetricCard.model_validate_json(card.model_dump_json()).conventions == Conventions(unjudged="remove")
    with pytest.raises(ValueError, match="Conventions: gain='log': Input should be 'exp' or 'linear'"):
        MetricCard.model_validate({**card.model_dump(), "conventions": {"gain": "log"}})
    schema = MetricCard.model_json_schema()["$defs"]["Conventions"]  # the card's JSON schema describes it still
    assert schema["properties"]["gain"]["enum"] == ["exp", "linear"] and schema["additionalProperties"] is False
    assert schema["properties"]["max_depth"]["description"].startswith("Only the top N of each ranking")
