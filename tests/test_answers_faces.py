"""Where answers show (issue 31): attached to a Report (its table and card), read by the gate as rules
(``answer.f1``), written into a result folder (``answers.csv``, report.md's Answers section) and the HTML page."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import rag_eval
from rag_eval.adapters import functions
from rag_eval.data import Collection
from rag_eval.data.answers import ReferenceAnswers
from rag_eval.drivers.gating import gate
from rag_eval.errors import DegenerateInterval
from rag_eval.examples import BEIR_FOLDER as BEIR
from rag_eval.metrics.answers import token_f1
from rag_eval.stages.generator import generate_answers

COLLECTION = Collection.from_beir(str(BEIR))
QUERIES = dict(COLLECTION.queries)  # q1 .. q10
REFS = ReferenceAnswers({q: [f"answer {q}", f"the {q} answer"] for q in QUERIES})
TEXTS = {d: chunk.content for d, chunk in COLLECTION.corpus.items()}


def _search(query: str, k: int):
    ids = sorted(COLLECTION.corpus)
    words = set(query.lower().split())
    scored = sorted(ids, key=lambda d: (-sum(w in d for w in words), d))
    return [(d, float(len(ids) - i)) for i, d in enumerate(scored[:k])]


def _evaluated():
    pipeline = rag_eval.Pipeline(functions.retriever(_search, name="ids", version="1"), depth=10, budget=3)
    result = pipeline.run(QUERIES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny collection's low judged share, said elsewhere
        return result, rag_eval.evaluate(COLLECTION.qrels, result)


RESULT, REPORT = _evaluated()


def _answerer(right: set[str], fails: set[str] = frozenset(), name: str = "fixed"):
    """A generator: "answer qN" for the queries in ``right`` (F1 1), "no idea" for the others (F1 0), raising for
    those in ``fails``."""
    by_question = {text: q for q, text in QUERIES.items()}

    def answer(prompt: str) -> str:
        qid = by_question[prompt.rsplit("Question: ", 1)[1].split("\n", 1)[0]]
        if qid in fails:
            raise RuntimeError(f"model down on {qid}")
        return f"answer {qid}" if qid in right else "no idea"

    return functions.generator(answer, name=name)


def _answered(right, fails=frozenset(), name="fixed", report=REPORT):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        answers = generate_answers(_answerer(set(right), set(fails), name), RESULT, texts=TEXTS)
    return report.with_answers(answers, REFS, questions=QUERIES)


BASE = _answered({"q1", "q2", "q3", "q4", "q5"})
CAND = _answered(set(QUERIES) - {"q3"}, fails={"q3"}, name="better")


def test_a_report_carries_its_answers_graded_with_intervals_on_its_card():
    table = CAND.answers
    assert table["query_id"].tolist() == list(QUERIES)
    row = table.set_index("query_id").loc["q7"]
    assert row["answer"] == "answer q7" and row["question"] == QUERIES["q7"]
    assert row["references"] == ["answer q7", "the q7 answer"] and len(row["context_ids"]) == 3
    assert (row["exact_match"], row["f1"], row["contains"]) == (1.0, 1.0, 1.0)
    failed = table.set_index("query_id").loc["q3"]
    assert pd.isna(failed["answer"]) and "model down on q3" in failed["error"] and math.isnan(failed["f1"])
    record = CAND.card.answers
    assert (record["queries"], record["answered"], record["failed"], record["skipped"]) == (10, 9, 1, 0)
    assert record["generator"] == "better" and record["run"] == REPORT.runs[0] and record["stage"] == "ids"
    f1 = {s["metric"]: s for s in record["summary"]}["answer.f1"]
    assert (f1["mean"], f1["n"], f1["n_failed"]) == (1.0, 9, 1)
    base_f1 = {s["metric"]: s for s in BASE.card.answers["summary"]}["answer.f1"]
    assert base_f1["mean"] == 0.5 and base_f1["ci_low"] < 0.5 < base_f1["ci_high"] and base_f1["n"] == 10
    text = CAND.card.render()
    assert "answers: 10 queries: 9 answered, 1 failed" in text and "answer.f1 1.000 [1.000, 1.000] (n 9)" in text


def test_the_answer_table_is_the_generators_columns_with_the_question_references_and_grades():
    from rag_eval.builtin.generator import extractive_generator
    from rag_eval.reports.answered import ANSWER_TABLE_COLUMNS
    from rag_eval.stages.generator import ANSWER_COLUMNS

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        answers = generate_answers(extractive_generator(), RESULT, texts=TEXTS)
    made, table = answers.to_frame(), REPORT.with_answers(answers, REFS, questions=QUERIES).answers
    assert made.columns.tolist() == list(ANSWER_COLUMNS)
    assert table.columns.tolist() == list(ANSWER_TABLE_COLUMNS) == [
        "query_id", "question", "answer", "error", "skipped", "cached", "latency", "tokens_in", "tokens_out",
        "context_ids", "references", "exact_match", "f1", "contains",
    ]  # fmt: skip
    assert table["answer"].tolist() == made["answer"].tolist() and table["latency"].equals(made["latency"])
    assert table["context_ids"].tolist() == made["context_ids"].tolist() and table["answer"].notna().all()
    assert table["f1"].tolist() == [token_f1(a, REFS[q]) for q, a in zip(table["query_id"], table["answer"])]


def test_answers_survive_save_and_load(tmp_path):
    CAND.save(tmp_path / "r.parquet")
    back = rag_eval.Report.load(tmp_path / "r.parquet")
    assert back.card.answers == CAND.card.answers
    assert back.answers["query_id"].tolist() == list(QUERIES)  # ids stay str
    assert back.answer_values("answer.f1").equals(CAND.answer_values("answer.f1"))
    assert (
        back.answers.set_index("query_id").loc["q2", "context_ids"]
        == CAND.answers.set_index("query_id").loc["q2", "context_ids"]
    )


def test_an_answer_for_a_query_the_run_did_not_measure_is_refused():
    answers = generate_answers(functions.generator(lambda p: "x", name="x"), {"zz": ()}, questions={"zz": "what?"})
    with pytest.raises(rag_eval.InputError, match="'zz' has an answer but"):
        REPORT.with_answers(answers, {"zz": ["x"]})


def test_the_gate_takes_an_answer_grade_as_a_rule_paired_by_query():
    result = gate(BASE, CAND, ["answer_f1:0.05"], seed=1)
    rule = result.rules[0]
    # q3 failed in the candidate: NaN, left out and named; the 9 others paired
    assert (rule.metric, rule.n, rule.n_nan, rule.nan_ids) == ("answer.f1", 9, 1, ("q3",))
    assert rule.baseline_mean == pytest.approx(4 / 9) and rule.candidate_mean == 1.0
    assert rule.difference == pytest.approx(5 / 9) and rule.verdict == "pass" and result.exit_code == 0
    assert (rule.wins, rule.ties, rule.losses) == (5, 4, 0)
    text = result.to_text()
    assert "answer.f1 [" in text and "answers by better" in text and "answers by fixed" in text
    assert "n 9 paired; left out: 1 NaN on either side (q3)" in text
    worse = gate(CAND, BASE, ["exact_match:0.05"], test="t").rules[0]  # differences: -1 (5 queries), 0 (4)
    sd = np.std([-1.0] * 5 + [0.0] * 4, ddof=1)
    assert worse.metric == "answer.exact_match" and worse.verdict == "regression"
    assert worse.ci_high == pytest.approx(-5 / 9 + 2.306004 * sd / 3, abs=1e-5)
    assert [w.query_id for w in worse.worse] == ["q10", "q6", "q7", "q8", "q9"]
    with pytest.warns(DegenerateInterval, match="containment max drop 0 .inconclusive, 10 queries"):
        same = gate(BASE, BASE, ["containment:0"], seed=1).rules[0]
    assert same.metric == "answer.contains" and same.difference == 0 and same.n == 10


def test_an_answer_grade_takes_an_absolute_floor_resting_on_the_answers_graded():
    from scipy import stats

    result = gate(
        REPORT, BASE, ["answer.f1 >= 0.1", "answer_f1 >= 0.3", "answer.f1 >= 0.9"], test="t", correction="none"
    )
    f1 = BASE.answers["f1"].to_numpy()  # five 1.0, five 0.0
    for rule, floor, verdict in zip(result.rules, (0.1, 0.3, 0.9), ("pass", "inconclusive", "regression"), strict=True):
        low, high = stats.ttest_1samp(f1, floor).confidence_interval(0.95)
        assert (rule.metric, rule.n, rule.n_nan, rule.verdict) == ("answer.f1", 10, 0, verdict)
        assert rule.ci_low + floor == pytest.approx(low, abs=1e-12) and rule.ci_high + floor == pytest.approx(high)
        assert (
            rule.candidate_mean == 0.5 and rule.rule.floor == floor and rule.baseline_system == f"the floor {floor:g}"
        )
    # the baseline (REPORT) carries no answers: a floor reads the candidate only; a failed answer is left out, said
    with pytest.warns(DegenerateInterval, match=r"answer.f1 >= 0.5 \(pass, 9 queries, each \+0.5000\)"):
        (failed,) = gate(REPORT, CAND, ["answer.f1 >= 0.5"], test="t").rules
    assert (failed.n, failed.n_nan, failed.nan_ids, failed.candidate_mean) == (9, 1, ("q3",), 1.0)
    assert (
        "n 9 of the candidate's, against the floor 0.5; left out: 1 without a graded answer (failed or not asked) (q3)"
        in (failed.numbers())
    )
    with pytest.raises(ValueError, match="the candidate carries no answers"):
        gate(BASE, REPORT, ["answer.f1 >= 0.5"])


def test_a_rule_on_answers_needs_answers_on_both_sides():
    with pytest.raises(ValueError, match="the baseline carries no answers"):
        gate(REPORT, CAND, ["answer.f1:0.05"])
    with pytest.raises(ValueError, match=r"answers are of .*not 'rerank'"):
        gate(BASE, CAND, ["answer.f1:rerank:0.05"])


def test_token_f1_of_the_fixed_answers():  # the grades the tests above rest on, from the SQuAD functions
    assert token_f1("answer q1", REFS["q1"]) == 1.0 and token_f1("no idea", REFS["q1"]) == 0.0
    assert np.isclose(BASE.answer_values("answer.f1").mean(), 0.5)


# ----- result folders ----------------------------------------------------------------------------------------------


def test_a_result_folder_carries_the_answers(tmp_path):
    from rag_eval.renderers.result_folder import load_manifest

    CAND.save_folder(tmp_path / "f", qrels=COLLECTION.qrels, runs=RESULT, plots=False)
    assert "answers.csv" in load_manifest(tmp_path / "f").files
    frame = pd.read_csv(tmp_path / "f" / "answers.csv", keep_default_na=False)
    row = frame.set_index("query_id").loc["q7"]
    assert row["references"] == "answer q7 | the q7 answer" and len(row["context_ids"].split()) == 3
    assert (row["answer"], float(row["f1"])) == ("answer q7", 1.0)
    assert frame.set_index("query_id").loc["q3", "error"] == "RuntimeError: model down on q3"
    markdown = (tmp_path / "f" / "report.md").read_text()
    section = markdown.split("## Answers\n", 1)[1].split("\n## ", 1)[0]
    assert "| token F1 (`answer.f1`) | 1.000 [1.000, 1.000] | 9 | 1 |" in section
    assert "10 queries: 9 answered, 1 failed, 0 not asked" in section and "generator 'better'" in section
    assert "Question: {question}" in section  # the prompt
    assert markdown.index("## Answers") < markdown.index("## Metric card")
    assert rag_eval.Report.load_folder(tmp_path / "f").card.answers == CAND.card.answers


def test_answers_added_to_a_folder_replace_its_answers_section(tmp_path):
    from rag_eval.renderers.result_folder import add_answers

    folder = tmp_path / "f"
    REPORT.save_folder(folder, qrels=COLLECTION.qrels, runs=RESULT, plots=False)
    before = (folder / "report.md").read_text()
    assert "## Answers" not in before
    loaded = rag_eval.Report.load_folder(folder)
    for answered, mean in ((BASE, "0.500"), (CAND, "0.900")):  # q3 failed in CAND: answered "no idea" here
        answers = generate_answers(
            _answerer({q for q in QUERIES if answered.answer_values("answer.f1").get(q) == 1.0}), RESULT, texts=TEXTS
        )
        add_answers(folder, loaded.with_answers(answers, REFS, questions=QUERIES))
        markdown = (folder / "report.md").read_text()
        assert markdown.count("## Answers") == 1 and markdown.count("## Metric card") == 1
        assert f"| token F1 (`answer.f1`) | {mean}" in markdown
        assert "  answers: generator 'fixed'" in markdown  # the card rendered again
        assert markdown.split("## Answers")[0] == before.split("## Metric card")[0]  # the rest as it was
    back = rag_eval.Report.load_folder(folder)  # every file checked against the new manifest
    assert back.answer_values("answer.f1").sum() == 9.0


def test_the_text_formats_and_the_notebook_end_with_the_answers():
    from rag_eval.renderers import format_report

    markdown = format_report(CAND, "markdown")
    assert "### Answers" in markdown and "| token F1 (`answer.f1`) | 1.000 [1.000, 1.000] | 9 | 1 |" in markdown
    assert "answers: 10 queries: 9 answered, 1 failed" in format_report(CAND, "table")
    assert "### Answers" in CAND._repr_markdown_() and "### Answers" not in REPORT._repr_markdown_()
    assert "Answers" not in format_report(REPORT, "table")


# ----- the HTML page -----------------------------------------------------------------------------------------------


def test_the_html_page_has_an_answers_section_and_each_query_its_answer():
    import re

    from rag_eval.renderers.html_report import render_html, side_of

    from .test_html_report import data_of, rows_of

    page = render_html([side_of(CAND, results=RESULT, collection=COLLECTION)], plots=False)
    grades = {a["data-metric"]: cells for a, cells in rows_of(page, "answer-grades")}
    assert grades["answer.f1"][1:] == ["1.000 [1.000, 1.000]", "9", "1"]
    assert grades["answer.exact_match"][1:] == ["1.000 [1.000, 1.000]", "9", "1"]
    section = re.search(r'<section class="answers".*?</section>', page, re.DOTALL).group(0)
    assert "10 queries, 9 answered, 1 failed" in section and "<code>better</code>" in section
    assert "Question: {question}" in section  # the prompt, escaped by jinja2 ({} are no HTML)
    data = data_of(page)
    p = data["ids"].index("q2")
    shard = data["shards"][p // data["shard"]]
    (answer,) = [a for a in shard["answers"] if a["q"] == p - shard["first"]]
    assert (answer["a"], answer["e"], answer["r"], answer["g"]) == (
        "answer q2", None, ["answer q2", "the q2 answer"], [1.0, 1.0, 1.0]
    )  # fmt: skip
    delivered = [shard["docs"][c] for c in answer["c"]]
    assert delivered == list(CAND.answers.set_index("query_id").loc["q2", "context_ids"])
    qrels = COLLECTION.qrels["q2"]
    assert answer["cg"] == [qrels.get(d) for d in delivered]
    assert [shard["texts"][c] for c in answer["c"]] == [
        f"{COLLECTION.corpus[d].title}\n{COLLECTION.corpus[d].text}" if COLLECTION.corpus[d].title
        else COLLECTION.corpus[d].text for d in delivered
    ]  # fmt: skip
    p3 = data["ids"].index("q3")
    (failed,) = [a for a in data["shards"][p3 // data["shard"]]["answers"] if a["q"] == p3 - shard["first"]]
    assert failed["a"] is None and "model down on q3" in failed["e"] and failed["g"] == [None, None, None]
    plain = render_html([side_of(REPORT, results=RESULT, collection=COLLECTION)], plots=False)
    assert 'class="answers"' not in plain and '"answers"' not in json.dumps(data_of(plain)["shards"])


@pytest.mark.browser
def test_a_query_opened_in_the_browser_shows_its_answer_and_its_delivered_context(tmp_path):
    from rag_eval.renderers.html_report import side_of, write_html

    from .chromium import chromium, missing_in_test
    from .test_html_report_browser import open_page

    path = write_html(tmp_path / "p.html", [side_of(CAND, results=RESULT, collection=COLLECTION)], plots=False)
    with chromium(missing_in_test) as browser:
        context, page, problems = open_page(browser, path, "1280")
        try:
            page.evaluate("window.ragEvalOpenQuery('q2')")
            answer = page.locator("#query-detail .answer")
            answer.wait_for()
            assert answer.locator(".answer-text").inner_text() == "answer q2"
            assert answer.locator(".references").inner_text() == "References: answer q2 | the q2 answer"
            assert answer.locator("table.answer-grade td").all_inner_texts() == ["1.000", "1.000", "1.000"]
            delivered = list(CAND.answers.set_index("query_id").loc["q2", "context_ids"])
            assert answer.locator("ol.context .doc").all_inner_texts() == delivered
            judged = COLLECTION.qrels["q2"]
            expected = [f"grade {judged[d]}" if d in judged else "unjudged" for d in delivered]
            assert answer.locator("ol.context .grade").all_inner_texts() == expected
            page.evaluate("window.ragEvalOpenQuery('q3')")
            page.locator("#query-detail .answer .failed").wait_for()
            assert "model down on q3" in page.locator("#query-detail .answer .failed").inner_text()
            assert page.locator("section.answers h2").inner_text() == "Answers"
            assert problems == []
        finally:
            context.close()


# ----- rag-eval bench --generate -----------------------------------------------------------------------------------


QUERIES_ANSWERED = ("q1", "q2", "q3", "q4")


def _beir_with_answers(root):
    import shutil

    folder = root / "beir"
    shutil.copytree(BEIR, folder)
    line = {"answers": [{"text": "chain"}, {"text": "the chain"}]}
    (folder / "answers.jsonl").write_text("".join(json.dumps({"query_id": q, **line}) + "\n" for q in QUERIES_ANSWERED))
    return folder


def test_bench_generate_answers_the_delivered_context_into_the_result_folder(tmp_path, capsys):
    from rag_eval.builtin.generator import extractive_generator
    from rag_eval.cli import main
    from rag_eval.stages.generator import render_prompt

    beir = _beir_with_answers(tmp_path)
    args = ["bench", "--beir", str(beir), "--pipeline", "tests.test_exit_codes:pipeline", "--depth", "10", "--budget",
            "2", "-o", str(tmp_path / "out"), "--no-plots", "--generate", "--generator", "extractive"]  # fmt: skip
    assert main(args) == 0
    out, err = capsys.readouterr()
    report = rag_eval.Report.load_folder(tmp_path / "out")
    record = report.card.answers
    assert (record["generator"], record["queries"], record["answered"], record["failed"]) == ("extractive", 4, 4, 0)
    table = report.answers.set_index("query_id")
    assert list(table.index) == ["q1", "q2", "q3", "q4"]  # the queries with a reference
    collection = Collection.from_beir(str(beir))
    extractive = extractive_generator()
    for q, row in table.iterrows():
        context = list(row["context_ids"])
        assert len(context) == 2  # budget(2)
        expected = extractive.generate(render_prompt(QUERIES[q], [(d, collection.corpus[d].content) for d in context]))
        assert row["answer"] == expected and row["f1"] == token_f1(expected, ["chain", "the chain"])
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "## Answers" in markdown and "generator 'extractive'" in markdown
    assert "answers: 4 queries: 4 answered, 0 failed" in out and "answers: ExtractiveGenerator(" in err
    assert main(args) == 0  # again: every answer from the cache
    assert rag_eval.Report.load_folder(tmp_path / "out").card.answers["cache_hits"] == 4


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (["--generate"], "the folder's answers.jsonl"),
        (["--generator", "extractive"], "--generator goes with --generate"),
        (["--generate", "--pipeline", "tests.test_exit_codes:pipeline"], "give --pipeline once (not 2)"),
        (["--generate", "--generator", "no_such_module:f"], "cannot load generator 'no_such_module:f'"),
    ],
)
def test_bench_generate_refuses_before_running(tmp_path, capsys, more, message):
    from rag_eval.cli import main

    beir = _beir_with_answers(tmp_path)
    if more == ["--generate"]:
        (beir / "answers.jsonl").unlink()
    args = ["bench", "--beir", str(beir), "--pipeline", "tests.test_exit_codes:pipeline", "-o", str(tmp_path / "o")]
    assert main([*args, *more]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_a_report_with_answers_shows_them_in_a_notebook_escaped():
    shown = CAND._repr_html_()
    assert "<strong>Answers</strong>" in shown and "Answers</strong>" not in REPORT._repr_html_()
    assert "<td>token F1 <code>answer.f1</code></td><td>1.000 [1.000, 1.000]</td><td>9</td><td>1</td>" in shown
    named = generate_answers(functions.generator(lambda p: "x", name="<b>gen</b>"), RESULT, texts=TEXTS)
    assert "&lt;b&gt;gen&lt;/b&gt;" in REPORT.with_answers(named, REFS)._repr_html_()


def test_the_predictor_table_rides_on_the_card_into_report_md(tmp_path):
    from rag_eval.statistics.answer_prediction import answer_predictors

    graded = BASE.answers.rename(columns={"exact_match": "em"}).assign(condition="delivered")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a predictor constant on these 10 queries is said elsewhere
        found = answer_predictors(REPORT, graded, stage="ids", resamples=200)
        answers = generate_answers(_answerer({"q1", "q2", "q3", "q4", "q5"}), RESULT, texts=TEXTS)
    answered = REPORT.with_answers(answers, REFS, questions=QUERIES, predictors=found)
    rows = answered.card.answers["predictors"]["table"]
    assert [r["predictor"] for r in rows] == found.table["predictor"].tolist()
    for row, (_, expected) in zip(rows, found.table.iterrows(), strict=True):
        assert row["n"] == expected["n"] and row["n_correct"] == expected["n_correct"] == 5
        for key in ("auc", "auc_low", "spearman"):
            assert (row[key] is None and math.isnan(expected[key])) or row[key] == pytest.approx(expected[key])
    assert answered.card.answers["predictors"]["describe"] == found.describe()
    answered.save_folder(tmp_path / "f", qrels=COLLECTION.qrels, runs=RESULT, plots=False)
    markdown = (tmp_path / "f" / "report.md").read_text()
    first = rows[0]
    assert "Which retrieval number predicts the answers:" in markdown
    assert f"| {first['predictor']} | {first['n']} | 5 |" in markdown


def test_bench_generate_with_failing_answers_writes_the_folder_and_exits_4(tmp_path, capsys):
    from .test_exit_codes import _main

    beir = _beir_with_answers(tmp_path)
    failing = "tests.test_exit_codes:no_answer"
    args = ["bench", "--beir", str(beir), "--pipeline", "tests.test_exit_codes:pipeline", "--depth", "10", "-o",
            str(tmp_path / "out"), "--no-plots", "--generate", "--generator", failing]  # fmt: skip
    assert _main(args) == 4  # its warnings printed as a user sees them
    err = capsys.readouterr().err
    assert "4 queries have no answer (first 'q1': RuntimeError: the model is down)" in err
    assert "rag-eval: warning: generator 'no_answer' failed on 4 of the 4 queries" in err
    record = rag_eval.Report.load_folder(tmp_path / "out").card.answers
    assert (record["answered"], record["failed"]) == (0, 4) and record["summary"][1]["mean"] is None


# ----- a judge's verdicts beside the grades ------------------------------------------------------------------------


def _judged_base():
    """BASE's answers (q1..q5 right, the others "no idea"), judged by a function judge that calls right every answer
    saying "answer" except q1's, and its agreement with F1 >= 0.5."""
    from rag_eval.ground_truth.answer_judge import judge_answers
    from rag_eval.statistics.grader_agreement import answer_agreement

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        answers = generate_answers(_answerer({"q1", "q2", "q3", "q4", "q5"}), RESULT, texts=TEXTS)

    def grade(question: str, text: str) -> int:
        answer = text.split("\n")[0].removeprefix("Proposed answer: ")
        return int(answer.startswith("answer") and answer != "answer q1")

    judged = judge_answers(functions.judge(grade, name="wordy", version="1"), answers, QUERIES, references=REFS)
    agreement = answer_agreement(judged, answers.grade(REFS), warn=False)
    report = REPORT.with_answers(answers, REFS, questions=QUERIES, judged=judged, agreement=agreement)
    return answers, judged, agreement, report


def test_a_judges_verdicts_sit_beside_the_grades_per_query_and_its_agreement_once_on_the_card(tmp_path):
    from sklearn.metrics import cohen_kappa_score

    _, _, agreement, report = _judged_base()
    table = report.answers.set_index("query_id")
    expected = [0.0, 1.0, 1.0, 1.0, 1.0] + [0.0] * 5  # q1 .. q10
    assert table["judge_grade"].tolist() == expected and table["judge_correct"].tolist() == expected
    assert table["f1"].tolist() == [1.0] * 5 + [0.0] * 5 and set(table["judge_error"]) == {None}
    judge = report.card.answers["judge"]
    assert (judge["judge"], judge["scale"], judge["correct_at"], judge["judged"], judge["failed"]) == (
        "wordy", [0, 1], 1, 10, 0
    )  # fmt: skip
    assert judge["correct"]["mean"] == 0.4 and judge["correct"]["n"] == 10
    assert judge["correct"]["ci_low"] < 0.4 < judge["correct"]["ci_high"]
    found = judge["agreement"]
    kappa = cohen_kappa_score([1] * 5 + [0] * 5, expected)
    assert found["statistic"] == "Cohen's kappa" and found["value"] == pytest.approx(kappa, abs=1e-12)
    assert (found["n"], found["method"]) == (10, "bootstrap, min n 10")
    assert (found["disagree"], found["disagree_ids"]) == (1, ["q1"])
    assert found["ci_low"] <= found["value"] <= found["ci_high"]  # 10 answers: the bootstrap's minimum, an interval
    assert (found["ci_low"], found["ci_high"]) == (agreement.kappa_low, agreement.kappa_high)
    text = report.card.render()
    assert text.count("judge 'wordy' against the reference (F1 >= 0.5) on 10 answers both graded") == 1
    assert "judge 'wordy' (fingerprint " in text and "correct 0.400 [" in text
    back = tmp_path / "r.parquet"
    report.save(back)
    loaded = rag_eval.Report.load(back)
    assert loaded.card.answers == report.card.answers
    assert loaded.answers["judge_grade"].tolist() == expected


def test_report_md_and_the_html_page_show_the_judge_beside_the_reference(tmp_path):
    from rag_eval.renderers.html_report import render_html, side_of
    from rag_eval.reports.answered import record_markdown

    from .test_html_report import data_of, rows_of

    _, _, agreement, report = _judged_base()
    lines = record_markdown(report.card.answers, file="answers.csv")
    (row,) = [line for line in lines if "`judge.correct`" in line]
    assert row.startswith("| judge 'wordy' says correct (on 0-1, correct at 1)") and "| 0.400 [" in row
    assert row.endswith("| 10 | 0 |")
    said = [line for line in lines if "judge 'wordy' against the reference (F1 &gt;= 0.5) on 10 answers" in line]
    assert len(said) == 1 and f"kappa {agreement.kappa:.3f} \\[{agreement.kappa_low:.3f}, " in said[0]  # once
    assert "- the judge and the reference disagree on 1 answers: q1; per query: the `judge_grade` column" in "\n".join(
        lines
    )
    page = render_html([side_of(report, results=RESULT, collection=COLLECTION)], plots=False)
    grades = {a["data-metric"]: cells for a, cells in rows_of(page, "answer-grades")}
    assert grades["judge.correct"][1:] == [row.split(" | ")[1], "10", "0"]
    import re

    section = re.search(r'<section class="answers".*?</section>', page, re.DOTALL).group(0)
    assert section.count("against the reference (F1 &gt;= 0.5) on 10 answers both graded") == 1  # once, summarised
    data = data_of(page)
    shown = {}
    for shard in data["shards"]:
        for a in shard.get("answers", []):
            shown[data["ids"][shard["first"] + a["q"]]] = (a["g"][1], a["j"], a["je"])
    assert shown["q1"] == (1.0, 0.0, None) and shown["q2"] == (1.0, 1.0, None) and shown["q7"] == (0.0, 0.0, None)
    plain = data_of(render_html([side_of(BASE, results=RESULT, collection=COLLECTION)], plots=False))
    assert all("j" not in a for shard in plain["shards"] for a in shard.get("answers", []))


def test_an_agreement_without_its_verdicts_or_of_another_judge_is_refused():
    from rag_eval.ground_truth.answer_judge import judge_answers

    answers, _, agreement, _ = _judged_base()
    with pytest.raises(rag_eval.InputError, match="needs the judge's verdicts"):
        REPORT.with_answers(answers, REFS, agreement=agreement)
    other = judge_answers(functions.judge(lambda q, t: 1, name="yes", version="1"), answers, QUERIES, references=REFS)
    with pytest.raises(rag_eval.InputError, match="the agreement is of judge 'wordy', the verdicts of 'yes'"):
        REPORT.with_answers(answers, REFS, judged=other, agreement=agreement)


@pytest.mark.browser
def test_a_query_opened_in_the_browser_shows_the_judges_grade_beside_the_reference_grades(tmp_path):
    from rag_eval.renderers.html_report import side_of, write_html

    from .chromium import chromium, missing_in_test
    from .test_html_report_browser import open_page

    _, _, _, report = _judged_base()
    path = write_html(tmp_path / "p.html", [side_of(report, results=RESULT, collection=COLLECTION)], plots=False)
    with chromium(missing_in_test) as browser:
        context, page, problems = open_page(browser, path, "1280")
        try:
            page.evaluate("window.ragEvalOpenQuery('q1')")
            table = page.locator("#query-detail .answer table.answer-grade")
            table.wait_for()
            assert table.locator("th").all_inner_texts() == ["exact match", "token F1", "contains", "judge"]
            assert table.locator("td").all_inner_texts() == ["1.000", "1.000", "1.000", "0"]  # the judge disagrees
            assert problems == []
        finally:
            context.close()
