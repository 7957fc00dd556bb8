"""What the hypothesis tests generate: small id alphabets (so that runs and judgements overlap), grades -1..3, a
few score values (so that ties are common) and the conventions that change how values are computed."""

from __future__ import annotations

from hypothesis import strategies as st

from rag_eval.metrics import PRESETS

DOCS = ["a", "b", "c", "d10", "d9", "e", "f"]  # "d9" > "d10" as strings
COUNTS = {"num_rel", "num_ret", "num_rel_ret"}  # the metrics that count rather than lie in [0, 1]
CONVENTIONS = [
    PRESETS["default"],
    PRESETS["trec_eval"],
    PRESETS["trec_eval"].replace(missing_run="zero", unjudged="remove"),
    PRESETS["default"].replace(relevance_threshold=2, no_relevant="skip"),
    PRESETS["default"].replace(max_depth=3, ties="doc_id"),
    PRESETS["default"].replace(ties="input_order", gain="linear"),
]

grades = st.integers(min_value=-1, max_value=3)
rankings = st.lists(st.sampled_from(DOCS), max_size=10)  # may repeat doc ids
unique_rankings = st.lists(st.sampled_from(DOCS), max_size=len(DOCS), unique=True)


def qrels_dicts(queries: list[str]) -> st.SearchStrategy[dict[str, dict[str, int]]]:
    """Qrels with at least one query, each judging at least one doc."""
    return st.dictionaries(
        st.sampled_from(queries), st.dictionaries(st.sampled_from(DOCS), grades, min_size=1), min_size=1
    )


def score_dicts(queries: list[str], scores: list[float]) -> st.SearchStrategy[dict[str, dict[str, float]]]:
    """Runs by score; a run may hold no query, and a query an empty ranking."""
    return st.dictionaries(st.sampled_from(queries), st.dictionaries(st.sampled_from(DOCS), st.sampled_from(scores)))
