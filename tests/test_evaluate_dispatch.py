"""rag_eval.evaluate is a dispatcher (rag_eval.reports.evaluation) over three evaluators (runs, pipeline results,
projections) that do not import it; no module of rag_eval.reports is named after a function it exports; warnings
from any of the three point at the caller's line."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

import rag_eval
from rag_eval import Run, SpanLabels, project
from rag_eval.data import Span
from rag_eval.errors import LowJudgedShare, LowQueryOverlap
from rag_eval.stages import Hit, Pipeline, Retriever

from .conftest import ROOT

REPORTS = ROOT / "rag_eval" / "reports"
QRELS = {"q1": {"a": 1, "b": 1}, "q2": {"c": 2}}


def _relative_imports(path: Path) -> set[str]:
    """The modules of rag_eval.reports that ``path`` imports (anywhere in it, function bodies included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rag_eval.reports."):
            found.add(node.module.split(".")[2])
    return found


def test_the_evaluators_do_not_import_the_dispatcher():
    dispatcher = _relative_imports(REPORTS / "evaluation.py")
    assert {"_runs", "projected", "stage_aware"} <= dispatcher
    for name in ("_runs", "projected", "stage_aware", "_judged", "_systematic", "report", "card"):
        assert "evaluation" not in _relative_imports(REPORTS / f"{name}.py"), name


EVALUATORS = ("evaluation", "_runs", "projected", "stage_aware", "_judged", "_systematic", "formats", "trec_eval")


def test_no_circle_through_the_evaluators():
    """No module of evaluate's (the dispatcher, the evaluators, their helpers, the formats) is in an import circle
    within rag_eval.reports."""
    graph = {p.stem: _relative_imports(p) & {q.stem for q in REPORTS.glob("*.py")} for p in REPORTS.glob("*.py")}
    graph.pop("__init__")

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph.get(start, ()))

    assert [m for m in EVALUATORS if reaches(m, m, {m})] == []


def test_no_module_of_reports_is_named_after_what_it_exports():
    """``rag_eval.reports.evaluate`` is the function, not a module shadowing it (nor stages: rag_eval.stages)."""
    modules = {p.stem for p in REPORTS.glob("*.py")}
    assert "evaluate" not in modules and "stages" not in modules
    assert callable(rag_eval.reports.evaluate) and rag_eval.reports.evaluate is rag_eval.evaluate
    assert rag_eval.evaluate.__module__ == "rag_eval.reports.evaluation"


def test_one_entry_point_for_the_three_kinds_of_input():
    run = Run.from_ranking({"q1": ["a", "x"], "q2": ["c"]}, name="r")
    plain = rag_eval.evaluate(QRELS, run, ["recall@2"], judged_threshold=0)
    assert plain.mean("r", "recall@2") == (0.5 + 1.0) / 2 and not plain.staged

    class Fixed(Retriever):
        def search(self, query: str, k: int) -> list[Hit]:
            return [Hit("a", 2.0), Hit("x", 1.0)] if query == "q1" else [Hit("y", 1.0)]

    result = Pipeline(Fixed("first"), depth=2, budget=2).run({"q1": "q1", "q2": "q2"})
    staged = rag_eval.evaluate(QRELS, {"p": result}, ["recall@budget"], judged_threshold=0)
    assert staged.staged and staged.values("p", "recall@budget", stage="first").to_dict() == {"q1": 0.5, "q2": 0.0}

    labels = SpanLabels([Span("d1", 0, 10, 1, "q1")])
    projection = project({"q1": ["c1", "c2"]}, {"c1": ("d1", 50, 60), "c2": ("d1", 0, 20)}, labels)
    projected = rag_eval.evaluate(labels, {"chunks": projection}, ["mrr"], judged_threshold=0)
    assert projected.mean("chunks", "mrr") == 0.5  # the labelled span is in the second chunk
    assert [i.role for i in projected.card.inputs] == ["labels", "run"]


def test_qrels_of_another_kind_are_refused_by_the_dispatcher():
    with pytest.raises(TypeError, match="qrels must be a Qrels or a"):
        rag_eval.evaluate([("q1", "a", 1)], Run.from_ranking({"q1": ["a"]}, name="r"), ["P@1"])
    with pytest.raises(ValueError, match="no metrics requested"):
        rag_eval.evaluate(QRELS, Run.from_ranking({"q1": ["a"]}, name="r"), [])


def test_warnings_point_at_the_callers_line():
    """The evaluators sit one or two calls below evaluate: each warning still names this file and line."""
    run = Run.from_ranking({"other": ["a"]}, name="r")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = _line() + 1
        rag_eval.evaluate(QRELS, run, ["P@1"])
    kinds = {w.category for w in caught}
    assert LowQueryOverlap in kinds
    assert {(Path(w.filename).name, w.lineno) for w in caught if w.category is LowQueryOverlap} == {
        (Path(__file__).name, line)
    }
    sparse = Run.from_ranking({"q1": ["a", "u1", "u2", "u3"], "q2": ["u4"]}, name="r")
    labels = SpanLabels([Span("d1", 0, 10, 1, "q1")])
    projection = project({"q1": ["c1", "c9"]}, {"c1": ("d1", 0, 10), "c9": ("d9", 0, 10)}, labels)
    for call in (
        lambda: rag_eval.evaluate(QRELS, sparse, ["P@4"]),
        lambda: rag_eval.evaluate(labels, {"chunks": projection}, ["P@2"]),
    ):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        low = [w for w in caught if w.category is LowJudgedShare]
        assert low and all(Path(w.filename).name == Path(__file__).name for w in low), [w.filename for w in caught]


def _line() -> int:
    import inspect

    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno
