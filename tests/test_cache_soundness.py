"""The stage cache's key is sound: each scenario runs as a user would, a script in a fresh process, twice.

- a helper edited in the module of the retriever: the rerun recomputes (recall 0.0, not the stale 1.0);
- two different indexes of the same size: never one key;
- a notebook-style function defined in ``__main__`` (a script, and code without source): cached across processes;
- a reranker edited in the module that also holds the retriever: the retrieval is reused, the rerank recomputed;
- an object that cannot be described exactly: refused with cache=, naming version=; runs without a cache;
- a cache directory of the older key scheme: said once (OldCacheKeys), then not again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import rag_eval
from rag_eval.adapters import functions
from rag_eval.errors import OldCacheKeys
from rag_eval.stages import Pipeline
from rag_eval.stages.fingerprint import Uncacheable, fingerprint

from .conftest import ROOT

QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1}}

# the user's module: a retriever calling a helper, and a reranker, side by side
STAGES = """
CALLS = "{calls}"

def _log(what):
    with open(CALLS, "a") as f:
        f.write(what + "\\n")

def _candidates(query):
    return {helper}

def search(query, k):
    _log("retrieve " + query)
    return _candidates(query)[:k]

def rerank(query, hits):
    _log("rerank " + query)
    return {rerank}
"""
GOOD = '["d1", "d2", "d3"] if query == "one" else ["d2", "d1", "d3"]'
BROKEN = '["d3", "d4", "d5"]'  # the edited helper: nothing relevant any more
KEEP = "[h.doc_id for h in hits]"
REVERSE = "[h.doc_id for h in hits][::-1]"

RUN = """
import json, sys, warnings
warnings.simplefilter("ignore")  # the judged-share note of these tiny qrels
sys.path[:0] = [{root!r}, {here!r}]
import rag_eval
from rag_eval.adapters import functions
from rag_eval.stages import Pipeline
import userstages as m

pipe = Pipeline(functions.retriever(m.search, name="search"), functions.reranker(m.rerank, name="rerank"),
                depth=3, budget=1)
result = pipe.run({{"q1": "one", "q2": "two"}}, cache=sys.argv[1], progress=False)
report = rag_eval.evaluate({qrels!r}, result)
print(json.dumps({{
    "recall": report.values(report.runs[0], "recall@budget", stage="search").to_dict(),
    "reranked": report.values(report.runs[0], "recall@budget", stage="rerank").to_dict(),
    "cache_hits": {{s: o.cache_hits for s, o in result.stages.items()}},
    "covers": {{s: o.covers for s, o in result.stages.items()}},
}}))
"""


def _user(tmp_path: Path, helper: str = GOOD, rerank: str = KEEP) -> None:
    calls = tmp_path / "calls.log"
    (tmp_path / "userstages.py").write_text(STAGES.format(calls=calls, helper=helper, rerank=rerank))
    for stale in (tmp_path / "__pycache__").glob("userstages*"):  # an edit within the same second
        stale.unlink()


def _run(tmp_path: Path, script: str, *args: str) -> dict:
    path = tmp_path / "run.py"
    path.write_text(script)
    env = dict(os.environ, PYTHONHASHSEED=str(len(args) + 11), PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def test_editing_a_helper_in_the_same_module_recomputes(tmp_path):
    script = RUN.format(root=str(ROOT), here=str(tmp_path), qrels=QRELS)
    cache = str(tmp_path / "cache")
    _user(tmp_path, helper=GOOD)
    first = _run(tmp_path, script, cache)
    assert first["recall"] == {"q1": 1.0, "q2": 1.0}
    assert "_candidates" in first["covers"]["search"]  # the card says what the key covers
    _calls(tmp_path)
    again = _run(tmp_path, script, cache)  # unchanged: all from the cache
    assert again["cache_hits"] == {"search": 2, "rerank": 2} and _calls(tmp_path) == []

    _user(tmp_path, helper=BROKEN)  # only the helper changes, not search() itself
    edited = _run(tmp_path, script, cache)
    assert edited["recall"] == {"q1": 0.0, "q2": 0.0}  # the true value, not the stale 1.0
    assert edited["cache_hits"] == {"search": 0, "rerank": 0}
    assert sorted(_calls(tmp_path)) == ["rerank one", "rerank two", "retrieve one", "retrieve two"]


def test_a_changed_reranker_reuses_the_cached_retrieval_from_the_same_module(tmp_path):
    script = RUN.format(root=str(ROOT), here=str(tmp_path), qrels=QRELS)
    cache = str(tmp_path / "cache")
    _user(tmp_path, rerank=KEEP)
    first = _run(tmp_path, script, cache)
    assert first["reranked"] == {"q1": 1.0, "q2": 1.0}
    _calls(tmp_path)
    _user(tmp_path, rerank=REVERSE)  # the reranker's code changes, in the module of the retriever
    edited = _run(tmp_path, script, cache)
    assert edited["cache_hits"] == {"search": 2, "rerank": 0}
    assert sorted(_calls(tmp_path)) == ["rerank one", "rerank two"]  # the retrieval was not run again
    assert edited["reranked"] == {"q1": 0.0, "q2": 0.0}  # d3 now comes first


INDEXES = """
import json, sys
sys.path[:0] = [{root!r}]
import numpy as np
from rag_eval.adapters import functions
from rag_eval.stages import Pipeline

INDEX = np.array(json.loads(sys.argv[2]), dtype=np.float32)  # one row per doc: equal shapes, different values
DOCS = ["d1", "d2", "d3"]

def search(query, k):
    order = np.argsort(-INDEX[:, 0], kind="stable")
    return [(DOCS[i], float(INDEX[i, 0])) for i in order[:k]]

result = Pipeline(functions.retriever(search, name="dense"), depth=2).run({{"q1": "x"}}, cache=sys.argv[1],
                                                                         progress=False)
out = result.stages["dense"]
print(json.dumps({{"top": out.outcomes["q1"].hits[0].doc_id, "cache_hits": out.cache_hits, "key": out.fingerprint}}))
"""


def test_two_indexes_of_equal_size_never_share_a_key(tmp_path):
    script = INDEXES.format(root=str(ROOT))
    cache = str(tmp_path / "cache")
    a = _run(tmp_path, script, cache, json.dumps([[0.9], [0.1], [0.5]]))
    b = _run(tmp_path, script, cache, json.dumps([[0.1], [0.9], [0.5]]))
    assert (a["top"], b["top"]) == ("d1", "d2") and b["cache_hits"] == 0 and a["key"] != b["key"]
    again = _run(tmp_path, script, cache, json.dumps([[0.9], [0.1], [0.5]]))
    assert again["cache_hits"] == 1 and again["key"] == a["key"] and again["top"] == "d1"


NOTEBOOK = '''
import json, sys
sys.path[:0] = [{root!r}]
from rag_eval.adapters import functions
from rag_eval.stages import Pipeline

BOOST = {boost!r}
cell = """
def score(doc):
    return BOOST.get(doc, 0.0)

def search(query, k):
    return sorted(["d1", "d2", "d3"], key=lambda d: -score(d))[:k]
"""
exec(cell, globals())  # as a notebook cell is run: no source file to read
result = Pipeline(functions.retriever(search, name="nb"), depth=2).run({{"q1": "x"}}, cache=sys.argv[1],
                                                                       progress=False)
out = result.stages["nb"]
print(json.dumps({{"top": out.outcomes["q1"].hits[0].doc_id, "cache_hits": out.cache_hits}}))
'''


def test_a_notebook_style_function_in_main_is_cached_and_follows_its_globals(tmp_path):
    cache = str(tmp_path / "cache")
    first = _run(tmp_path, NOTEBOOK.format(root=str(ROOT), boost={"d2": 1.0}), cache)
    again = _run(tmp_path, NOTEBOOK.format(root=str(ROOT), boost={"d2": 1.0}), cache)
    assert first == {"top": "d2", "cache_hits": 0} and again == {"top": "d2", "cache_hits": 1}
    changed = _run(tmp_path, NOTEBOOK.format(root=str(ROOT), boost={"d3": 1.0}), cache)  # a global changed
    assert changed == {"top": "d3", "cache_hits": 0}


class _Opaque:
    """Stands for a model or a client: state Python cannot see (a lock)."""

    def __init__(self):
        import threading

        self.lock = threading.Lock()


MODEL = _Opaque()


def _uses_model(query, k):
    return ["d1"] if MODEL else ["d2"]


def test_an_object_it_cannot_describe_refuses_the_cache_naming_version(tmp_path):
    stage = functions.retriever(_uses_model, name="opaque")
    with pytest.raises(Uncacheable, match=r"stage 'opaque'.*global 'MODEL'.*_thread.lock.*version="):
        Pipeline(stage, depth=1).run({"q1": "x"}, cache=tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("*/shard-*"))  # refused before anything ran
    result = Pipeline(stage, depth=1).run({"q1": "x"})  # no cache: it runs, and says it is not cached
    assert result.stages["opaque"].outcomes["q1"].hits[0].doc_id == "d1"
    assert "not cached" in result.stages["opaque"].covers
    pinned = functions.retriever(_uses_model, name="opaque", version="model-2026-11")
    cached = Pipeline(pinned, depth=1).run({"q1": "x"}, cache=tmp_path / "cache")
    assert cached.stages["opaque"].covers.startswith("version 'model-2026-11'")
    assert isinstance(Uncacheable("x"), rag_eval.InputError)  # the CLI prints it as one line


def test_known_objects_are_hashed_by_content_and_only_once():
    a, b = np.zeros((1000, 64), np.float32), np.zeros((1000, 64), np.float32)
    b[999, 63] = 1.0  # one value apart, same size
    assert fingerprint(a, stage="s").digest != fingerprint(b, stage="s").digest
    assert fingerprint(a, stage="s").digest == fingerprint(a.copy(), stage="s").digest
    run_a = rag_eval.Run.from_ranking({"q1": ["d1", "d2"]})
    run_b = rag_eval.Run.from_ranking({"q1": ["d2", "d1"]})
    assert fingerprint(run_a, stage="s").digest != fingerprint(run_b, stage="s").digest
    qrels = rag_eval.Qrels.from_dict({"q1": {"d1": 1}})
    assert fingerprint(qrels, stage="s") == fingerprint(rag_eval.Qrels.from_dict({"q1": {"d1": 1}}), stage="s")
    assert fingerprint(qrels, stage="s") != fingerprint(rag_eval.Qrels.from_dict({"q1": {"d1": 2}}), stage="s")
    # sets: the same whatever the hash seed's order; containers: exact (a tuple is not a list, 1 is not "1")
    assert fingerprint({"b", "a"}, stage="s") == fingerprint({"a", "b"}, stage="s")
    assert fingerprint((1, 2), stage="s") != fingerprint([1, 2], stage="s")
    assert fingerprint({1: "x"}, stage="s") != fingerprint({"1": "x"}, stage="s")

    big = np.random.default_rng(0).random((2000, 384))  # about 6 MB, read-only: hashed once, then remembered
    big.flags.writeable = False  # (a writable array is hashed at every run: tests/test_verdicts_fingerprints.py)

    def dense(query, k):
        return [f"d{i}" for i in np.argsort(-big[:, 0])[:k]]

    import time

    start = time.perf_counter()
    first = fingerprint(dense, stage="dense")
    cold = time.perf_counter() - start
    start = time.perf_counter()
    assert fingerprint(dense, stage="dense") == first
    warm = time.perf_counter() - start
    assert warm < max(cold, 0.002)  # loosely: the warm call does not hash the array again


def test_pandas_frames_by_content():
    pd = pytest.importorskip("pandas")
    a = pd.DataFrame({"doc": ["d1", "d2"], "w": [1.0, 2.0]})
    b = pd.DataFrame({"doc": ["d1", "d2"], "w": [1.0, 3.0]})
    assert fingerprint(a, stage="s") != fingerprint(b, stage="s")
    assert fingerprint(a, stage="s") == fingerprint(a.copy(), stage="s")


@pytest.mark.parametrize("marker", [None, 1, 2])  # before markers; rag_eval 0.1's scheme; 0.2's JSON lines
def test_a_directory_of_the_older_key_scheme_is_announced_once(tmp_path, marker):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "search-0123456789abcdef0123.jsonl").write_text("")  # written by an older rag_eval
    if marker is not None:
        (cache / "rag_eval-cache.json").write_text(json.dumps({"key_scheme": marker}))
    stage = functions.retriever(lambda q, k: ["d1"], name="search")
    with pytest.warns(OldCacheKeys, match=r"1 file\(s\) were written by an older rag_eval .*not reused \(nor migrated"):
        Pipeline(stage, depth=1).run({"q1": "x"}, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = Pipeline(stage, depth=1).run({"q1": "x"}, cache=cache)
    assert again.stages["search"].cache_hits == 1
    assert json.loads((cache / "rag_eval-cache.json").read_text()) == {"key_scheme": 3}
    assert len(list(cache.glob("search-*/shard-*.arrow"))) == 1  # the new format, beside the old file (kept)
    assert (cache / "search-0123456789abcdef0123.jsonl").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Pipeline(stage, depth=1).run({"q1": "x"}, cache=tmp_path / "fresh")  # a new directory: nothing to say


def test_a_stage_class_of_the_users_own_is_keyed_by_its_code_and_state():
    from rag_eval.stages import Retriever

    class Fixed(Retriever):
        def __init__(self, name, docs):
            super().__init__(name)
            self.docs = docs

        def search(self, query, k):
            return self.docs[:k]

    assert Fixed("f", ["d1", "d2"]).fingerprint() != Fixed("f", ["d2", "d1"]).fingerprint()
    assert Fixed("f", ["d1", "d2"]).fingerprint() == Fixed("f", ["d1", "d2"]).fingerprint()
    assert "code of" in Fixed("f", ["d1"]).described().covers


def test_the_fingerprint_is_the_same_in_two_processes_for_sets_and_dicts(tmp_path):
    code = textwrap.dedent(f"""
        import sys; sys.path[:0] = [{str(ROOT)!r}]
        from rag_eval.stages.fingerprint import fingerprint
        TERMS = {{"alpha", "beta", "gamma", "delta"}}
        WEIGHTS = {{"alpha": 1, "beta": (2, 3.5), "gamma": [None, True]}}
        def search(query, k):
            return [t for t in sorted(TERMS) if WEIGHTS.get(t)][:k]
        print(fingerprint(search, stage="s").digest)
    """)
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ, PYTHONHASHSEED=seed),
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outs) == 1


def _helper_for_the_card(query):
    return ["d1", "d2"]


def _search_for_the_card(query, k):
    return _helper_for_the_card(query)[:k]


def test_the_card_shows_what_each_fingerprint_covers():
    result = Pipeline(
        functions.retriever(_search_for_the_card, name="s"),
        functions.reranker(lambda q, hits: hits, name="r", version="v3"),
        depth=2,
    ).run({"q1": "x"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        card = rag_eval.evaluate({"q1": {"d1": 1}}, result).card
    notes = {i.name: i.notes for i in card.inputs if i.role == "stage"}
    assert (
        f"fingerprint {result.stages['s'].fingerprint} (covers code of _search_for_the_card, "
        "_helper_for_the_card)" in notes["s"]
    )
    assert any("(covers version 'v3'" in n for n in notes["r"])
