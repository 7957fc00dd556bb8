"""`rag-eval agreement`: a judgement log holding people's and a judge's grades, or two qrels files, gives the
agreement on the items both graded (the numbers equal judge_agreement's), and with --runs the rankings'."""

from __future__ import annotations

import json

import pytest

from rag_eval import Qrels, Run, evaluate
from rag_eval.cli import main
from rag_eval.ground_truth import JudgementLog
from rag_eval.ground_truth.agreement import judge_agreement
from rag_eval.statistics import ranking_agreement

PEOPLE = {("q1", "d1"): 3, ("q1", "d2"): 0, ("q1", "d3"): 2, ("q2", "d1"): 1, ("q2", "d2"): 0, ("q2", "d3"): 3}
JUDGE = {("q1", "d1"): 3, ("q1", "d2"): 1, ("q1", "d3"): 2, ("q2", "d1"): 1, ("q2", "d2"): 0, ("q2", "d3"): 2}


def _nested(grades):
    out: dict[str, dict[str, int]] = {}
    for (q, d), g in grades.items():
        out.setdefault(q, {})[d] = g
    return out


def test_agreement_of_a_log_equals_judge_agreement(tmp_path, capsys):
    log = JudgementLog.open(tmp_path / "log.jsonl")
    for (q, d), g in PEOPLE.items():
        log.append(q, d, g, assessor="alice")
    for (q, d), g in JUDGE.items():
        log.append(q, d, g, assessor="umbrela", judge={"fingerprint": "fp1"})
    assert main(["agreement", str(tmp_path / "log.jsonl"), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    expected = judge_agreement(_nested(PEOPLE), _nested(JUDGE), names=("alice", "umbrela")).to_dict()
    assert shown["items"] == expected and shown["ranking"] is None
    assert shown["items"]["n"] == 6 and shown["items"]["observed"] == pytest.approx(4 / 6)
    assert main(["agreement", str(tmp_path / "log.jsonl")]) == 0
    text = capsys.readouterr().out
    assert "confusion" in text and "umbrela" in text


@pytest.mark.filterwarnings("always::rag_eval.errors.LowAgreement")  # the CLI prints it on stderr
def test_agreement_of_two_qrels_with_runs_ranks_the_runs(tmp_path, capsys):
    human, judged = tmp_path / "human.txt", tmp_path / "judge.txt"
    Qrels.from_dict(_nested(PEOPLE)).to_trec(human)
    Qrels.from_dict(_nested(JUDGE)).to_trec(judged)
    runs = {
        "a": {"q1": {"d1": 3.0, "d3": 2.0, "d2": 1.0}, "q2": {"d3": 3.0, "d1": 2.0, "d2": 1.0}},
        "b": {"q1": {"d2": 3.0, "d3": 2.0, "d1": 1.0}, "q2": {"d2": 3.0, "d1": 2.0, "d3": 1.0}},
    }
    paths = []
    for name, scores in runs.items():
        path = tmp_path / f"{name}.trec"
        path.write_text(
            "".join(
                f"{q} Q0 {d} {r} {s} {name}\n"
                for q, docs in scores.items()
                for r, (d, s) in enumerate(sorted(docs.items(), key=lambda x: -x[1]), 1)
            )
        )
        paths.append(str(path))
    code = main(["agreement", str(human), str(judged), "--runs", *paths, "-m", "ndcg@2", "--test", "t"])
    assert code == 0
    out, err = capsys.readouterr()
    named = {n: Run.from_scores(s, name=n) for n, s in runs.items()}
    expected = ranking_agreement(
        evaluate(Qrels.from_trec(human), named, ["ndcg@2"]),
        evaluate(Qrels.from_trec(judged), named, ["ndcg@2"]),
        "ndcg@2",
        test="t",
        warn=False,  # the CLI said it on stderr
    )
    assert expected.render() in out
    assert expected.pair_share == 0.0 and "rank the systems unlike people's on ndcg@2" in err


def test_agreement_refuses_what_it_cannot_read(tmp_path, capsys):
    log = JudgementLog.open(tmp_path / "log.jsonl")
    log.append("q1", "d1", 1, assessor="alice")
    assert main(["agreement", str(tmp_path / "log.jsonl")]) == 2
    assert "0 model judge(s)" in capsys.readouterr().err
    assert main(["agreement", "a", "b", "c"]) == 2
    assert "not 3 files" in capsys.readouterr().err
    assert main(["agreement", str(tmp_path / "log.jsonl"), "--warn-below", "x"]) == 2


@pytest.mark.filterwarnings("always::rag_eval.errors.LowAgreement")
def test_a_judge_that_disagrees_is_warned_about(tmp_path, capsys):
    log = JudgementLog.open(tmp_path / "log.jsonl")
    for (q, d), g in PEOPLE.items():
        log.append(q, d, g, assessor="alice")
        log.append(q, d, 3 - g, assessor="inverted", judge={"fingerprint": "fp"})
    assert main(["agreement", str(tmp_path / "log.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "rag-eval: warning: judge 'inverted' agrees with alice at a quadratic-weighted kappa of -1.000" in err
    assert err.count("warning") == 1
