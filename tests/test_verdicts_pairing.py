"""Issue 27, classes 1, 2 and 12(a): a verdict says what it rests on. Every metric knows its direction; a paired
comparison says how many queries were on one side only (and the gate refuses them unless allowed); an interval
below its method's minimum n is inconclusive (gate) or refused (estimate), and a zero-width one is announced."""

from __future__ import annotations

import pytest

from rag_eval.errors import InputError
from rag_eval.metrics import direction, higher_is_better
from rag_eval.metrics.catalogue import FAMILIES, REPORTED

# --- 12(a): every metric knows its direction ---


@pytest.mark.parametrize(
    "name",
    [
        "recall@10",
        "ndcg@10",
        "ndcg_cut_10",
        "P@5",
        "map",
        "mrr",
        "judged@10",
        "recall@budget",
        "ndcg@depth",
        "rerank_gain@budget",
        "cand_ndcg@budget",
        "loss.delivered",
        "num_rel_ret",
        "set_f(beta=4)",
        "utility",
    ],
)
def test_higher_is_better(name: str) -> None:
    assert higher_is_better(name) is True
    assert direction(name) == "higher"


@pytest.mark.parametrize(
    "name",
    [
        "loss.never_retrieved",
        "loss.below_depth",
        "loss.reranked_out",
        "loss.failed",
        "unjudged@10",
        "unj@5",
        "rbp_resid",
        "rbp_resid(p=0.5)@10",
        "num_nonrel_judged_ret",
        "latency",
        "latency.p95",
        "LOSS.Never_Retrieved",
    ],
)
def test_lower_is_better(name: str) -> None:
    assert higher_is_better(name) is False
    assert direction(name) == "lower"


@pytest.mark.parametrize("name", ["num_ret", "num_rel", "num_q", "relstring@10", "runid"])
def test_no_better_side_is_refused(name: str) -> None:
    assert direction(name) == "none"
    with pytest.raises(InputError, match="no better side"):
        higher_is_better(name)


@pytest.mark.parametrize("name", ["recal@10", "loss.nowhere", "latency.p99", "", "gain@budget"])
def test_unknown_name_is_refused(name: str) -> None:
    with pytest.raises(InputError):
        higher_is_better(name)


def test_direction_is_read_from_the_family_records() -> None:
    lower = {n for n, f in {**FAMILIES, **REPORTED}.items() if f.direction == "lower"}
    assert lower == {
        "unjudged",
        "rbp_resid",
        "num_nonrel_judged_ret",
        "loss.never_retrieved",
        "loss.below_depth",
        "loss.reranked_out",
        "loss.failed",
        "latency",
        "latency.p50",
        "latency.p95",
    }
