"""Invariances every evaluation must have, on small generated qrels and runs (hypothesis).

What must not change a single per-query value: the order of the queries, a renaming of every query id and doc
id (one that keeps the order of doc ids where the tie rule compares them), the row order of a run ranked by
score (TREC file, JSONL, DataFrame, or a dict) and of a qrels file. And every 0..1 metric stays in [0, 1] even
with repeated doc ids and infinite scores.

Ids come from small alphabets so that runs and judgements overlap; scores take a few values so that ties are
common (a tie is where the order of the input or the spelling of an id could leak into a value).
"""

from __future__ import annotations

import json
import math
import random
import warnings
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rag_eval
from rag_eval import _accel
from rag_eval.metrics import PRESETS

from . import strategies
from .strategies import CONVENTIONS as BASE_CONVENTIONS
from .strategies import COUNTS, DOCS, rankings, unique_rankings

SETTINGS = settings(max_examples=300, deadline=None)
# random qrels and runs often share no query: rightly warned (LowQueryOverlap, tested in test_bad_input_systematic)
pytestmark = pytest.mark.filterwarnings("ignore::rag_eval.errors.LowQueryOverlap")

QUERIES = ["q1", "q2", "q3", "q10", "q4", "Q5"]
METRICS = [
    "recall@1",
    "recall@3",
    "recall(rel=2)@3",
    "precision@1",
    "precision@3",
    "P@10",
    "P(rel=2)@3",
    "hit@2",
    "hit(rel=2)@3",
    "mrr",
    "mrr@2",
    "mrr(rel=2)",
    "ndcg",
    "ndcg@3",
    "ndcg@10",
    "ndcg(gain=linear)@2",
    "ndcg(gain=exp)@5",
    "ndcg(rel=2)",
    "ndcg(gains=1:3;2:9)@3",
    "ap",
    "ap@3",
    "ap(rel=3)@5",
    "r_precision",
    "r_precision(rel=2)",
    "bpref",
    "bpref(rel=2)",
    "judged@1",
    "judged@3",
    "recall_ceiling@2",
    "num_rel",
    "num_rel(rel=2)",
    "num_ret",
    "num_rel_ret",
]
CONVENTIONS = BASE_CONVENTIONS + [
    PRESETS["default"].replace(negative_grades="unjudged", unjudged="remove", missing_run="skip"),
]
# where equal scores are ordered by doc id, not by the input's order
ID_TIES = [c for c in CONVENTIONS if c.ties != "input_order"]

qrels_dicts = strategies.qrels_dicts(QUERIES)
SCORES = [0.0, 0.5, 1.0, -0.0, -2.5, 1e300]
score_dicts = strategies.score_dicts(QUERIES, SCORES)
# new names: no whitespace (so that they could be written to a TREC file), some beyond ASCII, and no "0" (ids
# that differ only by leading zeros draw a near-miss warning, see rag_eval/data/_near_miss.py), and none two that
# differ only in case (also a near miss: "Z1" and "z1")
NAME_ALPHABET = "aZz19_-.:/é中\U0001f600"
new_names = st.text(NAME_ALPHABET, min_size=1, max_size=6)
doc_names = st.lists(new_names, min_size=len(DOCS), max_size=len(DOCS), unique_by=str.casefold)
query_names = st.lists(new_names, min_size=len(QUERIES), max_size=len(QUERIES), unique_by=str.casefold)
# (query, doc, score) rows of a run ranked by score; a doc may repeat within a query with another score
score_rows = st.lists(
    st.tuples(st.sampled_from(QUERIES), st.sampled_from(DOCS), st.sampled_from(SCORES)), min_size=1, max_size=25
)
shuffles = st.randoms(use_true_random=False)


def _values(report: rag_eval.Report, run: str = "run") -> dict[tuple[str, str], float]:
    frame = report.per_query
    frame = frame[frame["run"] == run]
    # NaN (judged@k of an empty top k is 0/0) as None, so that equal reports compare equal
    return {
        (q, m): (None if v != v else float(v)) for q, m, v in zip(frame["query_id"], frame["metric"], frame["value"])
    }


def _evaluate(qrels, run: rag_eval.Run, conventions) -> rag_eval.Report:
    return rag_eval.evaluate(qrels, {"run": run}, METRICS, conventions=conventions)


def _shuffled_dict(mapping: dict, rnd: random.Random) -> dict:
    items = list(mapping.items())
    rnd.shuffle(items)
    return dict(items)


@contextmanager
def _quiet(*messages: str):
    """Ignore rag_eval's UserWarnings that contain one of ``messages`` (repeated doc ids, infinite scores)."""
    with warnings.catch_warnings():
        for message in messages:
            warnings.filterwarnings("ignore", f".*{message}", UserWarning)
        yield


@contextmanager
def _pure_python():
    """rag_eval without its C extension, as RAG_EVAL_PURE_PYTHON=1 gives (every caller reads _accel.speedups)."""
    saved = _accel.speedups
    _accel.speedups = None
    try:
        yield
    finally:
        _accel.speedups = saved


# ----- the order of the queries --------------------------------------------------------------------------------


@SETTINGS
@given(qrels=qrels_dicts, scores=score_dicts, conventions=st.sampled_from(CONVENTIONS), rnd=shuffles)
def test_query_order_changes_no_value(qrels, scores, conventions, rnd):
    report = _evaluate(qrels, rag_eval.Run.from_scores(scores), conventions)
    shuffled = _evaluate(_shuffled_dict(qrels, rnd), rag_eval.Run.from_scores(_shuffled_dict(scores, rnd)), conventions)
    assert _values(shuffled) == _values(report)
    a, b = (r.summary.set_index(["run", "metric"]).sort_index() for r in (report, shuffled))
    assert a.index.equals(b.index)
    for column in ("n", "median"):  # NaN where no query is counted
        assert a[column].equals(b[column]), column
    # the same values summed in another order may differ in the last place
    for column in ("mean", "sum", "std"):
        assert b[column].tolist() == pytest.approx(a[column].tolist(), rel=1e-12, abs=1e-15, nan_ok=True), column


@SETTINGS
@given(
    qrels=qrels_dicts,
    ranking=st.dictionaries(st.sampled_from(QUERIES), unique_rankings, min_size=1),
    conventions=st.sampled_from(CONVENTIONS),
    rnd=shuffles,
)
def test_query_order_changes_no_value_of_a_given_ranking(qrels, ranking, conventions, rnd):
    a = _values(_evaluate(qrels, rag_eval.Run.from_ranking(ranking), conventions))
    b = _values(
        _evaluate(_shuffled_dict(qrels, rnd), rag_eval.Run.from_ranking(_shuffled_dict(ranking, rnd)), conventions)
    )
    assert a == b


# ----- renaming ids --------------------------------------------------------------------------------------------


def _renamed(qrels, run_dict, queries: dict[str, str], docs: dict[str, str]):
    new_qrels = {queries[q]: {docs[d]: g for d, g in judged.items()} for q, judged in qrels.items()}
    if all(isinstance(v, dict) for v in run_dict.values()):
        new_run = {queries[q]: {docs[d]: s for d, s in per.items()} for q, per in run_dict.items()}
    else:
        new_run = {queries[q]: [docs[d] for d in ranked] for q, ranked in run_dict.items()}
    return new_qrels, new_run


def _assert_renamed_values_equal(before, after, queries: dict[str, str]):
    assert len(before) == len(after)
    for (qid, metric), value in before.items():
        assert after[(queries[qid], metric)] == value, (qid, metric)


@SETTINGS
@given(
    qrels=qrels_dicts, scores=score_dicts, conventions=st.sampled_from(CONVENTIONS), names=doc_names, qnames=query_names
)
def test_renaming_ids_in_the_same_order_changes_no_value(qrels, scores, conventions, names, qnames):
    # doc ids mapped monotonically (ties="trec_eval"/"doc_id" compare them); query ids by any bijection
    docs = dict(zip(sorted(DOCS), sorted(names)))
    queries = dict(zip(QUERIES, qnames))
    new_qrels, new_scores = _renamed(qrels, scores, queries, docs)
    before = _values(_evaluate(qrels, rag_eval.Run.from_scores(scores), conventions))
    after = _values(_evaluate(new_qrels, rag_eval.Run.from_scores(new_scores), conventions))
    _assert_renamed_values_equal(before, after, queries)


@SETTINGS
@given(
    qrels=qrels_dicts,
    ranking=st.dictionaries(st.sampled_from(QUERIES), unique_rankings, min_size=1),
    scores=score_dicts,
    conventions=st.sampled_from(CONVENTIONS),
    names=doc_names,
    qnames=query_names,
)
def test_any_renaming_changes_no_value_where_no_tie_is_broken_by_id(qrels, ranking, scores, conventions, names, qnames):
    docs = dict(zip(DOCS, names))  # any bijection: the order of doc ids is not kept
    queries = dict(zip(QUERIES, qnames))
    # a given ranking is never re-sorted
    new_qrels, new_ranking = _renamed(qrels, ranking, queries, docs)
    before = _values(_evaluate(qrels, rag_eval.Run.from_ranking(ranking), conventions))
    after = _values(_evaluate(new_qrels, rag_eval.Run.from_ranking(new_ranking), conventions))
    _assert_renamed_values_equal(before, after, queries)
    # a run by score whose ties keep the input's order
    by_input = conventions.replace(ties="input_order")
    new_qrels, new_scores = _renamed(qrels, scores, queries, docs)
    before = _values(_evaluate(qrels, rag_eval.Run.from_scores(scores), by_input))
    after = _values(_evaluate(new_qrels, rag_eval.Run.from_scores(new_scores), by_input))
    _assert_renamed_values_equal(before, after, queries)


# ----- the row order of the input -------------------------------------------------------------------------------


def _write_trec_run(path: Path, rows) -> None:
    path.write_text("".join(f"{q} Q0 {d} {i + 1} {s!r} tag\n" for i, (q, d, s) in enumerate(rows)), "utf-8")


def _write_jsonl_run(path: Path, rows) -> None:
    path.write_text("".join(json.dumps({"query_id": q, "doc_id": d, "score": s}) + "\n" for q, d, s in rows), "utf-8")


def _frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])


@SETTINGS
@given(qrels=qrels_dicts, rows=score_rows, conventions=st.sampled_from(ID_TIES), rnd=shuffles)
def test_row_order_of_a_run_by_score_changes_no_value(tmp_path_factory, qrels, rows, conventions, rnd):
    folder = tmp_path_factory.mktemp("rows")
    shuffled = rows.copy()
    rnd.shuffle(shuffled)
    runs: dict[str, rag_eval.Run] = {}
    with _quiet("repeated doc id"):
        for label, these in (("given", rows), ("shuffled", shuffled)):
            _write_trec_run(folder / f"{label}.trec", these)
            _write_jsonl_run(folder / f"{label}.jsonl", these)
            runs[f"trec-{label}"] = rag_eval.Run.from_trec(folder / f"{label}.trec")
            runs[f"load-{label}"] = rag_eval.Run.load(folder / f"{label}.trec")
            with _pure_python():
                runs[f"trec-pure-{label}"] = rag_eval.Run.from_trec(folder / f"{label}.trec")
            runs[f"jsonl-{label}"] = rag_eval.Run.from_jsonl(folder / f"{label}.jsonl")
            runs[f"frame-{label}"] = rag_eval.Run.from_frame(_frame(these))
    # without repeats the rows are a dict too
    by_query: dict[str, dict[str, float]] = {}
    for q, d, s in rows:
        by_query.setdefault(q, {})[d] = s
    if sum(map(len, by_query.values())) == len(rows):
        runs["dict"] = rag_eval.Run.from_scores(by_query)
    reference = _values(_evaluate(qrels, runs["trec-given"], conventions))
    for label, run in runs.items():
        assert _values(_evaluate(qrels, run, conventions)) == reference, label


@SETTINGS
@given(qrels=qrels_dicts, scores=score_dicts, conventions=st.sampled_from(CONVENTIONS), rnd=shuffles)
def test_row_order_of_a_qrels_file_changes_no_value(tmp_path_factory, qrels, scores, conventions, rnd):
    folder = tmp_path_factory.mktemp("qrels")
    lines = [f"{q} 0 {d} {g}\n" for q, judged in qrels.items() for d, g in judged.items()]
    rnd.shuffle(lines)
    (folder / "shuffled.qrels").write_text("".join(lines), "utf-8")
    run = rag_eval.Run.from_scores(scores)
    reference = _values(_evaluate(qrels, run, conventions))
    from_file = rag_eval.Qrels.from_trec(folder / "shuffled.qrels")
    assert from_file == rag_eval.Qrels(qrels)
    assert _values(_evaluate(from_file, run, conventions)) == reference
    assert _values(_evaluate(rag_eval.Qrels.load(folder / "shuffled.qrels"), run, conventions)) == reference
    with _pure_python():
        pure = rag_eval.Qrels.from_trec(folder / "shuffled.qrels")
    assert _values(_evaluate(pure, run, conventions)) == reference


# ----- bounds ----------------------------------------------------------------------------------------------------

EXTREME_SCORES = [0.0, 1.0, -0.0, math.inf, -math.inf, 1e308, -1e308, 5e-324]
extreme_rows = st.lists(
    st.tuples(st.sampled_from(QUERIES), st.sampled_from(DOCS), st.sampled_from(EXTREME_SCORES)),
    min_size=1,
    max_size=25,
)


def _assert_bounded(values: dict[tuple[str, str], float]) -> None:
    for (qid, metric), value in values.items():
        if metric.split("(")[0] in COUNTS:
            assert value >= 0 and value == int(value), (qid, metric, value)
        else:
            if value is None:  # 0/0: only judged@k of an empty top k
                assert metric.startswith("judged@"), (qid, metric)
                continue
            assert 0.0 <= value <= 1.0, (qid, metric, value)


@SETTINGS
@given(
    qrels=qrels_dicts,
    rows=extreme_rows,
    ranking=st.dictionaries(st.sampled_from(QUERIES), rankings, min_size=1),
    conventions=st.sampled_from(CONVENTIONS),
)
def test_values_stay_in_0_1_with_repeats_and_infinite_scores(tmp_path_factory, qrels, rows, ranking, conventions):
    path = tmp_path_factory.mktemp("bounds") / "run.trec"
    _write_trec_run(path, rows)
    with _quiet("repeated doc id", "infinite score"):
        runs = {
            "frame": rag_eval.Run.from_frame(_frame(rows)),
            "trec": rag_eval.Run.from_trec(path),
            "ranking": rag_eval.Run.from_ranking(ranking),
            "scored ranking": rag_eval.Run.from_ranking({q: [(d, s) for rq, d, s in rows if rq == q] for q in ranking}),
        }
    report = rag_eval.evaluate(qrels, runs, METRICS, conventions=conventions)
    for name in runs:
        values = _values(report, name)
        assert {m for _, m in values} <= {str(rag_eval.parse_metric(m)) for m in METRICS}
        _assert_bounded(values)
    # the same rows, every repeat dropped but the best-scored copy: the same values
    if conventions.ties != "input_order":
        best: dict[str, dict[str, float]] = {}
        for q, d, s in rows:
            if d not in best.setdefault(q, {}) or s > best[q][d]:
                best[q][d] = s
        with _quiet("infinite score"):
            deduped = rag_eval.Run.from_scores(best)
        assert _values(rag_eval.evaluate(qrels, {"frame": deduped}, METRICS, conventions=conventions), "frame") == (
            _values(report, "frame")
        )
