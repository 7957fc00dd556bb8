"""Bad input of the dialects (rag_eval.metrics.dialects): every foreign name rag_eval cannot read with the meaning
it has in its tool is an InputError that says why; rows in docs/bad-input/values.md, section "Dialects"."""

from __future__ import annotations

import pytest

from rag_eval.errors import InputError
from rag_eval.metrics.grammar import parse_metric


def _refused(text: str, dialect: str | None) -> str:
    with pytest.raises(InputError) as caught:
        parse_metric(text, dialect=dialect)
    return str(caught.value)


@pytest.mark.parametrize(
    ("text", "dialect", "why"),
    [
        ("RBP(p=0.8)", "ir_measures", "cwl_eval"),
        ("IPrec@0.2", "ir_measures", "trec_eval 9's code"),
        ("alpha_nDCG@20", "ir_measures", "subtopic judgements"),
        ("Compat", "ir_measures", "compatibility"),
        ("NERR8(max_rel=3)@10", "ir_measures", "C/W/L"),
        ("rbp.95", "ranx", "raw grade"),
        ("hits@10", "ranx", "summed over queries"),
        ("dcg_burges@10", "ranx", "unnormalised DCG"),
        ("f1@10", "ranx", "no F1 at a cutoff"),
    ],
)
def test_a_foreign_name_rag_eval_cannot_compute_is_refused_with_the_reason(text, dialect, why):
    message = _refused(text, dialect)
    assert "accepts it, but rag_eval cannot compute it" in message and why in message


@pytest.mark.parametrize(
    ("text", "dialect", "suggestion"),
    [
        ("ndcg@10", "ir_measures", "'nDCG'"),  # ir_measures' names are case-sensitive
        ("Precison@5", "ir_measures", "'Precision'"),
        ("NDCG@10", "ranx", "'ndcg'"),
        ("rprecision", "ranx", "'r-precision'"),
        ("hitrate@5", "ranx", "'hit_rate'"),
    ],
)
def test_an_unknown_foreign_name_suggests_the_dialects_own_names(text, dialect, suggestion):
    message = _refused(text, dialect)
    assert message.startswith(f"unknown {dialect} metric") and f"did you mean {suggestion}" in message


@pytest.mark.parametrize(
    ("text", "convention"),
    [
        ("nDCG(judged_only=True)@10", "Conventions(unjudged='remove')"),
        ("P(judged_only=True)@5", "Conventions(unjudged='remove')"),
        ("NumRel", "Conventions(missing_run='skip')"),
        ("NumQ", "Conventions(missing_run='skip')"),
    ],
)
def test_a_foreign_setting_that_belongs_to_the_conventions_is_refused_with_the_convention(text, convention):
    assert convention in _refused(text, "ir_measures")


@pytest.mark.parametrize(
    ("text", "dialect", "message"),
    [
        ("P(rel=True)@5", "ir_measures", "rel must be an integer, not True"),
        ("P@5.5", "ir_measures", "the cutoff must be an integer, not 5.5"),
        ("P@0", "ir_measures", "the cutoff must be 1 or more"),
        ("P(rel=0)@5", "ir_measures", "rel must be 1 or more"),
        ("P(2)@5", "ir_measures", "parameters must be named"),
        ("P(rel=x)@5", "ir_measures", "not a literal value"),
        ("P(cutoff=5)@5", "ir_measures", "cutoff given twice"),
        ("Judged(rel=2)@5", "ir_measures", "no parameter 'rel'"),
        ("SetF(beta=float('inf'))", "ir_measures", "not a literal value"),
        ("SetF(beta=1e400)", "ir_measures", "beta must be a finite number"),
        ("nDCG(gains={1: -3})@5", "ir_measures", "a gain must be 0 or more"),
        ("nDCG(gains=[1, 2])@5", "ir_measures", "gains must be a non-empty dict"),
        ("nDCG(dcg='exp-log2',gains={1: 3})@5", "ir_measures", "with gains="),
        ("P@5;import os", "ir_measures", "cannot read ir_measures metric"),
        ("ndcg.10", "ranx", "write 'ndcg@10'"),
        ("ndcg@10-l0", "ranx", "rel must be 1 or more"),
        ("ndcg@99999999999", "ranx", "the cutoff must be at most"),
        ("ndcg@ten", "ranx", "cannot read ranx metric"),
    ],
)
def test_malformed_foreign_parameters_are_refused(text, dialect, message):
    assert message in _refused(text, dialect)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ndcg(ties=random)@10", "ties='random'; choose one of trec_eval, doc_id, input_order"),
        ("judged(per=all)@5", "per='all'; choose one of returned, k"),
        ("judged(empty=1)@5", "empty='1'; choose one of nan, zero"),
        ("num_ret(ties=doc_id)", "unknown parameter 'ties'"),  # a count does not depend on the order
    ],
)
def test_a_bad_tie_rule_or_judged_denominator_is_refused(text, message):
    assert message in _refused(text, None)
