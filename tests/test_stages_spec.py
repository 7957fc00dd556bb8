"""A pipeline result keeps a frozen description of the pipeline (PipelineSpec), never the live pipeline; the
stages package's face; fuse's RRF constant is rrf_k (k is a cutoff everywhere)."""

from __future__ import annotations

import dataclasses
import gc
import importlib
import pathlib
import pkgutil
import types
import weakref
from collections.abc import Sequence

import pytest

import rag_eval
import rag_eval.stages
from rag_eval.stages import (
    Budget,
    Fusion,
    Hit,
    Pipeline,
    PipelineResult,
    PipelineSpec,
    Reranker,
    Retriever,
    StageSpec,
    count_tokens,
    fuse,
)


class Fixed(Retriever):
    def __init__(self, name: str, ids: list[str], **kw: object) -> None:
        super().__init__(name, **kw)  # type: ignore[arg-type]
        self.ids = ids
        self.model = bytearray(1 << 20)  # stands for a model or an index the result must not keep alive

    def config(self) -> dict[str, object]:
        return {"ids": self.ids}

    def search(self, query: str, k: int) -> list[Hit]:
        return [Hit(d, float(len(self.ids) - i), text=f"text of {d}") for i, d in enumerate(self.ids[:k])]


class Reverse(Reranker):
    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        return list(reversed(hits))


def words(text: str) -> int:
    return len(text.split())


def test_a_result_describes_its_pipeline_in_a_frozen_spec():
    one, two, rerank = Fixed("one", ["a", "b", "c"]), Fixed("two", ["c", "a"], version="v2"), Reverse("rev")
    pipe = Pipeline(fuse(one, two), rerank, depth=3, budget="4tok", corpus=["a", "b", "c", "d"], tokenizer=words)
    result = pipe.run({"q": "x"})
    spec = result.pipeline
    assert isinstance(spec, PipelineSpec) and not isinstance(spec, Pipeline)
    assert repr(spec) == str(spec) == spec.structure == repr(pipe) == "rrf(one, two) %3 >> rev %budget(4tok)"
    assert repr(result) == "PipelineResult(rrf(one, two) %3 >> rev %budget(4tok), 1 queries)"
    assert (spec.depth, spec.budget, spec.corpus_size, spec.tokenizer) == (3, Budget(tokens=4), 4, words)
    assert [(s.name, s.role, s.kind, s.cls, s.version) for s in spec.stages] == [
        ("one", "input", "retriever", "tests.test_stages_spec.Fixed", None),
        ("two", "input", "retriever", "tests.test_stages_spec.Fixed", "v2"),
        ("rrf(one,two)", "first", "retriever", "rag_eval.stages.fusion.Fusion", None),
        ("rev", "reranker", "reranker", "tests.test_stages_spec.Reverse", None),
    ]
    assert [s.fingerprint for s in spec.stages] == [s.fingerprint() for s in pipe.stages]
    assert spec.stage("two").covers == "version 'v2' (given: the code is not looked at)"
    assert [s.role for s in spec.stages] == [out.role for out in result.stages.values()]
    with pytest.raises(KeyError, match=r"no stage 'three' in rrf\(one, two\) %3 >> rev %budget\(4tok\)"):
        spec.stage("three")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.depth = 5  # type: ignore[misc]
    # what was delivered is cut with the spec's tokenizer: "text of c" (3 words) fits 4 tokens, a second does not
    assert result.delivered() == {"q": 1}
    assert result.delivered("one") == {"q": 1}


def test_a_result_keeps_none_of_the_stages_alive():
    """The result outlives its pipeline: the stages (their models, indexes, clients) are freed with it."""
    first = Fixed("bm25", ["a", "b"])
    alive = weakref.ref(first)
    result = Pipeline(first, Reverse("rev"), depth=2, budget=1).run({"q": "x"})
    del first
    gc.collect()
    assert alive() is None
    assert [h.doc_id for h in result.stages["rev"].outcomes["q"].hits] == ["b", "a"]
    report = rag_eval.evaluate({"q": {"a": 1}}, result)  # the report reads the spec only
    assert report.values(report.runs[0], "recall@budget", stage="rev")["q"] == 0.0
    assert report.values(report.runs[0], "recall@budget", stage="bm25")["q"] == 1.0
    assert report.card.pipeline["structure"] == "bm25 %2 >> rev %budget(1)"


def test_equal_pipelines_give_equal_specs():
    def spec(tokenizer=count_tokens) -> PipelineSpec:
        pipe = Pipeline(Fixed("bm25", ["a"]), depth=4, budget=2, tokenizer=tokenizer)
        return pipe.run({"q": "x"}).pipeline

    assert spec() == spec() and hash(spec()) == hash(spec())
    assert spec() == spec(words)  # the tokenizer is a function: it is not compared (the budget of chunks is)
    assert spec() != dataclasses.replace(spec(), depth=5)
    assert isinstance(spec().stages[0], StageSpec)


def test_a_result_is_made_from_a_spec_only():
    pipe = Pipeline(Fixed("bm25", ["a"]), depth=1)
    with pytest.raises(TypeError, match="a PipelineResult holds a PipelineSpec, not a Pipeline"):
        PipelineResult(pipe, {"q": "x"}, {})  # type: ignore[arg-type]


# ----- fuse's RRF constant -------------------------------------------------------------------------------------
def test_fuse_takes_rrf_k_and_refuses_k_with_the_new_name():
    one, two = Fixed("one", ["a", "b", "c"]), Fixed("two", ["c", "a"])
    with pytest.raises(TypeError) as info:
        fuse(one, two, k=1)  # type: ignore[call-arg]
    assert str(info.value) == (
        "fuse takes the RRF constant as rrf_k= (k is a cutoff everywhere in rag_eval): write fuse(..., rrf_k=1)"
    )
    with pytest.raises(TypeError, match=r"Fusion takes the RRF constant as rrf_k=.*write Fusion\(\.\.\., rrf_k=60\)"):
        Fusion(one, two, k=60)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="fuse got an unexpected keyword argument 'weight'"):
        fuse(one, two, weight=[1, 2])  # type: ignore[call-arg]
    fused = fuse(one, two, rrf_k=1)
    assert fused.rrf_k == 1 and not hasattr(fused, "k")
    # a: 1/2 + 1/3, c: 1/4 + 1/2, b: 1/3 (by hand)
    assert [(h.doc_id, round(h.score or 0, 4)) for h in fused.search("x", 3)] == [
        ("a", 0.8333),
        ("c", 0.75),
        ("b", 0.3333),
    ]
    assert fuse(one, two).rrf_k == 60 == rag_eval.stages.fusion.RRF_K


def test_the_rrf_constant_keeps_its_cache_key():
    """rrf_k is the key's "k" of 0.1: a cache written before the rename still serves the fused pipeline."""
    one, two = Fixed("one", ["a"]), Fixed("two", ["a"])
    assert fuse(one, two, rrf_k=7).config()["k"] == 7
    assert fuse(one, two, rrf_k=7).fingerprint() != fuse(one, two, rrf_k=8).fingerprint()


# ----- the face --------------------------------------------------------------------------------------------------
def test_the_stages_face_is_sorted_and_shadows_no_module():
    names = rag_eval.stages.__all__
    assert names == sorted(names)
    assert all(hasattr(rag_eval.stages, n) for n in names)
    modules = {m.name for m in pkgutil.iter_modules(rag_eval.stages.__path__)}
    assert modules & set(names) == set(), "a module named like a public name shadows it"
    public = sorted(m for m in modules if not m.startswith("_"))
    assert public == [
        "budget",
        "contexts",
        "fingerprint",
        "fusion",
        "generator",
        "hit_table",
        "hits",
        "judges",
        "pipeline",
        "result",
        "stage",
        "traced",
    ]
    for m in modules:  # every module imports on its own
        importlib.import_module(f"rag_eval.stages.{m}")
    assert {"PipelineResult", "PipelineSpec", "StageSpec", "StageOutput", "Outcome", "StageCache"} <= set(names)
    assert callable(rag_eval.stages.chunk_map) and not isinstance(rag_eval.stages.chunk_map, types.ModuleType)


def test_no_module_of_the_stages_or_adapters_imports_another_in_a_circle():
    """Every import counts, also one inside a function or under TYPE_CHECKING: the runner does not import the
    pipeline that calls it, and the result does not import the pipeline it describes."""
    import ast

    from .conftest import ROOT

    def module_name(path: pathlib.Path) -> str:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        parts = ["rag_eval", *parts] if parts[0] == "adapters" else parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    files = [*(ROOT / "rag_eval" / "stages").glob("*.py"), *(ROOT / "adapters").glob("*.py")]
    modules = {module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                found = {f"{target}.{a.name}" for a in node.names} & modules.keys() or {target}
            elif isinstance(node, ast.Import):
                found = {a.name for a in node.names}
            else:
                continue
            graph[name] |= {m for m in found if m in modules and m != name and m != module_name(path).rsplit(".", 1)[0]}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), list(graph[start])
        while todo:
            here = todo.pop()
            if here == goal:
                return True
            if here not in seen:
                seen.add(here)
                todo.extend(graph[here])
        return False

    faces = {"rag_eval.stages", "rag_eval.adapters"}
    assert "rag_eval.stages._runner" in graph["rag_eval.stages.pipeline"]  # the graph sees imports
    circles = sorted(m for m in graph if m not in faces and reaches(m, m))
    assert circles == [], f"modules in an import circle: {circles}"
