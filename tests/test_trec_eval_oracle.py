"""rag_eval against the real trec_eval 10.0 (built from its source by the ``trec_eval_binary`` fixture), line for line.

240 seeded random qrels/run pairs full of the hard cases (score ties, grades -2..4, unjudged results, queries in
the qrels only and in the run only, runs of one document and of over 1,000, ids whose string order differs from
their numeric order, scores in scientific notation and spelled several ways, documents judged twice, a rank
column that disagrees with the scores, lines of several queries interleaved, tags that change from line to
line) are written as TREC files. For each of trec_eval's flag sets below, ``trec_eval -q -m ...`` prints every
per-query value and every ``all`` line of every measure rag_eval implements, at trec_eval's default cutoffs; rag_eval
reads the same files (``Qrels.from_trec``, ``Run.from_trec``), evaluates them in-process under
``conventions="trec_eval"`` with the flags' conventions, and prints them with its trec_eval formatter
(:func:`rag_eval.renderers.trec_eval.format_trec_eval`). The two printouts must be the same text, line for line.
A second trec_eval, built to print ``%.17g`` instead of ``%6.4f``, shows every value is the same double as
trec_eval's (per query and ``all``): rag_eval computes in trec_eval's order of operations. The same holds for nDCG
with a gain table, and, per query, under the default preset for the measures it defines as trec_eval does. A few
pairs also go through the command line (``rag-eval evaluate --format trec_eval --conventions trec_eval -q``).

Kept out of the generated data, because trec_eval cannot take it (see ../shared/ENVIRONMENT.md, checked again in
trec_eval's source):

- a query judged only with grades <= -2: trec_eval segfaults (``form_res_rels.c`` sizes its array of relevance
  levels by the largest grade, then negative). Every query has a grade of -1 or more;
- a first query (in string order) judged only -1: trec_eval asks for an array of 0 levels and quits. The first
  query (of the qrels, and of those also in the run) has a grade of 0 or more; later ones may be judged only -1;
- a document twice in one query of the run: trec_eval refuses it ("duplicate docs"; rag_eval keeps the first and
  warns, tested in tests/test_run.py). Run documents are distinct within a query;
- a document judged twice for one query: trec_eval refuses that too (``form_res_rels.c``), so rag_eval reads the
  qrels file *with* the repeated judgements (some with another grade: it keeps the first, with a
  ``DuplicateJudgement`` warning) and trec_eval is given the same file without the later repeats;
- a query judged but absent from the run under a flag set without ``-c``: trec_eval exits 4. Those qrels-only
  queries are then dropped from the qrels both sides are given (with ``-c`` both get them);
- comment lines (trec_eval reads a second comment line in a row of a qrels file as a query named ``#``), and
  numbers that trec_eval's atof/atol read otherwise than as plain decimals (``0x1p3``, ``inf``, ``1_0``, ``+2``):
  scores are plain decimals, with or without an exponent; grades are plain integers.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import shlex
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import rag_eval
import rag_eval.cli
from rag_eval.errors import DuplicateJudgement, NearMissIds, RagEvalWarning
from rag_eval.metrics import _kernels as K
from rag_eval.metrics.trec_eval_measures import trec_eval_metrics
from rag_eval.renderers.trec_eval import TREC_EVAL_FLAGS, TrecEvalLine, format_trec_eval, trec_eval_lines

from .conftest import ROOT

NUM_PAIRS = 240
CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)  # trec_eval's default cutoffs of P, recall, ndcg_cut, map_cut
TREC_MEASURES = [
    "runid",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "Rprec",
    "bpref",
    "recip_rank",
    "P",
    "recall",
    "ndcg",
    "ndcg_cut",
    "map_cut",
    "success",
]
METRICS = (
    ["num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "bpref", "recip_rank", "ndcg"]
    + [f"{name}_{k}" for name in ("P", "recall", "ndcg_cut", "map_cut") for k in CUTOFFS]
    + [f"success_{k}" for k in (1, 5, 10)]
)
FLAG_SETS = {
    "no flag": [],
    "-c": ["-c"],
    "-M 50": ["-M", "50"],
    "-l 2": ["-l", "2"],
    "-J": ["-J"],
    "-c -M 20 -l 2": ["-c", "-M", "20", "-l", "2"],
    "-J -M 20": ["-J", "-M", "20"],
    "-c -J -l 3": ["-c", "-J", "-l", "3"],
    "-M 1": ["-M", "1"],
}


def conventions_for(flags: list[str]) -> rag_eval.Conventions:
    """The trec_eval preset with the conventions trec_eval's flags stand for."""
    changes: dict[str, object] = {}
    for i, flag in enumerate(flags):
        if flag == "-c":
            changes["missing_run"] = "zero"
        elif flag == "-J":
            changes["unjudged"] = "remove"
        elif flag == "-M":
            changes["max_depth"] = int(flags[i + 1])
        elif flag == "-l":
            changes["relevance_threshold"] = int(flags[i + 1])
    return rag_eval.metrics.PRESETS["trec_eval"].replace(**changes)


# ----- the random hard data ---------------------------------------------------------------------------------------


@dataclass
class Pair:
    seed: int
    run_text: str
    qrels_lines: list[tuple[str, str, int]]  # (query, doc, grade) in file order, repeats included
    qrels_only: set[str]  # judged queries the run has no line for
    duplicated: bool


def _query_ids(rng: np.random.Generator, n: int) -> list[str]:
    """Ids whose string order is not their numeric order ("10" < "9", "q10" < "q9"), upper before lower case."""
    pool = [str(i) for i in (1, 2, 3, 7, 9, 10, 11, 20, 99, 100, 101, 250)]
    pool += [f"q{i}" for i in (1, 2, 9, 10, 12, 100)] + ["Q5", "Q50", "topic-7", "t.3", "q\u00e9"]
    return [str(x) for x in rng.choice(pool, size=n, replace=False)]


def _doc_ids(rng: np.random.Generator, n: int) -> list[str]:
    style = int(rng.integers(3))
    numbers = rng.choice(5000, size=n, replace=False)
    if style == 0:
        return [f"d{i}" for i in numbers]
    if style == 1:
        return [str(i) for i in numbers]
    return [f"{'D' if i % 3 else 'doc'}{i}" for i in numbers]


def _scores(rng: np.random.Generator, n: int) -> list[str]:
    """Scores as text: few distinct values (ties), scientific notation, doubles that differ in the last bits."""
    mode = int(rng.integers(6))
    if mode == 0:  # ties galore
        return [repr(float(v)) for v in rng.integers(0, 4, size=n) / 2]
    if mode == 1:  # one score for all
        return ["1"] * n
    if mode == 2:  # scientific notation, both cases of e, negative values and exponents
        values = rng.normal(size=n) * 10.0 ** rng.integers(-5, 5, size=n)
        return [f"{v:.3{'e' if i % 2 else 'E'}}" for i, v in enumerate(values)]
    if mode == 3:  # full precision
        return [repr(float(v)) for v in rng.random(n)]
    if mode == 4:  # values a few ulps apart, and spellings of one value
        base = ["0.3", "0.30000000000000004", "0.29999999999999999", "3e-1", "0.300", "0.30000000000000010"]
        return [str(rng.choice(base)) for _ in range(n)]
    return [str(int(v)) for v in rng.integers(-3, 3, size=n)]  # integers, ties


def make_pair(seed: int) -> Pair:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 13))
    qids = _query_ids(rng, n)
    roles = ["both"] + list(rng.choice(["both", "both", "both", "qrels_only", "run_only"], size=n - 1))
    long_query = rng.random() < 0.1
    judgements: dict[str, dict[str, int]] = {}
    rankings: dict[str, list[str]] = {}
    grade_sets = ([-2, -1, 0, 0, 1, 1, 1, 2, 2, 3, 4], [0, 0, 1], [-1, 0], [-1], [-2, -1, 0, 1], [1, 2, 3, 4])
    for i, (qid, role) in enumerate(zip(qids, roles)):
        size = int(rng.choice([1, 2, 5, 20, 60])) if not (long_query and i == 0) else 300
        docs = _doc_ids(rng, size + int(rng.integers(1, 40)) + (1200 if long_query and i == 0 else 0))
        if role != "run_only":
            choices = grade_sets[int(rng.integers(len(grade_sets)))]
            grades = [int(g) for g in rng.choice(choices, size=size)]
            if max(grades) <= -2:  # trec_eval segfaults on a query judged only <= -2
                grades[0] = -1
            if seed % 10 == 3 and i == 0:  # a grade above 9 (relstring's '>'; large linear gains), drawing nothing
                grades[-1] = 10 + seed % 7
            judgements[qid] = dict(zip(docs[:size], grades))
        if role != "qrels_only":
            long = long_query and i == 0
            length = int(rng.integers(1001, 1100)) if long else int(rng.choice([1, 1, 3, 10, 25, 120]))
            pool = docs[: max(length, 1)] if rng.random() < 0.3 else docs
            rankings[qid] = [str(d) for d in rng.choice(pool, size=min(length, len(pool)), replace=False)]
    # the first query trec_eval evaluates must have a grade >= 0, with or without the qrels-only queries
    covered = sorted(q for q in judgements if q in rankings)
    for first in {min(judgements), covered[0]}:
        if max(judgements[first].values()) < 0:
            doc = next(iter(judgements[first]))
            judgements[first][doc] = int(rng.integers(0, 3))
    lines = []
    tags = ["runA", "run-B", "STANDARD"]
    for qid, docs in rankings.items():
        scores = _scores(rng, len(docs))
        ranks = rng.permutation(len(docs)) + 1 if rng.random() < 0.5 else np.ones(len(docs), int)
        for doc, score, rank in zip(docs, scores, ranks):
            sep = "\t" if rng.random() < 0.1 else " "
            extra = " extra" if rng.random() < 0.02 else ""
            lines.append(
                sep.join([qid, str(rng.choice(["Q0", "0"])), doc, str(rank), score, str(rng.choice(tags))]) + extra
            )
    if rng.random() < 0.7:  # queries interleaved
        lines = [lines[i] for i in rng.permutation(len(lines))]
    qrels_lines = [(q, d, g) for q, judged in judgements.items() for d, g in judged.items()]
    qrels_lines = [qrels_lines[i] for i in rng.permutation(len(qrels_lines))]
    duplicated = rng.random() < 0.3
    if duplicated:  # judged twice: some with the same grade, some with another
        for j in rng.choice(len(qrels_lines), size=min(3, len(qrels_lines)), replace=False):
            q, d, g = qrels_lines[int(j)]
            again = g if rng.random() < 0.5 else int(rng.integers(-1, 5))
            qrels_lines.insert(int(rng.integers(int(j) + 1, len(qrels_lines) + 1)), (q, d, again))
    return Pair(seed, "".join(line + "\n" for line in lines), qrels_lines, set(judgements) - set(rankings), duplicated)


def _qrels_text(lines: list[tuple[str, str, int]], *, drop: set[str], dedupe: bool) -> str:
    seen: set[tuple[str, str]] = set()
    out = []
    for q, d, g in lines:
        if q in drop or (dedupe and (q, d) in seen):
            continue
        seen.add((q, d))
        out.append(f"{q} {'0' if len(out) % 2 else 'Q0'} {d} {g}\n")
    return "".join(out)


@dataclass
class Files:
    pair: Pair
    run: Path
    qrels: dict[bool, Path]  # with -c (every judged query) or without (those in the run): what rag_eval reads
    trec_qrels: dict[bool, Path]  # the same without the repeated judgements, for trec_eval


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> list[Files]:
    folder = tmp_path_factory.mktemp("oracle")
    out = []
    for seed in range(NUM_PAIRS):
        pair = make_pair(seed)
        base = folder / f"pair{seed:03d}"
        run = base.with_suffix(".run")
        run.write_text(pair.run_text, encoding="utf-8")
        qrels, trec_qrels = {}, {}
        for complete in (True, False):
            drop = set() if complete else pair.qrels_only
            suffix = "c" if complete else "nc"
            qrels[complete] = base.with_name(f"{base.name}.{suffix}.qrels")
            qrels[complete].write_text(_qrels_text(pair.qrels_lines, drop=drop, dedupe=False), encoding="utf-8")
            trec_qrels[complete] = base.with_name(f"{base.name}.{suffix}.dedup.qrels")
            trec_qrels[complete].write_text(_qrels_text(pair.qrels_lines, drop=drop, dedupe=True), encoding="utf-8")
        out.append(Files(pair, run, qrels, trec_qrels))
    return out


def test_the_data_has_every_hard_case(pairs):
    """The generator really makes what the module's docstring promises (or the comparison proves less)."""
    runs = [f.pair.run_text for f in pairs]
    lengths = [max(np.unique([line.split()[0] for line in text.splitlines()], return_counts=True)[1]) for text in runs]
    assert len(pairs) >= 200
    assert sum(f.pair.duplicated for f in pairs) >= 40
    assert sum(bool(f.pair.qrels_only) for f in pairs) >= 40
    assert sum(length > 1000 for length in lengths) >= 10
    assert sum("E+" in text or "e-" in text for text in runs) >= 40
    grades = {g for f in pairs for _, _, g in f.pair.qrels_lines}
    assert {-2, -1, 0, 1, 2, 3, 4} < grades and max(grades) > 9


def test_the_data_has_what_every_trec_eval_measure_needs(pairs):
    """For all_trec's measures: results judged -1 (pooled but unjudged: infAP, relstring's '.', unj) and judged
    <= -2 (relstring's '<'), queries judged only -1 or only non-relevant, rankings that -J empties (every result
    unjudged) or -c supplies empty (qrels-only queries), and score ties."""
    counts = dict.fromkeys(
        ["-1 retrieved", "<= -2 retrieved", "> 9 retrieved", "no relevant", "only -1", "-J empties", "ties"], 0
    )
    for files in pairs:
        judged: dict[str, dict[str, int]] = {}
        for q, d, g in files.pair.qrels_lines:
            judged.setdefault(q, {}).setdefault(d, g)
        ranked: dict[str, list[tuple[str, str]]] = {}
        for line in files.pair.run_text.splitlines():
            fields = line.split()
            ranked.setdefault(fields[0], []).append((fields[2], fields[4]))
        retrieved = [judged.get(q, {}).get(d) for q, results in ranked.items() for d, _ in results]
        counts["-1 retrieved"] += -1 in retrieved
        counts["<= -2 retrieved"] += -2 in retrieved
        counts["> 9 retrieved"] += any(g is not None and g > 9 for g in retrieved)
        counts["no relevant"] += any(q in ranked and max(grades.values()) < 1 for q, grades in judged.items())
        counts["only -1"] += any(set(grades.values()) == {-1} for grades in judged.values())
        counts["-J empties"] += any(
            q in judged and all(judged[q].get(d, -1) < 0 for d, _ in results) for q, results in ranked.items()
        )
        counts["ties"] += any(len({s for _, s in results}) < len(results) for results in ranked.values())
    assert min(counts.values()) >= 5 and counts["-1 retrieved"] >= 100 and counts["no relevant"] >= 100, counts


# ----- the two sides ------------------------------------------------------------------------------------------------


def trec_eval_output(binary: Path, flags: list[str], qrels: Path, run: Path) -> str:
    args = [str(binary), "-q", *flags]
    for measure in TREC_MEASURES:
        args += ["-m", measure]
    done = subprocess.run([*args, str(qrels), str(run)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"trec_eval {' '.join(args[1:])} {qrels} {run}: exit {done.returncode}: {done.stderr}"
    return done.stdout


@cache
def _read(qrels: Path, run: Path) -> tuple[rag_eval.Qrels, rag_eval.Run]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DuplicateJudgement)  # the repeated judgements, on purpose
        return rag_eval.Qrels.from_trec(qrels), rag_eval.Run.from_trec(run)


def rag_eval_report(flags: list[str], qrels_path: Path, run_path: Path) -> tuple[str, list[TrecEvalLine]]:
    """rag_eval's printout of the pair in trec_eval's format, and the same lines at full precision."""
    qrels, run = _read(qrels_path, run_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NearMissIds)  # "d7" in the run vs "D7" judged: rightly warned, kept apart
        report = rag_eval.evaluate(qrels, {"run": run}, METRICS, conventions=conventions_for(flags), judged_threshold=0)
    printed = format_trec_eval(report, qrels=qrels, runs={"run": run}, per_query=True)
    return printed, trec_eval_lines(report, qrels=qrels, runs={"run": run}, per_query=True)


def bit_differences(exact: str, ours: list[TrecEvalLine], label: str) -> list[str]:
    """Values that are not the same double as trec_eval's (printed with %.17g, which tells every double apart)."""
    theirs = {(p[0].strip(), p[1]): p[2] for p in (line.split("\t") for line in exact.splitlines())}
    out = []
    for line in ours:
        value = theirs.get((line.measure, line.query_id))
        if isinstance(line.value, str):
            same = value == line.value
        else:  # trec_eval's 0/0 (-J emptying a ranking) is NaN: printed -nan, any NaN of rag_eval's is the same
            same = value is not None and (
                float(value) == line.value or (math.isnan(float(value)) and math.isnan(line.value))
            )
        if not same:
            out.append(f"{label}: {line.measure} {line.query_id}: trec_eval {value}, rag_eval {line.value!r}")
    if len(ours) != len(theirs):
        out.append(f"{label}: trec_eval prints {len(theirs)} lines, rag_eval {len(ours)}")
    return out


def differences(expected: str, ours: str, label: str) -> list[str]:
    """Readable differences between two printouts, by (measure, query), then by line order."""
    if expected == ours:
        return []

    def by_key(text: str) -> dict[tuple[str, str], str]:
        return {(p[0].strip(), p[1]): p[2] for p in (line.split("\t") for line in text.splitlines())}

    theirs, mine = by_key(expected), by_key(ours)
    out = [
        f"{label}: {m} {q}: trec_eval {theirs.get((m, q))!r}, rag_eval {mine.get((m, q))!r}"
        for m, q in sorted(set(theirs) | set(mine))
        if theirs.get((m, q)) != mine.get((m, q))
    ]
    return out or [f"{label}: the same lines in another order"]


def _id(flag_set: str) -> str:
    """A test id that ``-k`` can select: "none", "c", "c_M_20_l_2", ..."""
    return flag_set.replace("-", "").replace(" ", "_") if FLAG_SETS[flag_set] else "none"


@pytest.mark.parametrize("flag_set", list(FLAG_SETS), ids=_id)
def test_every_line_agrees_with_trec_eval(trec_eval_binary, trec_eval_exact_binary, pairs, flag_set):
    """Every line as printed, and every value as the same double (trec_eval's order of operations)."""
    flags = FLAG_SETS[flag_set]
    complete = "-c" in flags
    printed: list[str] = []
    inexact: list[str] = []
    lines = all_lines = 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = [
            (
                pool.submit(trec_eval_output, trec_eval_binary, flags, f.trec_qrels[complete], f.run),
                pool.submit(trec_eval_output, trec_eval_exact_binary, flags, f.trec_qrels[complete], f.run),
            )
            for f in pairs
        ]
        for files, (expected, exact) in zip(pairs, jobs):
            text, ours = rag_eval_report(flags, files.qrels[complete], files.run)
            label = f"pair {files.pair.seed} [{flag_set}]"
            theirs = expected.result()
            printed += differences(theirs, text, label)
            inexact += bit_differences(exact.result(), ours, label)
            lines += theirs.count("\n")
            all_lines += theirs.count("\tall\t")
    assert not printed, f"{len(printed)} printed lines differ, e.g.:\n" + "\n".join(printed[:25])
    assert not inexact, f"{len(inexact)} values are not trec_eval's double, e.g.:\n" + "\n".join(inexact[:25])
    assert all_lines == len(pairs) * (len(METRICS) + 2)  # every measure's all line, with runid and num_q
    assert lines > all_lines + len(pairs) * len(METRICS)  # and at least one query's values in every pair


def test_a_gain_table_gives_trec_eval_values(trec_eval_exact_binary, pairs):
    """nDCG with trec_eval's gain table (``-m ndcg.1=3,2=9,4=4.5``, rag_eval's ``ndcg(gains=1:3;2:9;4:4.5)``), every
    flag set, every value as the same double: the gains scaled per query by a power of two change no bit."""
    problems: list[str] = []
    compared = 0
    for flag_set, flags in FLAG_SETS.items():
        complete = "-c" in flags
        with ThreadPoolExecutor(max_workers=2) as pool:
            jobs = [
                pool.submit(
                    subprocess.run,
                    [
                        str(trec_eval_exact_binary),
                        "-q",
                        *flags,
                        "-m",
                        "runid",
                        "-m",
                        "num_q",
                        "-m",
                        "ndcg.1=3,2=9,4=4.5",
                        str(f.trec_qrels[complete]),
                        str(f.run),
                    ],
                    capture_output=True,
                    text=True,
                )
                for f in pairs
            ]
            for files, job in zip(pairs, jobs):
                qrels, run = _read(files.qrels[complete], files.run)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", NearMissIds)
                    report = rag_eval.evaluate(
                        qrels,
                        {"run": run},
                        ["ndcg(gains=1:3;2:9;4:4.5)"],
                        conventions=conventions_for(flags),
                        judged_threshold=0,
                    )
                ours = trec_eval_lines(report, qrels=qrels, runs={"run": run}, per_query=True)
                compared += len(ours)
                problems += bit_differences(job.result().stdout, ours, f"pair {files.pair.seed} [{flag_set}]")
    assert compared > 10_000 and not problems, f"{len(problems)} differ, e.g.:\n" + "\n".join(problems[:25])


CLI_PAIRS = (3, 17, 42, 101)  # ~0.5 s a start


@pytest.mark.parametrize("flag_set", ["-c -M 20 -l 2", "-J -M 20"], ids=_id)
def test_the_command_line_prints_what_trec_eval_prints(trec_eval_binary, pairs, flag_set):
    flags = FLAG_SETS[flag_set]
    complete = "-c" in flags
    problems = []
    for seed in CLI_PAIRS:
        files = pairs[seed]
        args = [
            sys.executable,
            "-m",
            "rag_eval.cli",
            "evaluate",
            str(files.qrels[complete]),
            str(files.run),
            "--format",
            "trec_eval",
            "--conventions",
            "trec_eval",
            "-q",
            "--no-card",
            *flags,
        ]
        for metric in ["runid", "num_q", *METRICS]:  # runid and num_q are printed when asked, as trec_eval does
            args += ["-m", metric]
        done = subprocess.run(
            args, capture_output=True, text=True, cwd=ROOT, timeout=120, env=os.environ | {"PYTHONWARNINGS": "ignore"}
        )
        assert done.returncode == 0, done.stderr
        expected = trec_eval_output(trec_eval_binary, flags, files.trec_qrels[complete], files.run)
        problems += differences(expected, done.stdout, f"pair {seed} [{flag_set}] via the CLI")
    assert not problems, "\n".join(problems[:25])


# ----- every measure of -m all_trec, with trec_eval's parameters, through the command line ---------------------

# The measure lists the command line (and trec_eval) is given, as -m arguments: all_trec at its defaults; all_trec
# with every parameterised family given parameters of its own (a -m with parameters replaces the family's default
# ones; with -c, trec_eval resets a missing query's utility, relstring and rbp_resid only under their plain names);
# and the gain tables of the measures that take one (G, ndcg_rel, Rndcg, rbp: gains above 1, which rbp rescales to
# [0, 1]; a gain for grade 0), with utility's 4th weight (trec_eval without -N: a collection of 0 documents).
MEASURE_LISTS = {
    "all_trec": ["all_trec"],
    "params": [
        "all_trec",
        "P.5,7,3",
        "iprec_at_recall..10,.20",
        "Rprec_mult.5.0,0.2",
        "utility.2,-1,0,0",
        "11pt_avg..25,.5,.75",
        "ndcg.1=3,2=9",
        "rbp.p=0.5",
        "relstring.20",
        "recall.20,2000",
        "success.2,5,20",
        "ndcg_cut.3,20",
        "map_cut.2,50",
        "relative_P.2,7",
        "unj.1,3",
        "set_F.0.5",
        "rbp_resid.p=0.95",
    ],
    "gains": [
        "runid",
        "num_q",
        "G.1=2,2=5",
        "ndcg_rel.1=0.5,3=7",
        "Rndcg.2=4,4=1",
        "rbp.p=0.95,1=1,2=4",
        "ndcg.0=1,2=3",
        "utility.2,-1,0,0.5",
    ],
}
# which pairs each list runs on, under every flag set: all_trec on all of them, the others on a share (time)
MEASURE_PAIRS = {"all_trec": slice(None), "params": slice(0, None, 2), "gains": slice(1, None, 4)}


def _m_args(measures: list[str]) -> list[str]:
    return [arg for m in measures for arg in ("-m", m)]


def trec_eval_measures_output(
    binary: Path, flags: list[str], measures: list[str], qrels: Path, run: Path, *, per_query: bool = True
) -> str:
    args = [str(binary), *(["-q"] if per_query else []), *flags, *_m_args(measures), str(qrels), str(run)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{shlex.join(args)}: exit {done.returncode}: {done.stderr}"
    return done.stdout


def cli_output(flags: list[str], measures: list[str], qrels: Path, run: Path, *, per_query: bool = True) -> str:
    """``rag-eval evaluate QRELS RUN --format trec_eval --conventions trec_eval -q FLAGS -m ...``, in-process (a
    subprocess costs ~0.5 s a start; one pair in a subprocess is checked below)."""
    argv = [
        "evaluate",
        str(qrels),
        str(run),
        "--format",
        "trec_eval",
        "--conventions",
        "trec_eval",
        *(["-q"] if per_query else []),
        "--no-card",
        *flags,
        *_m_args(measures),
    ]
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        warnings.simplefilter("default", RagEvalWarning)  # the CLI prints them on stderr: rightly warned here
        code = rag_eval.cli.main(argv)
    assert code == 0, f"rag-eval {shlex.join(argv)}: exit {code}: {err.getvalue().strip()}"
    return out.getvalue()


def _by_measure(problems: list[tuple[str, str]]) -> str:
    """The differing lines counted by measure, with the first example of each."""
    counts: dict[str, list[str]] = {}
    for measure, text in problems:
        counts.setdefault(measure, []).append(text)
    return "\n".join(
        f"{measure}: {len(texts)} lines differ, e.g. {texts[0]}"
        for measure, texts in sorted(counts.items(), key=lambda kv: -len(kv[1]))
    )


def printout_differences(expected: str, ours: str, label: str) -> list[tuple[str, str]]:
    """(measure, description) of each (measure, query) whose printed value differs, or one ("<order>", ...) when
    the same lines come in another order."""
    if expected == ours:
        return []

    def by_key(text: str) -> dict[tuple[str, str], str]:
        return {(p[0].strip(), p[1]): p[2] for p in (line.split("\t") for line in text.splitlines())}

    theirs, mine = by_key(expected), by_key(ours)
    out = [
        (m, f"{label}: {m} {q}: trec_eval {theirs.get((m, q))!r}, rag_eval {mine.get((m, q))!r}")
        for m, q in sorted(set(theirs) | set(mine))
        if theirs.get((m, q)) != mine.get((m, q))
    ]
    if not out:
        first = next(i for i, (a, b) in enumerate(zip(expected.splitlines(), ours.splitlines())) if a != b)
        out = [
            (
                "<order>",
                f"{label}: the same lines in another order, first at line {first + 1}: trec_eval "
                f"{expected.splitlines()[first]!r}, rag_eval {ours.splitlines()[first]!r}",
            )
        ]
    return out


@pytest.mark.parametrize("measures", list(MEASURE_LISTS))
@pytest.mark.parametrize("flag_set", list(FLAG_SETS), ids=_id)
def test_every_trec_eval_measure_prints_as_trec_eval_prints_it(trec_eval_binary, pairs, flag_set, measures):
    """``rag-eval evaluate --format trec_eval --conventions trec_eval -q FLAGS -m all_trec ...`` prints what
    ``trec_eval -q FLAGS -m all_trec ...`` prints, line for line, on the random pairs (grade -1 judgements
    retrieved and not, ties, queries judged only -1 or 0, rankings emptied by -c or cut by -M)."""
    flags, arguments = FLAG_SETS[flag_set], MEASURE_LISTS[measures]
    complete = "-c" in flags
    chosen = pairs[MEASURE_PAIRS[measures]]
    problems: list[tuple[str, str]] = []
    lines = 0
    with ThreadPoolExecutor(max_workers=1) as pool:
        jobs = [
            pool.submit(trec_eval_measures_output, trec_eval_binary, flags, arguments, f.trec_qrels[complete], f.run)
            for f in chosen
        ]
        for files, job in zip(chosen, jobs):
            ours = cli_output(flags, arguments, files.qrels[complete], files.run)
            theirs = job.result()
            problems += printout_differences(theirs, ours, f"pair {files.pair.seed} [{flag_set}]")
            lines += theirs.count("\n")
    assert not problems, f"{len(problems)} printed lines differ (-m {' -m '.join(arguments)}):\n" + _by_measure(
        problems
    )
    assert lines > len(chosen) * (40 if measures != "gains" else 8)  # every measure's lines, most queries'


def test_without_q_only_the_all_lines_print_as_trec_eval_prints_them(trec_eval_binary, pairs):
    """``-m all_trec`` without ``-q`` (runid, num_q and the all lines), every flag set, a share of the pairs."""
    problems: list[tuple[str, str]] = []
    for flag_set, flags in FLAG_SETS.items():
        complete = "-c" in flags
        for files in pairs[5::12]:
            theirs = trec_eval_measures_output(
                trec_eval_binary, flags, ["all_trec"], files.trec_qrels[complete], files.run, per_query=False
            )
            ours = cli_output(flags, ["all_trec"], files.qrels[complete], files.run, per_query=False)
            assert "\tall\t" in theirs and all("\tall\t" in line for line in theirs.splitlines())
            problems += printout_differences(theirs, ours, f"pair {files.pair.seed} [{flag_set}]")
    assert not problems, _by_measure(problems)


@pytest.mark.parametrize("flag_set", list(FLAG_SETS), ids=_id)
def test_every_trec_eval_measure_is_trec_eval_s_double(trec_eval_exact_binary, pairs, flag_set):
    """Every value of every measure of all_trec (and the parameterised ones), per query and all, is the same double
    as trec_eval's (printed with %.17g): the printed agreement above is not luck in the fourth decimal. On a share
    of the pairs, through the API (``trec_eval_metrics`` and ``trec_eval_lines`` with ``metrics=``)."""
    flags, arguments = FLAG_SETS[flag_set], MEASURE_LISTS["params"]
    complete = "-c" in flags
    metrics = trec_eval_metrics(arguments)
    problems: list[str] = []
    compared = 0
    chosen = pairs[::8]
    with ThreadPoolExecutor(max_workers=1) as pool:
        jobs = [
            pool.submit(
                trec_eval_measures_output, trec_eval_exact_binary, flags, arguments, f.trec_qrels[complete], f.run
            )
            for f in chosen
        ]
        for files, job in zip(chosen, jobs):
            qrels, run = _read(files.qrels[complete], files.run)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", NearMissIds)
                report = rag_eval.evaluate(
                    qrels, {"run": run}, metrics, conventions=conventions_for(flags), judged_threshold=0
                )
            ours = trec_eval_lines(report, qrels=qrels, runs={"run": run}, per_query=True, metrics=metrics)
            compared += len(ours)
            problems += bit_differences(job.result(), ours, f"pair {files.pair.seed} [{flag_set}]")
    by_measure = [(p.split(": ")[1].split()[0], p) for p in problems]
    assert compared > 5_000 and not problems, f"{len(problems)} values differ:\n" + _by_measure(by_measure)


def test_all_trec_in_a_subprocess_prints_what_trec_eval_prints(trec_eval_binary, pairs):
    """One pair through the real command (``python -m rag_eval.cli``), as a user runs it."""
    files, flags = pairs[42], FLAG_SETS["-c -M 20 -l 2"]
    args = [
        sys.executable,
        "-m",
        "rag_eval.cli",
        "evaluate",
        str(files.qrels[True]),
        str(files.run),
        "--format",
        "trec_eval",
        "--conventions",
        "trec_eval",
        "-q",
        "--no-card",
        *flags,
        *_m_args(MEASURE_LISTS["params"]),
    ]
    done = subprocess.run(
        args, capture_output=True, text=True, cwd=ROOT, timeout=120, env=os.environ | {"PYTHONWARNINGS": "ignore"}
    )
    assert done.returncode == 0, done.stderr
    expected = trec_eval_measures_output(
        trec_eval_binary, flags, MEASURE_LISTS["params"], files.trec_qrels[True], files.run
    )
    assert not printout_differences(expected, done.stdout, "pair 42"), _by_measure(
        printout_differences(expected, done.stdout, "pair 42")
    )


# ----- the default preset: the same values per query, where its definitions are trec_eval's --------------------

# nDCG with linear gain (the default's is exponential); bpref left out (the default counts a grade below 0 as judged
# non-relevant, trec_eval as unjudged, which bpref and -J tell apart: those flag sets are left out too)
DEFAULT_METRICS = [
    "ndcg(gain=linear)" if m == "ndcg" else m.replace("ndcg_cut_", "ndcg(gain=linear)@")
    for m in METRICS
    if m != "bpref"
]


@pytest.mark.parametrize("flag_set", [f for f in FLAG_SETS if "-J" not in FLAG_SETS[f]], ids=_id)
def test_the_default_preset_gives_trec_eval_values_per_query(trec_eval_exact_binary, pairs, flag_set):
    """Under ``conventions="default"`` (with the flags' changes) every per-query value of a measure defined as
    trec_eval defines it is trec_eval's double; the all lines of means are the summary's (more exact) mean."""
    flags = FLAG_SETS[flag_set]
    complete = "-c" in flags
    conventions = rag_eval.Conventions().replace(
        **{k: v for k, v in conventions_for(flags).model_dump().items() if k in TREC_EVAL_FLAGS}
    )
    problems = []
    compared = 0
    for files in pairs[::3]:
        exact = trec_eval_output(trec_eval_exact_binary, flags, files.trec_qrels[complete], files.run)
        theirs = {
            (p[0].strip(), p[1]): float(p[2])
            for p in (line.split("\t") for line in exact.splitlines())
            if p[1] != "all"
        }
        qrels, run = _read(files.qrels[complete], files.run)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NearMissIds)
            report = rag_eval.evaluate(qrels, run, DEFAULT_METRICS, conventions=conventions, judged_threshold=0)
        lines = trec_eval_lines(report, qrels=qrels, runs={run.name: run}, per_query=True)
        summary = report.summary.set_index("metric")
        by_name = {m.trec_name: m for m in map(rag_eval.parse_metric, DEFAULT_METRICS)}
        for line in lines:
            metric = by_name.get(line.measure)
            if line.query_id != "all":
                compared += 1
                if theirs.get((line.measure, line.query_id)) != line.value:
                    problems.append(
                        f"pair {files.pair.seed} [{flag_set}] {line.measure} {line.query_id}: "
                        f"trec_eval {theirs.get((line.measure, line.query_id))!r}, rag_eval {line.value!r}"
                    )
            elif metric is not None and not metric.summed:
                assert line.value == summary.loc[str(metric), "mean"]
    assert compared > 10_000 and not problems, f"{len(problems)} differ, e.g.:\n" + "\n".join(problems[:25])


# ----- each way trec_eval accumulates, shown on a small input ------------------------------------------------------


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.fixture(scope="module")
def p20_over_1000_queries(tmp_path_factory) -> tuple[Path, Path]:
    """1,000 queries whose P_20 values add up to exactly 301.05 (mean 0.30105): added one by one in query order
    the double sum is 301.05000000000035 (mean 0.3010500000000004), which trec_eval prints 0.3011; the exact mean's
    nearest double is 0.30104999999999998, printed 0.3010."""
    rng = np.random.default_rng(0)
    hits = rng.integers(0, 21, size=1000)
    while hits.sum() != 6021:  # nudge to 6,021 relevant in the top 20s: 6021 / 20 / 1000 = 0.30105
        i = int(rng.integers(1000))
        hits[i] += 1 if hits.sum() < 6021 and hits[i] < 20 else (-1 if hits.sum() > 6021 and hits[i] > 0 else 0)
    folder = tmp_path_factory.mktemp("p20")
    qrels, run = [], []
    for i, k in enumerate(hits.tolist()):
        qrels += [f"q{i:04d} 0 d{j} {int(j < k)}" for j in range(max(k, 1))]
        run += [f"q{i:04d} Q0 d{j} {j + 1} {20 - j} t" for j in range(20)]
    return _write(folder / "qrels", qrels), _write(folder / "run", run)


def test_a_mean_is_added_in_query_order_as_trec_eval_does(p20_over_1000_queries):
    qrels_path, run_path = p20_over_1000_queries
    qrels, run = rag_eval.Qrels.from_trec(qrels_path), rag_eval.Run.from_trec(run_path)
    values = rag_eval.evaluate(qrels, run, ["P_20"], conventions="trec_eval").values(run.name, "P_20").to_numpy()
    assert math.fsum(values) == 301.05 and f"{math.fsum(values) / 1000:.4f}" == "0.3010"  # the exact mean
    trec = rag_eval.evaluate(qrels, run, ["P_20"], conventions="trec_eval")
    assert (
        format_trec_eval(trec, qrels=qrels, runs={run.name: run}).splitlines()[-1]
        == "P_20                  \tall\t0.3011"
    )
    # the summary under trec_eval's conventions shows trec_eval's mean too (its sum added in query order)
    one_by_one = 0.0
    for v in values.tolist():
        one_by_one += v
    assert trec.summary["sum"].iloc[0] == one_by_one and trec.summary["mean"].iloc[0] == one_by_one / 1000
    assert f"{trec.summary['mean'].iloc[0]:.4f}" == "0.3011"
    default = rag_eval.evaluate(qrels, run, ["P_20"], conventions=rag_eval.Conventions(gain="linear"))
    assert (
        format_trec_eval(default, qrels=qrels, runs={run.name: run}).splitlines()[-1]
        == "P_20                  \tall\t0.3010"
    )
    assert f"{default.summary['mean'].iloc[0]:.4f}" == "0.3010"  # the default's all line is its summary's mean


def test_trec_eval_prints_that_mean_so(trec_eval_binary, p20_over_1000_queries):
    qrels_path, run_path = p20_over_1000_queries
    done = subprocess.run(
        [str(trec_eval_binary), "-m", "P.20", str(qrels_path), str(run_path)], capture_output=True, text=True
    )
    assert done.stdout == "P_20                  \tall\t0.3011\n"


C_L2_QRELS = ["q1 0 d1 2", "q1 0 d2 1", "q2 0 d3 1", "q2 0 d4 0", "q3 0 d5 2", "q3 0 d6 -1"]
C_L2_RUN = ["q1 Q0 d1 1 2.5 first", "q2 Q0 d3 1 1e0 middle", "q1 Q0 d9 2 1.5 last"]  # q3: no results


def test_num_rel_all_line_under_c_counts_grades_above_0_whatever_l(tmp_path):
    """Per query num_rel counts grades >= 2 (1, 0, 1); the all line counts the qrels' grades > 0: 4."""
    qrels, run = (
        rag_eval.Qrels.from_trec(_write(tmp_path / "qrels", C_L2_QRELS)),
        rag_eval.Run.from_trec(_write(tmp_path / "run", C_L2_RUN)),
    )
    conventions = rag_eval.metrics.PRESETS["trec_eval"].replace(missing_run="zero", relevance_threshold=2)
    report = rag_eval.evaluate(qrels, run, ["num_rel", "num_rel_ret", "P_5"], conventions=conventions)
    assert format_trec_eval(report, qrels=qrels, runs={run.name: run}, per_query=True) == "".join(
        f"{line}\n"
        for line in [
            "num_rel               \tq1\t1",
            "num_rel_ret           \tq1\t1",
            "P_5                   \tq1\t0.2000",
            "num_rel               \tq2\t0",
            "num_rel_ret           \tq2\t0",
            "P_5                   \tq2\t0.0000",
            "num_rel               \tq3\t1",
            "num_rel_ret           \tq3\t0",
            "P_5                   \tq3\t0.0000",
            "runid                 \tall\tlast",
            "num_q                 \tall\t3",
            "num_rel               \tall\t4",
            "num_rel_ret           \tall\t1",
            "P_5                   \tall\t0.0667",
        ]
    )
    with pytest.raises(ValueError, match="pass qrels="):  # never the sum in its place
        format_trec_eval(report, runs={run.name: run})
    # without -c, or under the default conventions, the all line is the sum of the per-query values
    for conv in (
        conventions.replace(missing_run="skip"),
        rag_eval.Conventions(missing_run="zero", relevance_threshold=2),
    ):
        lines = format_trec_eval(rag_eval.evaluate(qrels, run, ["num_rel"], conventions=conv), qrels=qrels).splitlines()
        assert lines[-1] == f"num_rel               \tall\t{1 if conv.missing_run == 'skip' else 2}"


def test_trec_eval_counts_num_rel_so(trec_eval_binary, tmp_path):
    qrels, run = _write(tmp_path / "qrels", C_L2_QRELS), _write(tmp_path / "run", C_L2_RUN)
    done = subprocess.run(
        [str(trec_eval_binary), "-c", "-l", "2", "-m", "runid", "-m", "num_rel", str(qrels), str(run)],
        capture_output=True,
        text=True,
    )
    assert done.stdout == "runid                 \tall\tlast\nnum_rel               \tall\t4\n"


def test_runid_is_the_last_line_tag(tmp_path):
    run = rag_eval.Run.from_trec(_write(tmp_path / "run", C_L2_RUN))
    qrels = rag_eval.Qrels.from_trec(_write(tmp_path / "qrels", C_L2_QRELS[:4]))
    report = rag_eval.evaluate(qrels, {"mine": run}, ["P_5"], conventions="trec_eval")
    assert format_trec_eval(report, runs={"mine": run}).splitlines()[0] == "runid                 \tall\tlast"
    assert format_trec_eval(report).splitlines()[0] == "runid                 \tall\tmine"  # no Run given: its name


def test_dcg_divides_by_log2_in_rank_order():
    """trec_eval adds gain / log2(rank + 1) in rank order; gain * (1 / log2(rank + 1)) differs in the last bit
    (3 at rank 2, for one), which can change a printed digit."""
    rows, ranks, gains = np.array([0, 0, 0, 1]), np.array([0, 1, 4, 2]), np.array([1.0, 3.0, 3.0, 2.0])
    expected = [1.0 / math.log2(2) + 3.0 / math.log2(3) + 3.0 / math.log2(6), 2.0 / math.log2(4)]
    assert K.dcg(rows, ranks, gains, None, 2).tolist() == expected  # the same doubles, not approximately
    assert 3.0 * (1 / math.log2(3)) != 3.0 / math.log2(3)  # so the test above tells the two apart
    ideal = K.ideal_dcg(*K.best_gains(np.array([0, 0, 0]), np.array([1.0, 3.0, 3.0]), 1), 1, None)
    assert ideal.tolist() == [3.0 / math.log2(2) + 3.0 / math.log2(3) + 1.0 / math.log2(4)]


@pytest.mark.parametrize(
    "rule,gains,rel",
    [("exp", None, None), ("linear", None, 2), ("exp", {1: 5.0, 2: 5.0, 3: 0.5}, None), ("linear", {-1: 2.0}, None)],
)
def test_the_ideal_gains_counted_per_grade_are_the_sorted_ones_bit_for_bit(rule, gains, rel):
    rng = np.random.default_rng(7)
    n = 300
    query_of = np.repeat(np.arange(n), rng.integers(0, 12, n))
    grades = rng.integers(-1, 4, len(query_of))
    counted = K.best_gains_by_grade(query_of, grades, n, rule, gains, rel)
    assert counted is not None
    sorted_ = K.best_gains(query_of, K.gain_of(grades, rule, gains, rel), n)
    for a, b in zip(counted, sorted_, strict=True):
        assert a.dtype == b.dtype and a.tolist() == b.tolist()
    for k in (None, 1, 5, 10):
        assert K.ideal_dcg(*counted, n, k).tolist() == K.ideal_dcg(*sorted_, n, k).tolist()
    assert K.best_gains_by_grade(query_of, grades * 5000, n, rule, None, rel) is None  # too many grades: sort


def test_gains_are_scaled_only_where_a_sum_could_leave_the_normal_doubles():
    rng = np.random.default_rng(3)
    n = 200
    rows = np.repeat(np.arange(n), 6)
    ranks = np.tile(np.arange(6), n)
    gains = np.exp2(rng.integers(0, 4, len(rows)).astype(float)) - 1.0
    assert not K.gain_exponents(rows, gains, n).any()  # ordinary gains: nothing to scale
    top = np.zeros(n)
    np.maximum.at(top, rows, gains)
    exponents = np.frexp(top)[1].astype(np.int64)  # what every query's gains were scaled by before
    scaled = K.scale_gains(gains, rows, exponents)
    ideal = K.ideal_dcg(*K.best_gains(rows, gains, n), n, 5)
    ideal_scaled = K.ideal_dcg(*K.best_gains(rows, scaled, n), n, 5)
    unscaled = K.ndcg(rows, ranks, gains, 5, ideal)
    assert unscaled.tolist() == K.ndcg(rows, ranks, scaled, 5, ideal_scaled).tolist()  # the same bits either way
    assert K.gain_exponents(rows, gains * 2.0**1000, n).any() and K.gain_exponents(rows, gains * 2.0**-1000, n).any()


@pytest.mark.parametrize("conventions", ["default", "trec_eval"])
def test_a_huge_gain_table_scores_a_perfect_ranking_1(conventions):
    """Gains scaled per query by the power of two of the largest before summing: 1e308 / log2(2) + 1e308 /
    log2(3) no longer overflows to inf (inf / inf was NaN; trec_eval itself prints 0.0000 there)."""
    qrels = rag_eval.Qrels.from_dict({"q": {"a": 1, "b": 1, "c": 1, "x": 0}})
    perfect = rag_eval.Run.from_ranking({"q": ["a", "b", "c", "x"]})
    report = rag_eval.evaluate(
        qrels, perfect, ["ndcg(gains=1:1e308)@5", "ndcg(gains=1:1e308)"], conventions=conventions
    )
    assert report.per_query["value"].tolist() == [1.0, 1.0]
    worse = rag_eval.Run.from_ranking({"q": ["x", "a", "b", "c"]})
    huge = rag_eval.evaluate(qrels, worse, ["ndcg(gains=1:1e308)@5"], conventions=conventions).per_query["value"]
    plain = rag_eval.evaluate(qrels, worse, ["ndcg(gains=1:1)@5"], conventions=conventions).per_query["value"]
    assert huge.tolist() == pytest.approx(plain.tolist(), rel=1e-15) and 0.7 < plain[0] < 0.8
    # a power of two scales exactly: the same doubles as the unscaled sums, as trec_eval computes them
    exact = rag_eval.evaluate(qrels, worse, ["ndcg(gains=1:1125899906842624)@5"], conventions=conventions)  # 2^50
    assert exact.per_query["value"].tolist() == plain.tolist()
    two = rag_eval.evaluate(
        rag_eval.Qrels.from_dict({"q": {"a": 2, "b": 1}}),
        rag_eval.Run.from_ranking({"q": ["b", "a"]}),
        ["ndcg(gain=linear)"],
        conventions=conventions,
    ).per_query["value"]
    assert two.tolist() == [(1.0 / math.log2(2) + 2.0 / math.log2(3)) / (2.0 / math.log2(2) + 1.0 / math.log2(3))]
