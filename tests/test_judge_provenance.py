"""A model judge's grades in the judgement log and the qrels: marked as a judge's (name and fingerprint), never
overwriting a person's grade in a merge, and counted in the qrels' graded-by record, which every card made with
those qrels shows and which travels beside a written qrels file."""

from __future__ import annotations

import json
import warnings

import pytest

from rag_eval import InputError, Pipeline, Qrels, Run, evaluate
from rag_eval.data import GradedBy, JudgeShare
from rag_eval.data.graded_by import sidecar_path
from rag_eval.errors import StaleGradedBy
from rag_eval.ground_truth import JudgementLog, merge, write_qrels
from rag_eval.stages import Hit, Retriever

FP = "9c41e07b2d10"


def _log(tmp_path, name="j.jsonl"):
    return JudgementLog.open(tmp_path / name)


def test_a_judges_grade_round_trips_with_its_fingerprint_and_confidence(tmp_path):
    log = _log(tmp_path)
    log.append("q1", "d1", 2, assessor="umbrela", judge={"fingerprint": FP, "confidence": 0.75})
    log.append("q1", "d2", 1, assessor="alice")
    line = json.loads((tmp_path / "j.jsonl").read_text().splitlines()[0])
    assert line["judge"] == {"fingerprint": FP, "confidence": 0.75}
    again = JudgementLog.load(tmp_path / "j.jsonl")
    first, second = again.judgements
    assert first.by_judge and first.confidence == 0.75 and first.judge["fingerprint"] == FP
    assert not second.by_judge and second.confidence is None and "judge" not in second.to_json()
    assert again.judges == {"umbrela": FP} and again.people == ["alice"]


@pytest.mark.parametrize(
    "judge, problem",
    [
        ('"abc"', "field 'judge' must be an object"),
        ("{}", "judge.fingerprint must be a non-empty string"),
        ('{"fingerprint": ""}', "judge.fingerprint must be a non-empty string"),
        ('{"fingerprint": "x", "confidence": 1.5}', "judge.confidence must be a number in [0, 1]"),
        ('{"fingerprint": "x", "confidence": true}', "judge.confidence must be a number in [0, 1]"),
    ],
)
def test_a_bad_judge_object_names_the_file_and_line(tmp_path, judge, problem):
    good = '{"query_id": "q", "doc_id": "d", "grade": 1, "assessor": "a", "time": "2026-12-02T00:00:00Z"}'
    bad = good[:-1] + f', "judge": {judge}}}'
    path = tmp_path / "log.jsonl"
    path.write_text(good + "\n" + bad + "\n")
    with pytest.raises(InputError, match=r"log\.jsonl:2: ") as caught:
        JudgementLog.load(path)
    assert problem in str(caught.value) and str(path) in str(caught.value)


def test_merge_never_lets_a_judge_overwrite_a_person_and_counts_who_decided(tmp_path):
    people = _log(tmp_path, "people.jsonl")
    judged = _log(tmp_path, "judge.jsonl")
    people.append("q1", "d1", 3, assessor="alice")
    people.append("q1", "d2", 0, assessor="alice")
    for q, d, g in [("q1", "d1", 0), ("q1", "d2", 2), ("q1", "d3", 2), ("q2", "d1", 1), ("q2", "d4", 3)]:
        judged.append(q, d, g, assessor="umbrela", judge={"fingerprint": FP})
    base = {"q3": {"d9": 1}}  # the qrels merged into: people's grades
    merged = merge(base, people, judged)
    assert merged.qrels.to_dict() == {
        "q3": {"d9": 1},
        "q1": {"d1": 3, "d2": 0, "d3": 2},  # the person's 3 and 0 stand against the judge's 0 and 2
        "q2": {"d1": 1, "d4": 3},
    }
    assert merged.judges == {"umbrela": FP}
    judged_pairs = frozenset({("q1", "d3"), ("q2", "d1"), ("q2", "d4")})
    assert merged.qrels.graded_by == GradedBy(3, (JudgeShare("umbrela", FP, judged_pairs),))
    # the disagreements are listed, with the person's grade as the one kept
    conflicts = merged.conflicts.set_index(["query_id", "doc_id"])
    assert conflicts.loc[("q1", "d1"), "grade"] == 3 and conflicts.loc[("q1", "d1"), "umbrela"] == 0
    # a merge of people's logs alone says nothing about judges
    assert merge(base, people).qrels.graded_by is None


def test_two_judges_on_one_pair_decide_it_together_and_a_name_cannot_be_both(tmp_path):
    a, b = _log(tmp_path, "a.jsonl"), _log(tmp_path, "b.jsonl")
    a.append("q1", "d1", 1, assessor="judge-a", judge={"fingerprint": "fa"})
    b.append("q1", "d1", 3, assessor="judge-b", judge={"fingerprint": "fb"})
    b.append("q1", "d2", 2, assessor="judge-b", judge={"fingerprint": "fb"})
    merged = merge(None, a, b)
    assert merged.qrels.to_dict() == {"q1": {"d1": 1, "d2": 2}}  # the lower median of 1 and 3
    assert merged.qrels.graded_by == GradedBy(
        0,
        (
            JudgeShare("judge-a + judge-b", "fa,fb", frozenset({("q1", "d1")})),
            JudgeShare("judge-b", "fb", frozenset({("q1", "d2")})),
        ),
    )
    c = _log(tmp_path, "c.jsonl")
    c.append("q1", "d3", 1, assessor="judge-a")  # a person by the judge's name
    with pytest.raises(InputError, match="'judge-a' is both a person"):
        merge(None, a, c)


def test_the_graded_by_record_travels_beside_the_written_qrels(tmp_path):
    judged = _log(tmp_path)
    judged.append("q1", "d1", 2, assessor="umbrela", judge={"fingerprint": FP})
    judged.append("q1", "d2", 1, assessor="bob")
    merged = merge(None, judged)
    out = tmp_path / "qrels.txt"
    write_qrels(merged.qrels, out)
    record = json.loads(sidecar_path(out).read_text())
    assert record["people"] == 1
    assert record["judges"] == [{"name": "umbrela", "fingerprint": FP, "judgements": 1, "pairs": [["q1", "d1"]]}]
    read = Qrels.from_trec(out)
    assert read == merged.qrels and read.graded_by == merged.qrels.graded_by
    assert Qrels.load(out).graded_by == merged.qrels.graded_by
    # the qrels edited since: the record is stale, said and ignored
    out.write_text(out.read_text() + "q2 0 d5 1\n")
    with pytest.warns(StaleGradedBy, match="SHA-256 differs"):
        assert Qrels.from_trec(out).graded_by is None
    # people's qrels written over it: the record goes
    write_qrels({"q1": {"d1": 2}}, out)
    assert not sidecar_path(out).exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Qrels.from_trec(out).graded_by is None


def test_a_base_graded_in_part_by_a_judge_keeps_its_shares_in_a_later_merge(tmp_path):
    judged = _log(tmp_path, "judge.jsonl")
    judged.append("q1", "d1", 2, assessor="umbrela", judge={"fingerprint": FP})
    first = merge({"q1": {"d0": 1}}, judged).qrels
    assert first.graded_by == GradedBy(1, (JudgeShare("umbrela", FP, frozenset({("q1", "d1")})),))
    people = _log(tmp_path, "people.jsonl")
    people.append("q1", "d2", 3, assessor="alice")
    people.append("q1", "d1", 0, assessor="alice")  # the base keeps its grade of this pair (the judge's 2)
    again = merge(first, people).qrels
    assert again.to_dict() == {"q1": {"d0": 1, "d1": 2, "d2": 3}}
    assert again.graded_by == GradedBy(2, (JudgeShare("umbrela", FP, frozenset({("q1", "d1")})),))


class _Fixed(Retriever):
    def config(self):
        return {}

    def search(self, query, k):
        return [Hit("d1", 2.0), Hit("d2", 1.0), Hit("d3", 0.5)]


def test_every_card_made_with_judge_graded_qrels_says_so(tmp_path):
    judged = _log(tmp_path)
    judged.append("q1", "d1", 2, assessor="umbrela", judge={"fingerprint": FP})
    judged.append("q1", "d2", 0, assessor="umbrela", judge={"fingerprint": FP})
    judged.append("q1", "d3", 1, assessor="alice")
    judged.append("q2", "d1", 1, assessor="alice")
    qrels = merge(None, judged).qrels
    note = "graded in part by model judges: 2 of 4 judgements (50.0%): umbrela (fingerprint 9c41e07b2d10) 2 (50.0%)"
    run = Run.from_scores({"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d1": 1.0}})
    plain = evaluate(qrels, run, ["ndcg@3"])
    staged = evaluate(
        qrels, Pipeline(_Fixed("fixed"), depth=3).run({"q1": "a", "q2": "b"}, progress=False), ["recall@3"]
    )
    for report in (plain, staged):
        record = next(r for r in report.card.inputs if r.role == "qrels")
        assert record.notes == [note + "; people 2 (50.0%)"]
        assert note in report.card.render()
    people_only = merge(None, _people_log(tmp_path, judged)).qrels
    card = evaluate(people_only, run, ["ndcg@3"]).card
    assert next(r for r in card.inputs if r.role == "qrels").notes == []


def _people_log(tmp_path, log):
    people = _log(tmp_path, "people-only.jsonl")
    for j in log:
        if not j.by_judge:
            people.append(j.query_id, j.doc_id, j.grade, assessor=j.assessor)
    return people


def test_labelling_into_qrels_a_judge_graded_in_part_keeps_who_decided_each_pair(tmp_path):
    """The labelling page rewrites OUT as OUT's qrels merged with the assessor's log: the judge keeps the pairs of
    its own that the assessor did not grade again, and the record beside OUT says so; a pair graded again is the
    person's."""
    from rag_eval.ground_truth import Pool, PoolItem
    from rag_eval.labelling import LabellingSession

    judged = _log(tmp_path, "judge.jsonl")
    for d, g in (("d1", 2), ("d2", 0), ("d3", 1)):
        judged.append("q1", d, g, assessor="umbrela", judge={"fingerprint": FP})
    out = tmp_path / "qrels.txt"
    write_qrels(merge({"q1": {"d0": 3}}, judged).qrels, out)
    assert Qrels.from_trec(out).graded_by.by_judges == 3
    items = tuple(PoolItem("q1", d, {"a": r}, 1 / (60 + r), "q", "t") for r, d in enumerate(("d1", "d4"), start=1))
    session = LabellingSession(Pool(items, 2, "depth", ("a",)), out, assessor="alice")
    session.judge({"index": 0, "grade": 0})  # alice grades d1 again: hers now
    session.judge({"index": 1, "grade": 3})  # and d4, new
    read = Qrels.from_trec(out)
    assert read.to_dict() == {"q1": {"d0": 3, "d2": 0, "d3": 1, "d1": 0, "d4": 3}}
    assert read.graded_by == GradedBy(3, (JudgeShare("umbrela", FP, frozenset({("q1", "d2"), ("q1", "d3")})),))
