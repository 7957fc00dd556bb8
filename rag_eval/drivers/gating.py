"""``rag_eval.gate``: did a change make retrieval worse? A regression gate for CI, decided by intervals.

Per rule, the interval of the mean paired difference (candidate - baseline) says pass, regression or inconclusive
against ``-max_drop``, corrected across the rules; a floor rule (``answer.f1 >= 0.30``) holds the candidate's values
against the floor as a constant baseline with a max drop of 0; reports that are not comparable are refused. The
decision rule, the tests, the correction and the minimum n: ``docs/gate.md``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import check_choice, check_share
from .._escape import xml_text
from .._files import append_output, write_output
from .._markdown import markdown_cell
from ..errors import InputError
from ..renderers.result_folder import differences
from ..reports.answered import ANSWER_RULES, answer_metric
from ..reports.hashes import FIELDS
from ..reports.report import Report, is_geometric_metric, is_text_metric
from ..statistics.paired import (
    CORRECTIONS,
    INTERVAL_TESTS,
    MIN_N,
    Pairing,
    all_equal,
    correct,
    method_label,
    p_value,
    pair,
    paired_interval,
    shown_ids,
    warn_degenerate,
)
from ..statistics.power_analysis import power as power_analysis
from ..statistics.snapshot_drift import Drift

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ALLOWABLE",
    "EXIT_BAD_INPUT",
    "EXIT_INCONCLUSIVE",
    "EXIT_PASS",
    "EXIT_REGRESSION",
    "GATE_TESTS",
    "GateResult",
    "NotComparable",
    "Rule",
    "RuleResult",
    "WorseQuery",
    "gate",
]

GATE_TESTS = INTERVAL_TESTS  # randomization, t, wilcoxon, bootstrap
# what allow= may let through: a hash that differs, a side without hashes, queries measured on one side only
ALLOWABLE = (*FIELDS, "hashes", "unpaired")
VERDICTS = ("pass", "regression", "inconclusive")
EXIT_PASS, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_INCONCLUSIVE = 0, 1, 2, 3
POWER = 0.8  # the power of the minimum detectable difference and of the queries needed


class NotComparable(InputError):
    """The baseline and the candidate were computed on different qrels, queries, corpus, conventions or budget."""


@dataclass(frozen=True)
class Rule:
    """One rule of the gate: ``metric`` (as the report names it) must not drop by more than ``max_drop`` (>= 0, in
    the metric's units), or, given ``floor`` instead, the candidate's mean must be at least ``floor`` (its values
    held against the floor, the baseline unread); read from ``stage`` (a stage, ``run/stage`` or a run; by default
    the last stage of the pipeline that measures the metric, or the report's one run)."""

    metric: str
    max_drop: float | None = None
    stage: str | None = None
    floor: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or not self.metric.strip():
            raise ValueError(f"a rule's metric must be a metric name, not {self.metric!r}")
        if (self.max_drop is None) == (self.floor is None):
            raise ValueError(f"rule {self.metric}: give max_drop (a drop from the baseline) or floor, one of them")
        for name, value in (("max_drop", self.max_drop), ("floor", self.floor)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            ):
                raise ValueError(f"rule {self.metric}: {name} must be a finite number, not {value!r}")
        if self.max_drop is not None and self.max_drop < 0:
            raise ValueError(f"rule {self.metric}: max_drop must be a finite number >= 0, not {self.max_drop!r}")
        if self.stage is not None and (not isinstance(self.stage, str) or not self.stage):
            raise ValueError(f"rule {self.metric}: stage must be a stage name, not {self.stage!r}")

    @property
    def drop(self) -> float:
        """The drop the interval is held against: ``max_drop``, or 0 from the floor."""
        return 0.0 if self.max_drop is None else float(self.max_drop)

    @classmethod
    def parse(cls, text: str) -> Rule:
        """``METRIC:MAXDROP``, ``METRIC:STAGE:MAXDROP``, or a floor ``METRIC >= FLOOR`` / ``METRIC:STAGE >= FLOOR``
        (a colon inside a metric's parentheses belongs to the metric: ``ndcg(gains=1:3;2:9)@10:0.01``)."""
        depth, cuts, at = 0, [], -1
        for i, char in enumerate(text):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if char == ":" and depth == 0:
                cuts.append(i)
            if text.startswith(">=", i) and depth == 0 and at < 0:
                at = i
        from ..data.numeric import score_text

        if at >= 0:  # a floor
            cuts = [c for c in cuts if c < at]
            number = text[at + 2 :].strip()
            floor = score_text(number)
            if len(cuts) > 1 or floor is None:
                raise ValueError(f"rule {text!r}: expected METRIC >= FLOOR or METRIC:STAGE >= FLOOR, FLOOR a decimal")
            stage = text[cuts[0] + 1 : at].strip() if cuts else None
            return cls(text[: cuts[0] if cuts else at].strip(), stage=stage or None, floor=floor)
        if not cuts or len(cuts) > 2:
            raise ValueError(f"rule {text!r}: expected METRIC:MAXDROP, METRIC:STAGE:MAXDROP or METRIC[:STAGE] >= FLOOR")
        metric, drop_text = text[: cuts[0]], text[cuts[-1] + 1 :]
        stage = text[cuts[0] + 1 : cuts[1]] if len(cuts) == 2 else None
        drop = score_text(drop_text.strip())
        if drop is None:
            raise ValueError(f"rule {text!r}: the max drop {drop_text!r} is not a plain decimal number")
        return cls(metric.strip(), drop, stage.strip() if stage is not None else None)

    def __str__(self) -> str:
        where = f" [{self.stage}]" if self.stage else ""
        return f"{self.metric}{where} " + (
            f">= {self.floor:g}" if self.floor is not None else f"max drop {self.drop:g}"
        )


@dataclass(frozen=True)
class WorseQuery:
    """A query on which the candidate scored lower than the baseline."""

    query_id: str
    baseline: float
    candidate: float

    @property
    def change(self) -> float:
        return self.candidate - self.baseline


@dataclass(frozen=True)
class RuleResult:
    """The decision on one rule: the paired difference (candidate - baseline), its interval at ``confidence`` (NaN
    below the test's ``min_n``), the p-value of no difference (raw and corrected), the verdict, the queries that got
    worse (worst first: a drop, or a rise where lower is better), and the queries left out (``only_baseline``,
    ``only_candidate``: measured on one side only, as ``allow={"unpaired"}`` let through; ``nan_ids``)."""

    rule: Rule
    baseline_system: str  #: the system the values were read from: a run, or run/stage
    candidate_system: str
    metric: str  #: the metric's name in the reports
    n: int  #: paired queries with a value on both sides
    n_nan: int  #: queries counted on both sides whose value is NaN (0/0) on either: left out
    n_unpaired: int  #: queries counted on one side only: left out
    baseline_mean: float
    candidate_mean: float
    difference: float  #: mean of candidate - baseline over the n paired queries
    ci_low: float
    ci_high: float
    confidence: float  #: 1 - alpha_rule
    p_value: float
    p_adjusted: float
    verdict: str  #: "pass", "regression" or "inconclusive"
    wins: int
    ties: int
    losses: int
    minimum_detectable_difference: float | None  #: at n, alpha_rule, power 0.8 (paired t); None without spread
    queries_needed: int | None  #: to tell a drop of max_drop (paired t, power 0.8); None without spread
    worse: tuple[WorseQuery, ...] = ()  #: every query that got worse, the largest drop first
    higher_is_better: bool = True  #: the metric's direction (rag_eval.metrics.higher_is_better)
    test: str = "randomization"  #: the interval's method
    min_n: int = 0  #: the fewest paired queries the method's interval is trusted on (statistics.MIN_N)
    degenerate: bool = False  #: every paired difference the same: an interval of zero width, not certainty
    only_baseline: tuple[str, ...] = ()  #: queries only the baseline measured (left out; allow={"unpaired"})
    only_candidate: tuple[str, ...] = ()  #: queries only the candidate measured (left out)
    nan_ids: tuple[str, ...] = ()  #: queries measured on both sides, NaN (0/0) on either (left out)
    drift: str = ""  #: a rule that did not pass: the drift's causes (``gate(..., drift=)``), else ""

    @property
    def below_min_n(self) -> bool:
        return self.n < self.min_n

    def left_out(self) -> str:
        """How many queries were paired and which were left out (some named): what the verdict rests on."""
        if self.rule.floor is not None:  # the candidate's values alone
            nan = "without a graded answer (failed or not asked)" if self.metric in ANSWER_RULES else "NaN (0/0)"
            left = f"; left out: {self.n_nan} {nan} ({shown_ids(self.nan_ids)})" if self.nan_ids else ""
            return f"n {self.n} of the candidate's, against the floor {self.rule.floor:g}" + (left or "; none left out")
        parts = [
            f"{len(ids)} only in the {side} ({shown_ids(ids)})"
            for ids, side in ((self.only_baseline, "baseline"), (self.only_candidate, "candidate"))
            if ids
        ]
        if self.nan_ids:
            parts.append(f"{len(self.nan_ids)} NaN on either side ({shown_ids(self.nan_ids)})")
        return f"n {self.n} paired" + ("; left out: " + "; ".join(parts) if parts else "; none left out")

    def numbers(self) -> str:
        """One line: the difference, the means, the interval (and its method's minimum n), p, the queries paired
        and those left out."""
        interval = (
            f"no interval (n {self.n} is below {method_label(self.test)})"
            if self.below_min_n
            else f"{_percent(self.confidence)} interval [{_signed(self.ci_low)}, {_signed(self.ci_high)}] "
            f"({method_label(self.test)}{'; zero width' if self.degenerate else ''})"
        )
        change = (
            f"mean {self.candidate_mean:.4f}, {self.difference:+.4f} from the floor {self.rule.floor:g}"
            if self.rule.floor is not None
            else f"difference {self.difference:+.4f} ({self.baseline_mean:.4f} -> {self.candidate_mean:.4f})"
        )
        return f"{change}, {interval}, p {_p(self.p_value)} (corrected {_p(self.p_adjusted)}), {self.left_out()}"

    def reason(self) -> str:
        """Why the verdict, in one sentence, with the threshold (a drop, or a rise where lower is better)."""
        text = self._reason()
        if self.degenerate:
            text += (
                f"; the interval has zero width because every one of the {self.n} paired differences is "
                f"{self.difference:+.4f}: no spread among these queries, not certainty about others"
            )
        if self.n_unpaired:
            text += f"; {self.n_unpaired} queries measured on one side only were left out (allowed)"
        if self.drift:
            text += f"; drift between the snapshots: {self.drift}"
        return text

    def _reason(self) -> str:
        if self.below_min_n:
            return (
                f"{self.n} paired {'query is' if self.n == 1 else 'queries are'} below the {self.test} interval's "
                f"minimum of {self.min_n}: not enough queries to tell"
            )
        floor = self.rule.floor
        if floor is not None:  # the interval of the difference from the floor, shown as the mean's
            mean = f"the mean's interval [{floor + self.ci_low:.4f}, {floor + self.ci_high:.4f}]"
            if self.verdict != "inconclusive":
                return f"{mean} is {'above' if self.verdict == 'pass' else 'below'} the floor {floor:g}"
            text = f"{mean} holds the floor {floor:g}: not enough queries to tell"
            if self.minimum_detectable_difference is not None:
                text += f"; minimum detectable difference {self.minimum_detectable_difference:.4f} at {self.n} queries"
            return text
        if not self.higher_is_better:
            threshold = f"+{self.rule.drop:g}"
            if self.verdict == "pass":
                return f"lower is better: the interval's upper bound {_signed(self.ci_high)} is below {threshold}"
            if self.verdict == "regression":
                return f"lower is better: the interval's lower bound {_signed(self.ci_low)} is above {threshold}"
            text = f"lower is better: the interval holds {threshold}: not enough queries to tell"
        else:
            threshold = f"-{self.rule.drop:g}"
            if self.verdict == "pass":
                return f"the interval's lower bound {_signed(self.ci_low)} is above {threshold}"
            if self.verdict == "regression":
                return f"the interval's upper bound {_signed(self.ci_high)} is below {threshold}"
            text = f"the interval holds {threshold}: not enough queries to tell"
        if self.minimum_detectable_difference is not None:
            text += f"; minimum detectable difference {self.minimum_detectable_difference:.4f} at {self.n} queries"
        if self.queries_needed is not None and self.rule.drop > 0:
            text += f"; about {self.queries_needed} queries needed to tell a drop of {self.rule.drop:g}"
        return text

    def worst(self, k: int) -> str:
        """The ``k`` largest drops (rises where lower is better) as ``query change (baseline -> candidate)``, and how
        many more."""
        below = self.rule.floor is not None
        if not self.worse:
            return "no query below the floor" if below else "no query got worse"
        shown = ", ".join(
            f"{w.query_id} {w.candidate:.4f}"
            if below
            else f"{w.query_id} {w.change:+.4f} ({w.baseline:.4f} -> {w.candidate:.4f})"
            for w in self.worse[:k]
        )
        more = len(self.worse) - k
        head = "below the floor" if below else "worse"
        return f"{head} on {len(self.worse)} queries: {shown}" + (f", and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class GateResult:
    """What :func:`gate` decided: one :class:`RuleResult` per rule, the settings, and the differences in what the
    reports were computed on that ``allow`` let through (``overrides``). ``verdict`` is ``"regression"`` when any
    rule is one, else ``"inconclusive"`` when any rule is one, else ``"pass"``; ``exit_code`` is 1 for a regression,
    3 for an inconclusive verdict unless ``inconclusive="pass"``, else 0."""

    rules: tuple[RuleResult, ...]
    test: str
    correction: str
    alpha: float
    alpha_rule: float  #: the level of each rule's interval (1 - confidence)
    inconclusive: str  #: what an inconclusive rule does: "fail" or "pass"
    baseline: str  #: where the baseline came from (a path, or "report")
    candidate: str
    overrides: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        found = {r.verdict for r in self.rules}
        return next((v for v in ("regression", "inconclusive") if v in found), "pass")

    @property
    def exit_code(self) -> int:
        if self.verdict == "regression":
            return EXIT_REGRESSION
        if self.verdict == "inconclusive" and self.inconclusive == "fail":
            return EXIT_INCONCLUSIVE
        return EXIT_PASS

    @property
    def passed(self) -> bool:
        return self.exit_code == EXIT_PASS

    def _how(self) -> str:
        m = len(self.rules)
        if self.correction == "none" or m == 1:
            level = f"alpha {self.alpha:g}"
        elif self.correction == "holm":
            level = f"holm over {m} rules: alpha {self.alpha:g}/{m}"
        else:
            level = f"bh over {m} rules, false-coverage-rate intervals: {self.alpha_rule:.4g}"
        counts = "fails" if self.inconclusive == "fail" else "passes"
        return (
            f"{self.test} test (min n {MIN_N[self.test]}), intervals at {_percent(1 - self.alpha_rule)} ({level}); "
            f"an inconclusive rule {counts}"
        )

    def _status(self) -> str:
        return f"{self.verdict.upper()} (exit {self.exit_code})"

    def to_text(self, *, worst: int = 5) -> str:
        """The verdict on one screen: the outcome and exit code, how it was decided, any override, then per rule
        the verdict, the numbers, why, and the ``worst`` largest drops."""
        lines = [
            f"rag-eval gate: {self._status()}",
            f"  baseline {self.baseline}, candidate {self.candidate}",
            f"  {self._how()}",
        ]
        lines += [f"  OVERRIDE (allowed to differ): {o}" for o in self.overrides]
        for r in self.rules:
            where = (
                r.candidate_system
                if r.candidate_system == r.baseline_system or r.rule.floor is not None
                else (f"{r.baseline_system} vs {r.candidate_system}")
            )
            limit = f">= {r.rule.floor:g}" if r.rule.floor is not None else f"max drop {r.rule.drop:g}"
            lines.append(f"{r.verdict.upper():>12}  {r.metric} [{where}], {limit}")
            lines.append(f"              {r.numbers()}")
            if r.n_unpaired:
                lines.append(f"              LEFT OUT (allowed, unpaired): {r.left_out()}")
            lines.append(f"              {r.reason()}")
            lines.append(f"              {r.worst(worst)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def _repr_markdown_(self) -> str:
        """In a notebook: :meth:`to_markdown`, the verdict first, then the rules and the queries that got worse."""
        return self.to_markdown()

    def _repr_html_(self) -> str:
        """In a notebook: the verdict first, in words and in colour (Okabe-Ito's bluish green pass, vermillion
        regression, orange inconclusive), then a row per rule; every text escaped."""
        import html

        from .._plot_style import OKABE_ITO

        colours = {"pass": "bluish green", "regression": "vermillion", "inconclusive": "orange"}
        e = html.escape

        def word(verdict: str) -> str:
            return f'<strong style="color:{OKABE_ITO[colours[verdict]]}">{e(verdict.upper())}</strong>'

        rows = "".join(
            f"<tr><td>{word(r.verdict)}</td><td>{e(str(r.rule))}</td><td>{e(r.candidate_system)}</td>"
            f"<td>{e(r.numbers())}</td><td>{e(r.reason())}</td><td>{e(r.worst(5))}</td></tr>"
            for r in self.rules
        )
        return (
            f"<p>Retrieval gate: {word(self.verdict)} (exit {self.exit_code})</p>"
            f"<p>{e(f'baseline {self.baseline}, candidate {self.candidate}; {self._how()}')}</p>"
            + "".join(f"<p>OVERRIDE (allowed to differ): {e(o)}</p>" for o in self.overrides)
            + "<table><thead><tr><th>verdict</th><th>rule</th><th>system</th><th>numbers</th><th>why</th>"
            f"<th>worst queries</th></tr></thead><tbody>{rows}</tbody></table>"
        )

    def to_markdown(self, *, worst: int = 10) -> str:
        """A Markdown summary (a CI job summary): the outcome, the settings, the overrides, a table of the rules
        (difference, interval, p, verdict), and per rule the ``worst`` largest drops. Every cell is escaped."""
        out = [f"## Retrieval gate: {self._status()}", ""]
        out.append(markdown_cell(f"Baseline {self.baseline}, candidate {self.candidate}; {self._how()}."))
        out.append("")
        for o in self.overrides:
            out += [f"**Override** (allowed to differ): {markdown_cell(o)}", ""]
        header = ["rule", "system", "n", "baseline", "candidate", "difference", "interval", "p (corrected)", "verdict"]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * len(header))
        for r in self.rules:
            cells = [
                str(r.rule),
                r.candidate_system,
                str(r.n),
                f"{r.baseline_mean:.4f}",
                f"{r.candidate_mean:.4f}",
                f"{r.difference:+.4f}",
                f"[{_signed(r.ci_low)}, {_signed(r.ci_high)}]",
                f"{_p(r.p_value)} ({_p(r.p_adjusted)})",
            ]
            out.append("| " + " | ".join(markdown_cell(c) for c in cells) + f" | **{r.verdict}** |")
        out.append("")
        for r in self.rules:
            out.append(f"### {markdown_cell(str(r.rule))}: {r.verdict}")
            out.append("")
            out.append(markdown_cell(r.reason()) + ".")
            out.append("")
            out.append(markdown_cell(f"Queries: {r.left_out()}; interval: {method_label(r.test)}") + ".")
            out.append("")
            floor = r.rule.floor is not None
            if r.worse:
                more = len(r.worse) - worst
                out.append(
                    f"{len(r.worse)} queries {'below the floor' if floor else 'got worse'}"
                    + (f" ({min(worst, len(r.worse))} largest drops):" if more > 0 else ":")
                )
                out.append("")
                out.append(f"| query | {'floor' if floor else 'baseline'} | candidate | change |")
                out.append("|---|---|---|---|")
                out += [
                    f"| {markdown_cell(w.query_id)} | {w.baseline:.4f} | {w.candidate:.4f} | {w.change:+.4f} |"
                    for w in r.worse[:worst]
                ]
            else:
                out.append("No query below the floor." if floor else "No query got worse.")
            out.append("")
        return "\n".join(out)

    def to_junit(self, *, worst: int = 10) -> str:
        """JUnit XML: one ``testsuite`` of one ``testcase`` per rule. A regression is a ``failure``; an inconclusive
        rule is a ``failure`` under ``inconclusive="fail"`` and ``skipped`` under ``"pass"``; the message holds the
        numbers and the reason, the element's text the rule's part of the verdict."""
        import xml.etree.ElementTree as ET

        failures = sum(
            r.verdict == "regression" or (r.verdict == "inconclusive" and self.inconclusive == "fail")
            for r in self.rules
        )
        skipped = sum(r.verdict == "inconclusive" and self.inconclusive == "pass" for r in self.rules)
        counts = {"tests": str(len(self.rules)), "failures": str(failures), "errors": "0"}
        root = ET.Element("testsuites", {"name": "rag-eval gate", **counts, "time": "0"})
        suite = ET.SubElement(
            root, "testsuite", {"name": "rag-eval gate", **counts, "skipped": str(skipped), "time": "0"}
        )
        properties = ET.SubElement(suite, "properties")
        shown = {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "test": self.test,
            "correction": self.correction,
            "alpha": f"{self.alpha:g}",
            "confidence": f"{1 - self.alpha_rule:.6g}",
            "inconclusive": self.inconclusive,
            "verdict": self.verdict,
        }
        for i, o in enumerate(self.overrides):
            shown[f"override.{i + 1}"] = o
        for name, value in shown.items():
            ET.SubElement(properties, "property", {"name": name, "value": xml_text(value)})
        for r in self.rules:
            case = ET.SubElement(
                suite,
                "testcase",
                {"name": xml_text(f"{r.rule} ({r.candidate_system})"), "classname": "rag_eval.gate", "time": "0"},
            )
            # ElementTree escapes & < > and quotes; the characters XML 1.0 cannot hold are xml_text's
            message = xml_text(f"{r.verdict}: {r.numbers()}; {r.reason()}")
            body = f"{message}\n{xml_text(r.worst(worst))}"
            if r.verdict == "regression" or (r.verdict == "inconclusive" and self.inconclusive == "fail"):
                ET.SubElement(case, "failure", {"type": r.verdict, "message": message}).text = body
            elif r.verdict == "inconclusive":
                ET.SubElement(case, "skipped", {"type": r.verdict, "message": message}).text = body
            else:
                ET.SubElement(case, "system-out").text = body
        ET.indent(root)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"

    def write_junit(self, path: str | os.PathLike[str]) -> None:
        _write(path, self.to_junit(), "--junit")

    def write_markdown(self, path: str | os.PathLike[str]) -> None:
        """Write (or, for ``$GITHUB_STEP_SUMMARY``, append to: an existing file is appended to) the Markdown."""
        _write(path, self.to_markdown() + "\n", "--markdown", append=True)


def _write(path: str | os.PathLike[str], text: str, flag: str, *, append: bool = False) -> None:
    """Through the durable-I/O module: whole or not at all (an append is cut back); a failure names the file."""
    (append_output if append else write_output)(path, text.encode("utf-8"))


def _percent(confidence: float) -> str:
    return f"{100 * confidence:.4g}%"


def _signed(value: float) -> str:
    return f"{value:+.4f}" if math.isfinite(value) else ("-inf" if value < 0 else ("+inf" if value > 0 else "nan"))


def _p(value: float) -> str:
    return "nan" if value != value else f"{value:.4g}"


# ----- the entry point ---------------------------------------------------------------------------------------------


def gate(
    baseline: Report | str | os.PathLike[str],
    candidate: Report | str | os.PathLike[str],
    rules: Rule | Sequence[Rule | str],
    *,
    test: str = "randomization",
    correction: str = "holm",
    alpha: float = 0.05,
    inconclusive: str = "fail",
    allow: Collection[str] = (),
    resamples: int = 10000,
    permutations: int = 10000,
    seed: int = 0,
    drift: Drift | None = None,
) -> GateResult:
    """Decide whether ``candidate`` made retrieval worse than ``baseline`` by more than each rule allows (see the
    module's docstring for the decision rule, the intervals and the correction).

    ``baseline``, ``candidate``: Reports, or paths of saved reports (``Report.save``) or result folders (checked
    against their manifest). ``rules``: :class:`Rule` objects or strings ``METRIC:MAXDROP`` /
    ``METRIC:STAGE:MAXDROP``. ``test``: ``randomization`` (default), ``t``, ``wilcoxon`` or ``bootstrap``.
    ``correction``: ``holm`` (default), ``bh`` or ``none`` across the rules. ``inconclusive``: ``"fail"`` (exit
    code 3) or ``"pass"``. ``allow``: kinds of difference to let through (of :data:`ALLOWABLE`: ``qrels``,
    ``queries``, ``corpus``, ``conventions``, ``budget``, ``hashes``; ``unpaired``: queries measured on one side
    only, left out and counted), each printed in the verdict. ``drift``: a
    :class:`~rag_eval.statistics.snapshot_drift.Drift` of the two snapshots: a rule that does not pass names its
    causes in its reason (docs/drift.md).

    Raises :class:`NotComparable` (an InputError) naming each difference not allowed,
    :class:`~rag_eval.statistics.paired.UnpairedQueries` (an InputError) when a side lacks queries the other
    measured, and ValueError for bad settings, an unknown metric or stage, a metric with no better side
    (``num_ret``), or a rule with no paired query.
    """
    check_choice(test, "test", GATE_TESTS)
    check_choice(correction, "correction", CORRECTIONS)
    alpha = check_share(alpha, "alpha")
    check_choice(inconclusive, "inconclusive", ("fail", "pass"))
    unknown = sorted(set(allow) - set(ALLOWABLE))
    if isinstance(allow, str) or unknown:
        raise ValueError(f"cannot allow {unknown or allow!r} to differ; choose from {ALLOWABLE}")
    for name, value in (("resamples", resamples), ("permutations", permutations)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, not {value!r}")
    parsed = [rules] if isinstance(rules, Rule) else [r if isinstance(r, Rule) else Rule.parse(r) for r in rules]
    if not parsed:
        raise ValueError("no rule: give at least one (a metric and its max drop)")

    base, base_name = _load(baseline, "baseline")
    cand, cand_name = _load(candidate, "candidate")
    found = differences(base, cand, names=("baseline", "candidate"))
    refused = [line for what, line in found if what not in allow]
    if refused:
        kinds = sorted({what for what, _ in found if what not in allow})
        raise NotComparable(
            "baseline and candidate are not comparable: "
            + "; ".join(refused)
            + f" (allow={{{', '.join(repr(k) for k in kinds)}}}, --allow-different {' '.join(kinds)}, to compare "
            "them all the same)"
        )
    overrides = tuple(line for _, line in found)

    twice = [str(r) for i, r in enumerate(parsed) if r in parsed[:i]]
    if twice:
        raise ValueError(f"rule {twice[0]} is given twice")
    pairs = [_paired(base, cand, rule, allow_unpaired="unpaired" in allow) for rule in parsed]
    raw = np.array(
        [
            p_value(test, p.x, p.y, permutations=permutations, seed=seed, resamples=resamples) if p.n else np.nan
            for _, _, _, p in pairs
        ]
    )
    adjusted = correct(raw, correction)
    m = len(parsed)
    if correction == "none":
        alpha_rule = alpha
    elif correction == "holm":
        alpha_rule = alpha / m
    else:
        selected = int(np.sum(adjusted < alpha))
        alpha_rule = max(selected, 1) * alpha / m
    confidence = 1 - alpha_rule

    results = []
    degenerate = []
    for (rule, metric, systems, paired), p, p_adj in zip(pairs, raw, adjusted, strict=True):
        x, y, ids = paired.x, paired.y, [str(q) for q in paired.ids]
        diff = x - y
        higher = _higher_is_better(metric, rule)
        # the change in the metric's better direction: a drop where higher is better, a rise where lower is
        better = diff if higher else -diff
        below = len(diff) < MIN_N[test]
        flat = not below and all_equal(diff)
        if below:
            low = high = math.nan  # no interval the method trusts: inconclusive
            verdict = "inconclusive"
        else:
            low, high = paired_interval(
                test, diff, confidence=confidence, resamples=resamples, permutations=permutations, seed=seed
            )
            worst_bound, best_bound = (low, high) if higher else (-high, -low)  # of the change, better-oriented
            if worst_bound > -rule.drop:
                verdict = "pass"
            elif best_bound < -rule.drop:
                verdict = "regression"
            else:
                verdict = "inconclusive"
        if flat:
            degenerate.append(f"{rule} ({verdict}, {len(diff)} queries, each {float(diff[0]):+.4f})")
        mdd, needed = _power(diff, ids, alpha_rule, rule.drop)
        order = np.lexsort((np.array(ids, dtype=object).astype(str), better))
        worse = tuple(WorseQuery(ids[i], float(y[i]), float(x[i])) for i in order if better[i] < 0)
        results.append(
            RuleResult(
                rule=rule,
                baseline_system=systems[0],
                candidate_system=systems[1],
                metric=metric,
                n=len(diff),
                n_nan=paired.n_nan,
                n_unpaired=paired.n_unpaired,
                baseline_mean=float(y.mean()),
                candidate_mean=float(x.mean()),
                difference=float(diff.mean()),
                ci_low=float(low),
                ci_high=float(high),
                confidence=confidence,
                p_value=float(p),
                p_adjusted=float(p_adj),
                verdict=verdict,
                wins=int((better > 0).sum()),
                ties=int((diff == 0).sum()),
                losses=int((better < 0).sum()),
                minimum_detectable_difference=mdd,
                queries_needed=needed,
                worse=worse,
                higher_is_better=higher,
                test=test,
                min_n=MIN_N[test],
                degenerate=flat,
                only_baseline=tuple(str(q) for q in paired.only_y),
                only_candidate=tuple(str(q) for q in paired.only_x),
                nan_ids=tuple(str(q) for q in paired.nan_ids),
            )
        )
    if degenerate:
        warn_degenerate(f"gate, {len(degenerate)} of {len(results)} rules: {'; '.join(degenerate)}")
    if drift is not None:
        if not isinstance(drift, Drift):
            raise TypeError(f"drift must be what rag_eval.statistics.drift returns, not {type(drift).__name__}")
        named = drift.causes()
        results = [replace(r, drift=named) if r.verdict != "pass" else r for r in results]
    settings = {"resamples": resamples, "permutations": permutations, "seed": seed, "power": POWER}
    return GateResult(
        rules=tuple(results),
        test=test,
        correction=correction,
        alpha=alpha,
        alpha_rule=alpha_rule,
        inconclusive=inconclusive,
        baseline=base_name,
        candidate=cand_name,
        overrides=overrides,
        settings=settings,
    )


def _load(given: Report | str | os.PathLike[str], role: str) -> tuple[Report, str]:
    if isinstance(given, Report):
        return given, f"{role} report"
    if not isinstance(given, (str, os.PathLike)):
        raise TypeError(
            f"{role} must be a Report or the path of a saved report or result folder, not {type(given).__name__}"
        )
    where = Path(given)
    if not where.exists():
        raise InputError(f"no such report file or result folder ({role})", source=os.fspath(given))
    return (Report.load_folder(where) if where.is_dir() else Report.load(where)), os.fspath(given)


def _paired(
    base: Report, cand: Report, rule: Rule, *, allow_unpaired: bool
) -> tuple[Rule, str, tuple[str, str], Pairing]:
    """The rule's paired values: (rule, metric name, (baseline system, candidate system), the pairing), queries
    paired by id through :func:`rag_eval.statistics.paired.pair`, as ``compare`` pairs them: a side lacking queries
    the other measured is refused unless ``allow_unpaired``. A floor rule pairs the candidate's values with the
    floor (a NaN, or a failed answer, left out and counted)."""
    import pandas as pd

    answers = answer_metric(rule.metric) is not None
    if rule.floor is None:
        bv, b_system, metric = _values(base, rule, "baseline")
        cv, c_system, c_metric = _values(cand, rule, "candidate")
        if c_metric != metric:
            raise ValueError(f"rule {rule}: the baseline measures it as {metric!r}, the candidate as {c_metric!r}")
    else:
        cv, c_system, metric = _values(cand, rule, "candidate")
        if not _higher_is_better(metric, rule):
            raise ValueError(f"rule {rule}: lower is better for {metric}: a floor (>=) is no rule on it")
        bv, b_system = pd.Series(float(rule.floor), index=cv.index), f"the floor {rule.floor:g}"
    done = "answered" if answers else "measured"
    paired = pair(
        cv,
        bv,
        allow_unpaired=allow_unpaired,
        what=f"rule {rule}",
        hint=f"allow={{'unpaired'}}, --allow-different unpaired, to gate on the queries both {done}, each left out "
        "counted in the verdict",
    )
    if not paired.n:
        value = "a graded answer" if answers else "a value"
        where = "in the candidate" if rule.floor is not None else "on both sides"
        raise ValueError(f"rule {rule}: no query has {value} {where} ({paired.left_out()}): nothing to decide on")
    return rule, metric, (b_system, c_system), paired


def _values(report: Report, rule: Rule, role: str) -> tuple[pd.Series, str, str]:
    """One side's values of ``rule`` by query id (NaN: 0/0, or a failed answer), the system they were read from,
    and the metric's name: an answer grade (``answer.f1``) from the side's graded answers (``Report.answers``), any
    other metric from its run (and stage)."""
    metric = answer_metric(rule.metric)
    if metric is None:
        run, stage, metric = _system(report, rule, role)
        return report.values(run, metric, stage), _name(run, stage), metric
    record = report.card.answers
    if record is None:
        raise ValueError(
            f"rule {rule}: the {role} carries no answers (rag-eval answers FOLDER, rag-eval bench --generate, "
            "Report.with_answers)"
        )
    found = list((report.card.answers_by_run or {record["run"]: record}).values())  # each answered run's
    names = [_name(r["run"], r.get("stage")) for r in found]
    if rule.stage is not None:
        found = [r for r, n in zip(found, names, strict=True) if rule.stage in (n, r.get("stage"), r["run"])]
    if not found:
        raise ValueError(f"rule {rule}: the {role}'s answers are of {', '.join(names)}, not {rule.stage!r}")
    if len(found) > 1:
        raise ValueError(f"rule {rule}: the {role} carries the answers of several runs ({names}): name one (run/stage)")
    record = found[0]
    where = _name(record["run"], record.get("stage"))
    system = f"{where}, answers by {record['generator']} ({record['fingerprint'][:12]})"
    return report.answer_values(metric, run=record["run"] if len(names) > 1 else None), system, metric


def _higher_is_better(metric: str, rule: Rule) -> bool:
    """The direction of ``metric`` (as the report names it); a metric with no better side is no rule."""
    from ..metrics.catalogue import direction

    if metric in ANSWER_RULES:
        return True  # a grade of the answer: higher is better
    try:
        way = direction(metric)
    except ValueError as exc:
        raise ValueError(f"rule {rule}: cannot tell which way {metric} is better ({exc})") from None
    if way == "none":
        raise ValueError(f"rule {rule}: {metric} has no better side (a count of the input or a text): not a gate rule")
    return way == "higher"


def _name(run: str, stage: str | None) -> str:
    return run if stage is None else f"{run}/{stage}"


def _system(report: Report, rule: Rule, role: str) -> tuple[str, str | None, str]:
    """Where ``rule`` reads ``report``: (run, stage, metric name as the report has it). ``rule.stage`` names a stage,
    ``run/stage`` or a run; without it, the report's one run and, for a pipeline, its last stage that measures the
    metric."""
    runs = report.runs
    stages = report.stages if report.staged else [None]
    blocks = [(r, s) for r in runs for s in stages if _has_block(report, r, s)]
    if rule.stage is not None:
        chosen = [
            (r, s)
            for r, s in blocks
            if rule.stage in (_name(r, s), s) or (rule.stage == r and (s is None or len(stages) == 1))
        ]
        if not chosen:
            names = [_name(r, s) for r, s in blocks]
            raise ValueError(f"rule {rule}: the {role} has no stage or run {rule.stage!r}; it has {names}")
        if len(chosen) > 1:
            raise ValueError(
                f"rule {rule}: {rule.stage!r} could be any of {[_name(r, s) for r, s in chosen]} in the {role}: "
                "name it as run/stage"
            )
    else:
        if len(runs) != 1:
            raise ValueError(f"rule {rule}: the {role} has several runs ({runs}): name one with a stage (run/stage)")
        chosen = blocks
    metric_found: list[tuple[str, str | None, str]] = []
    for r, s in chosen:
        name = _metric_name(report, r, s, rule.metric)
        if name is not None:
            metric_found.append((r, s, name))
    if not metric_found:
        r, s = chosen[-1]
        measured = [m for m in report.metrics if not is_text_metric(m)]
        where = "" if rule.stage is None and s is None else f" ({'stage' if s else 'run'} {_name(r, s)!r})"
        raise ValueError(f"rule {rule}: the {role} does not measure {rule.metric!r}{where}; it measures {measured}")
    run, stage, metric = metric_found[-1]  # the last stage that measures it
    if is_geometric_metric(metric) or is_text_metric(metric):
        raise ValueError(
            f"rule {rule}: {metric} is not averaged by an arithmetic mean over queries; gate on its per-query "
            "family instead (ap for gm_map, bpref for gm_bpref)"
        )
    return run, stage, metric


def _has_block(report: Report, run: str, stage: str | None) -> bool:
    try:
        report.query_ids(run, stage)
    except KeyError:
        return False
    return True


def _metric_name(report: Report, run: str, stage: str | None, metric: str) -> str | None:
    """The name under which ``report`` holds ``metric`` for that run (stage): as given, case aside, or its canonical
    string (``NDCG@10`` -> ``ndcg@10``); None when it is not measured there."""
    held = [m for m in report.metrics if _measures(report, run, stage, m)]
    if metric in held:
        return metric
    folded = [m for m in held if m.lower() == metric.lower()]
    if folded:
        return folded[0]
    try:
        from ..metrics.grammar import parse_metric

        canonical = str(parse_metric(metric))
    except ValueError:
        return None
    return canonical if canonical in held else None


def _measures(report: Report, run: str, stage: str | None, metric: str) -> bool:
    try:
        report.values(run, metric, stage)
    except (KeyError, ValueError):
        return False
    return True


def _power(diff: np.ndarray, ids: list[str], alpha_rule: float, max_drop: float) -> tuple[float | None, int | None]:
    """The minimum detectable difference at n and the queries needed to tell a drop of ``max_drop``: the paired
    t-test's (rag_eval.power, noncentral t) at ``alpha_rule``, power 0.8; None where the differences do not vary or
    are fewer than 2."""
    try:
        analysis = power_analysis(
            dict(zip(ids, diff.tolist(), strict=True)),
            alpha=alpha_rule,
            power=POWER,
            effect=max_drop if max_drop > 0 else None,
            comparisons=1,
        )
    except ValueError:
        return None, None
    mdd = analysis.minimum_detectable_difference
    return (mdd if math.isfinite(mdd) else None), analysis.queries_needed
