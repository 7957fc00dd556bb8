"""``rag-eval answers``: a generator over a result folder's delivered contexts, its answers graded against reference
answers (see docs/answers.md and docs/cli.md)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._escape import visible
from ..errors import InputError
from ._common import count, incomplete, option, say, shared

if TYPE_CHECKING:
    from ..data.answers import ReferenceAnswers

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    cmd = commands.add_parser(
        "answers",
        help="answer each query from its delivered context and grade the answers (EM, F1, containment)",
        description="Read a result folder's final stage (or --delivered-by), cut each query's ranking to the "
        "pipeline's "
        "budget as the card records it, put the chunks' texts (from --beir) under the prompt, ask the generator, and "
        "grade each answer against the reference answers (SQuAD v1.1 exact match and token F1, the best over a "
        "query's references, and containment). Attaches them to the folder's report (OUT: FOLDER itself by default, "
        "or a copy): answers.csv (one row per query), report.md's Answers section, the card; prints the means. "
        "Answers are cached in OUT/cache: a rerun asks nothing already answered. A failed answer is counted, never "
        "graded wrong. With --judge, a judge also grades each answer (0 wrong, 1 right, reading the question, the "
        "answer and its references), its verdict is written beside the grades and its agreement with F1 >= 0.5 "
        "(Cohen's kappa with a bootstrap interval) to OUT/judge_agreement.json. See docs/answers.md.",
    )
    cmd.add_argument(
        "folder", metavar="FOLDER", help="a result folder of a pipeline (Report.save_folder, rag-eval bench)"
    )
    shared(cmd, "beir", required=True)
    shared(cmd, "split")
    cmd.add_argument(
        "--references",
        required=True,
        metavar="PATH",
        help="reference answers: a SQuAD folder (answers.jsonl) or dev-v1.1.json, a JSONL file (--field), or a CSV "
        "or Parquet table (--field names the column, one answer a row)",
    )
    cmd.add_argument(
        "--field", default="answers", help="the JSONL field or table column of the answers (default answers)"
    )
    cmd.add_argument("--id-field", default="query_id", help="the field or column of the query id (default query_id)")
    shared(cmd, "generator")
    cmd.add_argument("--prompt", metavar="FILE", help="a prompt template file with {question} and {context}")
    shared(cmd, "run")
    cmd.add_argument("--delivered-by", metavar="NAME", help="the stage whose ranking is delivered (default the last)")
    option(cmd, "--questions", number=count(), metavar="N", help="answer N queries drawn with --seed (default all)")
    shared(cmd, "seed")
    option(cmd, "--max-tokens", number=count(), metavar="N", default="48", help="the built-in generator's new tokens")
    shared(
        cmd,
        "judge",
        help="a judge that also grades each answer 0 (wrong) or 1 (right): package.module:function returning a judge "
        "(e.g. rag_eval.adapters.langchain.judge(model, prompt=ANSWER_PROMPT)), or a function (question, text) -> "
        "grade, the text being the answer and its references",
    )
    shared(cmd, "out", help="the result folder to write: FOLDER with the answers (default FOLDER itself, updated)")
    shared(cmd, "cache")


def run(args: argparse.Namespace) -> int:
    from ..data.collection import Collection
    from ..data.run import Run
    from ..reports import Report
    from ..stages.budget import count_tokens
    from ..stages.generator import DEFAULT_PROMPT, generate_answers
    from ..stages.hits import Hit

    folder = Path(args.folder)
    report = Report.load_folder(folder)  # every file checked against the manifest first
    pipeline = _pipeline(report, args.run, str(folder))
    stages = list(pipeline["stages"])
    stage = args.delivered_by or stages[-1]
    if stage not in stages:
        raise InputError(f"no stage {stage!r} in pipeline {pipeline['run']!r} (stages: {stages})", source=str(folder))
    budget = _budget(pipeline["budget"], str(folder))
    from ..renderers.result_folder import listed_file, safe_name

    name = f"runs/{safe_name(pipeline['run'])}.{safe_name(stage)}.trec"
    if not listed_file(folder, name):
        raise InputError(
            f"the folder's manifest lists no {name}: it holds no ranking of stage {stage!r}", source=str(folder)
        )
    ranked = Run.from_trec(folder / name)
    collection = Collection.from_beir(args.beir, split=args.split)
    references = _references(args.references, args.field, args.id_field)
    ids = [q for q in ranked.query_ids if q in references]
    if not ids:
        raise InputError("no query of the folder's run has a reference answer", source=args.references)
    if args.questions is not None and args.questions < len(ids):
        picked = np.sort(np.random.default_rng(args.seed).choice(len(ids), args.questions, replace=False))
        ids = [ids[i] for i in picked.tolist()]
    missing = [q for q in ids if q not in collection.queries]
    if missing:
        raise InputError(f"{len(missing)} queries have no text, e.g. {missing[0]!r}", source=args.beir)
    absent = {d for q in ids for d, _ in ranked.ranking(q)} - collection.corpus.keys()
    if absent:
        raise InputError(
            f"{len(absent)} ranked chunk ids are not in corpus.jsonl, e.g. {sorted(absent)[0]!r}", source=args.beir
        )
    contexts = {}
    for q in ids:
        hits = [Hit(d, text=collection.corpus[d].content) for d, _ in ranked.ranking(q)]
        contexts[q] = tuple(hits[: budget.cut(hits, count_tokens)])
    prompt = DEFAULT_PROMPT if args.prompt is None else _read(args.prompt)
    out = Path(args.out) if args.out else folder
    cache = Path(args.cache) if args.cache else out / "cache"
    questions = {q: collection.queries[q] for q in ids}
    from ..builtin.generator import generator_of

    with generator_of(args.generator, max_tokens=args.max_tokens) as generator:
        answers = generate_answers(generator, contexts, questions=questions, prompt=prompt, cache=cache)
    grades = answers.grade(references)
    judged = agreement = None
    files: dict[str, bytes] = {}
    if args.judge:
        log = cache / "answers.judgements.jsonl"
        judged, agreement = _judged(args.judge, answers, questions, references, grades, args.seed, log)
        if agreement is not None:
            text = json.dumps(agreement.to_dict(), indent=2, ensure_ascii=False) + "\n"
            files["judge_agreement.json"] = text.encode("utf-8")
    answered = report.with_answers(
        answers,
        references,
        questions=questions,
        run=pipeline["run"],
        stage=stage,
        judged=judged,
        agreement=agreement,
        replace=True,  # a pipeline answered again: its new answers replace its old ones, those of others are kept
    )  # the judge's verdicts beside the grades, per query (answers.csv) and summarised (report.md, the card)
    from ..renderers.result_folder import ANSWERS_FILE, add_answers

    path = add_answers(folder, answered, out=out, files=files) / ANSWERS_FILE
    means = grades.mean()
    say(
        visible(
            f"{len(ids)} queries of {pipeline['run']!r} / {stage!r} under {pipeline['budget']}, generator "
            f"{generator.name!r} ({answers.calls} calls, {answers.cache_hits} from the cache): answered "
            f"{len(ids) - grades.failed}, failed {grades.failed} (not graded); exact match {means['exact_match']:.3f}, "
            f"F1 {means['f1']:.3f}, contains {means['contains']:.3f} -> {path}"
        )
    )
    if judged is not None:
        say(visible(f"judge {judged.judge!r}: {judged.calls} calls, {judged.from_log} verdicts from {log}"))
    if agreement is not None:
        say(visible(agreement.describe()))
    if answers.failures:
        first, why = next(iter(answers.failures.items()))
        return incomplete(
            visible(
                f"{len(answers.failures)} queries have no answer (first {first!r}: {why}); a run again asks only them"
            )
        )
    if judged is not None and judged.failed:
        first, why = next(iter(judged.errors.items()))
        return incomplete(
            visible(f"the judge failed on {judged.failed} answers (first {first!r}: {why}): they have no verdict")
        )
    return 0


def _judged(
    spec: str, answers: Any, questions: dict[str, str], references: Any, grades: Any, seed: int, log: Path
) -> Any:
    """The judge's verdicts on the answers (0..1, reading the references; kept in and reused from ``log``) and
    their agreement with F1 >= 0.5."""
    from ..ground_truth.answer_judge import judge_answers
    from ..ground_truth.judging import load_judge
    from ..statistics.grader_agreement import answer_agreement

    log.parent.mkdir(parents=True, exist_ok=True)
    judged = judge_answers(load_judge(spec), answers, questions, references=references, log=log)
    if np.isnan(judged.grades).all():  # nothing to measure: said with the judge's failures, not bad input
        return judged, None
    return judged, answer_agreement(judged, grades, against="f1", seed=seed)


def _pipeline(report: Any, run: str | None, where: str) -> dict[str, Any]:
    card = report.card.pipeline
    if not card:
        raise InputError(
            "not a pipeline's result folder: its card records no pipeline (no delivered context)", source=where
        )
    every: list[dict[str, Any]] = card.get("all") or [card]
    if run is None:
        if len(every) > 1:
            raise InputError(
                f"the folder holds {len(every)} pipelines: name one with --run ({[p['run'] for p in every]})",
                source=where,
            )
        return every[0]
    for p in every:
        if p["run"] == run:
            return p
    raise InputError(f"no pipeline {run!r} in the folder ({[p['run'] for p in every]})", source=where)


def _budget(text: str, where: str) -> Any:
    from ..stages.budget import Budget

    found = re.fullmatch(r"budget\((\d+)(tok)?\)", text or "")
    if found is None:
        raise InputError(f"the card's budget {text!r} is not budget(N) or budget(Ntok)", source=where)
    return Budget.parse(int(found[1]) if not found[2] else f"{found[1]}tok")


def _references(path: str, field: str, id_field: str) -> ReferenceAnswers:
    from ..data.answers import ReferenceAnswers

    where = Path(path)
    if where.is_dir() or where.suffix == ".json":
        return ReferenceAnswers.from_squad(where)
    if where.suffix in (".csv", ".parquet"):
        import pandas as pd

        if not where.is_file():
            raise InputError("no such file", source=path)
        frame = (
            pd.read_csv(where, dtype=str, keep_default_na=False) if where.suffix == ".csv" else pd.read_parquet(where)
        )
        return ReferenceAnswers.from_frame(frame, column=field, id_column=id_field)
    return ReferenceAnswers.from_jsonl(where, field=field, id_field=id_field)


def _read(path: str) -> str:
    try:
        return Path(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the prompt: {exc}", source=path) from None
