"""The answers of several pipelines in one report (issue 31, "where it shows"): ``with_answers`` once per run keeps
each run's answers, the card holds each with its paired difference from the first (checked against NumPy's own
bootstrap and rag_eval.statistics), and report.md, answers.csv, the HTML page, the notebook, the gate and
``rag-eval answers`` show them all."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import rag_eval
from rag_eval.adapters import functions
from rag_eval.data import Collection
from rag_eval.data.answers import ReferenceAnswers
from rag_eval.examples import BEIR_FOLDER as BEIR
from rag_eval.stages.generator import delivered_contexts, generate_answers

COLLECTION = Collection.from_beir(str(BEIR))
QUERIES = dict(COLLECTION.queries)  # q1 .. q10
REFS = ReferenceAnswers({q: [f"answer {q}"] for q in QUERIES})
TEXTS = {d: chunk.content for d, chunk in COLLECTION.corpus.items()}


def _search(query: str, k: int):
    ids = sorted(COLLECTION.corpus)
    words = set(query.lower().split())
    scored = sorted(ids, key=lambda d: (-sum(w in d for w in words), d))
    return [(d, float(len(ids) - i)) for i, d in enumerate(scored[:k])]


def _flip(query: str, hits):
    return [h.doc_id for h in reversed(hits)]


def _evaluated():
    first = functions.retriever(_search, name="ids", version="1")
    plain = rag_eval.Pipeline(first, depth=10, budget=3)
    flipped = rag_eval.Pipeline(first, functions.reranker(_flip, name="flip", version="1"), depth=10, budget=3)
    results = {"plain": plain.run(QUERIES), "flipped": flipped.run(QUERIES)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny collection's low judged share, said elsewhere
        return results, rag_eval.evaluate(COLLECTION.qrels, results)


RESULTS, REPORT = _evaluated()


def _generator(right: set[str], half: set[str] = frozenset(), fails: set[str] = frozenset(), name: str = "fixed"):
    """ "answer qN" for ``right`` (F1 1, exact), "answer" for ``half`` (F1 2/3, not exact, not contained), "no idea"
    for the others (0), raising for ``fails``."""
    by_question = {text: q for q, text in QUERIES.items()}

    def answer(prompt: str) -> str:
        qid = by_question[prompt.rsplit("Question: ", 1)[1].split("\n", 1)[0]]
        if qid in fails:
            raise RuntimeError(f"model down on {qid}")
        return f"answer {qid}" if qid in right else "answer" if qid in half else "no idea"

    return functions.generator(answer, name=name)


def _answers(run: str, generator, only: set[str] | None = None):
    contexts = delivered_contexts(RESULTS[run])
    if only is not None:
        contexts = {q: c for q, c in contexts.items() if q in only}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return generate_answers(generator, contexts, questions=QUERIES, texts=TEXTS)


PLAIN = _answers("plain", _generator({"q1", "q2", "q3", "q4", "q5"}, half={"q6"}))
FLIPPED = _answers("flipped", _generator({"q3", "q4", "q5", "q6", "q7", "q8", "q9"}, half={"q1", "q10"}, name="g2"))
BOTH = REPORT.with_answers(PLAIN, REFS, questions=QUERIES, run="plain").with_answers(
    FLIPPED, REFS, questions=QUERIES, run="flipped"
)


def _row(record, metric):
    return {r["metric"]: r for r in record["paired"]["rows"]}[metric]


def test_two_runs_answers_accumulate_by_run_and_their_paired_difference_is_numpys_bootstrap():
    card = BOTH.card
    assert list(card.answers_by_run) == ["plain", "flipped"] and card.answers == card.answers_by_run["plain"]
    assert (card.answers["stage"], card.answers_by_run["flipped"]["stage"]) == ("ids", "flip")  # each run's last
    assert "paired" not in card.answers and card.answers_by_run["flipped"]["generator"] == "g2"
    table = BOTH.answers
    assert table.columns[0] == "run" and table["run"].tolist() == ["plain"] * 10 + ["flipped"] * 10
    a = BOTH.answer_values("answer.f1", run="plain")
    b = BOTH.answer_values("answer.f1", run="flipped")
    assert a["q6"] == pytest.approx(2 / 3) and (a["q1"], b["q1"], b["q2"]) == (1.0, pytest.approx(2 / 3), 0.0)
    paired = card.answers_by_run["flipped"]["paired"]
    assert (paired["against"], paired["n"], paired["left_out"], paired["min_n"]) == ("plain", 10, 0, 10)
    assert paired["method"] == "bootstrap, min n 10" and paired["refused"] is None
    rng = np.random.default_rng(0)  # the bootstrap by hand: 1,000 resamples of the 10 queries, seed 0
    picks = rng.integers(0, 10, size=(1000, 10))
    for metric in ("answer.exact_match", "answer.f1", "answer.contains"):
        d = (BOTH.answer_values(metric, run="flipped") - BOTH.answer_values(metric, run="plain")).to_numpy()
        low, high = np.quantile(d[picks].mean(axis=1), [0.025, 0.975])
        row = _row(card.answers_by_run["flipped"], metric)
        assert row["diff"] == pytest.approx(d.mean(), abs=1e-12) and row["diff"] == pytest.approx(
            row["mean"] - row["baseline_mean"], abs=1e-12
        )
        assert (row["ci_low"], row["ci_high"]) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    f1 = _row(card.answers_by_run["flipped"], "answer.f1")
    assert f1["diff"] == pytest.approx((-1 / 3 - 1 + 1 / 3 + 3 + 2 / 3) / 10)  # q1, q2, q6, q7..q9, q10
    assert f1["ci_low"] < f1["diff"] < f1["ci_high"]


def test_the_paired_difference_is_what_rag_eval_statistics_and_the_gate_compute():
    from rag_eval.drivers.gating import gate
    from rag_eval.statistics import condition_effects
    from rag_eval.statistics.paired import paired_bootstrap_ci

    record = BOTH.card.answers_by_run["flipped"]
    f1, em = _row(record, "answer.f1"), _row(record, "answer.exact_match")
    table = BOTH.answers.rename(columns={"run": "condition"}).assign(correct=lambda t: t["exact_match"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a zero-width interval of a condition, said elsewhere
        effects = condition_effects(table, baseline="plain", correct_at=None)
    (found,) = effects.differences.to_dict("records")  # its queries in id order: the same differences, resampled
    assert (found["n"], found["n_left_out"]) == (record["paired"]["n"], record["paired"]["left_out"])
    assert (found["f1_diff"], found["accuracy_diff"]) == pytest.approx((f1["diff"], em["diff"]), abs=1e-12)
    d = (BOTH.answer_values("answer.f1", run="flipped") - BOTH.answer_values("answer.f1", run="plain")).to_numpy()
    assert paired_bootstrap_ci(d, resamples=1000, confidence=0.95, seed=0) == pytest.approx(
        (f1["ci_low"], f1["ci_high"]), abs=1e-12
    )
    base = REPORT.with_answers(PLAIN, REFS, run="plain")
    cand = REPORT.with_answers(FLIPPED, REFS, run="flipped")
    (rule,) = gate(base, cand, ["answer.f1:1"], test="bootstrap", resamples=1000, seed=0).rules
    assert (rule.difference, rule.ci_low, rule.ci_high) == pytest.approx(
        (f1["diff"], f1["ci_low"], f1["ci_high"]), abs=1e-12
    )


def test_below_the_minimum_n_the_difference_has_no_interval_and_says_what_was_left_out():
    fewer = _answers("flipped", _generator(set(QUERIES), fails={"q2"}, name="g3"), only=set(QUERIES) - {"q10"})
    report = REPORT.with_answers(PLAIN, REFS, run="plain").with_answers(fewer, REFS, run="flipped")
    paired = report.card.answers_by_run["flipped"]["paired"]
    assert (paired["n"], paired["left_out"], paired["not_graded"], paired["one_run_only"]) == (8, 2, 1, 1)
    assert paired["refused"] == "no interval: 8 paired queries, fewer than the minimum n 10"
    f1 = _row(report.card.answers_by_run["flipped"], "answer.f1")
    kept = [q for q in QUERIES if q not in ("q2", "q10")]
    assert f1["diff"] == pytest.approx(1 - np.mean([PLAIN_F1[q] for q in kept])) and f1["ci_low"] is None
    text = report.card.render()
    assert "'flipped' - 'plain', paired by query: 8 queries graded in both, 2 left out (1 failed or not asked" in text
    assert "no interval: 8 paired queries, fewer than the minimum n 10" in text
    assert f"answer.f1 {f1['diff']:+.3f} (no interval)" in text


PLAIN_F1 = {q: 1.0 if q in {"q1", "q2", "q3", "q4", "q5"} else 2 / 3 if q == "q6" else 0.0 for q in QUERIES}


def test_a_run_answered_twice_is_refused_unless_replaced_in_its_place():
    with pytest.raises(rag_eval.InputError, match=r"answers of run 'plain' already \(of plain / ids\)"):
        BOTH.with_answers(PLAIN, REFS, run="plain")
    again = BOTH.with_answers(FLIPPED, REFS, questions=QUERIES, run="plain", replace=True)
    assert list(again.card.answers_by_run) == ["plain", "flipped"] and again.card.answers["generator"] == "g2"
    assert _row(again.card.answers_by_run["flipped"], "answer.f1")["diff"] == 0.0  # the same answers both
    with pytest.raises(rag_eval.InputError, match=r"several runs \(\['plain', 'flipped'\]\): name one"):
        BOTH.answer_values("answer.f1")
    with pytest.raises(rag_eval.InputError, match="no answers of run 'x'"):
        BOTH.answer_values("answer.f1", run="x")


def test_one_run_answered_is_as_before():
    one = REPORT.with_answers(PLAIN, REFS, questions=QUERIES, run="plain")
    assert one.card.answers_by_run is None and one.card.answers["run"] == "plain"
    assert "run" not in one.answers.columns and one.answer_values("answer.f1").to_dict() == PLAIN_F1
    assert one.answer_values("answer.f1", run="plain").to_dict() == PLAIN_F1
    assert "### Answers\n" in one._repr_markdown_() and "side by side" not in one._repr_markdown_()


def test_two_runs_answers_survive_save_and_load(tmp_path):
    BOTH.save(tmp_path / "r.parquet")
    back = rag_eval.Report.load(tmp_path / "r.parquet")
    assert back.card == BOTH.card
    assert back.answers["run"].tolist() == BOTH.answers["run"].tolist()
    for run in ("plain", "flipped"):
        assert back.answer_values("answer.f1", run=run).equals(BOTH.answer_values("answer.f1", run=run))


def _side_by_side(markdown: str) -> dict[str, list[str]]:
    section = re.split(r"^#+ Answers\n", markdown, maxsplit=1, flags=re.MULTILINE)[1]
    rows = re.findall(r"^\| ([^|]+) \| (.+) \|$", section.split("\n#", 1)[0], re.MULTILINE)
    return {name.strip(): [c.strip() for c in cells.split(" | ")] for name, cells in rows}


def test_report_md_and_answers_csv_show_both_runs_side_by_side(tmp_path):
    folder = tmp_path / "f"
    BOTH.save_folder(folder, qrels=COLLECTION.qrels, runs=RESULTS, plots=False)
    markdown = (folder / "report.md").read_text()
    table = _side_by_side(markdown)
    assert table["grade"] == ["plain", "flipped", "flipped - plain (paired)"]
    f1 = _row(BOTH.card.answers_by_run["flipped"], "answer.f1")
    plain = {s["metric"]: s for s in BOTH.card.answers["summary"]}["answer.f1"]
    assert table["token F1 (`answer.f1`)"] == [
        f"{plain['mean']:.3f} [{plain['ci_low']:.3f}, {plain['ci_high']:.3f}]",
        f"{np.mean([1, 2 / 3, 0, 1, 1, 1, 1, 1, 1, 2 / 3]):.3f} ["
        + ", ".join(f"{v:.3f}" for v in _interval_of("flipped"))
        + "]",
        f"{f1['diff']:+.3f} [{f1['ci_low']:+.3f}, {f1['ci_high']:+.3f}]",
    ]
    assert table["answered"] == ["10 of 10", "10 of 10", "10 paired, 0 left out"]
    assert "### Answers of plain" in markdown and "### Answers of flipped" in markdown
    assert "10 queries graded in both, 0 left out" in markdown and "bootstrap, min n 10" in markdown
    frame = pd.read_csv(folder / "answers.csv", keep_default_na=False)
    assert frame["run"].tolist() == ["plain"] * 10 + ["flipped"] * 10
    assert frame.set_index(["run", "query_id"]).loc[("flipped", "q1"), "answer"] == "answer"
    back = rag_eval.Report.load_folder(folder)
    assert back.card.answers_by_run == BOTH.card.answers_by_run


def _interval_of(run: str) -> tuple[float, float]:
    s = {s["metric"]: s for s in BOTH.card.answers_by_run[run]["summary"]}["answer.f1"]
    return s["ci_low"], s["ci_high"]


def test_the_notebook_and_the_text_formats_show_both_runs():
    from rag_eval.renderers import format_report

    markdown = BOTH._repr_markdown_()
    assert "### Answers\n" in markdown and "#### Answers of flipped" in markdown
    assert _side_by_side(markdown)["grade"] == ["plain", "flipped", "flipped - plain (paired)"]
    html = BOTH._repr_html_()
    assert "Answers of 2 runs, paired" in html and html.count("<strong>Answers of ") == 3
    table = format_report(BOTH, "table")
    assert "answers: 'flipped' - 'plain', paired by query: 10 queries graded in both" in table
    assert "on the delivered context of plain / ids" in table and "on the delivered context of flipped / flip" in table


def test_the_html_page_shows_each_runs_answers_and_their_difference():
    from rag_eval.renderers.html_report import render_html, side_of

    from .test_html_report import data_of, rows_of

    page = render_html([side_of(BOTH, results=RESULTS, collection=COLLECTION)], plots=False)
    compare = {a.get("data-metric"): cells for a, cells in rows_of(page, "answer-compare")}
    f1 = _row(BOTH.card.answers_by_run["flipped"], "answer.f1")
    assert compare["answer.f1"][-1] == f"{f1['diff']:+.3f} [{f1['ci_low']:+.3f}, {f1['ci_high']:+.3f}]"
    sections = re.findall(r'<section class="answers" [^>]*data-run="([^"]+)"', page)
    assert sections == ["plain", "flipped"]
    data = data_of(page)
    p = data["ids"].index("q1")
    shard = data["shards"][p // data["shard"]]
    mine = [a for a in shard["answers"] if a["q"] == p - shard["first"]]
    assert [(a["n"], a["a"], a["g"][1]) for a in mine] == [
        ("plain", "answer q1", 1.0),
        ("flipped", "answer", pytest.approx(2 / 3)),
    ]
    delivered = {r: list(BOTH.answers.set_index(["run", "query_id"]).loc[(r, "q1"), "context_ids"]) for r in RESULTS}
    assert [[shard["docs"][c] for c in a["c"]] for a in mine] == [delivered["plain"], delivered["flipped"]]
    ranked = [d for d, _ in _search(QUERIES["q1"], 10)]
    assert (delivered["plain"], delivered["flipped"]) == (ranked[:3], ranked[::-1][:3])  # the reranker's flip


def test_the_gate_reads_the_answers_of_the_run_a_rule_names():
    from rag_eval.drivers.gating import gate

    with pytest.raises(ValueError, match=r"carries the answers of several runs \(\['plain/ids', 'flipped/flip'\]\)"):
        gate(BOTH, BOTH, ["answer.f1:0.05"])
    verdict = gate(REPORT.with_answers(PLAIN, REFS, run="flipped"), BOTH, ["answer.f1:flipped:0.05"])
    (rule,) = verdict.rules
    assert rule.difference == pytest.approx(_row(BOTH.card.answers_by_run["flipped"], "answer.f1")["diff"])


def test_a_judged_run_beside_an_unjudged_one_keeps_its_verdicts_to_itself(tmp_path):
    from rag_eval.ground_truth.answer_judge import judge_answers
    from rag_eval.renderers.html_report import render_html, side_of

    from .test_html_report import data_of

    def grade(question: str, text: str) -> int:
        return int(text.startswith("Proposed answer: answer"))

    judged = judge_answers(functions.judge(grade, name="j", version="1"), FLIPPED, QUERIES, references=REFS)
    report = REPORT.with_answers(PLAIN, REFS, run="plain").with_answers(FLIPPED, REFS, run="flipped", judged=judged)
    table = report.answers.set_index(["run", "query_id"])
    assert table.loc[("flipped", "q1"), "judge_grade"] == 1.0 and table.loc[("flipped", "q2"), "judge_grade"] == 0.0
    assert np.isnan(table.loc[("plain", "q1"), "judge_grade"]) and table.loc[("plain", "q1"), "judge_error"] is None
    assert "judge" not in report.card.answers and report.card.answers_by_run["flipped"]["judge"]["judged"] == 10
    report.save(tmp_path / "r.parquet")
    assert rag_eval.Report.load(tmp_path / "r.parquet").card == report.card
    data = data_of(render_html([side_of(report, results=RESULTS, collection=COLLECTION)], plots=False))
    rows = [a for shard in data["shards"] for a in shard.get("answers", [])]
    assert {a["n"]: "j" in a for a in rows} == {"plain": False, "flipped": True}
    assert sorted(a["j"] for a in rows if a["n"] == "flipped") == [0.0] + [1.0] * 9  # all but q2 say "answer"


@pytest.mark.browser
def test_a_query_opened_in_the_browser_shows_both_runs_answers_side_by_side(tmp_path):
    from rag_eval.renderers.html_report import side_of, write_html

    from .chromium import chromium, missing_in_test
    from .test_html_report_browser import TABS, axe_violations, open_page, tab

    path = write_html(tmp_path / "p.html", [side_of(BOTH, results=RESULTS, collection=COLLECTION)], plots=False)
    with chromium(missing_in_test) as browser:
        context, page, problems = open_page(browser, path, "1280")
        try:
            page.evaluate("window.ragEvalOpenQuery('q1')")
            page.locator("#query-detail .answers-side .answer").first.wait_for()
            blocks = page.locator("#query-detail .answers-side .answer")
            assert blocks.locator("h3").all_inner_texts() == ["plain: The answer", "flipped: The answer"]
            assert blocks.locator(".answer-text").all_inner_texts() == ["answer q1", "answer"]
            assert blocks.nth(1).locator("table.answer-grade td").all_inner_texts() == ["0.000", "0.667", "0.000"]
            tops = [blocks.nth(k).bounding_box()["y"] for k in range(2)]
            assert tops[0] == tops[1]  # beside each other, not one under the other
            assert page.locator("section.answers h2").all_inner_texts() == ["plain: Answers", "flipped: Answers"]
            try:
                import axe_playwright_python  # noqa: F401
            except ImportError:
                missing_in_test("the Python package axe-playwright-python is not installed")
            seen = {"a query open": axe_violations(page)}
            for view in [v.strip() for v in page.locator(TABS).all_inner_texts()]:
                tab(page, view).click()
                seen[view] = axe_violations(page)
            serious = [
                (k, v["id"]) for k, found in seen.items() for v in found if v["impact"] in ("serious", "critical")
            ]
            assert serious == [] and problems == [] and len(seen) > 2
        finally:
            context.close()


# ----- rag-eval answers, once per pipeline of a folder ------------------------------------------------------------


def first_chunk(prompt: str) -> str:
    """The command line's generator: the first delivered chunk's first word."""
    return prompt.split("[1] ", 1)[1].split()[0]


def test_rag_eval_answers_once_per_pipeline_keeps_both_and_a_rerun_replaces_its_own(tmp_path, capsys):
    from rag_eval.cli import main

    folder = tmp_path / "f"
    REPORT.save_folder(folder, qrels=COLLECTION.qrels, runs=RESULTS, plots=False)
    refs = tmp_path / "refs.jsonl"
    refs.write_text("".join(json.dumps({"query_id": q, "answers": [f"answer {q}"]}) + "\n" for q in QUERIES))
    given = ["answers", str(folder), "--beir", str(BEIR), "--references", str(refs)]
    generator = ["--generator", f"{__name__}:first_chunk", "--cache", str(tmp_path / "cache")]
    for run in ("plain", "flipped", "plain"):
        assert main([*given, *generator, "--run", run]) == 0
    back = rag_eval.Report.load_folder(folder)
    assert list(back.card.answers_by_run) == ["plain", "flipped"]
    frame = pd.read_csv(folder / "answers.csv", keep_default_na=False)
    assert frame["run"].tolist() == ["plain"] * 10 + ["flipped"] * 10
    firsts = {r: [TEXTS[ids.split()[0]].split()[0] for ids in frame[frame["run"] == r]["context_ids"]] for r in RESULTS}
    assert frame[frame["run"] == "flipped"]["answer"].tolist() == firsts["flipped"]
    assert frame[frame["run"] == "plain"]["answer"].tolist() == firsts["plain"]
    assert (folder / "report.md").read_text().count("## Answers\n") == 1
