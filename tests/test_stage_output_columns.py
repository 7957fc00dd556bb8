"""StageOutput holds a hit table: its outcomes view, properties and Run read the columns, and agree with objects."""

from __future__ import annotations

import numpy as np
import pytest

from rag_eval import Qrels
from rag_eval.data.run import Run
from rag_eval.errors import InputError
from rag_eval.stages import Hit, Outcome, StageOutput
from rag_eval.stages.budget import Budget, count_tokens
from rag_eval.stages.hit_table import TableBuilder, concat


def _outcomes() -> dict[str, Outcome]:
    return {
        "q1": Outcome((Hit("a", 2.0, tokens=3), Hit("b", 1.0, tokens=4), Hit("c", 0.5, tokens=1)), latency=0.5),
        "q2": Outcome(None, "boom", latency=0.25),
        "q3": Outcome((Hit("é", 1.0, text="one two"), Hit("d", 0.0, text="three")), cached=True, issues=("x", "y")),
        "q4": Outcome(None, "not run: up failed on this query", skipped=True),
        "q5": Outcome((), beyond_depth=("z",)),
    }


def _stage(**kw: object) -> StageOutput:
    return StageOutput.from_outcomes("s", "first", "fp", _outcomes(), **kw)  # type: ignore[arg-type]


def test_the_outcomes_view_gives_back_what_was_put_in():
    out = _stage(covers="code")
    assert list(out.outcomes) == ["q1", "q2", "q3", "q4", "q5"]
    assert len(out.outcomes) == 5 and "q3" in out.outcomes and "nope" not in out.outcomes
    for q, o in _outcomes().items():
        assert out.outcomes[q] == o
    assert out.covers == "code" and len(out.table) == 5
    with pytest.raises(TypeError):
        out.outcomes["q1"] = Outcome(None)  # type: ignore[index]


def test_properties_read_the_columns():
    out = _stage()
    assert out.failures == {"q2": "boom", "q4": "not run: up failed on this query"}
    assert out.cache_hits == 1
    assert out.latencies().tolist() == [0.5, 0.0]  # q1 and q5 computed; q3 cached; q2, q4 failed
    assert out.issue_rows() == [("q3", "x"), ("q3", "y")]
    assert out.mended == 1
    assert out.lengths.tolist() == [3, 0, 2, 0, 0]


def test_the_run_comes_from_the_buffers_in_the_order_given():
    out = _stage()
    run = out.run()
    assert run.query_ids == ("q1", "q3", "q5") and run.ranked_by == "given"
    assert run.offsets.tolist() == [0, 3, 5, 5]
    assert run.doc_ids.tolist() == ["a", "b", "c", "é", "d"]
    assert run.scores is not None and run.scores.tolist() == [2.0, 1.0, 0.5, 1.0, 0.0]
    assert run.ranking("q3") == [("é", 1.0), ("d", 0.0)]  # packed ids taken one by one (UTF-8)
    expected = Run.from_ranking(
        {"q1": [("a", 2.0), ("b", 1.0), ("c", 0.5)], "q3": [("é", 1.0), ("d", 0.0)], "q5": []}, name="s"
    )
    assert run == expected


def test_a_stage_with_a_hit_without_score_gives_a_ranking_without_scores():
    out = StageOutput.from_outcomes("s", "first", "fp", {"q": Outcome((Hit("a", 1.0), Hit("b")))})
    run = out.run()
    assert run.scores is None and run.doc_ids.tolist() == ["a", "b"]


def test_a_sliced_and_chunked_table_reads_the_right_rows():
    builder = TableBuilder()
    for i in range(6):
        builder.add(f"q{i}", "", None if i == 2 else [Hit(f"d{i}-{j}", float(-j)) for j in range(i)], error="e")
    whole = builder.table()
    table = concat([whole.slice(1, 2), whole.slice(3, 3)])  # two chunks, each with a slice offset
    out = StageOutput("s", "first", "fp", table)
    run = out.run()
    assert run.query_ids == ("q1", "q3", "q4", "q5")
    assert run.doc_ids.tolist() == [f"d{i}-{j}" for i in (1, 3, 4, 5) for j in range(i)]
    single = StageOutput("s", "first", "fp", whole.slice(3, 2))
    assert single.run().doc_ids.tolist() == [f"d{i}-{j}" for i in (3, 4) for j in range(i)]


def test_grades_agree_with_and_without_the_c_extension(monkeypatch):
    from rag_eval import _accel
    from rag_eval.metrics._engine import evaluate_run
    from rag_eval.metrics.conventions import Conventions
    from rag_eval.metrics.grammar import parse_metric

    qrels = Qrels.from_dict({"q1": {"b": 1, "c": 2}, "q3": {"é": 1}, "q5": {"z": 1}})
    metrics = [parse_metric(m) for m in ("ndcg@2", "recall@3", "mrr@3")]
    native = evaluate_run(qrels, _stage().run(), metrics, Conventions()).values
    monkeypatch.setattr(_accel, "speedups", None)
    run = _stage().run()
    assert not hasattr(run.doc_id_column, "blob")  # unpacked for the pure-Python lookup
    pure = evaluate_run(qrels, run, metrics, Conventions()).values
    np.testing.assert_array_equal(np.asarray(native), np.asarray(pure))
    assert np.asarray(native)[1].tolist() == [1.0, 1.0, 0.0]


def test_delivered_counts_match_the_budget_cut_hit_by_hit():
    out = _stage()
    for budget in (Budget(chunks=2), Budget(tokens=4), Budget(tokens=7), Budget(tokens=1)):
        expected = [budget.cut(o.hits or (), count_tokens) if not o.failed else 0 for o in _outcomes().values()]
        assert out.delivered(budget, count_tokens).tolist() == expected
    assert out.delivered(Budget(tokens=7), count_tokens).tolist() == [2, 0, 2, 0, 0]


def test_a_table_of_another_shape_is_refused():
    import pyarrow as pa

    with pytest.raises(TypeError, match="schema"):
        StageOutput("s", "first", "fp", pa.table({"query_id": ["q"]}))


def test_from_outcomes_refuses_a_doc_id_twice_in_a_query():
    with pytest.raises(InputError, match="'a' is in the hits twice"):
        StageOutput.from_outcomes("s", "first", "fp", {"q": Outcome((Hit("a"), Hit("a")))})


def _judged_pipeline():
    import rag_eval
    from rag_eval.adapters import functions
    from rag_eval.stages import Pipeline

    returned = {
        "q1": ["a", "b", "c", "d", "e"],  # e past the depth of 4
        "q2": "fail",
        "q3": ["c", "a"],
        "q4": ["f", "g"],
    }

    def search(text: str, k: int) -> list[Hit]:
        docs = returned[text]
        if docs == "fail":
            raise RuntimeError("down")
        return [Hit(d, float(-i), tokens=2) for i, d in enumerate(docs)]

    def rerank(text: str, hits: list[Hit]) -> list[Hit]:
        if text == "q3":
            raise RuntimeError("reranker down")
        return list(reversed(hits))

    pipe = Pipeline(
        functions.retriever(search, name="first"), functions.reranker(rerank, name="rev"), depth=4, budget=2
    )
    result = pipe.run({q: q for q in returned}, progress=False)
    qrels = rag_eval.Qrels.from_dict(
        {
            "q1": {"a": 1, "c": 2, "e": 1, "z": 1},
            "q2": {"a": 1},
            "q3": {"a": 1, "x": 1},
            "q4": {"f": 0, "y": 1},
        }
    )
    return rag_eval.evaluate(qrels, result)


def test_stage_aware_values_from_the_columns_match_the_hand_computed_ones():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = _judged_pipeline()
    values = report.per_query.set_index(["stage", "query_id", "metric"])["value"]
    # q1: the reranker reverses a b c d (e past the depth): it delivers d, c; candidate gains (exp) 1 0 3 0
    expected = (3 / np.log2(3)) / (3 + 1 / np.log2(3))
    assert values["rev", "q1", "cand_ndcg@budget"] == pytest.approx(expected, rel=1e-12)
    for fate, share in (("delivered", 0.25), ("reranked_out", 0.25), ("below_depth", 0.25), ("never_retrieved", 0.25)):
        assert values["rev", "q1", f"loss.{fate}"] == share
    assert values["rev", "q1", "loss.failed"] == 0.0
    assert values["rev", "q2", "loss.failed"] == 1.0  # the first stage failed: everything lost to it
    # q3: the reranker failed: its candidate a lost to the failure, x never retrieved
    assert values["rev", "q3", "loss.failed"] == 0.5 and values["rev", "q3", "loss.never_retrieved"] == 0.5
    assert values["rev", "q3", "cand_ndcg@budget"] == 0.0  # it ranked nothing of the a and c it was given
    # q4: no relevant candidate: cand_ndcg is 0/0
    assert np.isnan(values["rev", "q4", "cand_ndcg@budget"])
    assert values["rev", "q4", "loss.never_retrieved"] == 1.0
    assert values["first", "q1", "recall@depth"] == 0.5  # a and c of a, c, e, z
    items = report.loss_items.set_index(["query_id", "doc_id"])["fate"]
    assert items["q1", "a"] == "reranked_out" and items["q1", "e"] == "below_depth" and items["q3", "a"] == "failed"


def test_the_chunk_hash_from_columns_is_the_per_line_definition():
    from rag_eval.reports.hashes import _digest, corpus_sha256
    from rag_eval.stages import PipelineResult
    from rag_eval.stages.result import PipelineSpec, StageSpec

    first = {
        "q1": Outcome((Hit("b", text='say "hi"'), Hit("a"), Hit("é", text="x\ny"))),
        "q2": Outcome((Hit("a", text=""), Hit("b", text='say "hi"'), Hit("c\\d"))),
        "q3": Outcome(None, "down"),
    }
    second = {"q1": Outcome((Hit("a"), Hit("b", text="shortened"))), "q2": Outcome(()), "q3": Outcome(None, "x")}
    stages = {
        "first": StageOutput.from_outcomes("first", "first", "f", first),
        "second": StageOutput.from_outcomes("second", "reranker", "s", second),
    }
    spec = PipelineSpec(
        "first >> second",
        10,
        Budget(chunks=2),
        (
            StageSpec("first", "first", "retriever", "m.F", "f", ""),
            StageSpec("second", "reranker", "reranker", "m.S", "s", ""),
        ),
    )
    result = PipelineResult(spec, {"q1": "1", "q2": "2", "q3": "3"}, stages)
    pairs = {(h.doc_id, h.text) for out in (first, second) for o in out.values() for h in o.hits or ()}
    ordered = sorted(pairs, key=lambda c: (c[0], c[1] is not None, c[1] or ""))
    expected = _digest(([i] if t is None else [i, t] for i, t in ordered), "chunks")
    assert corpus_sha256(result) == (expected, "hits")


@pytest.mark.parametrize("with_failed", [False, True])
def test_a_stage_rankings_grades_read_from_its_judgements_equal_a_fresh_lookup(with_failed):
    """The stage-aware report seeds a stage's ranking with the judgement each hit names (one lookup per stage) and
    keeps its grade matrices: every metric equals the same ranking's plain evaluation, for every query left out."""
    from rag_eval.metrics._engine import evaluate_run
    from rag_eval.metrics._grades import lookup_values
    from rag_eval.metrics.conventions import Conventions
    from rag_eval.metrics.grammar import parse_metric

    qrels = Qrels.from_dict({"q1": {"b": 1, "c": 2}, "q2": {"a": 1}, "q3": {"é": 1, "d": 3}, "q9": {"x": 1}})
    metrics = [parse_metric(m) for m in ("ndcg@2", "recall@3", "mrr@3", "judged@2", "num_rel_ret")]
    out = _stage()
    offsets, _ = out.hit_columns()
    every = np.arange(qrels.num_judgements, dtype=np.int64)
    codes = lookup_values(out.doc_ids(), offsets, qrels.rows_of(out.query_ids), qrels, every)
    seeded = out.ranking_run(with_failed=with_failed, with_scores=False)
    seeded._memo["judgements"], seeded._memo["matrices"] = (qrels, codes), []
    for exclude in [(), ("q1",), ("q3", "q2")]:
        for conventions in (Conventions(), Conventions(missing_run="zero", unjudged="remove")):
            plain = out.ranking_run(with_failed=with_failed, with_scores=False)
            expected = evaluate_run(qrels, plain, metrics, conventions, exclude=exclude)
            for _ in range(2):  # the second time from the kept matrix
                got = evaluate_run(qrels, seeded, metrics, conventions, exclude=exclude, warn_ids=False)
                assert got.account.counted == expected.account.counted
                np.testing.assert_array_equal(np.asarray(got.values), np.asarray(expected.values))
    assert 0 < len(seeded._memo["matrices"]) <= 4
