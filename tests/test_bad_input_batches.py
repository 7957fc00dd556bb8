"""Bad input to batched stages and the streaming runner, one test per kind (rows of docs/bad-input/pipelines.md, section
"Batched stages and executors")."""

from __future__ import annotations

import pytest

from rag_eval.errors import InputError
from rag_eval.stages import Hit, Pipeline, Retriever


class Recording(Retriever):
    def __init__(self, name="r", answers=None, batch=None):
        super().__init__(name, version="1")
        self.answers, self.batch, self.calls = dict(answers or {}), batch, []

    def search(self, query, k):
        self.calls.append(query)
        return self.answers.get(query, [Hit(f"{query}-a", 1.0), Hit(f"{query}-b", 0.5)])

    def search_batch(self, queries, k):
        self.calls.append(tuple(queries))
        if self.batch is not None:
            return self.batch(queries)
        return [self.search(q, k) for q in queries]


def test_batch_size_and_executor_are_checked_before_anything_runs():
    stage = Recording()
    pipe = Pipeline(stage, depth=2)
    for kwargs, message in [
        ({"batch_size": 0}, "batch_size must be 1 or more, not 0"),
        ({"batch_size": True}, "batch_size must be an int, not bool True"),
        ({"batch_size": 2.0}, "batch_size must be an int, not float 2.0"),
        ({"batch_size": "4"}, "batch_size must be an int, not str '4'"),
        ({"batch_size": 10**7}, "batch_size must be at most 1000000, not 10000000"),
        ({"executor": "dask"}, "executor must be None, 'ray' or an executor object (with run_stage), not 'dask'"),
        ({"executor": object}, "executor must be None, 'ray' or an executor object (with run_stage), not <class"),
    ]:
        with pytest.raises(InputError) as info:
            pipe.run({"q": "x"}, **kwargs)
        assert str(info.value).startswith(message), (kwargs, str(info.value))
    assert stage.calls == []


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(lambda queries: None, id="None"),
        pytest.param(lambda queries: "a b", id="a str"),
        pytest.param(lambda queries: {q: [] for q in queries}, id="a dict"),
        pytest.param(lambda queries: [[Hit("z")]] * (len(queries) + 1), id="one list too many"),
        pytest.param(lambda queries: [[Hit("z")]] * (len(queries) - 1), id="one list too few"),
    ],
)
def test_a_batch_answer_that_cannot_be_matched_to_its_queries_is_asked_query_by_query(answer):
    stage = Recording(answers={"two": None}, batch=answer)
    result = Pipeline(stage, depth=2).run({"q1": "one", "q2": "two", "q3": "three"}, batch_size=3)
    assert stage.calls == [("one", "two", "three"), "one", "two", "three"]
    assert result.failures.to_dict("records") == [
        {"stage": "r", "query_id": "q2", "error": "returned None instead of a list of hits"}
    ]  # the fault is the query's own, not the batch's: q1 and q3 keep their answers
    assert [h.doc_id for h in result.stages["r"].outcomes["q3"].hits] == ["three-a", "three-b"]


def test_a_cached_answer_outside_a_new_corpus_is_computed_again(tmp_path):
    stage = Recording(answers={"x": [Hit("a", 1.0), Hit("zz", 0.5)]})
    Pipeline(stage, depth=2, corpus={"a", "zz", "y-a", "y-b"}).run({"q": "x", "p": "y"}, cache=tmp_path)
    assert stage.calls == ["x", "y"]
    # a smaller corpus: the stored answer of q holds zz, outside it; before, it was read back unchecked
    result = Pipeline(stage, depth=2, corpus={"a", "y-a", "y-b"}).run({"q": "x", "p": "y"}, cache=tmp_path)
    assert stage.calls == ["x", "y", "x"]  # q computed again (and checked), p read from the cache
    assert result.failures.to_dict("records") == [
        {"stage": "r", "query_id": "q", "error": "returned doc ids not in the corpus: ['zz']"}
    ]
    assert result.stages["r"].cache_hits == 1
