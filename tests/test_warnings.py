"""Every warning rag_eval gives is of its own kind: a subclass of rag_eval.errors.RagEvalWarning, so that tests
and users can filter exactly the kind they mean. Checked on the source, so a new warning cannot slip in as a bare
UserWarning."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import rag_eval.errors as errors
from rag_eval.errors import LowJudgedShare

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "rag_eval").rglob("*.py")) + sorted((ROOT / "adapters").glob("*.py"))
KINDS = {name for name, obj in vars(errors).items() if inspect.isclass(obj) and issubclass(obj, errors.RagEvalWarning)}


def _warning_calls(tree: ast.AST):
    """``(line, category)`` of every ``warnings.warn(...)`` and ``warn(...)`` call (category as written, or None)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name != "warn":
            continue
        category = (
            node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "category"), None)
        )
        yield node.lineno, (ast.unparse(category) if category is not None else None)


def test_every_warning_names_its_own_kind():
    offenders = []
    for path in SOURCES:
        for line, category in _warning_calls(ast.parse(path.read_text(encoding="utf-8"))):
            if path.name == "input_files.py" and category == "category":  # the one helper that passes a kind through
                continue
            if path.name in ("_moved.py", "bench.py") and category == "DeprecationWarning":  # old import paths
                continue
            if category not in KINDS:
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {category}")
    assert offenders == []


def test_the_kinds_are_exported_and_documented():
    for name in KINDS:
        assert name in errors.__all__, name
        assert getattr(errors, name).__doc__, name
    assert issubclass(LowJudgedShare, errors.RagEvalWarning) and issubclass(errors.RagEvalWarning, UserWarning)
    assert "LowJudgedShare" in KINDS and len(KINDS) >= 13
