"""Bad input to the adapters' batch settings and batch functions (docs/bad-input/pipelines.md, "Batched adapters")."""

from __future__ import annotations

import pytest

from rag_eval.adapters import functions
from rag_eval.errors import FailingStage, InputError
from rag_eval.stages import Pipeline

QUERIES = {"q1": "cats", "q2": "dogs", "q3": "fish"}


def _search(queries, k):
    return [[f"{q}-{i}" for i in range(k)] for q in queries]


def test_a_batch_flag_that_is_not_a_bool_is_refused():
    for value in ("yes", "no", 1, 0, None):  # "no" is true, 0 false: only a bool says which is meant
        with pytest.raises(InputError, match=rf"stage 'b': batch must be True or False, not {value!r}"):
            functions.retriever(_search, name="b", batch=value)
        with pytest.raises(InputError, match=rf"stage 'b': batch must be True or False, not {value!r}"):
            functions.reranker(lambda qs, hs: hs, name="b", batch=value)


def test_a_max_concurrency_that_is_not_a_count_is_refused():
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda

    from rag_eval.adapters import langchain as lc

    runnable = RunnableLambda(lambda q: [Document(page_content=q, id=q)])
    for value in (0, -1, 2.5, "4", True):
        with pytest.raises(InputError, match=r"stage 'x': max_concurrency must be None or an int of 1 or more, not"):
            lc.retriever(runnable, name="x", max_concurrency=value)
    assert lc.retriever(runnable, name="x", max_concurrency=2).max_concurrency == 2


def test_a_batch_function_answering_another_number_of_queries_fails_those_queries():
    """One ranking short for every batch, a batch of one included: no query takes another's answer; each fails,
    naming the counts."""

    def one_short(queries, k):
        return _search(queries, k)[:-1]

    stage = functions.retriever(one_short, name="short", batch=True)
    with pytest.raises(ValueError, match=r"'short': the batch function returned 0 rankings for 1 query"):
        stage.search("cats", 2)
    with pytest.warns(FailingStage, match=r"stage 'short' failed on 3 of 3 queries"):
        result = Pipeline(stage, depth=2, budget=1).run(QUERIES, batch_size=3, progress=False)
    assert sorted(result.failures.query_id) == ["q1", "q2", "q3"]
    assert set(result.failures.error) == {
        "ValueError: stage 'short': the batch function returned 0 rankings for 1 query (one per query, in their order)"
    }
