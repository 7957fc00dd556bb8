"""The judgement log (append-only, torn last line, superseding), merging into qrels (conflicts kept, the rule for
which grade wins) and Cohen's kappa against hand-computed values."""

from __future__ import annotations

import json
import math

import pytest

from rag_eval import InputError, Qrels
from rag_eval.ground_truth import JudgementLog, cohen_kappa, merge, write_qrels

POOL = {"id": "abc123", "depth": 10, "strategy": "depth", "systems": ["bm25", "dense"], "already_judged": 4}


# ----- Cohen's kappa, by hand --------------------------------------------------------------------------------


def _from_table(table: list[list[int]]) -> tuple[list[int], list[int]]:
    """Two raters' labels from a contingency table (rows: rater A's label, columns: rater B's)."""
    a, b = [], []
    for i, row in enumerate(table):
        for j, count in enumerate(row):
            a += [i] * count
            b += [j] * count
    return a, b


def test_kappa_of_the_textbook_two_by_two_table():
    # 50 proposals; both yes 20, A yes B no 5, A no B yes 10, both no 15 (Wikipedia, "Cohen's kappa"):
    # p_o = 35/50 = 0.7; A says yes 25/50, B 30/50: p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = 0.2/0.5 = 0.4
    a, b = _from_table([[20, 5], [10, 15]])
    assert cohen_kappa(a, b) == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        # same p_o = 0.6, different marginals (Wikipedia's pair): p_e 0.54 -> 0.06/0.46; p_e 0.46 -> 0.14/0.54
        ([[45, 15], [25, 15]], 0.06 / 0.46),
        ([[25, 35], [5, 35]], 0.14 / 0.54),
        ([[10, 0], [0, 7]], 1.0),  # perfect agreement
        ([[0, 5], [5, 0]], -1.0),  # perfect disagreement with balanced marginals: p_o 0, p_e 0.5
    ],
)
def test_kappa_of_hand_computed_tables(table, expected):
    assert cohen_kappa(*_from_table(table)) == pytest.approx(expected)


def test_kappa_on_four_grades():
    a = [0, 0, 1, 1, 2, 2, 3, 3, 0, 2]
    b = [0, 1, 1, 1, 2, 3, 3, 2, 0, 2]
    # p_o = 7/10; A: 3,2,3,2 of grades 0..3, B: 2,3,3,2; p_e = (6+6+9+4)/100 = 0.25; kappa = 0.45/0.75 = 0.6
    assert cohen_kappa(a, b) == pytest.approx(0.6)
    assert cohen_kappa(b, a) == pytest.approx(0.6)  # symmetric


def test_kappa_is_nan_when_chance_agreement_is_certain_and_refuses_bad_input():
    assert math.isnan(cohen_kappa([2, 2, 2], [2, 2, 2]))
    with pytest.raises(ValueError, match="same items"):
        cohen_kappa([1, 2], [1])
    with pytest.raises(ValueError, match="at least one"):
        cohen_kappa([], [])


# ----- the log ------------------------------------------------------------------------------------------------


def test_each_append_is_one_whole_line_on_disk_at_once(tmp_path):
    path = tmp_path / "out.qrels.judgements.jsonl"
    log = JudgementLog.open(path)
    assert len(log) == 0 and not path.exists()
    j = log.append("q1", "d1", 2, assessor="alice", pool=POOL)
    lines = path.read_text().splitlines()  # read while the log is still open: nothing is buffered
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record == {
        "query_id": "q1",
        "doc_id": "d1",
        "grade": 2,
        "assessor": "alice",
        "time": j.time,
        "scale": [0, 3],
        "pool": {"id": "abc123", "depth": 10, "strategy": "depth", "systems": ["bm25", "dense"]},
    }
    assert j.time.endswith("Z") and "T" in j.time  # ISO 8601, UTC
    log.append("q1", "d2", 0, assessor="alice", pool=POOL)
    assert len(path.read_text().splitlines()) == 2
    again = JudgementLog.load(path)
    assert [(x.query_id, x.doc_id, x.grade) for x in again] == [("q1", "d1", 2), ("q1", "d2", 0)]


def test_append_refuses_grades_outside_the_scale_and_bad_names(tmp_path):
    log = JudgementLog.open(tmp_path / "log.jsonl")
    for grade in (4, -1, 1.5, "2", True):
        with pytest.raises(ValueError):
            log.append("q1", "d1", grade, assessor="alice")
    with pytest.raises(ValueError, match="assessor"):
        log.append("q1", "d1", 1, assessor="qrels")
    with pytest.raises(ValueError, match="assessor"):
        log.append("q1", "d1", 1, assessor=" ")
    log.append("q1", "d1", 4, assessor="alice", scale=(0, 4))  # a wider scale, recorded on the line
    assert len(JudgementLog.load(tmp_path / "log.jsonl")) == 1


def test_a_later_judgement_by_the_same_assessor_supersedes(tmp_path):
    log = JudgementLog.open(tmp_path / "log.jsonl")
    log.append("q1", "d1", 3, assessor="alice")
    log.append("q1", "d1", 1, assessor="alice")  # back, then a new grade
    log.append("q1", "d1", 2, assessor="bob")
    latest = JudgementLog.load(tmp_path / "log.jsonl").latest()
    assert {k: j.grade for k, j in latest.items()} == {("alice", "q1", "d1"): 1, ("bob", "q1", "d1"): 2}
    assert len(JudgementLog.load(tmp_path / "log.jsonl")) == 3  # append-only: both of alice's lines are kept
    merged = merge(None, tmp_path / "log.jsonl")
    assert merged.grades[("q1", "d1")] == {"alice": 1, "bob": 2}


def test_a_torn_last_line_is_ignored_with_a_warning_and_cut_off_before_the_next_append(tmp_path):
    path = tmp_path / "log.jsonl"
    log = JudgementLog.open(path)
    log.append("q1", "d1", 2, assessor="alice")
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"query_id": "q1", "doc_id": "TORN", "gra')  # killed mid-write
    with pytest.warns(UserWarning, match=r"log.jsonl: the last line is cut short"):
        log = JudgementLog.open(path)
    assert [j.doc_id for j in log] == ["d1"]
    log.append("q1", "d3", 1, assessor="alice")
    assert path.read_bytes().count(b"\n") == 2 and b"TORN" not in path.read_bytes()
    assert [j.doc_id for j in JudgementLog.load(path)] == ["d1", "d3"]  # no warning: the file is whole again


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path):
    path = tmp_path / "log.jsonl"
    JudgementLog.open(path).append("q1", "d1", 2, assessor="alice")
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # e.g. edited by hand
    log = JudgementLog.open(path)
    assert [j.doc_id for j in log] == ["d1"]
    log.append("q1", "d2", 3, assessor="alice")
    assert [j.doc_id for j in JudgementLog.load(path)] == ["d1", "d2"]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("not json", "not valid JSON"),
        ('["a list"]', "expected a JSON object"),
        ('{"doc_id": "d", "grade": 1, "assessor": "a", "time": "2026-01-01T00:00:00Z"}', "'query_id' is missing"),
        (
            '{"query_id": "q", "doc_id": "d", "grade": 7, "assessor": "a", "time": "2026-01-01T00:00:00Z"}',
            "grade 7 is outside the scale 0..3",
        ),
        (
            '{"query_id": "q", "doc_id": "d", "grade": 1.5, "assessor": "a", "time": "2026-01-01T00:00:00Z"}',
            "grade 1.5 is not an integer",
        ),
        ('{"query_id": "q", "doc_id": "d", "grade": 1, "assessor": "a", "time": "yesterday"}', "not an ISO 8601"),
    ],
)
def test_a_bad_line_inside_the_log_names_file_and_line(tmp_path, line, problem):
    path = tmp_path / "log.jsonl"
    JudgementLog.open(path).append("q1", "d1", 2, assessor="alice")
    with open(path, "a") as f:
        f.write(line + "\n")
        f.write('{"query_id": "q", "doc_id": "d", "grade": 1, "assessor": "a", "time": "2026-01-01T00:00:00Z"}\n')
    with pytest.raises(InputError, match=problem) as info:
        JudgementLog.load(path)
    assert info.value.source == str(path) and info.value.line == 2


def test_reading_a_missing_log_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        JudgementLog.load(tmp_path / "nope.jsonl")


# ----- merging ------------------------------------------------------------------------------------------------

A = [0, 0, 1, 1, 2, 2, 3, 3, 0, 2]
B = [0, 1, 1, 1, 2, 3, 3, 2, 0, 2]


def _two_assessors(tmp_path):
    alice = JudgementLog.open(tmp_path / "alice.jsonl")
    bob = JudgementLog.open(tmp_path / "bob.jsonl")
    for i, (a, b) in enumerate(zip(A, B)):
        alice.append("q1", f"d{i}", a, assessor="alice")
        bob.append("q1", f"d{i}", b, assessor="bob")
    bob.append("q2", "x", 3, assessor="bob")  # only bob judged this one
    return alice, bob


def test_merge_keeps_conflicts_and_takes_the_lower_median(tmp_path):
    alice, bob = _two_assessors(tmp_path)
    merged = merge(None, alice, bob)
    # agreed pairs keep their grade; the three disagreements take the lower grade of two
    expected = {f"d{i}": min(a, b) for i, (a, b) in enumerate(zip(A, B))}
    assert merged.qrels.to_dict() == {"q1": expected, "q2": {"x": 3}}
    conflicts = merged.conflicts
    assert list(conflicts.columns) == ["query_id", "doc_id", "grade", "qrels", "alice", "bob"]
    rows = {(r.doc_id, r.grade, r.alice, r.bob) for r in conflicts.itertuples()}
    assert rows == {("d1", 0, 0, 1), ("d5", 2, 2, 3), ("d7", 2, 3, 2)}
    assert conflicts["qrels"].isna().all()
    assert merge(None, alice, bob, resolve="max").qrels["q1"]["d1"] == 1
    assert merge(None, alice, bob, resolve="min").qrels["q1"]["d7"] == 2


def test_the_lower_median_of_three_assessors_is_the_middle_grade(tmp_path):
    log = JudgementLog.open(tmp_path / "log.jsonl")
    for who, grade in (("alice", 0), ("bob", 3), ("carol", 2)):
        log.append("q1", "d1", grade, assessor=who)
    log.append("q1", "d2", 1, assessor="alice")
    log.append("q1", "d2", 3, assessor="bob")
    merged = merge(None, log)
    assert merged.qrels.to_dict() == {"q1": {"d1": 2, "d2": 1}}
    assert len(merged.conflicts) == 2


def test_an_existing_qrels_grade_is_kept_and_a_different_one_reported(tmp_path):
    alice, bob = _two_assessors(tmp_path)
    qrels = Qrels.from_dict({"q1": {"d0": 3, "d2": 1, "old": 2}})
    merged = merge(qrels, alice, bob)
    assert merged.qrels["q1"]["d0"] == 3  # both said 0: the qrels grade stays, and the pair is a conflict
    assert merged.qrels["q1"]["d2"] == 1 and merged.qrels["q1"]["old"] == 2
    row = merged.conflicts.set_index("doc_id").loc["d0"]
    assert (row["grade"], row["qrels"], row["alice"], row["bob"]) == (3, 3, 0, 0)
    assert "d2" not in set(merged.conflicts["doc_id"])  # all three agree on 1
    assert qrels.to_dict() == {"q1": {"d0": 3, "d2": 1, "old": 2}}  # the input is not changed


def test_kappa_of_two_assessors_on_their_overlap(tmp_path):
    alice, bob = _two_assessors(tmp_path)
    kappa = merge(None, alice, bob).kappa
    assert kappa.n == 10  # q2/x was judged by bob alone
    assert kappa.value == pytest.approx(0.6)  # see test_kappa_on_four_grades
    # relevant = grade >= 1: A 7 relevant of 10, B 8; p_o 0.9, p_e (7*8 + 3*2)/100 = 0.62; kappa 0.28/0.38
    assert kappa.binary == pytest.approx(0.28 / 0.38)
    assert kappa.reason is None
    # at grade >= 2 the two agree on every pair
    assert merge(None, alice, bob, threshold=2).kappa.binary == pytest.approx(1.0)
    frame = kappa.to_frame()
    assert frame.loc[0, ["assessor_a", "assessor_b", "n"]].tolist() == ["alice", "bob", 10]
    assert frame.loc[0, "observed"] == pytest.approx(0.7)


def test_kappa_is_none_with_a_reason_without_two_assessors_or_overlap(tmp_path):
    alice, _bob = _two_assessors(tmp_path)
    one = merge(None, alice).kappa
    assert one.value is None and "1 assessor" in one.reason and one.pairwise == ()
    carol = JudgementLog.open(tmp_path / "carol.jsonl")
    carol.append("q9", "z", 1, assessor="carol")
    apart = merge(None, alice, carol).kappa
    assert apart.value is None and apart.n == 0 and "no pair in common" in apart.reason
    same = JudgementLog.open(tmp_path / "same.jsonl")
    for who in ("x", "y"):
        same.append("q1", "d1", 2, assessor=who)
    undefined = merge(None, same).kappa
    assert undefined.value is None and undefined.n == 1 and "undefined" in undefined.reason


def test_kappa_with_three_assessors_is_pairwise(tmp_path):
    alice, bob = _two_assessors(tmp_path)
    carol = JudgementLog.open(tmp_path / "carol.jsonl")
    for i, grade in enumerate(A):
        carol.append("q1", f"d{i}", grade, assessor="carol")
    kappa = merge(None, alice, bob, carol).kappa
    assert kappa.value is None and "3 assessors" in kappa.reason
    by_pair = {p.assessors: p for p in kappa.pairwise}
    assert set(by_pair) == {("alice", "bob"), ("alice", "carol"), ("bob", "carol")}
    assert by_pair[("alice", "carol")].kappa == pytest.approx(1.0)
    assert by_pair[("alice", "bob")].kappa == pytest.approx(0.6)
    assert by_pair[("bob", "carol")].kappa == pytest.approx(0.6)
    assert len(kappa.to_frame()) == 3


def test_merge_reads_paths_and_refuses_a_bad_log(tmp_path):
    path = tmp_path / "log.jsonl"
    JudgementLog.open(path).append("q1", "d1", 2, assessor="alice")
    assert merge({"q0": {"a": 1}}, str(path)).qrels.to_dict() == {"q0": {"a": 1}, "q1": {"d1": 2}}
    with open(path, "a") as f:
        f.write("{oops\n\n")
    with pytest.raises(InputError) as info:
        merge(None, path)
    assert info.value.line == 2
    with pytest.raises(ValueError, match="resolve"):
        merge(None, resolve="mean")


def test_across_logs_the_later_time_wins_for_the_same_assessor(tmp_path):
    first = JudgementLog.open(tmp_path / "a.jsonl")
    second = JudgementLog.open(tmp_path / "b.jsonl")
    first.append("q1", "d1", 3, assessor="alice", time="2026-01-02T00:00:00.000Z")
    second.append("q1", "d1", 1, assessor="alice", time="2026-01-01T00:00:00.000Z")
    assert merge(None, first, second).qrels["q1"]["d1"] == 3
    assert merge(None, second, first).qrels["q1"]["d1"] == 3


# ----- writing qrels ------------------------------------------------------------------------------------------


def test_write_qrels_round_trips_and_leaves_no_temporary_file(tmp_path):
    qrels = Qrels.from_dict({"q1": {"d1": 2, "d2": 0}, "q2": {"d9": 3}})
    out = tmp_path / "out.qrels"
    out.write_text("q0 0 old 1\n")
    write_qrels(qrels, out)
    assert Qrels.from_trec(out) == qrels
    assert out.read_text() == "q1 0 d1 2\nq1 0 d2 0\nq2 0 d9 3\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.qrels"]
    with pytest.raises(InputError) as info:
        write_qrels(Qrels.from_dict({"q 1": {"d": 1}}), out)
    assert str(info.value) == (
        f"{out}: query id 'q 1' holds whitespace, which separates the fields of a TREC line: "
        "it cannot be written to a trec file and read back"
    )
    assert Qrels.from_trec(out) == qrels  # a refused write leaves the old file whole


def test_cli_merge_lists_conflicts_and_kappa(tmp_path, capsys):
    from rag_eval.cli import main

    a, b = JudgementLog.open(tmp_path / "alice.jsonl"), JudgementLog.open(tmp_path / "bob.jsonl")
    for doc, grade in [("d1", 3), ("d2", 0), ("d3", 1), ("d4", 2)]:
        a.append("q1", doc, grade, assessor="alice")
    for doc, grade in [("d1", 3), ("d2", 1), ("d3", 1), ("d5", 0)]:
        b.append("q1", doc, grade, assessor="bob")
    base = tmp_path / "base.qrels"
    base.write_text("q1 0 d4 0\nq2 0 d9 1\n", "utf-8")
    out = tmp_path / "merged.qrels"
    code = main(["merge", str(a.path), str(b.path), "--qrels", str(base), "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0
    # d4: the base qrels' 0 is kept against alice's 2; d2: alice 0, bob 1 -> the lower median, 0
    assert Qrels.from_trec(out).to_dict() == {"q1": {"d1": 3, "d2": 0, "d3": 1, "d4": 0, "d5": 0}, "q2": {"d9": 1}}
    assert captured.out == "query_id,doc_id,grade,qrels,alice,bob\nq1,d2,0,,0,1\nq1,d4,0,0,2,\n"
    # on d1, d2, d3: observed 2/3, chance 1/3 -> 0.5; binary (>= 1): observed 2/3, chance 2/3 -> 0
    assert captured.err == (
        f"rag-eval: merged 2 assessor(s) into {out} (6 judgements); 2 conflict(s) listed on "
        "stdout; Cohen's kappa 0.500 on grades, 0.000 at grade >= 1 (n=3)\n"
    )
    assert main(["merge", str(tmp_path / "missing.jsonl"), "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"rag-eval: error: {tmp_path / 'missing.jsonl'}: no such file\n"
