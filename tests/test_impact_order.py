"""Label what matters first (issue 17): the impact order of a pool (rag_eval.ground_truth.ordering), the labelling
page serving it (``--order impact``), and the cranfield replay that measures it (benchmarks/label_order_replay.py).
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import threading

import numpy as np
import pytest

import rag_eval
from rag_eval import Run
from rag_eval.cli import main
from rag_eval.errors import InputError
from rag_eval.ground_truth import Pool, pool
from rag_eval.ground_truth.ordering import impact_order, impact_weights
from rag_eval.labelling import LabellingServer, LabellingSession, log_path_for

from .conftest import DATASETS, ROOT, need_shared
from .test_labelling_server import QUERIES, TEXTS, Running, make_pool

W2, W3 = 1 / math.log2(3), 0.5  # nDCG's discounts of ranks 2 and 3 (rank 1: 1)


def pairs(p: Pool) -> list[tuple[str, str]]:
    return [(i.query_id, i.doc_id) for i in p.items]


# ----- the weights and the order --------------------------------------------------------------------------------


def test_each_item_weighs_the_difference_of_the_two_discounts(tmp_path):
    made, _ = make_pool(tmp_path)  # bm25: q1 a b c, q2 d e; dense: q1 c a x, q2 f d
    assert impact_weights(made) == pytest.approx(
        {
            ("q1", "a"): 1 - W2,  # ranks 1 and 2
            ("q1", "c"): 1 - W3,  # ranks 3 and 1
            ("q1", "b"): W2,  # rank 2 and absent
            ("q1", "x"): W3,
            ("q2", "d"): 1 - W2,
            ("q2", "f"): 1.0,  # rank 1 and absent: the most a grade can move the difference
            ("q2", "e"): W2,
        },
        abs=1e-15,
    )
    assert list(impact_weights(made)) == pairs(made)  # in the pool's order


def test_the_order_is_global_highest_impact_first_ties_by_best_rank_then_the_pool_s_order(tmp_path):
    made, _ = make_pool(tmp_path)
    ordered = impact_order(made)
    # f 1.0; b and e 0.631 (equal best rank 2: pool order, q1 first); c and x 0.5 (c has a rank 1); a and d 0.369
    assert pairs(ordered) == [
        ("q2", "f"),
        ("q1", "b"),
        ("q2", "e"),
        ("q1", "c"),
        ("q1", "x"),
        ("q1", "a"),
        ("q2", "d"),
    ]
    assert sorted(ordered.items, key=lambda i: (i.query_id, i.doc_id)) == sorted(
        made.items, key=lambda i: (i.query_id, i.doc_id)
    )  # the same items, texts and ranks
    assert (ordered.depth, ordered.strategy, ordered.systems, ordered.already_judged) == (3, "depth", made.systems, 0)
    assert impact_order(made) == ordered  # deterministic, id included


def test_a_judge_s_doubt_multiplies_the_impact_and_unnamed_items_count_as_unsure(tmp_path):
    made, _ = make_pool(tmp_path)
    # f: 1.0 * 0.25; b, e: 0.631 * 1 (not named); c: 0.5 * 0.9; x: 0.5 * 1; a: 0.369 * 1; d: 0.369 * 0
    doubt = {("q2", "f"): 0.25, ("q1", "c"): 0.9, ("q2", "d"): 0.0, ("q9", "zz"): 0.5}  # q9: not pooled, ignored
    assert pairs(impact_order(made, uncertainty=doubt)) == [
        ("q1", "b"),
        ("q2", "e"),
        ("q1", "x"),
        ("q1", "c"),
        ("q1", "a"),
        ("q2", "f"),
        ("q2", "d"),
    ]
    # u = 1 everywhere is no judge at all; u = 0 everywhere leaves the ties to the impact: the plain impact order
    everything = {(i.query_id, i.doc_id): 1 for i in made.items}
    assert pairs(impact_order(made, uncertainty=everything)) == pairs(impact_order(made))
    nothing = {(i.query_id, i.doc_id): 0.0 for i in made.items}
    assert pairs(impact_order(made, uncertainty=nothing)) == pairs(impact_order(made))
    assert impact_order(made, uncertainty=everything).order["uncertainty"] is True


def test_at_a_shallower_cutoff_items_below_it_weigh_nothing_and_the_least_sure_of_them_come_first(tmp_path):
    made, _ = make_pool(tmp_path)
    assert impact_weights(made, depth=1) == {
        ("q1", "a"): 1.0,
        ("q1", "c"): 1.0,
        ("q1", "b"): 0.0,
        ("q1", "x"): 0.0,
        ("q2", "d"): 1.0,
        ("q2", "f"): 1.0,
        ("q2", "e"): 0.0,
    }
    ordered = impact_order(made, depth=1, uncertainty={("q1", "b"): 0.2, ("q2", "e"): 0.5})
    assert pairs(ordered) == [("q1", "a"), ("q1", "c"), ("q2", "d"), ("q2", "f"), ("q1", "x"), ("q2", "e"), ("q1", "b")]
    assert ordered.order["metric"] == "ndcg@1"


def test_three_systems_every_pair_or_against_a_baseline_or_a_chosen_two():
    runs = {
        "A": Run.from_ranking({"q": ["a", "b"]}, name="A"),
        "B": Run.from_ranking({"q": ["b", "a"]}, name="B"),
        "C": Run.from_ranking({"q": ["c", "a"]}, name="C"),
    }
    made = pool(runs, depth=2)
    assert pairs(made) == [("q", "a"), ("q", "b"), ("q", "c")]
    # a: discounts A 1, B 0.631, C 0.631; b: A 0.631, B 1, C 0; c: C 1 only
    assert impact_weights(made) == pytest.approx(
        {("q", "a"): (2 * (1 - W2)) / 3, ("q", "b"): (1 - W2 + W2 + 1) / 3, ("q", "c"): 2 / 3}, abs=1e-15
    )
    assert impact_weights(made, baseline="B") == pytest.approx(
        {("q", "a"): (1 - W2) / 2, ("q", "b"): (1 - W2 + 1) / 2, ("q", "c"): 1 / 2}, abs=1e-15
    )
    assert pairs(impact_order(made)) == [("q", "b"), ("q", "c"), ("q", "a")]  # b, c tie at 2/3: pool order
    assert pairs(impact_order(made, systems=["A", "C"])) == [("q", "c"), ("q", "b"), ("q", "a")]
    ordered = impact_order(made, baseline="B")
    assert ordered.order == {
        "by": "impact",
        "metric": "ndcg@2",
        "systems": ["A", "B", "C"],
        "pairs": "against B",
        "uncertainty": False,
        "from": made.id,
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"systems": ["bm25"]}, "impact order compares systems, and pool"),
        ({"systems": ["bm25", "sparse"]}, "system(s) ['sparse'] are not in pool"),
        ({"systems": ["bm25", "bm25"]}, "name one system twice"),
        ({"systems": "bm25"}, "systems must be a list"),
        ({"depth": 4}, "impact order depth must be at most 3, not 4"),
        ({"depth": 0}, "impact order depth must be 1 or more"),
        ({"depth": True}, "impact order depth must be an int"),
        ({"baseline": "sparse"}, "baseline 'sparse' is not one of the systems compared"),
        ({"uncertainty": {("q1", "a"): 1.5}}, "uncertainty of query 'q1', doc 'a' must be a number in [0, 1], not 1.5"),
        ({"uncertainty": {("q1", "a"): float("nan")}}, "must be a number in [0, 1], not nan"),
        ({"uncertainty": {("q1", "a"): True}}, "must be a number in [0, 1], not True"),
        ({"uncertainty": {"q1": 0.5}}, "uncertainty: key 'q1' is not a (query_id, doc_id) pair of str"),
        ({"uncertainty": [0.5]}, "uncertainty must map (query_id, doc_id) to a number in [0, 1]"),
    ],
)
def test_bad_options_are_input_errors_that_say_what_is_wrong(tmp_path, options, message):
    made, _ = make_pool(tmp_path)
    with pytest.raises(InputError) as info:
        impact_order(made, **options)
    assert message in str(info.value)


def test_a_pool_of_one_system_has_nothing_to_compare():
    one = pool({"bm25": Run.from_ranking({"q": ["a", "b"]}, name="bm25")}, depth=2)
    with pytest.raises(InputError, match="has 1 to compare"):
        impact_order(one)
    with pytest.raises(TypeError, match="pool must be a Pool"):
        impact_order([])  # type: ignore[arg-type]


# ----- the pool's provenance and files --------------------------------------------------------------------------


def test_the_order_is_in_the_provenance_and_the_id_and_survives_save_and_load(tmp_path):
    made, path = make_pool(tmp_path)
    assert made.id == "1a660826d8fb"  # a pool without an order keeps the id it always had
    assert made.order is None and "order" not in made.provenance
    assert json.loads(path.read_text().splitlines()[0])["pool"] == {
        "id": "1a660826d8fb",
        "depth": 3,
        "strategy": "depth",
        "systems": ["bm25", "dense"],
        "already_judged": 0,
    }
    assert Pool.load(path) == made

    ordered = impact_order(made)
    assert ordered.id != made.id and len(ordered.id) == 12
    assert ordered.provenance["order"] == {
        "by": "impact",
        "metric": "ndcg@3",
        "systems": ["bm25", "dense"],
        "pairs": "all",
        "uncertainty": False,
        "from": made.id,
    }
    saved = tmp_path / "impact.jsonl"
    ordered.save(saved)
    assert Pool.load(saved) == ordered
    assert pairs(Pool.load(saved)) == pairs(ordered)
    # the same items in the same order, without the record of how, is another pool: the order is part of the id
    assert Pool(ordered.items, 3, "depth", made.systems).id != ordered.id


def test_a_bad_order_in_a_pool_file_names_the_file(tmp_path):
    made, path = make_pool(tmp_path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        line["pool"]["order"] = "impact"  # not an object
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(InputError) as info:
        Pool.load(bad)
    assert str(info.value).startswith(f"{bad}:1: field 'pool': pool order must be a JSON object")
    with pytest.raises(InputError, match="non-empty 'by' string"):
        Pool(made.items, 3, "depth", made.systems, order={"by": ""})
    with pytest.raises(InputError, match="JSON values only"):
        Pool(made.items, 3, "depth", made.systems, order={"by": "hand", "when": object()})


# ----- the labelling page serves it ------------------------------------------------------------------------------


class ServedInOrder(Running):
    """test_labelling_server's Running, serving the pool in the order given."""

    def __init__(self, made, out, *, order: str) -> None:
        self.session = LabellingSession(made, out, assessor="alice", order=order)
        self.server = LabellingServer(self.session)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()


def test_the_session_serves_the_impact_order_and_records_it(tmp_path):
    made, _ = make_pool(tmp_path)
    out = tmp_path / "out.qrels"
    running = ServedInOrder(made, out, order="impact")
    try:
        ordered = impact_order(made)
        status, state = running.request("GET", "/api/state")
        assert status == 200 and (state["total"], state["next"]) == (7, 0)
        assert state["pool"]["id"] == ordered.id and state["pool"]["order"] == ordered.provenance["order"]
        status, item = running.request("GET", "/api/item?i=0")
        assert (item["query_id"], item["doc_id"], item["text"]) == ("q2", "f", TEXTS["f"])
        assert item["query"] == QUERIES["q2"] and item["ranks"] == {"dense": 1}
        status, result = running.judge(0, 3)
        assert status == 200 and result["state"]["next"] == 1
        assert running.request("GET", "/api/item?i=1")[1]["doc_id"] == "b"
        assert out.read_text() == "q2 0 f 3\n"
        [line] = [json.loads(x) for x in log_path_for(out).read_text().splitlines()]
        assert line["pool"]["id"] == ordered.id  # the log names the pool served
    finally:
        running.stop()
    # the default serves the pool's own order, and says nothing of an order
    plain = LabellingSession(made, tmp_path / "plain.qrels", assessor="bob")
    assert plain.pool is made and "order" not in plain.state()["pool"]
    # resuming in the pool's order after labelling in impact order: item f is judged already, whichever order
    again = LabellingSession(made, out, assessor="alice")
    assert again.state()["judged"] == 1 and again.item(5)["grade"] == 3
    with pytest.raises(InputError, match="unknown --order 'best'; choose one of pool, impact"):
        LabellingSession(made, out, assessor="alice", order="best")


def test_rag_eval_label_order_impact_serves_and_names_the_order(tmp_path, capsys, monkeypatch):
    made, path = make_pool(tmp_path)
    out = tmp_path / "out.qrels"

    def interrupted(self, poll_interval=0.5):  # Ctrl-C as soon as the server is up
        raise KeyboardInterrupt

    monkeypatch.setattr(LabellingServer, "serve_forever", interrupted)
    assert main(["label", str(path), "-o", str(out), "--assessor", "carol", "--order", "impact"]) == 0
    first, last = capsys.readouterr().out.splitlines()
    assert first.startswith(f"rag-eval: labelling 7 items of pool {impact_order(made).id} in impact order at ")
    assert last.startswith("rag-eval: 0 of 7 judged")
    assert main(["label", str(path), "-o", str(out), "--assessor", "carol"]) == 0
    assert capsys.readouterr().out.startswith(f"rag-eval: labelling 7 items of pool {made.id} at ")
    with pytest.raises(SystemExit) as info:
        main(["label", str(path), "-o", str(out), "--order", "best"])
    assert info.value.code == 2
    assert "invalid choice: 'best'" in capsys.readouterr().err


def test_a_judges_log_gives_the_doubt_and_the_label_command_orders_by_it(tmp_path, capsys, monkeypatch):
    from rag_eval.ground_truth import JudgementLog
    from rag_eval.ground_truth.ordering import judge_uncertainty

    made, path = make_pool(tmp_path)
    log = JudgementLog.open(tmp_path / "judge.jsonl")
    log.append("q2", "f", 3, assessor="umbrela", judge={"fingerprint": "fp", "confidence": 0.75})
    log.append("q1", "c", 1, assessor="umbrela", judge={"fingerprint": "fp", "confidence": 0.5})
    log.append("q1", "c", 2, assessor="umbrela", judge={"fingerprint": "fp", "confidence": 0.1})  # supersedes
    log.append("q2", "d", 0, assessor="umbrela", judge={"fingerprint": "fp"})  # no confidence: left out (u = 1)
    log.append("q2", "e", 1, assessor="alice")  # a person's grade: not a judge's doubt
    doubt = judge_uncertainty(log)
    assert doubt == pytest.approx({("q2", "f"): 0.25, ("q1", "c"): 0.9})
    assert judge_uncertainty(log, judge="umbrela") == doubt
    with pytest.raises(InputError, match="no model judge 'other' in the log"):
        judge_uncertainty(log, judge="other")
    expected = impact_order(made, uncertainty=doubt)
    session = LabellingSession(made, tmp_path / "s.qrels", assessor="bob", order="impact", uncertainty=doubt)
    assert pairs(session.pool) == pairs(expected) and session.pool.id == expected.id
    with pytest.raises(InputError, match="only in impact order"):
        LabellingSession(made, tmp_path / "t.qrels", assessor="bob", uncertainty=doubt)

    def interrupted(self, poll_interval=0.5):
        raise KeyboardInterrupt

    monkeypatch.setattr(LabellingServer, "serve_forever", interrupted)
    out = tmp_path / "out.qrels"
    args = ["label", str(path), "-o", str(out), "--assessor", "carol", "--order", "impact"]
    assert main([*args, "--judge-log", str(tmp_path / "judge.jsonl")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"rag-eval: labelling 7 items of pool {expected.id} in impact order, weighted by the ")
    assert main([*args[:-2], "--judge-log", str(tmp_path / "judge.jsonl")]) == 2
    assert "it needs --order impact" in capsys.readouterr().err


# ----- the measurement: the cranfield replay ---------------------------------------------------------------------


def _replay_module():
    spec = importlib.util.spec_from_file_location("label_order_replay", ROOT / "benchmarks" / "label_order_replay.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["label_order_replay"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_on_cranfield_impact_order_settles_the_comparison_with_under_60_percent_of_depth_order_s_labels():
    folder = need_shared(DATASETS / "cranfield")
    pytest.importorskip("bm25s", reason="the replay needs bm25s and PyStemmer (pip install -e '.[bench]')")
    pytest.importorskip("Stemmer", reason="the replay needs PyStemmer (pip install -e '.[bench]')")
    replay = _replay_module()
    data = replay.load(folder)
    runs = {name: replay.bm25_run(data, name, **replay.VARIANTS[name]) for name in ("stem", "nostem")}
    measured = replay.measure(data, runs, ("stem", "nostem"))
    pooled = measured.pooled
    assert (len(pooled), len(pooled.query_ids)) == (5861, 225)
    grades = replay.hidden_grades(pooled, data.qrels)
    assert sum(g > 0 for g in grades.values()) == 616  # relevant pooled items (grades 1..3) of 1,249

    # the replay's numbers are the harness's: per-query nDCG@20 (rag_eval.evaluate, default conventions: gain
    # 2^g - 1) and the paired t-test's p (rag_eval.compare, test="t") at checkpoints of both orders
    for order in (pooled.items, impact_order(pooled).items):
        checks = (1, 40, 332, 1500, 4580, len(order))
        run = replay.replay(order, grades, ("stem", "nostem"), order="x", snapshots=checks)
        for n in checks:
            qrels = replay.qrels_after(order, grades, n)
            report = rag_eval.evaluate(qrels, runs, ["ndcg@20"])
            mine = run.snapshots[n]
            assert set(mine) == set(report.values("stem", "ndcg@20").index)
            for s, name in enumerate(("stem", "nostem")):
                harness = report.values(name, "ndcg@20")
                assert max(abs(mine[q][s] - harness[q]) for q in mine) < 1e-12
            assert run.mean_diff[n - 1] == pytest.approx(
                report.mean("stem", "ndcg@20") - report.mean("nostem", "ndcg@20"), abs=1e-12
            )
            if n > 1:
                table = rag_eval.compare(report, baseline="nostem", test="t", correction="none").table
                assert run.p[n - 1] == pytest.approx(float(table["p_value"].iloc[0]), rel=1e-9)

    # under all the labels: stem is better, significantly (paired t, alpha 0.05)
    assert measured.means == pytest.approx((0.5075, 0.4776), abs=5e-5)
    assert measured.depth.final == measured.impact.final == (1, True)
    assert measured.depth.p[-1] == pytest.approx(0.0139, abs=5e-5)
    # the labels each order needs before the sign and the significance match the final ones and stay so
    assert measured.depth.needed == 4580
    assert measured.impact.needed == 332
    assert measured.ratio <= 0.6
    assert measured.ratio == pytest.approx(0.0725, abs=5e-5)
    # "stay matched": one label fewer, and the order was not settled yet
    for r in (measured.depth, measured.impact):
        at = r.needed - 1  # the state after r.needed labels is index r.needed - 1
        assert r.sign[at:].tolist() == [1] * (r.labels - at) and bool(np.all(r.significant[at:]))
        assert (r.sign[at - 1], bool(r.significant[at - 1])) != (1, True)

    # the adaptive experiment of the script (not served by the page): every item once, and fewer labels still
    adaptive = replay.adaptive_order(pooled, grades, ("stem", "nostem"))
    assert sorted(pairs_of(adaptive)) == sorted(pairs_of(pooled.items))
    assert replay.replay(adaptive, grades, ("stem", "nostem"), order="adaptive").needed == 237


def pairs_of(items) -> list[tuple[str, str]]:
    return [(i.query_id, i.doc_id) for i in items]
