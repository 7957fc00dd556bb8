"""trec_eval's own test suite, reproduced line for line by the CLI.

Each of the seven golden files of ``../shared/conformance/trec_eval/`` (README.md there names the trec_eval
command that made it) must come out of ``rag-eval evaluate QRELS RUN --format trec_eval --conventions trec_eval``
with the same flags, whole: every measure, every query, every ``all`` line, in the same order, to the same digits.
A failure lists the first 20 lines that differ. tests/test_trec_eval_oracle.py checks the same against the
trec_eval binary itself, on random data.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import warnings
from functools import cache

import pytest

from rag_eval.cli import main

from .conftest import CONFORMANCE, ROOT, need_shared

# golden file -> (qrels, run, flags): trec_eval's command line (README.md), as rag-eval takes it
COMMANDS = {
    "out.test": ("qrels.test", "results.test", []),
    "out.test.a": ("qrels.test", "results.test", ["-m", "all_trec"]),
    "out.test.aq": ("qrels.test", "results.test", ["-m", "all_trec", "-q"]),
    "out.test.aqc": ("qrels.test", "results.trunc", ["-m", "all_trec", "-q", "-c"]),
    "out.test.aqcM": ("qrels.test", "results.trunc", ["-m", "all_trec", "-q", "-c", "-M100"]),
    "out.test.aql": ("qrels.rel_level", "results.test", ["-m", "all_trec", "-mrelstring.20", "-q", "-l2"]),
    "out.test.meas_params": (
        "qrels.test",
        "results.test",
        [
            "-q",
            "-miprec_at_recall..10,.20,.25,.75,.50",
            "-m",
            "P.5,7,3",
            "-m",
            "recall.20,2000",
            "-m",
            "Rprec_mult.5.0,0.2,0.35",
            "-mutility.2,-1,0,0",
            "-m",
            "11pt_avg..25,.5,.75",
            "-mndcg.1=3,2=9,4=4.5",
            "-mndcg_cut.10,20,23.4",
            "-msuccess.2,5,20",
        ],
    ),
}


def _argv(golden: str) -> list[str]:
    qrels, run, flags = COMMANDS[golden]
    return [
        "evaluate",
        str(CONFORMANCE / qrels),
        str(CONFORMANCE / run),
        "--format",
        "trec_eval",
        "--conventions",
        "trec_eval",
        "--no-card",
        *flags,
    ]


@cache
def _printed(golden: str) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of the CLI for one golden file's command (warnings printed, not raised:
    ``ndcg_cut.10,20,23.4`` is warned about, as trec_eval reads 23.4 as 23)."""
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        status = main(_argv(golden))
    return status, out.getvalue(), err.getvalue()


def differences(expected: str, got: str, *, limit: int = 20) -> list[str]:
    """The lines that differ, readably: a value that differs, a line missing or unexpected (keyed by measure and
    query), or, when every line is there with its value, the first place the order differs. At most ``limit``."""

    def keyed(text: str) -> dict[tuple[str, str], str]:
        out = {}
        for line in text.splitlines():
            measure, _, rest = line.partition("\t")
            qid, _, value = rest.partition("\t")
            out.setdefault((measure.rstrip(), qid), value)
        return out

    want, have = keyed(expected), keyed(got)
    found = []
    for key, value in want.items():
        if key not in have:
            found.append(f"missing     {key[0]:<22} {key[1]:<5} {value}")
        elif have[key] != value:
            found.append(f"differs     {key[0]:<22} {key[1]:<5} expected {value}, got {have[key]}")
    found += [f"unexpected  {key[0]:<22} {key[1]:<5} {value}" for key, value in have.items() if key not in want]
    if not found:
        for i, (a, b) in enumerate(zip(expected.splitlines(), got.splitlines())):
            if a != b:
                found.append(f"line {i + 1}: expected {a!r}, got {b!r} (same lines, another order or spacing)")
                break
        else:
            found.append(f"{len(expected.splitlines())} lines expected, {len(got.splitlines())} printed")
    shown = found[:limit]
    if len(found) > limit:
        shown.append(f"... and {len(found) - limit} more")
    return shown


@pytest.mark.parametrize("golden", list(COMMANDS))
def test_the_cli_prints_trec_eval_s_golden_file(golden):
    need_shared(CONFORMANCE)
    status, got, err = _printed(golden)
    assert status == 0, err
    expected = (CONFORMANCE / golden).read_text()
    if got != expected:
        diff = differences(expected, got)
        pytest.fail(
            f"{golden}: {len(diff)} difference(s) shown, of {len(expected.splitlines())} lines:\n" + "\n".join(diff),
            pytrace=False,
        )


def test_a_real_process_prints_the_same_file():
    """One golden file through ``python -m rag_eval.cli`` in a subprocess: the installed entry point, stdout as
    bytes (no newline translation, nothing else on it)."""
    need_shared(CONFORMANCE)
    done = subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", *_argv("out.test.aqc")], capture_output=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == (CONFORMANCE / "out.test.aqc").read_bytes()


def test_the_diff_message_names_each_kind_of_difference():
    expected = (
        "map                   \tall\t0.1785\n"
        "P_5                   \tall\t0.2667\n"
        "P_10                  \tall\t0.3000\n"
    )
    got = (
        "map                   \tall\t0.1786\n"
        "P_10                  \tall\t0.3000\n"
        "rbp                   \tall\t0.3234\n"
    )
    assert differences(expected, got) == [
        "differs     map                    all   expected 0.1785, got 0.1786",
        "missing     P_5                    all   0.2667",
        "unexpected  rbp                    all   0.3234",
    ]
    reordered = "".join(reversed(expected.splitlines(keepends=True)))
    assert differences(expected, reordered) == [
        "line 1: expected 'map                   \\tall\\t0.1785', got 'P_10                  \\tall\\t0.3000' "
        "(same lines, another order or spacing)"
    ]
    many = "".join(f"P_{k:<20}\tall\t0.0000\n" for k in range(1, 40))
    assert len(differences(many, "")) == 21 and differences(many, "")[-1] == "... and 19 more"
