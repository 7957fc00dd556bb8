"""Issue 27, class 9: a stage's cache key never misses state that changed since it was taken.

Every public type a stage may close over (enumerated from the packages' ``__all__``, so that a new type without a
case here fails :func:`test_every_public_type_has_a_case`) is built for real, closed over by a function stage, run
with a stage cache, mutated by every path this test can reach (setting each public attribute, adding to and writing
into each dict, list, set, array and frame reachable from it), and run again: the mutation is refused, or the cache
misses and the stage reads the new state. No fingerprint is remembered on an object that can change after it was taken
(rag_eval/stages/_fingerprint.py: Qrels and a Run's columns are read-only, so theirs are; a Collection's corpus and
queries, frames and writable arrays are read again at every run).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import importlib
import inspect
import os
import pickle
import types
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rag_eval
import rag_eval.statistics
from rag_eval import data as D
from rag_eval import ground_truth as G
from rag_eval import reports as R
from rag_eval import stages as S
from rag_eval.adapters import functions
from rag_eval.data import Chunk, Collection
from rag_eval.stages import Uncacheable
from rag_eval.stages.fingerprint import fingerprint

PACKAGES = (
    "rag_eval",
    "rag_eval.data",
    "rag_eval.stages",
    "rag_eval.reports",
    "rag_eval.statistics",
    "rag_eval.renderers",
    "rag_eval.drivers",
    "rag_eval.ground_truth",
    "rag_eval.metrics",
    "rag_eval.labelling",
)

# -- the content a stage reads, computed here independently of rag_eval's fingerprint ---------------------------

_DERIVED = frozenset({"_memo", "_fingerprint"})  # caches of what the rest of the state says


def _content(value: Any) -> str:
    """A digest of everything ``value`` holds (private attributes included; caches of derived values left out)."""
    digest = hashlib.sha256()
    _walk(value, digest, set(), [])
    return digest.hexdigest()[:16]


def _walk(value: Any, out: Any, seen: set[int], alive: list[Any]) -> None:
    kind = type(value)
    if value is None or kind in (bool, int, float, complex, str, bytes):
        out.update(f"{kind.__name__}:{value!r};".encode())
        return
    if id(value) in seen:
        out.update(b"@;")
        return
    seen.add(id(value))
    alive.append(value)
    out.update(f"<{kind.__module__}.{kind.__qualname__}>".encode())
    top = kind.__module__.partition(".")[0]
    if isinstance(value, np.ndarray):
        out.update(f"{value.dtype.str}{value.shape}".encode())
        if value.dtype.hasobject:
            _walk(value.tolist(), out, seen, alive)
        else:
            out.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, np.generic):
        out.update(value.tobytes())
    elif isinstance(value, os.PathLike):  # a path: what it names (pathlib caches its parts on the object)
        out.update(os.fspath(value).encode())
    elif top == "pandas":
        _walk(value.to_dict("split") if kind.__name__ == "DataFrame" else list(value.items()), out, seen, alive)
        _walk(getattr(value, "name", None), out, seen, alive)
    elif top == "pyarrow":
        _walk(value.to_pylist() if hasattr(value, "to_pylist") else str(value), out, seen, alive)
    elif kind in (dict, types.MappingProxyType) or (isinstance(value, Mapping) and not _attributes(value)):
        for key, item in value.items():
            _walk(key, out, seen, alive)
            _walk(item, out, seen, alive)
    elif kind in (list, tuple):
        for item in value:
            _walk(item, out, seen, alive)
    elif kind in (set, frozenset):
        out.update("".join(sorted(_content(item) for item in value)).encode())
    elif isinstance(value, (types.FunctionType, types.MethodType, functools.partial)):
        if isinstance(value, types.FunctionType):
            out.update(value.__code__.co_code)
            _walk([c.cell_contents for c in value.__closure__ or ()], out, seen, alive)
            _walk(value.__defaults__, out, seen, alive)
        else:
            _walk(vars(value) if hasattr(value, "__dict__") else repr(type(value)), out, seen, alive)
    elif isinstance(value, (type, types.ModuleType, types.BuiltinFunctionType)):
        out.update(getattr(value, "__qualname__", value.__name__).encode())
    else:
        for name, item in sorted(_attributes(value).items()):
            out.update(name.encode())
            _walk(item, out, seen, alive)


def _attributes(value: Any) -> dict[str, Any]:
    """An object's own state: its ``__dict__`` and slots, without the caches of derived values."""
    kind = type(value)
    cached = {n for c in kind.__mro__ for n, v in vars(c).items() if isinstance(v, functools.cached_property)}
    state = dict(getattr(value, "__dict__", None) or {})
    if isinstance(value, rag_eval.Qrels):  # its __dict__ holds only what it derives from its judgements
        state = {}
    for cls in kind.__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            private = name.startswith("__") and not name.endswith("__")
            mangled = f"_{cls.__name__.lstrip('_')}{name}" if private else name
            try:
                state[mangled] = object.__getattribute__(value, mangled)
            except AttributeError:
                continue
    return {n: v for n, v in state.items() if n not in _DERIVED and n not in cached}


# -- the stage and the runs -----------------------------------------------------------------------------------


def _stage_over(value: Any) -> Any:
    """A retriever whose one hit is the digest of ``value``'s content, read when it runs."""

    def search(query: str, k: int) -> list[str]:
        return [_content(value)]

    return functions.retriever(search, name="over")


def _run(stage: Any, cache: Path) -> tuple[str, int]:
    """The stage's one hit and its cache hits, run with ``cache``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = rag_eval.Pipeline(stage, depth=1, budget=1).run({"q1": "x"}, cache=cache)
    output = result.stages["over"]
    outcome = output.outcomes["q1"]
    assert outcome.hits is not None, outcome.error
    return outcome.hits[0].doc_id, output.cache_hits


# -- real instances of every public type ----------------------------------------------------------------------

QUERIES = {f"q{i}": f"question {i}" for i in range(12)}


def _qrels(shift: int = 0) -> rag_eval.Qrels:
    return rag_eval.Qrels.from_dict(
        {q: {f"d{i}": 1, f"d{i + 1}": 0, f"d{(i + shift) % 12 + 12}": 2} for i, q in enumerate(QUERIES)}
    )


def _ranked(name: str, seed: int) -> rag_eval.Run:
    rng = np.random.default_rng(seed)
    return rag_eval.Run.from_scores(
        {q: {f"d{d}": 10.0 - j for j, d in enumerate(rng.permutation(24)[:6].tolist())} for q in QUERIES}, name=name
    )


def _report(shift: int = 0, runs: tuple[int, ...] = (1, 7)) -> rag_eval.Report:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rag_eval.evaluate(_qrels(shift), [_ranked(f"s{r}", r) for r in runs], ["ndcg@10", "P@5", "mrr"])


def _quiet(make: Callable[[], Any]) -> Callable[[], Any]:
    def made() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return make()

    return made


def _pipeline_result() -> S.PipelineResult:
    stage = functions.retriever(lambda q, k: ["d1", "d2"][:k], name="r")
    return rag_eval.Pipeline(stage, depth=2, budget=1).run({"q1": "x", "q2": "y"})


def _judgement(doc: str = "d1", assessor: str = "alice") -> G.Judgement:
    return G.Judgement("q1", doc, 2, assessor, "2026-01-01T00:00:00Z")


def _judging_run() -> G.JudgingRun:
    import pandas as pd

    failures = pd.DataFrame({"query_id": ["q2"], "doc_id": ["d2"], "error": ["timeout"]})
    return G.JudgingRun("j", "abc", (0, 3), "log.jsonl", "p1", 2, 1, 0, 1, 0, 2, {("q1", "d1"): 2}, failures)


def _session(tmp: Path) -> Any:
    from rag_eval.labelling import LabellingSession

    return LabellingSession(rag_eval.pool([_ranked("a", 1)], depth=1), tmp / "out.qrels", assessor="alice")


def _cache(tmp: Path) -> S.StageCache:
    return S.StageCache(tmp / "shared-cache")


def _grade(items: Any, scale: Any) -> list[int]:
    return [1 for _ in items]


def _answer_prediction() -> Any:
    from rag_eval.statistics import answer_predictors

    from .test_answer_analysis import _report_and_answers

    report, answers, _ = _report_and_answers()
    return answer_predictors(report, answers, resamples=100)


def _condition_effects() -> Any:
    import pandas as pd

    from rag_eval.statistics import condition_effects

    from .test_answer_analysis import _report_and_answers

    _, answers, _ = _report_and_answers()
    both = pd.concat([answers, answers.assign(condition="oracle", f1=1.0, em=1.0, correct=True)], ignore_index=True)
    return condition_effects(both, resamples=100)


def _drift() -> Any:
    from rag_eval.statistics import drift

    before = _pipeline_result()
    stage = functions.retriever(lambda q, k: ["d3", "d1", "d2"][:k], name="r")
    after = rag_eval.Pipeline(stage, depth=2, budget=1).run({"q1": "x", "q2": "y"})
    return drift(before, after, {"q1": {"d1": 1}, "q2": {"d2": 1}})


def _judged_answers() -> Any:
    from rag_eval.ground_truth import judge_answers

    answers = {"q1": "Zenda", "q2": "Paris", "q3": "blue"}
    questions = {"q1": "capital of Freedonia?", "q2": "capital of France?", "q3": "colour of the sky?"}
    judge = functions.judge(lambda q, text: int("Zenda" in text or "Paris" in text), name="names", version="1")
    return judge_answers(judge, answers, questions)


def _answer_agreement() -> Any:
    from rag_eval.metrics.answers import grade_answers
    from rag_eval.statistics import answer_agreement

    judged = _judged_answers()
    grades = grade_answers({"q1": "Zenda", "q2": "Paris", "q3": "blue"}, {"q1": "Zenda", "q2": "Lyon", "q3": "blue"})
    return answer_agreement(judged, grades, resamples=100)


def _utility_labels() -> Any:
    from rag_eval.ground_truth import utility_labels
    from rag_eval.stages.contexts import sentence_reader

    from .test_answer_analysis import squad_grade

    texts = {
        "a": "Zenda is the capital of Freedonia.",
        "b": "Freedonia borders Sylvania.",
        "d": "The river flows north.",
    }
    questions = {"q1": "What is the capital of Freedonia?", "q2": "Which way does the river flow?"}
    references = {"q1": ["Zenda"], "q2": ["north"]}
    return utility_labels({"q1": ["a", "b"], "q2": ["d"]}, questions, texts, sentence_reader, squad_grade, references)


CASES: dict[str, Callable[..., Any]] = {
    # rag_eval.data
    "Chunk": lambda: Chunk("t", "text", {"k": "v", "n": [1, 2]}),
    "Collection": lambda: Collection(
        "c",
        {"d1": Chunk("", "apple"), "d2": Chunk("t", "pear", {"k": 1})},
        {"q1": "apple"},
        rag_eval.Qrels.from_dict({"q1": {"d1": 1}}),
    ),
    "GradedBy": lambda: D.GradedBy(3, (D.JudgeShare("j", "abc", frozenset({("q1", "d1")})),)),
    "JudgeShare": lambda: D.JudgeShare("j", "abc", frozenset({("q1", "d1")})),
    "Qrels": _qrels,
    "QueryProvenance": lambda: D.QueryProvenance("log.csv", 2, columns={"c": 1}),
    "QuerySet": lambda: D.QuerySet({"q1": "a", "q2": "b"}, {"q1": D.QueryProvenance("log.csv", 2)}),
    "QuerySetCard": lambda: D.QuerySetCard(source="log.csv", filters={"f": 1}, strata={"s": {"n": 1}}),
    "Run": lambda: _ranked("a", 1),
    "Source": lambda: D.Source("x.txt", "00" * 32),
    "ChunkRef": lambda: D.ChunkRef("d1", 0, 10),
    "Span": lambda: D.Span("d1", 0, 10, 1, "q1"),
    "SpanLabels": lambda: D.SpanLabels([D.Span("d1", 0, 10, 1, "q1")], docs={"q2": {"d2": 1}}),
    # rag_eval.stages
    "Budget": lambda: S.Budget(chunks=3),
    "Fingerprint": lambda: S.Fingerprint("abc", "code"),
    "Hit": lambda: S.Hit("d1", 1.0, "text", metadata={"k": [1, 2]}),
    "JudgeGrade": lambda: S.JudgeGrade(2, 0.5),
    "JudgeItem": lambda: S.JudgeItem("q1", "d1", "a", "b"),
    "Outcome": lambda: S.Outcome((S.Hit("d1"),), issues=("x",)),
    "StageSpec": lambda: S.StageSpec("r", "retriever", "retriever", "x.Y", "abc", "code"),
    "PipelineSpec": lambda: _pipeline_result().pipeline,
    "StageOutput": lambda: _pipeline_result().stages["r"],
    "PipelineResult": _pipeline_result,
    "Pipeline": lambda: rag_eval.Pipeline(functions.retriever(lambda q, k: ["d1"], name="r"), depth=2),
    "Stage": lambda: functions.retriever(lambda q, k: list(QUERIES)[:k], name="r"),
    "Retriever": lambda: functions.retriever(lambda q, k: list(QUERIES)[:k], name="r"),
    "Reranker": lambda: functions.reranker(lambda q, hits: hits[::-1], name="rr"),
    "Fusion": lambda: rag_eval.fuse(
        functions.retriever(lambda q, k: ["d1"], name="a"), functions.retriever(lambda q, k: ["d2"], name="b")
    ),
    "BaseJudge": lambda: functions.judge(_grade, name="j"),
    "Judge": lambda: functions.judge(_grade, name="j"),
    "StageCache": _cache,
    # rag_eval.metrics
    "Conventions": lambda: rag_eval.Conventions(),
    "Metric": lambda: rag_eval.parse_metric("ndcg@10"),
    # rag_eval.reports
    "Report": _report,
    "MetricCard": lambda: _report().card,
    "Comparison": _quiet(lambda: rag_eval.compare(_report(), permutations=200)),
    "GateResult": _quiet(lambda: rag_eval.gate(_report(runs=(1,)), _report(runs=(7,)), ["ndcg@10:0.05"], test="t")),
    "PowerAnalysis": _quiet(lambda: rag_eval.power(_report(), metric="ndcg@10", comparisons=1)),
    "PPIInterval": _quiet(
        lambda: rag_eval.ppi_interval(
            {q: float(i % 2) for i, q in enumerate(QUERIES)},
            {q: float(i % 3 > 0) for i, q in enumerate(QUERIES) if i < 10},
        )
    ),
    "JudgeAssisted": _quiet(lambda: R.judge_assisted(_report(1), _report(0))),
    "Space": lambda: rag_eval.Space(functions.retriever(lambda q, k: ["d1"], name="r"), depth=[2, 3], budget=1),
    # rag_eval.ground_truth
    "Pool": lambda: rag_eval.pool([_ranked("a", 1), _ranked("b", 7)], depth=2, queries=QUERIES),
    "PoolItem": lambda: rag_eval.pool([_ranked("a", 1), _ranked("b", 7)], depth=2).items[0],
    "Projection": lambda: rag_eval.project(
        {"q1": ["c1", "c2"]}, {"c1": ("d1", 0, 15), "c2": ("d1", 12, 40)}, D.SpanLabels([D.Span("d1", 10, 20, 1, "q1")])
    ),
    "ProjectionRules": lambda: G.ProjectionRules(min_overlap_chars=3),
    "QueryCounts": lambda: G.QueryCounts(3, 2, 1, 4),
    "Agreement": lambda: G.Agreement(("a", "b"), 3, 0.5, 0.2, 0.1),
    "Kappa": lambda: G.Kappa(0.5, 0.4, 3, 1, (G.Agreement(("a", "b"), 3, 0.5, 0.2, 0.1),)),
    "Judgement": _judgement,
    "JudgementLog": lambda: G.JudgementLog("unused.jsonl", [_judgement(), _judgement("d2", "bob")]),
    "Merged": lambda: G.merge(_qrels(), G.JudgementLog("unused.jsonl", [_judgement("d9")])),
    "JudgeAgreement": lambda: rag_eval.judge_agreement(_qrels(0), _qrels(1), warn=False),
    "RankingAgreement": lambda: rag_eval.statistics.ranking_agreement(
        _report(0, runs=(1, 7, 3)), _report(1, runs=(1, 7, 3)), "ndcg@10", warn=False
    ),
    "HumanSample": lambda: G.draw_human_sample(list(QUERIES), 4, seed=0),
    "UtilityLabels": _quiet(_utility_labels),
    "AnswerPrediction": _quiet(_answer_prediction),
    "ConditionEffects": _quiet(_condition_effects),
    "Drift": _quiet(_drift),
    "JudgedAnswers": _quiet(_judged_answers),
    "AnswerAgreement": _quiet(_answer_agreement),
    "JudgingRun": _judging_run,
    # rag_eval.labelling
    "LabellingSession": _session,
}

IN_A_FOLDER = {"StageCache", "LabellingSession"}  # their factories take a folder

NOT_DATA = {
    "Executor": "a protocol (what an executor must do): no instance of its own",
    "RayExecutor": "a connection to a Ray cluster (needs Ray); what it holds cannot be described: Uncacheable",
    "LabellingServer": "a live HTTP server on a socket and a thread; what it serves is its LabellingSession (a case)",
}


def _public_types() -> dict[str, type]:
    found: dict[str, type] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) and not issubclass(value, (BaseException, Warning)):
                assert found.setdefault(value.__name__, value) is value, f"two public types named {value.__name__}"
    return found


def test_every_public_type_has_a_case():
    public = set(_public_types())
    assert public - set(CASES) - set(NOT_DATA) == set(), "a public type without a case in CASES (or NOT_DATA)"
    assert set(CASES) | set(NOT_DATA) <= public, "a case for a type that is no longer public"
    assert not set(CASES) & set(NOT_DATA)


# -- mutations: every path this test can reach from an instance ------------------------------------------------

Step = tuple[str, Any]  # ("attr", name) | ("item", key) | ("index", i)


def _public(value: Any) -> dict[str, Any]:
    """What a user reaches from ``value`` by a public name: attributes, fields, properties (read now)."""
    kind = type(value)
    names = {n for n in _attributes(value) if not n.startswith("_")}
    if dataclasses.is_dataclass(value):
        names |= {f.name for f in dataclasses.fields(value) if not f.name.startswith("_")}
    names |= set(getattr(kind, "_fields", ()))  # a named tuple's
    for cls in kind.__mro__:
        for name, member in vars(cls).items():
            if not name.startswith("_") and isinstance(member, (property, functools.cached_property)):
                names.add(name)
    found = {}
    for name in sorted(names):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found[name] = getattr(value, name)
        except Exception:  # noqa: BLE001 - a property that needs more than this instance holds
            continue
    return found


def _leaf(value: Any) -> bool:
    return (
        value is None
        or type(value) in (bool, int, float, complex, str, bytes)
        or isinstance(value, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType))
        or (callable(value) and not hasattr(value, "__dict__"))
    )


def _mutations(root: Any, depth: int = 3) -> list[tuple[tuple[Step, ...], str]]:
    """``(path, how)`` for every mutation reachable from ``root``: ``set`` a public attribute, ``add`` to or
    ``write`` into a dict, list, set, array or frame."""
    found: list[tuple[tuple[Step, ...], str]] = []
    seen: set[int] = set()
    alive: list[Any] = []

    def visit(value: Any, path: tuple[Step, ...]) -> None:
        if path and path[-1][0] == "attr":
            found.append((path, "set"))
        if _leaf(value) or id(value) in seen or len(path) > depth:
            return
        seen.add(id(value))
        alive.append(value)
        top = type(value).__module__.partition(".")[0]
        if isinstance(value, np.ndarray):
            if value.size:
                found.append((path, "write"))
            return
        if top == "pandas":
            if getattr(value, "size", 0):
                found.append((path, "write"))
            return
        if top == "pyarrow":
            return
        if isinstance(value, (dict, types.MappingProxyType)) or (isinstance(value, Mapping) and not _public(value)):
            found.append((path, "add"))
            for key in list(value)[:1]:
                found.append(((*path, ("item", key)), "write"))
                visit(value[key], (*path, ("item", key)))
            return
        if isinstance(value, (list, tuple)) and not hasattr(type(value), "_fields"):  # a named tuple: by name
            if isinstance(value, list):
                found.append((path, "add"))
            for i, item in enumerate(value[:1]):
                if isinstance(value, list):
                    found.append(((*path, ("index", i)), "write"))
                visit(item, (*path, ("index", i)))
            return
        if isinstance(value, (set, frozenset)):
            if isinstance(value, set):
                found.append((path, "add"))
            return
        for name, item in _public(value).items():
            visit(item, (*path, ("attr", name)))

    visit(root, ())
    return found


def _resolve(root: Any, path: tuple[Step, ...]) -> Any:
    value = root
    for kind, key in path:
        value = getattr(value, key) if kind == "attr" else value[key]
    return value


def _changed(value: Any) -> Any:
    """Another value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "~"
    if isinstance(value, tuple):
        return (*value, value[0]) if value else ("~",)
    if isinstance(value, frozenset):
        return value | {"~"}
    if value is None:
        return "~"
    return None


def _mutate(root: Any, path: tuple[Step, ...], how: str) -> None:
    """Apply one mutation; raises what the object raises when it refuses it."""
    target = _resolve(root, path)
    if how == "set":
        parent, (_, name) = _resolve(root, path[:-1]), path[-1]
        setattr(parent, name, _changed(target))
    elif how == "write" and path and path[-1][0] in ("item", "index"):
        parent, (_, key) = _resolve(root, path[:-1]), path[-1]
        parent[key] = _changed(target)
    elif how == "write" and isinstance(target, np.ndarray):
        first = target.flat[0]
        target.flat[0] = _changed(first) if not isinstance(first, np.number) else first + 1
    elif how == "write":  # a pandas frame or series
        first = target.iat[(0, 0) if target.ndim == 2 else 0]
        changed = _changed(first.item() if isinstance(first, np.generic) else first)
        if target.ndim == 2:
            target.iat[0, 0] = changed
        else:
            target.iat[0] = changed
    elif isinstance(target, list):
        target.append(copy.copy(target[0]) if target else "~")
    elif isinstance(target, set):
        target.add("~")
    else:  # a mapping: one more key, of the kind its keys are
        keys = list(target)
        key = (keys[0] + "~" if isinstance(keys[0], str) else _changed(keys[0])) if keys else "~"
        target[key] = copy.copy(target[keys[0]]) if keys else 1


PIPELINE_RUNS = 4  # per type, spread over its mutations: a run with a stage cache takes a tenth of a second
REFUSED = (TypeError, ValueError, AttributeError)  # read-only view, read-only array, frozen attribute


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_stage_closing_over_a_public_type_sees_every_change_or_the_change_is_refused(name, tmp_path):
    make = CASES[name]
    (tmp_path / "made").mkdir()
    made = make(tmp_path / "made") if name in IN_A_FOLDER else make()
    try:  # a fresh instance per mutation: a deep copy where one can be made (faster to make than a comparison)
        copy.deepcopy(made)
        build = functools.partial(copy.deepcopy, made)
    except TypeError:  # holds a read-only mapping (no copy of one): made again
        build = (lambda: make(tmp_path / "made")) if name in IN_A_FOLDER else make
    probe = build()
    try:
        fingerprint(_stage_over(probe).fn, stage="over")
    except Uncacheable:  # holds what cannot be described (a lock): never cached, so never stale
        with pytest.raises(Uncacheable, match="version="):
            _run(_stage_over(probe), tmp_path / "refused")
        return
    mutations = _mutations(probe)
    assert mutations, f"{name}: no path to mutate found"
    failures: list[str] = []
    applied = refused = 0
    every = max(1, len(mutations) // PIPELINE_RUNS)  # these through the runner; every one through the key
    for n, (path, how) in enumerate(mutations):
        value = build()
        stage = _stage_over(value)
        before = _content(value)
        through_runner = n % every == 0
        cache = tmp_path / f"cache-{n}"
        key = stage.fingerprint()
        if through_runner:
            assert _run(stage, cache)[0] == before
        where = f"{name}{''.join(f'.{k}' if s == 'attr' else f'[{k!r}]' for s, k in path)} ({how})"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _mutate(value, path, how)
        except REFUSED:
            refused += 1
        else:
            applied += 1
        after = _content(value)
        if after != before and stage.fingerprint() == key:
            failures.append(f"{where}: changed, but the stage's cache key did not")
        if through_runner:
            second, hits = _run(stage, cache)
            if after != before and (hits or second != after):
                failures.append(f"{where}: changed, but the cache {'hit' if hits else 'missed'} and read {second}")
            elif after == before and second != before:
                failures.append(f"{where}: unchanged, yet read {second}")
    assert not failures, "\n".join(failures)
    assert applied + refused == len(mutations)


# -- the cases named in the issue, by hand ---------------------------------------------------------------------


def _collection() -> Collection:
    return Collection("c", {"d1": Chunk("", "apple")}, {"q1": "apple"}, rag_eval.Qrels.from_dict({"q1": {"d1": 1}}))


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.corpus.__setitem__("d2", Chunk("", "apple pie")),  # the issue's case: a chunk added
        lambda c: c.corpus.update({"d2": Chunk("", "apple pie")}),
        lambda c: c.corpus.__setitem__("d1", Chunk("", "apple tart")),  # a chunk replaced
        lambda c: c.corpus.pop("d1"),
        lambda c: c.corpus["d1"].metadata.__setitem__("lang", "en"),  # a chunk's metadata, in place
        lambda c: c.queries.__setitem__("q2", "pear"),
    ],
    ids=["add", "update", "replace", "remove", "metadata", "queries"],
)
def test_a_collection_changed_after_a_run_is_read_again(change, tmp_path):
    collection = _collection()

    def seen() -> str:  # what the stage read: every chunk, its metadata, every query
        chunks = ";".join(f"{i}:{c.title}:{c.text}:{sorted(c.metadata.items())}" for i, c in collection.corpus.items())
        return f"{chunks}#{sorted(collection.queries.items())}"

    stage = functions.retriever(lambda q, k: [*list(collection.corpus)[:k], seen()], name="over")
    before = seen()
    first = rag_eval.Pipeline(stage, depth=5).run({"q1": "apple"}, cache=tmp_path).stages["over"]
    assert [h.doc_id for h in first.outcomes["q1"].hits] == ["d1", before]
    change(collection)
    assert seen() != before
    again = rag_eval.Pipeline(stage, depth=5).run({"q1": "apple"}, cache=tmp_path).stages["over"]
    assert again.cache_hits == 0
    assert [h.doc_id for h in again.outcomes["q1"].hits] == [*list(collection.corpus)[:5], seen()]


def test_a_dict_and_a_collection_in_the_same_place_are_read_alike(tmp_path):
    """The issue's comparison: a plain dict was read again, a Collection was not; now both are."""
    corpus = {"d1": "apple"}
    collection = _collection()
    by_dict = functions.retriever(lambda q, k: list(corpus)[:k], name="over")
    by_collection = functions.retriever(lambda q, k: list(collection.corpus)[:k], name="over")
    cases = (
        (by_dict, lambda: corpus.update(d2="pie")),
        (by_collection, lambda: collection.corpus.update(d2=Chunk("", "pie"))),
    )
    for stage, add in cases:
        cache = tmp_path / str(id(stage))
        rag_eval.Pipeline(stage, depth=5).run({"q1": "x"}, cache=cache)
        add()
        again = rag_eval.Pipeline(stage, depth=5).run({"q1": "x"}, cache=cache)
        assert again.stages["over"].cache_hits == 0
        assert [h.doc_id for h in again.stages["over"].outcomes["q1"].hits] == ["d1", "d2"]


def test_qrels_refuse_every_write_and_their_digest_is_kept(tmp_path):
    qrels = _qrels()
    digest = fingerprint(qrels, stage="s").digest
    writes = [
        lambda: qrels.judgements["q1"].__setitem__("d1", 3),
        lambda: qrels.judgements.__setitem__("q99", {}),
        lambda: qrels["q1"].__setitem__("d1", 3),
        lambda: qrels.columns[1].__setitem__(0, 5),
        lambda: qrels.columns[2].__setitem__(0, 5),
        lambda: setattr(qrels, "source", None),
        lambda: setattr(qrels, "graded_by", D.GradedBy(1)),
        lambda: setattr(qrels, "anything", 1),
        lambda: delattr(qrels, "source"),
    ]
    for write in writes:
        with pytest.raises((TypeError, ValueError, AttributeError)):
            write()
    copied = qrels.to_dict()
    copied["q1"]["d1"] = 3  # a copy: the qrels keep their grade
    assert qrels["q1"]["d1"] == 1 and fingerprint(qrels, stage="s").digest == digest
    assert fingerprint(qrels, stage="s").digest == fingerprint(_qrels(), stage="s").digest  # by content
    for twin in (pickle.loads(pickle.dumps(qrels)), copy.deepcopy(qrels), copy.copy(qrels)):
        assert twin == qrels and twin.judgements == qrels.judgements
        with pytest.raises(AttributeError):
            twin.source = None


def test_a_runs_columns_are_read_only_and_a_renamed_run_is_a_new_key(tmp_path):
    run = _ranked("a", 1)
    for column in (run.offsets, run.doc_ids, run.scores, run.doc_id_column, run.ranked()):
        with pytest.raises(ValueError, match="read-only"):
            column[0] = column[1]
    path = tmp_path / "run.trec"
    run.to_trec(path)
    read = rag_eval.Run.from_trec(path)
    ids = read.doc_id_column
    starts = ids.starts if not isinstance(ids, np.ndarray) else ids
    with pytest.raises(ValueError, match="read-only"):
        starts[0] = starts[1]
    stage = functions.retriever(lambda q, k: [run.name], name="over")
    assert _run(stage, tmp_path / "c")[0] == "a"
    run.name = "b"  # a run's name, tag and notes may be set: read at every run
    doc, hits = _run(stage, tmp_path / "c")
    assert (doc, hits) == ("b", 0)


def test_a_writable_array_is_read_at_every_run_a_read_only_one_once(tmp_path):
    writable = np.arange(6.0)
    frozen = np.arange(6.0)
    frozen.flags.writeable = False
    view = writable[1:].view()
    view.flags.writeable = False  # read-only, but its base is not: read at every run too
    stage = functions.retriever(lambda q, k: [f"{writable[0]}-{view[0]}"], name="over")
    assert _run(stage, tmp_path) == ("0.0-1.0", 0)
    writable[:2] = [7.0, 8.0]
    assert _run(stage, tmp_path) == ("7.0-8.0", 0)
    with pytest.raises(ValueError, match="read-only"):
        frozen[0] = 1.0
    from rag_eval.stages.fingerprint import _MEMO

    fingerprint(frozen, stage="s")
    fingerprint(writable, stage="s")
    assert _MEMO.get(frozen) is not None and _MEMO.get(writable) is None and _MEMO.get(view) is None


def test_a_frame_changed_in_place_is_read_again(tmp_path):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"doc": ["d1", "d2"], "w": [1.0, 2.0]})
    stage = functions.retriever(lambda q, k: list(frame.sort_values("w", ascending=False)["doc"])[:k], name="over")
    first = rag_eval.Pipeline(stage, depth=2).run({"q1": "x"}, cache=tmp_path)
    assert first.stages["over"].outcomes["q1"].hits[0].doc_id == "d2"
    frame.loc[0, "w"] = 5.0
    again = rag_eval.Pipeline(stage, depth=2).run({"q1": "x"}, cache=tmp_path)
    assert again.stages["over"].cache_hits == 0 and again.stages["over"].outcomes["q1"].hits[0].doc_id == "d1"


def test_a_function_judge_whose_closure_changed_is_another_judge(tmp_path):
    """A judge's fingerprint (what a judging run resumes by) is read at every use, as a stage's key is."""
    rubric = {"apple": 2}

    def grade(query: str, text: str) -> int:
        return rubric.get(text, 0)

    made = functions.judge(grade, name="rubric")
    first = made.fingerprint
    pool = rag_eval.pool(
        [rag_eval.Run.from_ranking({"q1": ["d1", "d2"]})],
        depth=2,
        queries={"q1": "fruit"},
        texts={"d1": "apple", "d2": "pear"},
    )
    run = rag_eval.judge(pool, made, log=tmp_path / "log.jsonl", progress=False)
    assert run.grades == {("q1", "d1"): 2, ("q1", "d2"): 0}
    rubric["pear"] = 3  # the judge now grades otherwise: its stored grades are not its own
    assert made.fingerprint != first
    with pytest.raises(rag_eval.InputError, match=r"fingerprint .*changed"):
        rag_eval.judge(pool, made, log=tmp_path / "log.jsonl", progress=False)
    rubric.pop("pear")
    assert made.fingerprint == first  # the same again: resumes, asking nothing
    again = rag_eval.judge(pool, made, log=tmp_path / "log.jsonl", progress=False)
    assert again.calls == 0 and again.from_log == 2
