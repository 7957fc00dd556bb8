"""Bad input in the stages (layer 3): fusion's settings, and the scores a fusion sums.

Every kind here is a row of docs/bad-input/pipelines.md (section "Stages and fusion"); its last column names the test.
Each refusal is an InputError with the exact message.
"""

from __future__ import annotations

import math

import pytest

from rag_eval import InputError
from rag_eval.errors import FailingStage
from rag_eval.stages import Hit, Pipeline, Retriever, fuse


class Fixed(Retriever):
    def __init__(self, name: str, hits: list[Hit]) -> None:
        super().__init__(name)
        self.hits = hits

    def config(self) -> dict[str, object]:
        return {"hits": [tuple(h) for h in self.hits]}

    def search(self, query: str, k: int) -> list[Hit]:
        return self.hits[:k]


ONE = Fixed("one", [Hit("a", 2.0), Hit("b", 1.0)])
TWO = Fixed("two", [Hit("b", 3.0), Hit("c", 1.0)])


def error_of(call, *args, **kwargs) -> str:
    with pytest.raises(InputError) as info:
        call(*args, **kwargs)
    return str(info.value)


def test_fusion_constant_and_weights_are_checked_when_made():
    """A NaN RRF constant or weight made every fused score NaN, sorted in no order: a silent wrong ranking."""
    for bad, problem in (
        (math.nan, "an int, not float nan"),
        (-1, "0 or more, not -1"),
        (1.5, "an int, not float 1.5"),
        (True, "an int, not bool True"),
        ("60", "an int, not str '60'"),
    ):
        assert error_of(fuse, ONE, TWO, rrf_k=bad) == f"the RRF constant rrf_k must be {problem}"
    assert error_of(fuse, ONE, TWO, weights=[1.0, math.nan]) == (
        "fusion weight 2 (of retriever 'two') must be a finite number, not nan"
    )
    assert error_of(fuse, ONE, TWO, weights=[math.inf, 1], method="combsum") == (
        "fusion weight 1 (of retriever 'one') must be a finite number, not inf"
    )
    # rrf_k=0 and a negative weight are defined: a: 2/1, b: 2/2 - 1/1 = 0, c: -1/2
    assert [(h.doc_id, h.score) for h in fuse(ONE, TWO, rrf_k=0, weights=[2, -1]).search("q", 3)] == [
        ("a", 2.0),
        ("b", 0.0),
        ("c", -0.5),
    ]


def test_combsum_refuses_a_fused_score_it_cannot_order():
    """combsum sums scores: +inf from one input against -inf from another (or inf times a weight of 0) gave a NaN
    fused score, which sorts anywhere. Direct use raises; in a run, the fused stage fails on that query (recorded,
    scored 0) and the other queries go on."""
    up = Fixed("up", [Hit("a", math.inf), Hit("b", 1.0)])
    down = Fixed("down", [Hit("a", -math.inf), Hit("c", 1.0)])
    message = (
        "combsum: doc 'a''s fused score is NaN (an infinite score of one input against the opposite infinity of "
        "another, or an infinite score times a weight of 0), which has no place in the order"
    )
    assert error_of(fuse(up, down, method="combsum").search, "q", 3) == message
    assert error_of(fuse(up, TWO, method="combsum", weights=[0, 1]).search, "q", 3) == message
    with pytest.warns(FailingStage, match=r"stage 'combsum\(up,down\)' failed on 1 of 1 queries"):
        result = Pipeline(fuse(up, down, method="combsum"), depth=3, budget=2).run({"q": "text"})
    assert result.stages["combsum(up,down)"].failures == {"q": f"InputError: {message}"}
    assert not result.stages["up"].failures and not result.stages["down"].failures  # the inputs answered
    # one infinity alone is an order (first), and rrf reads ranks only
    assert [h.doc_id for h in fuse(up, TWO, method="combsum").search("q", 3)] == ["a", "b", "c"]  # b: 1 + 3
    assert [h.doc_id for h in fuse(up, down).search("q", 3)] == ["a", "b", "c"]  # a: 2/61, b and c: 1/62 each
