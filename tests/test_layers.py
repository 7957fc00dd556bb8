"""The house's layers: each module of rag_eval imports only its own layer and the layers below it, no import circle
joins its modules (inside a layer too) nor its packages, no module reaches into another package's private module,
no module imports an old path kept for compatibility, and the renderers compute no metric."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

from .conftest import ROOT

# package (first name under rag_eval) -> layer; adapters/ ships as rag_eval.adapters
LAYERS = {
    "_accel": 0,
    "_checks": 0,
    "_escape": 0,
    "_files": 0,
    "_markdown": 0,
    "_moved": 0,
    "_optional": 0,
    "_plot_style": 0,
    "_speedups": 0,
    "_sync": 0,
    "_version": 0,
    "errors": 0,
    "data": 1,
    "metrics": 2,
    "stages": 3,
    "adapters": 3,
    "reports": 4,
    "ground_truth": 4,
    "statistics": 5,
    "renderers": 6,
    "drivers": 7,
    "cli": 8,
    "labelling": 8,
    "builtin": 8,
    "bench": 8,  # the deprecated alias of builtin
    "examples": 8,
    "testing": 8,
    "__main__": 8,
}


def _package_of(path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[0] == "adapters":
        return "adapters"
    if parts[1] == "_old_paths":  # rag_eval/_old_paths/reports/gate.py is rag_eval.reports.gate (rag_eval._moved)
        return parts[2]
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


# ----- no import circle among rag_eval's modules ------------------------------------------------------------------


def _modules(root) -> dict[str, Path]:
    """Dotted module name -> file, for rag_eval and adapters/ (as rag_eval.adapters); a package by its
    ``__init__.py``, a C extension by its source (``rag_eval/_speedups.c``: it imports no Python module)."""
    found = {}
    for top, name in ((root / "rag_eval", "rag_eval"), (root / "adapters", "rag_eval.adapters")):
        for path in sorted([*top.rglob("*.py"), *top.rglob("*.c")]):
            parts = [*name.split("."), *path.relative_to(top).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            if parts[1:2] == ["_old_paths"]:  # an old module path, importable by the package's __path__
                del parts[1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Every import statement in the tree, at any depth (functions, methods, try blocks), but those under
    ``if TYPE_CHECKING:`` (never run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {module it imports: line of the first such import}, among ``modules`` only.

    ``from P import name`` is an edge to the submodule ``P.name`` where there is one, else to ``P`` itself (a name
    taken from a package's face runs that face); ``import a.b.c`` is an edge to ``a.b.c``. The packages a dotted
    import passes through are not edges: Python has them (partly) initialised before their modules run.
    """
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges: dict[str, int] = {}
        graph[module] = edges
        if path.suffix != ".py":
            continue
        for node in _imports(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names
                ]
            for target in targets:
                if target in modules and target != module:
                    edges.setdefault(target, node.lineno)
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One shortest circle through each strongly connected component of more than one module (Tarjan's
    algorithm, iterative), each as [a, b, ..., a]."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    found = []
    for component in components:
        first = min(component)
        paths = {first: [first]}  # breadth first, inside the component, back to the first module
        queue = [first]
        while queue:
            node = queue.pop(0)
            if first in graph[node]:
                found.append([*paths[node], first])
                break
            for child in sorted(graph[node]):
                if child in component and child not in paths:
                    paths[child] = [*paths[node], child]
                    queue.append(child)
    return sorted(found)


def _describe(circle: list[str], graph: dict[str, dict[str, int]], modules: dict[str, Path], root: Path) -> str:
    steps = [f"  {a} ({modules[a].relative_to(root)}:{graph[a][b]}) imports {b}" for a, b in itertools.pairwise(circle)]
    return " -> ".join(circle) + "\n" + "\n".join(steps)


def test_no_import_circle_among_rag_eval_s_modules():
    """Every import counts, lazy ones inside functions too (they are circles all the same, hidden until called),
    but those under ``if TYPE_CHECKING:``."""
    modules = _modules(ROOT)
    assert "rag_eval.adapters.langchain" in modules and "rag_eval.data" in modules
    graph = import_graph(modules)
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(_describe(c, graph, modules, ROOT) for c in found)


def _tree(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "adapters").mkdir(exist_ok=True)
    return import_graph(_modules(tmp_path))


def test_the_circle_finder_sees_lazy_imports_and_faces_and_ignores_type_checking(tmp_path):
    graph = _tree(
        tmp_path,
        {
            "rag_eval/__init__.py": "from .reports import evaluate\n",
            "rag_eval/reports/__init__.py": "from .evaluation import evaluate\n",
            "rag_eval/reports/evaluation.py": "from . import projected\ndef evaluate(): pass\n",
            # a lazy import inside a function closes a circle with evaluation
            "rag_eval/reports/projected.py": "def f():\n    from .evaluation import evaluate\n",
            # under TYPE_CHECKING: no edge
            "rag_eval/data/__init__.py": "from .qrels import Qrels\n",
            "rag_eval/data/qrels.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..reports import Report\n"
                "else:\n    from .._files import x\nclass Qrels: pass\n"
            ),
            "rag_eval/_files.py": "import rag_eval.errors\nfrom . import _speedups\n",
            "rag_eval/_speedups.c": "/* a C extension: an import of it is no edge to the package's face */\n",
            "rag_eval/errors.py": "",
            # a name taken from its own package's face: a circle through the face
            "rag_eval/stages/__init__.py": "from .pipeline import Pipeline\nHit = 1\n",
            "rag_eval/stages/pipeline.py": "from . import Hit\nclass Pipeline: pass\n",
        },
    )
    assert graph["rag_eval.reports.projected"] == {"rag_eval.reports.evaluation": 2}
    assert graph["rag_eval.data.qrels"] == {"rag_eval._files": 5}  # not rag_eval.reports
    # not the root package it passes through, nor the face for the compiled module
    assert graph["rag_eval._files"] == {"rag_eval.errors": 1, "rag_eval._speedups": 2}
    assert circles(graph) == [
        ["rag_eval.reports.evaluation", "rag_eval.reports.projected", "rag_eval.reports.evaluation"],
        ["rag_eval.stages", "rag_eval.stages.pipeline", "rag_eval.stages"],
    ]
    modules = _modules(tmp_path)
    text = _describe(circles(graph)[0], graph, modules, tmp_path)
    assert "rag_eval.reports.projected (" in text and "projected.py:2) imports rag_eval.reports.evaluation" in text


def test_the_circle_finder_on_a_longer_circle(tmp_path):
    graph = _tree(
        tmp_path,
        {
            "rag_eval/__init__.py": "",
            "rag_eval/stages/__init__.py": "",
            "rag_eval/stages/pipeline.py": "from .result import PipelineResult\n",
            "rag_eval/stages/result.py": "def f():\n    from . import _runner\n",
            "rag_eval/stages/_runner.py": "import rag_eval.stages.pipeline as p\n",
            "rag_eval/stages/fusion.py": "from .pipeline import x\n",  # into the circle, not part of it
        },
    )
    assert circles(graph) == [
        ["rag_eval.stages._runner", "rag_eval.stages.pipeline", "rag_eval.stages.result", "rag_eval.stages._runner"]
    ]


# ----- between packages: no circle, no private module reached, no old path, renderers on the Report's API -----------

# the old paths of modules that moved (rag_eval._moved; files in rag_eval/_old_paths/, on the package's __path__):
# importable, with a DeprecationWarning, by users only
ALIASES = [
    "rag_eval.ground_truth._agreement_text",
    "rag_eval.reports._fates",
    "rag_eval.reports._markdown",
    "rag_eval.reports._stage_pairs",
    "rag_eval.reports._systems",
    "rag_eval.reports.comparison",
    "rag_eval.reports.formats",
    "rag_eval.reports.gate",
    "rag_eval.reports.html_report",
    "rag_eval.reports.power_analysis",
    "rag_eval.reports.prediction_powered",
    "rag_eval.reports.result_folder",
    "rag_eval.reports.statistics",
    "rag_eval.reports.trec_eval",
    "rag_eval.reports.tuning",
]


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "rag_eval"


def _edges(modules: dict[str, Path]):
    """(module, line, imported module, imported names) for every import of a rag_eval module, lazy ones too."""
    for module, path in modules.items():
        if path.suffix != ".py":
            continue
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield module, node.lineno, alias.name, []
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                full = f"{source}.{alias.name}"
                yield (
                    (module, node.lineno, full, []) if full in modules else (module, node.lineno, source, [alias.name])
                )


def test_no_import_circle_between_packages():
    """Between rag_eval's packages (a package's face counts as the package): no two import each other, through any
    number of others. The old paths kept for compatibility are left out (nothing in rag_eval imports them)."""
    modules = _modules(ROOT)
    graph: dict[str, dict[str, int]] = {}
    for module, line, target, _ in _edges(modules):
        if target.startswith("rag_eval.") and module not in ALIASES:
            a, b = _package(module), _package(target)
            if a != b and "rag_eval" not in (a, b):
                graph.setdefault(a, {}).setdefault(b, line)
                graph.setdefault(b, {})
    assert circles(graph) == []


def test_no_module_imports_another_package_s_private_module():
    """``from ..data._ids import x`` from another package reaches past the package's public modules: a name other
    packages need lives in a public module (``rag_eval.data.ids``, ``rag_eval.metrics.engine``). The ground floor's
    modules (``rag_eval._files``, ...) are shared by every package."""
    modules = _modules(ROOT)
    wrong = []
    for module, line, target, names in _edges(modules):
        parts = target.split(".")
        if parts[0] != "rag_eval" or len(parts) < 3 or _package(module) == parts[1] or module in ALIASES:
            continue
        private = [p for p in parts[2:] if p.startswith("_")] + [n for n in names if n.startswith("_")]
        if private:
            wrong.append(f"{modules[module].relative_to(ROOT)}:{line} imports {target} {names or ''}".rstrip())
    assert wrong == []


def test_no_module_imports_an_old_path():
    """The old paths (the alias modules, and the names a face keeps for compatibility) are for users: rag_eval, its
    adapters, tests, benchmarks and scripts import the new ones."""
    import importlib

    moved = {}
    for face in ("rag_eval.reports", "rag_eval.ground_truth", "rag_eval.ground_truth.agreement"):
        getter = importlib.import_module(face).__dict__["__getattr__"]
        moved[face] = set(getter.moved)
    assert "compare" in moved["rag_eval.reports"] and "ranking_agreement" in moved["rag_eval.ground_truth"]
    modules = _modules(ROOT)
    for folder in ("tests", "benchmarks"):  # as if they were modules of rag_eval, by their path
        for path in sorted((ROOT / folder).rglob("*.py")):
            modules[f"{folder}.{'.'.join(path.relative_to(ROOT / folder).with_suffix('').parts)}"] = path
    wrong = []
    for module, line, target, names in _edges(modules):
        if module in ALIASES or module == "tests.test_moved_names":
            continue
        old = [n for n in names if n in moved.get(target, ())]
        if target in ALIASES or old:
            wrong.append(f"{modules[module].relative_to(ROOT)}:{line} imports {target} {old or ''}".rstrip())
    assert wrong == []


def test_every_alias_module_is_listed_and_moved():
    """Each module listed in ALIASES is a two-line alias of a new path (no code of its own, importing nothing but
    rag_eval._moved), and every module that is so is listed."""
    modules = _modules(ROOT)
    aliases = sorted(m for m, path in modules.items() if "moved_module(__name__," in path.read_text("utf-8"))
    assert aliases == ALIASES
    for module in ALIASES:
        imported = {target for m, _, target, _ in _edges({module: modules[module]}) if target.startswith("rag_eval")}
        assert imported <= {"rag_eval._moved"}, module


def test_renderers_compute_no_metric():
    """The renderers read what the Report holds (its public API: blocks, columns, tables, recall curves): none
    imports the metric engine or its kernels, nor evaluates (rag_eval.reports.evaluation, stage_aware)."""
    modules = _modules(ROOT)
    renderers = {m: p for m, p in modules.items() if _package(m) == "renderers"}
    assert "rag_eval.renderers.html_report" in renderers and "rag_eval.renderers.trec_eval" in renderers
    engine = ("rag_eval.metrics.engine", "rag_eval.metrics._", "rag_eval.reports.evaluation", "rag_eval.reports.stage_")
    wrong = [
        f"{renderers[m].relative_to(ROOT)}:{line} imports {target}"
        for m, line, target, names in _edges(renderers)
        if target.startswith(engine) or "evaluate_run" in names or "evaluate" in names
    ]
    assert wrong == []
    reached = [
        f"{path.relative_to(ROOT)} reads Report.{name}"
        for path in renderers.values()
        for name in ("_block", "_blocks", "_column", "_tables", "_table", "_card", "_weights", "_metrics")
        if f"report.{name}" in path.read_text("utf-8") or f"._{name.lstrip('_')}(" in path.read_text("utf-8")
    ]
    assert reached == []


def test_no_module_is_over_900_lines():
    """One concept per module (issue 29): a module of rag_eval or its adapters that grows past 900 lines holds two."""
    long = {
        str(path.relative_to(ROOT)): n
        for folder in ("rag_eval", "adapters")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if (n := len(path.read_text("utf-8").splitlines())) > 900
    }
    assert long == {}
