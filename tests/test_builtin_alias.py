"""rag_eval.bench, renamed rag_eval.builtin, still imports: the same modules, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import sys

import pytest

import rag_eval.builtin.demo
import rag_eval.builtin.pipelines


def _forget_the_alias():
    for name in [n for n in sys.modules if n == "rag_eval.bench" or n.startswith("rag_eval.bench.")]:
        del sys.modules[name]
    if hasattr(sys.modules["rag_eval"], "bench"):
        delattr(sys.modules["rag_eval"], "bench")


def test_the_old_name_and_its_submodules_are_the_new_modules_with_a_warning():
    _forget_the_alias()
    with pytest.warns(DeprecationWarning, match=r"^rag_eval\.bench is deprecated: import rag_eval\.builtin$"):
        importlib.import_module("rag_eval.bench")
    with pytest.warns(
        DeprecationWarning, match=r"rag_eval\.bench\.pipelines is deprecated: import rag_eval\.builtin\."
    ):
        from rag_eval.bench.pipelines import Parts, build
    assert (Parts, build) == (rag_eval.builtin.pipelines.Parts, rag_eval.builtin.pipelines.build)
    with pytest.warns(DeprecationWarning, match=r"rag_eval\.bench\.demo is deprecated") as caught:
        import rag_eval.bench.demo as old_demo
    assert old_demo is rag_eval.builtin.demo and sys.modules["rag_eval.bench.demo"] is rag_eval.builtin.demo
    assert caught[0].filename == __file__  # said at the import statement, not inside the import system
    # the module keeps its own name and spec, so resources and pickles name rag_eval.builtin
    assert old_demo.__name__ == old_demo.__spec__.name == "rag_eval.builtin.demo"
    from importlib import resources

    with pytest.warns(DeprecationWarning, match=r"rag_eval\.bench\.demo_data is deprecated"):
        files = resources.files("rag_eval.bench.demo_data")
    assert files.joinpath("questions.jsonl").read_text(encoding="utf-8").startswith("{")
    finders = [f for f in sys.meta_path if repr(f) == "<rag_eval.bench alias of rag_eval.builtin>"]
    _forget_the_alias()
    with pytest.warns(DeprecationWarning):
        importlib.import_module("rag_eval.bench")
    assert [f for f in sys.meta_path if repr(f) == "<rag_eval.bench alias of rag_eval.builtin>"] == finders  # once


def test_an_unknown_submodule_of_the_old_name_is_not_found():
    with pytest.warns(DeprecationWarning), pytest.raises(ModuleNotFoundError, match=r"rag_eval\.builtin\.nothing"):
        importlib.import_module("rag_eval.bench.nothing")
