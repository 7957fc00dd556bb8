"""Every metric family is one registration (rag_eval.metrics.catalogue.register): a new one is added in one module
and evaluated through the CLI; every registered family is complete; the tables derived from the registrations
(trec_eval's measure table, its nicknames, the aliases, the parameters' defaults, choices and required ones) are
what they were when written by hand (the literals below are those hand-written tables, kept as the oracle)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rag_eval
from rag_eval.errors import InputError
from rag_eval.metrics import load_plugins, parse_metric, register
from rag_eval.metrics._registry import kernel_of
from rag_eval.metrics.catalogue import ALIASES, FAMILIES, PARAM_TYPES, Family, ParamInfo, TrecMeasure
from rag_eval.metrics.trec_eval_measures import NICKNAMES, TREC_MEASURES
from rag_eval.renderers.trec_eval import MEASURE_TABLE

ROOT = Path(rag_eval.__file__).resolve().parent.parent

# A family in one module: its registration and its kernel (relevant results in the top k, counted; `weight=`
# multiplies them, default 1).
PLUGIN = '''
"""A metric family of its own: relevant results in the top k, times weight."""

import numpy as np

from rag_eval.metrics import register
from rag_eval.metrics.catalogue import REL, Family, ParamInfo


def top_k_relevant(ki):
    m = ki.matrix
    found = ki.relevant(ki.threshold) & (m.ranks < ki.k)
    weight = float(ki.metric.param.get("weight", "1"))
    return weight * np.bincount(m.rows, weights=found, minlength=m.num_queries)


register(
    Family(
        "newfamily",
        "relevant results in the top k, times `weight` (default 1)",
        "required",
        {"rel": REL, "weight": ParamInfo("decimal", "a weight", default="1", low=0.0)},
        aggregate="sum",
        kernel=top_k_relevant,
    )
)
'''

QRELS = "q1 0 a 1\nq1 0 b 0\nq1 0 c 2\nq2 0 d 1\nq2 0 e 1\nq3 0 f 1\n"
RUN = "q1 Q0 a 1 3.0 t\nq1 Q0 b 2 2.0 t\nq1 Q0 c 3 1.0 t\nq2 Q0 x 1 2.0 t\nq2 Q0 e 2 1.0 t\nq3 Q0 y 1 1.0 t\n"


def _cli(tmp_path: Path, *args: str, plugins: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.trec").write_text(RUN)
    env = {k: v for k, v in os.environ.items() if k != "RAG_EVAL_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT), env.get("PYTHONPATH", "")])
    if plugins is not None:
        env["RAG_EVAL_PLUGINS"] = plugins
    command = [sys.executable, "-m", "rag_eval", "evaluate", "qrels.txt", "run.trec", *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_a_family_added_in_one_module_is_evaluated_through_the_cli(tmp_path):
    (tmp_path / "my_family.py").write_text(PLUGIN)
    done = _cli(
        tmp_path,
        "-m",
        "newfamily@2",
        "-m",
        "newfamily(weight=2.5)@3",
        "-m",
        "newfamily(weight=1)@3",
        "-m",
        "P@2",
        "-q",
        "--format",
        "json",
        plugins="my_family",
    )
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)
    # newfamily(weight=1)@3 is newfamily@3: a parameter at its default is left out of the canonical string
    assert table["card"]["metrics"] == ["newfamily@2", "newfamily(weight=2.5)@3", "newfamily@3", "precision@2"]
    per_query = {(r["query_id"], r["metric"]): r["value"] for r in table["per_query"]}
    # q1 ranks a (1), b (0), c (2): 1 relevant in the top 2, 2 in the top 3; q2: x, e (1); q3: y (unjudged)
    assert [per_query[q, "newfamily@2"] for q in ("q1", "q2", "q3")] == [1.0, 1.0, 0.0]
    assert [per_query[q, "newfamily(weight=2.5)@3"] for q in ("q1", "q2", "q3")] == [5.0, 2.5, 0.0]
    assert [per_query[q, "newfamily@3"] for q in ("q1", "q2", "q3")] == [2.0, 1.0, 0.0]
    assert [per_query[q, "precision@2"] * 2 for q in ("q1", "q2", "q3")] == [1.0, 1.0, 0.0]
    summary = {r["metric"]: r for r in table["summary"]}
    assert summary["newfamily@2"]["sum"] == 2.0


def test_without_the_plugin_the_family_is_unknown_and_a_missing_plugin_is_named(tmp_path):
    done = _cli(tmp_path, "-m", "newfamily@2", plugins=None)
    assert done.returncode == 2
    assert "unknown metric 'newfamily@2'" in done.stderr
    done = _cli(tmp_path, "-m", "P@2", plugins="no_such_family_module")
    assert done.returncode == 2
    assert "RAG_EVAL_PLUGINS: cannot import the metric plugin 'no_such_family_module'" in done.stderr


def test_load_plugins_imports_each_module_once_and_names_a_bad_one(tmp_path, monkeypatch):
    (tmp_path / "counted_plugin.py").write_text(
        "import builtins\nbuiltins.counted_plugin_loads = getattr(builtins, 'counted_plugin_loads', 0) + 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_plugins(" counted_plugin , ") == ["counted_plugin"]
    assert load_plugins("counted_plugin") == ["counted_plugin"]
    import builtins

    assert builtins.counted_plugin_loads == 1  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="cannot import the metric plugin 'not_a_module_here'"):
        load_plugins("not_a_module_here")


def test_register_refuses_a_name_an_alias_or_a_trec_measure_taken():
    with pytest.raises(ValueError, match="ndcg"):
        register(Family("ndcg", "again"))
    with pytest.raises(ValueError, match="map"):
        register(Family("my_ap", "again", aliases=("map",)))
    with pytest.raises(ValueError, match="measure table is made"):
        register(Family("my_p", "a trec_eval measure too late", trec=(TrecMeasure("my_P", 99),)))
    with pytest.raises(ValueError, match="not lower case"):
        register(Family("MyFamily", "upper case"))
    with pytest.raises(ValueError, match="direction"):
        Family("x", "no direction", direction="up")
    with pytest.raises(ValueError, match="parameter type"):
        ParamInfo("float", "not a type")
    with pytest.raises(ValueError, match="example"):
        ParamInfo("decimal", "required without example", required=True)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_registered_family_is_complete(name):
    """A direction, a valid cutoff rule, aggregation and kind, a kernel that resolves, parameters of a known type
    whose defaults read back as themselves (and are then left out of the name), and required ones whose example
    parses."""
    family = FAMILIES[name]
    assert family.direction in ("higher", "lower", "none")
    assert family.cutoff in ("required", "optional", "none")
    assert callable(kernel_of(name))
    k = "@5" if family.cutoff == "required" else ""
    required = ",".join(f"{key}={info.example}" for key, info in family.params.items() if info.required)
    for key, info in family.params.items():
        assert info.type in PARAM_TYPES and info.desc
        if info.type == "choice":
            assert info.choices and all(c == c.lower() for c in info.choices)
        if info.low is not None and info.high is not None:
            assert info.low <= info.high
        if info.default is not None:
            written = ",".join(filter(None, [required, f"{key}={info.default}"]))
            metric = parse_metric(f"{name}({written}){k}")
            assert key not in metric.param  # the default is read, in range, and left out
        if info.required:
            assert parse_metric(f"{name}({required}){k}").param[key]
            with pytest.raises(InputError, match=f"needs the parameter {key}="):
                parse_metric(f"{name}{k}")


# ----- the hand-written tables these registrations replace (main at 08416e9), as the oracle ---------------------------

_CUT = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
OLD_TREC_MEASURES = (
    ("runid", "runid", "single", ()),
    ("num_q", "num_q", "single", ()),
    ("num_ret", "num_ret", "single", ()),
    ("num_rel", "num_rel", "single", ()),
    ("num_rel_ret", "num_rel_ret", "single", ()),
    ("map", "ap", "single", ()),
    ("gm_map", "gm_map", "single", ()),
    ("Rprec", "r_precision", "single", ()),
    ("bpref", "bpref", "single", ()),
    ("recip_rank", "mrr", "single", ()),
    ("iprec_at_recall", "iprec_at_recall", "cut_double", (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)),
    ("P", "precision", "cut_long", _CUT),
    ("relstring", "relstring", "p_double", ()),
    ("recall", "recall", "cut_long", _CUT),
    ("infAP", "infap", "single", ()),
    ("gm_bpref", "gm_bpref", "single", ()),
    ("Rprec_mult", "rprec_mult", "cut_double", (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)),
    ("utility", "utility", "p_double", ()),
    ("11pt_avg", "11pt_avg", "p_double", ()),
    ("binG", "bing", "single", ()),
    ("G", "g", "p_pair", ()),
    ("ndcg", "ndcg", "p_pair", ()),
    ("ndcg_rel", "ndcg_rel", "p_pair", ()),
    ("Rndcg", "rndcg", "p_pair", ()),
    ("ndcg_cut", "ndcg", "cut_long", _CUT),
    ("map_cut", "ap", "cut_long", _CUT),
    ("relative_P", "relative_precision", "cut_long", _CUT),
    ("success", "hit", "cut_long", (1, 5, 10)),
    ("set_P", "set_precision", "single", ()),
    ("set_relative_P", "set_relative_precision", "single", ()),
    ("set_recall", "set_recall", "single", ()),
    ("set_map", "set_map", "single", ()),
    ("set_F", "set_f", "p_double", ()),
    ("num_nonrel_judged_ret", "num_nonrel_judged_ret", "single", ()),
    ("rbp", "rbp", "p_pair", ()),
    ("rbp_resid", "rbp_resid", "p_pair", ()),
    ("unj", "unjudged", "cut_long", (5, 10, 20)),
)
OLD_MEASURE_TABLE = tuple(m[0] for m in OLD_TREC_MEASURES)  # reports/trec_eval.py's MEASURE_TABLE: the same names
OLD_NICKNAMES = {
    "official": (
        *("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank"),
        *("iprec_at_recall", "P"),
    ),
    "set": (
        *("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall", "set_relative_P"),
        *("set_map", "set_F"),
    ),
    "all_trec": (
        *("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank"),
        *("iprec_at_recall", "P", "relstring", "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref", "utility"),
        *("11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut", "ndcg_cut", "ndcg_rel", "Rndcg"),
        *("binG", "G", "set_P", "set_recall", "set_relative_P", "set_map", "set_F", "num_nonrel_judged_ret"),
    ),
}
OLD_ALIASES = {
    "p": "precision",
    "success": "hit",
    "recip_rank": "mrr",
    "rr": "mrr",
    "map": "ap",
    "rprec": "r_precision",
    "r-precision": "r_precision",
    "rprecision": "r_precision",
    "ndcg_cut": "ndcg",
    "map_cut": "ap",
    "numrel": "num_rel",
    "numret": "num_ret",
    "numrelret": "num_rel_ret",
    "judged_at": "judged",
    "gm_ap": "gm_map",
    "iprec": "iprec_at_recall",
    "11pt": "11pt_avg",
    "11_pt_avg": "11pt_avg",
    "relative_p": "relative_precision",
    "set_p": "set_precision",
    "set_relative_p": "set_relative_precision",
    "unj": "unjudged",
}
OLD_PARAM_DEFAULTS = {
    ("11pt_avg", "levels"): "0;0.1;0.2;0.3;0.4;0.5;0.6;0.7;0.8;0.9;1",
    ("utility", "weights"): "1;-1;0;0",
    ("set_f", "beta"): "1",
    ("rbp", "p"): "0.9",
    ("rbp_resid", "p"): "0.9",
}
OLD_REQUIRED_PARAMS = {
    "iprec_at_recall": ("level", "iprec_at_recall(level=0.1)"),
    "rprec_mult": ("mult", "rprec_mult(mult=0.2)"),
}
OLD_CHOICES = {"ties": ("trec_eval", "doc_id", "input_order"), "per": ("returned", "k"), "empty": ("nan", "zero")}
OLD_PRINTED_AS_TYPED = {
    "11pt_avg",
    "utility",
    "set_f",
    "relstring",
    "rbp",
    "rbp_resid",
    "ndcg",
    "ndcg_rel",
    "rndcg",
    "g",
}


def test_trec_eval_s_tables_derived_from_the_registrations_are_the_hand_written_ones():
    assert tuple((m.name, m.family, m.kind, m.defaults) for m in TREC_MEASURES) == OLD_TREC_MEASURES
    assert MEASURE_TABLE == OLD_MEASURE_TABLE
    assert {nick: set(names) for nick, names in NICKNAMES.items()} == {
        nick: set(names) for nick, names in OLD_NICKNAMES.items()
    }
    for names in NICKNAMES.values():  # each in the table's order (trec_eval sorts them so)
        assert list(names) == [n for n in MEASURE_TABLE if n in names]
    printed_as_typed = {name for name, f in FAMILIES.items() if f.trec and f.trec[0].kind in ("p_double", "p_pair")}
    assert printed_as_typed == OLD_PRINTED_AS_TYPED
    # the printout's rules, once written by family name in renderers/trec_eval.py, now read from the registrations
    from rag_eval.renderers import trec_eval as printout
    from rag_eval.renderers.trec_eval import _measure

    assert {"gm_map", "gm_bpref", "num_q", "runid"} == printout._SUMMARY_ONLY
    assert {"relstring"} == printout._PER_QUERY_ONLY
    assert printout._LEVEL_PARAM == {"iprec_at_recall": "level", "rprec_mult": "mult"}
    measures = {
        name: _measure(parse_metric(name), printed)
        for name, printed in [
            ("ndcg@10", "ndcg_cut_10"),
            ("ap@5", "map_cut_5"),
            ("recall@100", "recall_100"),
            ("ap", "map"),
        ]
    }
    assert measures == {"ndcg@10": "ndcg_cut", "ap@5": "map_cut", "recall@100": "recall", "ap": "map"}


def test_the_grammar_s_tables_derived_from_the_registrations_are_the_hand_written_ones():
    assert ALIASES == OLD_ALIASES
    defaults = {(n, k): p.default for n, f in FAMILIES.items() for k, p in f.params.items() if p.default is not None}
    assert defaults == OLD_PARAM_DEFAULTS
    required = {n: (k, f"{n}({k}={p.example})") for n, f in FAMILIES.items() for k, p in f.params.items() if p.required}
    assert required == OLD_REQUIRED_PARAMS
    choices = {k: p.choices for f in FAMILIES.values() for k, p in f.params.items() if p.type == "choice"}
    assert choices == {**OLD_CHOICES, "gain": ("exp", "linear")}
    assert FAMILIES["relstring"].cutoff_default == 10 and str(parse_metric("relstring@10")) == "relstring"
