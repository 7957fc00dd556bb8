"""``rag-eval demo``: the whole flow, offline, on a corpus every Python installation carries.

The corpus is the docstrings of ~36 standard-library modules (:mod:`rag_eval.builtin.corpus`); the questions are ones
Python users ask; the labels were made by pooling the top 10 of two pipelines for each question and judging every
pooled chunk 0-3 (``demo_data/pooling.json`` says which systems, depth and date). A labelled chunk whose local
docstring differs from the one judged (its text hash) counts as unjudged, and the demo says how many.

The demo runs ``bm25>>dense`` at depth 50 and budget 5, prints the stage-aware summary, and writes its report
folder (``./demo-report/`` by default); a second run reuses the caches in that folder.

Then a judge-assisted run beside the human one (:func:`judge_assisted_run`): as if people had graded only
:data:`DEMO_HUMAN_SAMPLE` questions drawn at random, the weak built-in MiniLM judge (fitted, cross-fitted, on those
questions' labels alone) grades the whole labelling pool, and prediction-powered (PPI++) intervals over all 56
questions stand beside the human-only interval of the sample, the naive judge-only one, and the mean under every
label, which the demo, having them all, can show as the reference.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import sys
import time
import warnings
from importlib import resources
from pathlib import Path

from .._escape import markdown_code
from .._files import all_or_none, atomic_write, output_error, write_output
from .._version import __version__
from ..data.collection import Collection
from ..data.qrels import Qrels
from ..errors import LowJudgedShare
from .corpus import build_corpus, text_hash

DEMO_PIPELINE = "bm25>>dense"
DEMO_DEPTH = 50
DEMO_BUDGET = 5
DEMO_EFFECT = 0.02  # the difference in recall@budget the "How many questions" paragraph asks about
DEMO_HUMAN_SAMPLE = 20  # the questions the judge-assisted run takes people to have graded (drawn uniformly)
DEMO_SEED = 0  # the seed of that draw
DEMO_JUDGED_METRICS = ("recall@budget", "ndcg@budget")  # what the judge-assisted table estimates


def _data(name: str) -> str:
    return resources.files("rag_eval.builtin").joinpath("demo_data", name).read_text(encoding="utf-8")


def questions() -> dict[str, str]:
    records = (json.loads(line) for line in _data("questions.jsonl").splitlines() if line.strip())
    return {r["_id"]: r["text"] for r in records}


def labels() -> list[dict]:
    """Every judgement: query id, chunk id, grade, and the hash of the chunk text that was judged."""
    rows = []
    for line in _data("labels.tsv").splitlines()[1:]:
        if line.strip():
            query_id, chunk_id, grade, judged_hash = line.split("\t")
            rows.append({"query_id": query_id, "chunk_id": chunk_id, "grade": int(grade), "text_hash": judged_hash})
    return rows


def demo_collection() -> tuple[Collection, dict[str, int]]:
    """The corpus built from this Python's docstrings, the questions, and the labels that still apply here.

    Returns the collection and counts: judgements kept, and those whose chunk text differs here (or whose chunk
    is gone), which count as unjudged.
    """
    corpus = build_corpus()
    judged: dict[str, dict[str, int]] = {}
    kept = changed = 0
    for row in labels():
        chunk = corpus.get(row["chunk_id"])
        if chunk is None or text_hash(chunk.text) != row["text_hash"]:
            changed += 1
            continue
        judged.setdefault(row["query_id"], {})[row["chunk_id"]] = row["grade"]
        kept += 1
    asked = questions()
    qrels = Qrels.from_dict({q: judged.get(q, {}) for q in asked})
    return Collection("python-stdlib-docs", corpus, asked, qrels), {"kept": kept, "changed": changed}


def pool(depth: int = 10, systems: tuple[str, ...] = ("bm25", "dense"), cache_dir: str | None = None) -> list[dict]:
    """The labelling pool: for each question, the union of the top ``depth`` chunks of each system, with texts.
    (How ``demo_data/labels.tsv`` was made; rerun it to relabel after the corpus changes.)"""
    from .pipelines import BATCH_SIZE, Parts, build

    corpus = build_corpus()
    collection = Collection("python-stdlib-docs", corpus, questions(), Qrels.from_dict({}))
    parts = Parts(collection, cache_dir)
    pooled: dict[str, dict[str, None]] = {q: {} for q in collection.queries}
    for system in systems:
        pipeline = build(system, collection, depth=depth, budget=depth, parts=parts)
        result = pipeline.run(collection.queries, progress=False, batch_size=BATCH_SIZE)
        final = result.stages[result.final_stage]
        offsets, hits = final.hit_columns()  # a failed query owns no hits
        docs, o = hits.field("doc_id").to_pylist(), offsets.tolist()
        for i, q in enumerate(final.query_ids):
            pooled[q].update(dict.fromkeys(docs[o[i] : min(o[i + 1], o[i] + depth)]))
    return [
        {
            "query_id": q,
            "question": collection.queries[q],
            "candidates": [
                {
                    "chunk_id": d,
                    "title": corpus[d].title,
                    "text": corpus[d].text,
                    "text_hash": text_hash(corpus[d].text),
                }
                for d in ids
            ],
        }
        for q, ids in pooled.items()
    ]


def judge_assisted_run(collection: Collection, result, parts, out: Path) -> tuple[str, dict[str, str]]:
    """The judge-assisted run beside the human one (see the module's doc): returns the text printed and the facts
    for report.md. The labelling pool is rebuilt as the labels were made (bm25 and dense, top 10 each: exactly the
    labelled pairs); the judge's grades go to ``out/judge.judgements.jsonl``, so that a second demo run asks the
    judge nothing (the judging run resumes from its log)."""
    from ..ground_truth import check_complete, draw_human_sample, judge, judge_agreement, merge
    from ..ground_truth import pool as make_pool
    from ..reports import evaluate
    from ..statistics import judge_assisted
    from .judge import minilm_judge
    from .pipelines import BATCH_SIZE, build

    systems = {
        name: build(name, collection, depth=10, budget=10, parts=parts).run(
            collection.queries, cache=out / "cache" / "stages", progress=False, batch_size=BATCH_SIZE
        )
        for name in ("bm25", "dense")
    }
    labelling_pool = make_pool(systems, depth=10)
    sample = draw_human_sample(sorted(collection.queries), DEMO_HUMAN_SAMPLE, seed=DEMO_SEED)
    human = Qrels.from_dict({q: collection.qrels[q] for q in sample.query_ids})
    check_complete(sample, labelling_pool, human)  # every pooled chunk of a sampled question has a person's grade
    grader = minilm_judge(human, queries=collection.queries, texts=labelling_pool, seed=DEMO_SEED)
    log = out / "judge.judgements.jsonl"
    judged = judge(labelling_pool, grader, log=log, progress=False)
    judge_qrels = merge(None, log).qrels  # the judge's grades alone, every pooled pair of every question
    agreement = judge_agreement(
        human,
        {q: dict(judge_qrels[q]) for q in sample.query_ids},
        names=("people", grader.name),
        warn=False,  # weak by design: said in the text below, not as a warning
    )
    pipelines = {DEMO_PIPELINE: result}
    # the same pipeline measured again, under other qrels, for the estimates: the demo's report has said its judged
    # share once (one line per report, as the README promises); these passes say it on their cards, not again
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowJudgedShare)
        judge_report = evaluate(judge_qrels, pipelines, list(DEMO_JUDGED_METRICS)).with_judge_agreement(agreement)
        human_report = evaluate(human, pipelines, list(DEMO_JUDGED_METRICS))
        full_report = evaluate(collection.qrels, pipelines, list(DEMO_JUDGED_METRICS))
    estimates = judge_assisted(judge_report, human_report, sample=sample)
    rows = []
    for row in estimates.table.itertuples():
        stage = str(row.system).split("/", 1)[1]
        reference = full_report.mean(DEMO_PIPELINE, str(row.metric), stage)
        rows.append(
            f"  {stage:<14} {row.metric:<14} {reference:6.3f}"
            f"   {row.estimate:6.3f} [{row.ci_low:.3f}, {row.ci_high:.3f}]"
            f"   {row.human_mean:6.3f} [{row.human_ci_low:.3f}, {row.human_ci_high:.3f}]"
            f"   {row.judge_mean:6.3f} [{row.judge_ci_low:.3f}, {row.judge_ci_high:.3f}]"
        )
    n_all = len(collection.queries)
    lines = [
        f"Judge-assisted: as if people had graded {len(sample)} of the {n_all} questions (drawn at random, seed "
        f"{DEMO_SEED}), the weak MiniLM judge graded all {len(labelling_pool)} pooled chunks ({judged.summary()}).",
        f"  its agreement with people on the {agreement.n} chunks both graded: quadratic-weighted kappa "
        f"{_shown(agreement.weighted_kappa)}, Krippendorff's alpha {_shown(agreement.alpha)} (weak, as documented)",
        f"  {'stage':<14} {'metric':<14} {'all ' + str(n_all):>6}   {'PPI++ (95% CI)':<22}   "
        f"{'people only, ' + str(len(sample)):<22}   judge only (naive)",
        *rows,
        f"  'all {n_all}' is the mean under every label (the demo has them all); PPI++ uses the judge on every "
        f"question and people on the {len(sample)}, and stays unbiased under the judge's errors; the naive "
        "judge-only interval does not.",
    ]
    first = estimates.table.iloc[0]
    facts = {
        "judge-assisted": (
            f"people on {len(sample)} of {n_all} questions (seed {DEMO_SEED}) + the weak MiniLM judge on all "
            f"{len(labelling_pool)} pooled chunks (weighted kappa {_shown(agreement.weighted_kappa)}): "
            f"{first['metric']} of {first['system']} by PPI++ {first['estimate']:.3f} "
            f"[{first['ci_low']:.3f}, {first['ci_high']:.3f}], people only [{first['human_ci_low']:.3f}, "
            f"{first['human_ci_high']:.3f}]"
        )
    }
    shown = "\n\n".join(["\n".join(lines), estimates.render(), agreement.render(), judge_report.card.render()])
    write_output(out / "judge-assisted.md", ("# Judge-assisted estimates\n\n" + markdown_code(shown)).encode("utf-8"))
    return "\n".join(lines), facts


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def how_many_questions(report) -> str:
    """The demo's "How many questions" paragraph: from its report, the minimum detectable difference in
    recall@budget between the first stage and the reranker at the report's number of questions, and the questions
    needed to detect a difference of ``DEMO_EFFECT`` (:func:`rag_eval.power`, paired t-test, one comparison)."""
    from ..statistics import power

    first, reranker = report.stages[0], report.stages[-1]
    try:
        analysis = power(
            report,
            baseline=first,
            system=reranker,
            metric="recall@budget",
            effect=DEMO_EFFECT,
            method="t",
            comparisons=1,
        )
    except ValueError as error:
        return f"How many questions: no power analysis of recall@budget ({error})."
    needed = analysis.queries_needed
    return (
        f"How many questions: with the paired t-test at alpha {analysis.alpha:g} and power {analysis.power:g}, "
        f"{analysis.n} questions detect a difference in recall@budget between {first} and {reranker} of "
        f"{analysis.minimum_detectable_difference:.3f} or more (sd of the per-question differences "
        f"{analysis.sd:.3f}); detecting {DEMO_EFFECT:g} would take "
        + (f"{needed} questions." if needed is not None else "more questions than can be searched.")
    )


def _can_write(out: Path) -> None:
    """Write and remove a small file in ``out`` (made for it, and removed again if it was not there): an
    :class:`~rag_eval.errors.InputError` naming the file when it cannot be written."""
    made = [p for p in (out, *out.parents) if not p.exists()]
    probe = out / ".rag_eval-demo-write-check"
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write(probe, b"rag_eval demo: this folder can be written\n")
        probe.unlink()
    except OSError as exc:
        for folder in made:  # innermost first: only the folders made here, and only while empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise output_error(probe, exc) from exc


def main(argv: list[str] | None = None, *, prog: str = "rag-eval demo") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="Run the bundled demo: bm25>>dense on Python's own docs.")
    parser.add_argument("--out", default="demo-report", help="report folder (default ./demo-report)")
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    from ..reports import evaluate
    from .outputs import write_report_folder
    from .pipelines import BATCH_SIZE, Parts, build

    started = time.perf_counter()
    out = Path(args.out)
    cache = out / "cache"
    _can_write(out)  # a full disk or a read-only folder is said now, not after minutes of encoding
    collection, counts = demo_collection()
    print(
        f"corpus: {len(collection.corpus)} chunks from the docstrings of this Python's standard library; "
        f"{len(collection.queries)} questions",
        file=sys.stderr,
    )
    if counts["changed"]:
        print(
            f"{counts['changed']} of {counts['kept'] + counts['changed']} labelled chunks read differently in this "
            f"Python {platform.python_version()} than when judged: they count as unjudged",
            file=sys.stderr,
        )
    parts = Parts(collection, cache)
    pipeline = build(DEMO_PIPELINE, collection, depth=DEMO_DEPTH, budget=DEMO_BUDGET, parts=parts)
    result = pipeline.run(collection.queries, cache=cache / "stages", batch_size=BATCH_SIZE)
    report = evaluate(collection.qrels, {DEMO_PIPELINE: result})
    questions_paragraph = how_many_questions(report)
    out.mkdir(parents=True, exist_ok=True)
    with all_or_none():  # judge-assisted.md, the result folder and report.html: all of them or none (docs/cli.md)
        judged_paragraph, judged_facts = judge_assisted_run(collection, result, parts, out)
        wall = time.perf_counter() - started
        facts = {
            "collection": (
                f"{len(collection.corpus)} docstring chunks of {len(collection.queries)} questions' worth of stdlib"
            ),
            "pipeline": f"`{pipeline}`",
            "labels": (
                f"{counts['kept']} judgements apply here; {counts['changed']} judged chunks differ in this Python"
                " and count as unjudged"
            ),
            "machine": (
                f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
                f"rag_eval {__version__}"
            ),
            "date": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
            "wall time": f"{wall:.1f} s",
            "how many questions": questions_paragraph.removeprefix("How many questions: "),
            **judged_facts,
        }
        path = write_report_folder(
            out,
            report,
            {DEMO_PIPELINE: result},
            collection.qrels,
            title="rag_eval demo: bm25 >> MiniLM rerank on Python's docs",
            facts=facts,
            plots=not args.no_plots,
            collection=collection,
        )
        page = _html_page(out, report, result, collection, plots=not args.no_plots)
    from ..reports.funnel_text import funnel_of, funnel_text

    found = funnel_of(report)
    if found:  # the answer first: where the relevant items went, each stage's headline number; then the detail
        print(funnel_text(found))
    summary = report.summary
    print(
        summary[["stage", "metric", "mean", "ci_low", "ci_high", "n", "n_nan", "n_failed"]].to_string(
            index=False, float_format=lambda v: f"{v:.3f}"
        )
    )
    print(questions_paragraph)
    print(judged_paragraph)
    print(f"report: {path.resolve()}")
    if page is not None:
        print(f"html report: {page.resolve()}")
    return 0


def _html_page(out: Path, report, result, collection: Collection, *, plots: bool) -> Path | None:
    """``report.html`` beside report.md (rag_eval.renderers.html_report): the drill-down to the budget plus 10, with
    the chunks' texts; without the html extra (jinja2) a line on stderr says how to get it."""
    try:
        return report.to_html(
            out / "report.html",
            results={DEMO_PIPELINE: result},
            collection=collection,
            title="rag_eval demo: bm25 >> MiniLM rerank on Python's docs",
            plots=plots,
        )
    except ImportError as error:
        print(f"report.html not written: {error}", file=sys.stderr)
        return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
