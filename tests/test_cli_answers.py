"""``rag-eval answers``: a result folder's final stage cut to its budget, the chunk texts from the BEIR folder, a
generator function, the grades written per query; the cache on a rerun, --questions, references as CSV, bad input."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from rag_eval import Run
from rag_eval.cli import main
from rag_eval.data import Collection
from rag_eval.examples import BEIR_FOLDER as BEIR
from rag_eval.metrics.answers import contains_answer, exact_match, token_f1


def first_words(prompt: str) -> str:
    """The generator: the first chunk's first two words; each prompt appended to the file $ASKED_LOG (a file, not a
    list of this module's: what the function reaches is in its fingerprint, and a growing list would change it)."""
    with open(os.environ["ASKED_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(prompt) + "\n")
    return " ".join(prompt.split("[1] ", 1)[1].split()[:2])


def asked(folder) -> list[str]:
    path = folder / "asked.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("answers")
    patch = pytest.MonkeyPatch()
    patch.setenv("ASKED_LOG", str(root / "asked.jsonl"))
    assert main(["bench", "--beir", str(BEIR), "--pipeline", "tests.test_exit_codes:pipeline", "--depth", "30",
              "--budget", "3", "-o", str(root / "bench"), "--no-plots"]) == 0  # fmt: skip
    refs = root / "refs.jsonl"
    refs.write_text(
        "".join(json.dumps({"query_id": f"q{i}", "answers": ["bike chain", "chain"]}) + "\n" for i in range(1, 9))
    )
    yield root
    patch.undo()


def _run(folder, *more):
    return main(["answers", str(folder / "bench"), "--beir", str(BEIR), "--references", str(folder / "refs.jsonl"),
                 "--generator", f"{__name__}:first_words", *more])  # fmt: skip


def test_answers_of_the_delivered_context_graded_and_cached(folder, capsys):
    assert _run(folder, "-o", str(folder / "out")) == 0
    frame = pd.read_csv(folder / "out" / "answers.csv", keep_default_na=False)
    assert frame["query_id"].tolist() == [f"q{i}" for i in range(1, 9)]  # those with a reference, in run order
    run = Run.from_trec(folder / "bench" / "runs" / "tests.test_exit_codes_pipeline.ids1.trec")
    corpus = Collection.from_beir(BEIR).corpus
    for row in frame.itertuples():
        delivered = [d for d, _ in run.ranking(row.query_id)][:3]  # the card's budget(3)
        assert row.context_ids.split() == delivered
        expected = " ".join(corpus[delivered[0]].content.split()[:2])
        assert row.answer == expected
        refs = ["bike chain", "chain"]
        assert (row.exact_match, row.f1, row.contains) == (
            exact_match(expected, refs), token_f1(expected, refs), contains_answer(expected, refs))  # fmt: skip
    assert len(asked(folder)) == 8
    err = capsys.readouterr().err
    assert "8 queries of 'tests.test_exit_codes:pipeline' / 'ids1' under budget(3)" in err and "(8 calls, 0 from" in err
    assert _run(folder, "-o", str(folder / "out")) == 0
    assert len(asked(folder)) == 8  # the rerun asked nothing: every answer from OUT/cache
    assert "(0 calls, 8 from the cache)" in capsys.readouterr().err


def test_a_sample_a_prompt_file_and_references_as_a_table(folder, capsys):
    (folder / "prompt.txt").write_text("Q: {question}\n{context}\n")
    pd.DataFrame({"qid": ["q1", "q2", "q2", "q3"], "gold": ["x", "y", "chain", "z"]}).to_csv(
        folder / "refs.csv", index=False
    )
    status = main(["answers", str(folder / "bench"), "--beir", str(BEIR), "--references", str(folder / "refs.csv"),
                   "--field", "gold", "--id-field", "qid", "--generator", f"{__name__}:first_words", "--questions", "2",
                   "--seed", "3", "--prompt", str(folder / "prompt.txt"), "-o", str(folder / "sampled")])  # fmt: skip
    assert status == 0
    frame = pd.read_csv(folder / "sampled" / "answers.csv", keep_default_na=False)
    assert len(frame) == 2 and set(frame["query_id"]) <= {"q1", "q2", "q3"}
    assert asked(folder)[-1].startswith("Q: ")
    assert set(frame["references"]) <= {"x", "y | chain", "z"}


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (["--delivered-by", "rerank"], "no stage 'rerank'"),
        (["--run", "other"], "no pipeline 'other'"),
        (["--generator", "no_such_module:f"], "cannot load generator 'no_such_module:f'"),
    ],
)
def test_bad_input_is_one_line_and_status_2(folder, capsys, more, message):
    assert _run(folder, *more, "-o", str(folder / "bad")) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def starts_with_b(question: str, text: str) -> int:
    """A judge of answers: right when the answer starts with a B (it reads the question and the references)."""
    answer = text.split("\n")[0].removeprefix("Proposed answer: ")
    assert question and "Reference answers: bike chain | chain" in text
    return int(answer.startswith("B"))


@pytest.mark.filterwarnings("always::rag_eval.errors.LowAgreement")
def test_a_judge_grades_the_answers_beside_the_reference_with_its_agreement(folder, capsys):
    from sklearn.metrics import cohen_kappa_score

    assert _run(folder, "-o", str(folder / "judged"), "--judge", f"{__name__}:starts_with_b") == 0
    frame = pd.read_csv(folder / "judged" / "answers.csv", keep_default_na=False)
    expected = [int(a.startswith("B")) for a in frame["answer"]]
    assert frame["judge_grade"].tolist() == expected and set(frame["judge_error"]) == {""} and 0 < sum(expected) < 8
    saved = json.loads((folder / "judged" / "judge_agreement.json").read_text("utf-8"))
    assert (saved["judge"], saved["rule"], saved["n"]) == ("starts_with_b", "F1 >= 0.5", 8)
    reference = (frame["f1"] >= 0.5).astype(int)
    assert saved["kappa"] == pytest.approx(cohen_kappa_score(reference, expected), abs=1e-12)
    assert saved["agreement"]["confusion"]["counts"] == [
        [int(((reference == r) & (pd.Series(expected) == j)).sum()) for j in (0, 1)] for r in (0, 1)
    ]
    assert saved["kappa_low"] is None  # 8 answers: fewer than the bootstrap's 10
    assert frame["judge_correct"].tolist() == [float(v) for v in expected]
    markdown = (folder / "judged" / "report.md").read_text("utf-8")
    section = markdown.split("\n## Answers\n", 1)[1].split("\n## ", 1)[0]
    (row,) = [line for line in section.splitlines() if "(`judge.correct`)" in line]
    assert f"| {sum(expected) / 8:.3f} [" in row and row.endswith("| 8 | 0 |")
    assert section.count("judge 'starts_with_b' against the reference (F1 &gt;= 0.5) on 8 answers") == 1
    card = json.loads((folder / "judged" / "card.json").read_text("utf-8"))["answers"]["judge"]
    assert (card["agreement"]["n"], card["agreement"]["ci_low"]) == (8, None)
    err = capsys.readouterr().err
    assert "judge 'starts_with_b' against the reference (F1 >= 0.5) on 8 answers both graded" in err
    assert "no interval: 8 answers, fewer than 10" in err
    assert "judge 'starts_with_b': 1 calls, 0 verdicts from" in err
    assert _run(folder, "-o", str(folder / "judged"), "--judge", f"{__name__}:starts_with_b") == 0
    assert "judge 'starts_with_b': 0 calls, 8 verdicts from" in capsys.readouterr().err  # the log, not the judge
    assert "rag-eval: warning: the kappa of judge 'starts_with_b' against the reference (F1 >= 0.5)" in err


def fails_on_q2(question: str, text: str) -> int:
    """A judge of answers whose model is down on one question, and answers 1 elsewhere."""
    if question == "when should a bike chain be replaced":
        raise ConnectionError("the judge's model is down")
    return 1


@pytest.mark.filterwarnings("always::rag_eval.errors.LowAgreement")
def test_a_judge_failing_on_some_answers_is_status_4_and_each_failure_kept(folder, capsys):
    (folder / "failing").mkdir()
    (folder / "failing" / "judge_agreement.json").write_text("{}")  # an earlier run's: not left beside these
    status = _run(folder, "-o", str(folder / "failing"), "--judge", f"{__name__}:fails_on_q2")
    assert status == 4
    frame = pd.read_csv(folder / "failing" / "answers.csv", keep_default_na=False).set_index("query_id")
    assert frame.loc["q2", "judge_error"] == "ConnectionError: the judge's model is down"
    assert frame.loc["q2", "judge_grade"] == "" and set(frame.drop(index="q2")["judge_grade"]) == {"1.0"}
    saved = json.loads((folder / "failing" / "judge_agreement.json").read_text("utf-8"))
    assert saved["n"] == 7 and saved["left_out"]["judge failed"] == 1
    err = capsys.readouterr().err
    assert "the judge failed on 1 answers (first 'q2': ConnectionError: the judge's model is down)" in err
    assert "left out: 1 judge failed" in err


def test_answers_in_place_keep_the_folder_whole_and_a_rerun_replaces_them(folder, capsys):
    import shutil

    from rag_eval import Report
    from rag_eval.renderers.result_folder import load_manifest

    shutil.copytree(folder / "bench", folder / "inplace")
    before = load_manifest(folder / "inplace").files
    for _ in range(2):  # twice in place: the second finds the first's answers and replaces them
        assert main(["answers", str(folder / "inplace"), "--beir", str(BEIR), "--references",
                     str(folder / "refs.jsonl"), "--generator", f"{__name__}:first_words"]) == 0  # fmt: skip
    after = load_manifest(folder / "inplace").files  # every file checked against it
    kept = {k: v for k, v in before.items() if k not in ("report.parquet", "card.json", "report.md")}
    assert kept.items() <= after.items() and "answers.csv" in after
    report = Report.load_folder(folder / "inplace")
    assert report.card.answers["queries"] == 8 and report.card.answers["cache_hits"] == 8  # the rerun asked nothing
    assert (folder / "inplace" / "report.md").read_text().count("## Answers") == 1
