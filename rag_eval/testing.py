"""Helpers for a project's own test suite: ``from rag_eval.testing import assert_no_regression``.

A plain module, imported explicitly: no pytest plugin is registered or loaded, and nothing here imports pytest.

    >>> from rag_eval.testing import assert_no_regression
    >>> def test_retrieval_did_not_get_worse():
    ...     assert_no_regression("results/main", "results/branch", metric="ndcg@budget", max_drop=0.01)

The decision is :func:`rag_eval.drivers.gating.gate`'s (docs/gate.md): the interval of (candidate - baseline) at the
corrected level; **pass** when its lower bound is above ``-max_drop``, **regression** when its upper bound is below
it, **inconclusive** otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence

from .drivers.gating import GateResult, Rule, gate
from .reports.report import Report

__all__ = ["assert_no_regression"]


def assert_no_regression(
    baseline: Report | str | os.PathLike[str],
    candidate: Report | str | os.PathLike[str],
    *,
    metric: str | None = None,
    max_drop: float | None = None,
    stage: str | None = None,
    rules: Sequence[Rule | str] = (),
    test: str = "randomization",
    correction: str = "holm",
    alpha: float = 0.05,
    inconclusive: str = "fail",
    allow: Collection[str] = (),
    seed: int = 0,
) -> GateResult:
    """Run the gate on ``baseline`` and ``candidate`` (Reports, saved reports or result folders) and raise
    AssertionError, whose message is the gate's verdict text, when a rule is a regression, or inconclusive unless
    ``inconclusive="pass"``. Returns the :class:`~rag_eval.drivers.gating.GateResult` when it passes.

    The rules: ``metric`` with ``max_drop`` (and ``stage``), and/or ``rules`` (:class:`~rag_eval.drivers.gating.Rule`
    objects or ``METRIC[:STAGE]:MAXDROP`` / ``METRIC[:STAGE] >= FLOOR`` strings). Reports that are not comparable
    (different qrels, queries, corpus, conventions or budget, not in ``allow``) raise
    :class:`~rag_eval.drivers.gating.NotComparable`, and a side lacking queries the other measured
    :class:`~rag_eval.statistics.paired.UnpairedQueries` (unless
    ``allow`` holds ``"unpaired"``), InputErrors, not AssertionErrors: that is bad input, not a regression. A rule
    below its test's minimum n is inconclusive, so it fails unless ``inconclusive="pass"``; a metric where lower is
    better fails on a rise. ``test``, ``correction``, ``alpha``, ``seed``: as in the gate.
    """
    given: list[Rule | str] = list(rules)
    if metric is not None:
        if max_drop is None:
            raise ValueError("metric= needs max_drop= (the largest drop that does not matter)")
        given.insert(0, Rule(metric, max_drop, stage))
    elif max_drop is not None or stage is not None:
        raise ValueError("max_drop= and stage= go with metric=")
    if not given:
        raise ValueError("no rule: give metric= and max_drop=, or rules=[...]")
    result = gate(
        baseline,
        candidate,
        given,
        test=test,
        correction=correction,
        alpha=alpha,
        inconclusive=inconclusive,
        allow=allow,
        seed=seed,
    )
    if not result.passed:
        raise AssertionError(result.to_text())
    return result
