"""The house's layers: each module of rag_eval imports only its own layer and the layers below it."""

from __future__ import annotations

import ast

from .conftest import ROOT

# package (first name under rag_eval) -> layer; adapters/ ships as rag_eval.adapters
LAYERS = {
    "_accel": 0,
    "_files": 0,
    "_optional": 0,
    "_speedups": 0,
    "_version": 0,
    "errors": 0,
    "data": 1,
    "metrics": 2,
    "stages": 3,
    "adapters": 3,
    "reports": 4,
    "ground_truth": 4,
    "cli": 5,
    "labelling": 5,
    "bench": 5,
    "examples": 5,
    "__main__": 5,
}


def _package_of(path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[0] == "adapters":
        return "adapters"
    return parts[1] if len(parts) > 1 else "__init__"


def _imported(path, tree) -> set[str]:
    """The rag_eval packages a module imports (absolute or relative), at any place in the module."""
    here = path.relative_to(ROOT).with_suffix("").parts
    if here[0] == "adapters":
        here = ("rag_eval",) + here
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(here[: len(here) - node.level])
                target = base + (node.module.split(".") if node.module else [])
                names = [target + [a.name] for a in node.names] if not node.module else [target]
            else:
                names = [(node.module or "").split(".")]
            for name in names:
                if name[:1] == ["rag_eval"] and len(name) > 1:
                    found.add(name[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name.split(".")
                if name[0] == "rag_eval" and len(name) > 1:
                    found.add(name[1])
    return found


def test_every_module_imports_only_its_layer_and_below():
    files = sorted((ROOT / "rag_eval").rglob("*.py")) + sorted((ROOT / "adapters").rglob("*.py"))
    assert len(files) > 40
    wrong = []
    for path in files:
        package = _package_of(path)
        if package == "__init__":
            continue  # the package face re-exports from every layer
        assert package in LAYERS, f"{path}: put its package in a layer (tests/test_layers.py)"
        for target in _imported(path, ast.parse(path.read_text("utf-8"))):
            if target in LAYERS and LAYERS[target] > LAYERS[package]:
                wrong.append(
                    f"{path.relative_to(ROOT)} (layer {LAYERS[package]}) imports rag_eval.{target} "
                    f"(layer {LAYERS[target]})"
                )
    assert wrong == []
