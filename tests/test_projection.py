"""Projection of span, document and chunk labels onto ranked chunks, with hand-computed values: the threshold's
edge, a chunk covering two spans, two chunks covering one span, document labels with repeated chunks, uncovered
spans in recall's denominator, real LlamaIndex and LangChain chunkings through the real adapters, bad input."""

from __future__ import annotations

import math
import warnings

import pytest

import rag_eval
from rag_eval import InputError, Run, SpanLabels, project
from rag_eval.data import ChunkRef, Qrels, Span
from rag_eval.ground_truth import ProjectionRules
from rag_eval.stages import Pipeline, chunk_map


def measure(qrels, runs, metrics, **options):
    """rag_eval.evaluate, without the judged-share warning (these fixtures leave some chunks unjudged on purpose)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*lower bounds.*")
        return rag_eval.evaluate(qrels, runs, metrics, **options)


def value(report, metric, query, run=None):
    return float(report.values(run or report.runs[0], metric)[query])


def statuses(projection, query="q"):
    frame = projection.to_frame()
    return list(frame[frame.query_id == query].status)


# -- the overlap threshold, at its edge --------------------------------------------------------------------------
# one span d1[10:20) (10 characters); chunks overlap it by 5, 8, 10 and 3 characters
EDGE_LABELS = SpanLabels([Span("d1", 10, 20, 1, "q")])
EDGE_CHUNKS = {"c5": ("d1", 0, 15), "c8": ("d1", 12, 40), "c10": ("d1", 10, 20), "c3": ("d1", 17, 30)}


@pytest.mark.parametrize(
    ("rule", "covering"),
    [
        ({}, ["c10"]),  # default: the whole answer (share 1.0)
        ({"min_overlap_share": 1.0}, ["c10"]),
        ({"min_overlap_share": 0.8}, ["c8", "c10"]),  # needs 8: exactly 8 counts
        ({"min_overlap_share": 0.81}, ["c10"]),  # needs ceil(8.1) = 9
        ({"min_overlap_share": 0.5}, ["c5", "c8", "c10"]),  # needs 5
        ({"min_overlap_share": 0.51}, ["c8", "c10"]),  # needs 6
        ({"min_overlap_share": 0.3}, ["c5", "c8", "c10", "c3"]),  # 0.3 * 10 = 3.0000000000000004 in floats: still 3
        ({"min_overlap_chars": 3}, ["c5", "c8", "c10", "c3"]),
        ({"min_overlap_chars": 4}, ["c5", "c8", "c10"]),
        ({"min_overlap_chars": 6}, ["c8", "c10"]),
        ({"min_overlap_chars": 10}, ["c10"]),
        ({"min_overlap_chars": 50}, ["c10"]),  # capped at the span's length: the whole answer always counts
    ],
)
def test_overlap_threshold_edge(rule, covering):
    for chunk in EDGE_CHUNKS:
        p = project({"q": [chunk]}, EDGE_CHUNKS, EDGE_LABELS, **rule)
        assert statuses(p) == (["unit"] if chunk in covering else ["nonrelevant"]), chunk


def test_threshold_decides_recall_and_mrr():
    ranking = {"q": ["c5", "c8", "c10"]}
    whole = project(ranking, EDGE_CHUNKS, EDGE_LABELS)
    half = project(ranking, EDGE_CHUNKS, EDGE_LABELS, min_overlap_share=0.5)
    assert statuses(whole) == ["nonrelevant", "nonrelevant", "unit"]
    assert statuses(half) == ["unit", "wasted", "wasted"]
    report = measure(EDGE_LABELS, {"whole": whole, "half": half}, ["recall@1", "mrr", "precision@3"])
    assert value(report, "recall@1", "q", "whole") == 0.0 and value(report, "recall@1", "q", "half") == 1.0
    assert value(report, "mrr", "q", "whole") == pytest.approx(1 / 3) and value(report, "mrr", "q", "half") == 1.0
    assert value(report, "precision@3", "q", "whole") == pytest.approx(1 / 3)
    assert value(report, "precision@3", "q", "half") == pytest.approx(1 / 3)  # the two repeats are wasted


def test_rules_validated_and_described():
    assert ProjectionRules().min_overlap_share == 1.0
    assert ProjectionRules().needed(7) == 7 and ProjectionRules(min_overlap_share=0.5).needed(7) == 4
    assert ProjectionRules(min_overlap_chars=3).needed(2) == 2
    assert "min_overlap_chars=3" in ProjectionRules(min_overlap_chars=3).describe()
    for bad in (
        {"min_overlap_chars": 3, "min_overlap_share": 0.5},
        {"min_overlap_share": 0},
        {"min_overlap_share": 1.5},
        {"min_overlap_chars": 0},
        {"min_overlap_chars": 2.5},
        {"ties": "random"},
    ):
        with pytest.raises(ValueError):
            ProjectionRules(**bad)


# -- one chunk covering two spans, two chunks covering one span --------------------------------------------------
TWO_SPANS = SpanLabels([Span("d1", 10, 20, 1, "q"), Span("d1", 30, 35, 2, "q")])
TWO_CHUNKS = {"big": ("d1", 0, 40), "s1": ("d1", 5, 25), "s2": ("d1", 28, 38)}


def test_chunk_covering_two_spans_is_credited_with_one():
    p = project({"q": ["big", "s1", "s2"]}, TWO_CHUNKS, TWO_SPANS)
    frame = p.to_frame()
    # big holds both answers: credited with the higher grade (d1[30:35], grade 2); s1 then takes d1[10:20]
    assert list(frame.id) == ["d1[30:35]", "d1[10:20]", "s2"]
    assert statuses(p) == ["unit", "unit", "wasted"]
    assert p.counts["q"] == (2, 2, 1, 3)
    assert p.qrels.to_dict() == {"q": {"d1[10:20]": 1, "d1[30:35]": 2, "s2": 0}}
    report = measure(TWO_SPANS, p, ["recall@1", "recall@2", "ndcg@3", "precision@2"])
    assert value(report, "recall@1", "q") == 0.5  # one position, one unit
    assert value(report, "recall@2", "q") == 1.0
    assert value(report, "precision@2", "q") == 1.0
    assert value(report, "ndcg@3", "q") == pytest.approx(1.0)  # grade 2 first, then grade 1: the ideal order


def test_chunk_covering_two_spans_after_one_is_credited():
    p = project({"q": ["s1", "big"]}, TWO_CHUNKS, TWO_SPANS)
    assert statuses(p) == ["unit", "unit"]  # big's d1[10:20] is taken, its d1[30:35] is new
    report = measure(TWO_SPANS, p, ["ndcg@2"])
    # exp gains: grade 1 -> 1 at rank 1, grade 2 -> 3 at rank 2; ideal 3 then 1
    expected = (1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert value(report, "ndcg@2", "q") == pytest.approx(expected)
    assert expected == pytest.approx(0.796708, abs=1e-6)


def test_two_chunks_covering_one_span_count_once():
    labels = SpanLabels([Span("d1", 100, 110, 1, "q")])
    chunks = {"o1": ("d1", 80, 120), "o2": ("d1", 90, 130), "far": ("d1", 0, 50), "x": ("d2", 0, 50)}
    p = project({"q": ["o1", "x", "o2", "far"]}, chunks, labels)
    assert statuses(p) == ["unit", "unjudged", "wasted", "nonrelevant"]
    assert p.counts["q"] == (1, 1, 1, 4)
    assert p.wasted_share == 0.25
    assert p.qrels.to_dict() == {"q": {"d1[100:110]": 1, "o2": 0, "far": 0}}
    report = measure(labels, p, ["recall@4", "precision@4", "judged@4"])
    assert value(report, "recall@4", "q") == 1.0
    assert value(report, "precision@4", "q") == 0.25  # not 0.5: o2 repeats the answer o1 delivered
    assert value(report, "judged@4", "q") == 0.75  # x comes from a document nobody labelled


def test_alternative_spans_form_one_unit():
    # two annotators' answers to one question: "Denver Broncos" and "the Denver Broncos"
    labels = SpanLabels([Span("a0", 177, 191, 1, "q", unit="ans"), Span("a0", 173, 191, 1, "q", unit="ans")])
    chunks = {"k1": ("a0", 175, 300), "k2": ("a0", 0, 176)}
    p = project({"q": ["k2", "k1"]}, chunks, labels)
    assert statuses(p) == ["nonrelevant", "unit"]
    assert p.qrels.to_dict() == {"q": {"ans": 1, "k2": 0}}
    assert p.counts["q"].units == 1


# -- document-level labels -----------------------------------------------------------------------------------------
DOC_LABELS = SpanLabels(docs={"q": {"A": 1, "B": 2, "C": 0}})
DOC_CHUNKS = {"a1": "A", "a2": "A", "a3": ("A", 10, 20), "b1": ("B",), "c1": ChunkRef("C"), "e1": "E"}


def test_document_labels_count_each_document_once():
    p = project({"q": ["a1", "a2", "b1", "a3", "c1", "e1"]}, DOC_CHUNKS, DOC_LABELS)
    assert statuses(p) == ["unit", "wasted", "unit", "wasted", "unit", "unjudged"]
    assert list(p.to_frame().id) == ["A", "a2", "B", "a3", "C", "e1"]
    assert p.counts["q"] == (2, 2, 2, 6)
    report = measure(DOC_LABELS, p, ["precision@5", "precision@2", "recall@2", "recall@3", "ndcg@3", "num_rel"])
    assert value(report, "precision@5", "q") == 0.4  # distinct relevant documents A and B in the top 5, over 5
    assert value(report, "precision@2", "q") == 0.5
    assert value(report, "recall@2", "q") == 0.5
    assert value(report, "recall@3", "q") == 1.0
    assert value(report, "num_rel", "q") == 2
    # A (gain 1) at rank 1, B (gain 3) at rank 3: (1 + 3/2) / (3 + 1/log2 3)
    assert value(report, "ndcg@3", "q") == pytest.approx(2.5 / (3 + 1 / math.log2(3)))


def test_document_labels_from_a_run_ranked_by_score():
    run = Run.from_scores({"q": {"a1": 3.0, "a2": 2.0, "b1": 2.0, "e1": 1.0}}, name="bm25")
    p = project(run, DOC_CHUNKS, DOC_LABELS)  # ties by trec_eval's rule: b1 before a2 (doc id descending)
    assert list(p.to_frame().chunk_id) == ["a1", "b1", "a2", "e1"]
    assert p.run.name == "bm25" and p.run.ranked_by == "given"
    assert [s for _, s in p.run.ranking("q")] == [3.0, 2.0, 2.0, 1.0]
    p_input = project(run, DOC_CHUNKS, DOC_LABELS, ties="input_order")
    assert list(p_input.to_frame().chunk_id) == ["a1", "a2", "b1", "e1"]


def test_chunk_labels_used_as_given():
    labels = SpanLabels(chunks={"q": {"k1": 2, "k2": 0}})
    p = project({"q": ["k2", "k1", "k3", "k1"]}, None, labels)
    assert statuses(p) == ["unit", "unit", "unjudged", "wasted"]
    assert list(p.to_frame().id) == ["k2", "k1", "k3", "k1#4"]  # a repeat gets its own id: no duplicate warning
    assert p.counts["q"] == (1, 1, 1, 4)


def test_qrels_as_doc_or_chunk_labels():
    qrels = Qrels.from_dict({"q": {"A": 1}})
    assert SpanLabels.from_qrels(qrels, level="doc").docs("q") == {"A": 1}
    assert SpanLabels.from_qrels(qrels, level="chunk").chunks("q") == {"A": 1}
    with pytest.raises(ValueError, match="level"):
        SpanLabels.from_qrels(qrels, level="span")


# -- recall's denominator: every unit, covered or not ------------------------------------------------------------
def test_recall_counts_units_no_chunk_covers():
    labels = SpanLabels(
        [Span("d1", 0, 5, 1, "q"), Span("d2", 0, 5, 1, "q"), Span("d3", 40, 45, 1, "q"), Span("d1", 0, 5, 1, "absent")]
    )
    chunks = {"x1": ("d1", 0, 100), "x2": ("d2", 50, 100), "x9": ("d9", 0, 10)}
    p = project({"q": ["x2", "x1", "x9"], "unlabelled": ["x1"]}, chunks, labels)
    assert p.counts["q"] == (3, 1, 0, 3)
    assert p.counts["absent"] == (1, 0, 0, 0)
    assert "absent" in p.qrels and "absent" not in p.run and "unlabelled" not in p.qrels
    report = measure(labels, p, ["recall@10", "recall@1", "mrr"])
    assert value(report, "recall@10", "q") == pytest.approx(1 / 3)
    assert value(report, "recall@1", "q") == 0.0
    assert value(report, "mrr", "q") == 0.5
    assert value(report, "recall@10", "absent") == 0.0  # in the labels, not in the ranking: an empty ranking
    assert "unlabelled" not in set(report.per_query.query_id)
    left_out = report.card.queries[0].left_out
    assert left_out == {"run_only": ["unlabelled"]}


def test_projection_keeps_every_position_without_warning():
    labels = SpanLabels([Span("d1", 0, 5, 1, "q")])
    chunks = {"c": ("d1", 0, 10), "d1[0:5]": ("d1", 0, 10)}  # a chunk id that equals the unit's id
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = project({"q": ["c", "c", "d1[0:5]", "c"]}, chunks, labels)
    assert list(p.to_frame().id) == ["d1[0:5]", "c", "d1[0:5]#3", "c#4"]
    assert p.run.num_entries == 4 and len(p.chunk_ids) == 4


# -- the report: one call for several projections, the rules on the card ------------------------------------------
def test_evaluate_projections_side_by_side_with_the_rules_on_the_card():
    labels = SpanLabels([Span("d1", 10, 20, 1, "q")])
    whole = project({"q": ["c5", "c10"]}, EDGE_CHUNKS, labels)
    chars = project({"q": ["c5", "c10"]}, EDGE_CHUNKS, labels, min_overlap_chars=5)
    report = measure(labels, {"whole": whole, "5chars": chars}, ["mrr"])
    assert report.runs == ["whole", "5chars"]
    assert value(report, "mrr", "q", "whole") == 0.5 and value(report, "mrr", "q", "5chars") == 1.0
    card = report.card.render()
    assert "min_overlap_share=1" in card and "min_overlap_chars=5" in card
    assert "1 queries: 1 answer spans in 1 answer units" in card
    assert "1 relevant units, 1 credited in the ranking (100.0%), 1 wasted positions of 2" in card
    single = measure(whole.qrels, whole.run, ["mrr"])  # the plain route: the run's notes carry the rules
    assert "min_overlap_share=1" in single.card.render()
    with pytest.raises(TypeError, match="SpanLabels"):
        rag_eval.evaluate(whole.qrels, whole, ["mrr"])
    with pytest.raises(ValueError, match="other labels"):
        rag_eval.evaluate(TWO_SPANS, whole, ["mrr"])


# -- real chunkings through the real adapters -------------------------------------------------------------------
NILE = (
    "The Nile flows north through eleven countries. Its longest tributary is the White Nile. "
    "The Aswan High Dam was completed in 1970. It holds back Lake Nasser. "
    "Cairo lies on the banks of the Nile delta. Millions of people live there today."
)
# answers: "White Nile" [76, 86), "1970" [124, 128), "Lake Nasser" [144, 155), "Cairo" [157, 162)


def _answers(**per_query: list[str]) -> SpanLabels:
    return SpanLabels([Span("nile", None, None, 1, q, answer=a) for q, answers in per_query.items() for a in answers])


def test_llamaindex_sentence_splitter_through_the_adapter():
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore

    from rag_eval.adapters import llamaindex

    splitter = SentenceSplitter(chunk_size=20, chunk_overlap=0, tokenizer=str.split, id_func=lambda i, d: f"nile-{i}")
    nodes = splitter.get_nodes_from_documents([Document(text=NILE, id_="nile")])
    assert [(n.node_id, n.start_char_idx, n.end_char_idx) for n in nodes] == [
        ("nile-0", 0, 87),
        ("nile-1", 88, 156),
        ("nile-2", 157, 236),
    ]

    order = {
        "When was the dam completed?": ["nile-2", "nile-1", "nile-0"],
        "Which river and which city?": ["nile-0", "nile-1", "nile-2"],
    }
    by_id = {n.node_id: n for n in nodes}

    class Fixed(BaseRetriever):
        def _retrieve(self, query_bundle):
            ids = order[query_bundle.query_str]
            return [NodeWithScore(node=by_id[i], score=1.0 / (r + 1)) for r, i in enumerate(ids)]

    pipe = Pipeline(llamaindex.retriever(Fixed(), name="fixed"), depth=3, budget=3)
    result = pipe.run({"dam": "When was the dam completed?", "two": "Which river and which city?"})
    refs = chunk_map(result)
    assert refs == {
        "nile-0": ChunkRef("nile", 0, 87),
        "nile-1": ChunkRef("nile", 88, 156),
        "nile-2": ChunkRef("nile", 157, 236),
    }
    labels = _answers(dam=["1970"], two=["White Nile", "Cairo"]).locate({"nile": NILE})
    assert [(s.start, s.end) for s in labels.spans("two")] == [(76, 86), (157, 162)]
    p = project(result.runs["fixed"], refs, labels)
    assert statuses(p, "dam") == ["nonrelevant", "unit", "nonrelevant"]
    assert statuses(p, "two") == ["unit", "nonrelevant", "unit"]
    report = measure(labels, {"fixed": p}, ["mrr", "recall@1", "recall@3", "precision@3"])
    assert value(report, "mrr", "dam") == 0.5
    assert value(report, "recall@1", "two") == 0.5 and value(report, "recall@3", "two") == 1.0
    assert value(report, "precision@3", "two") == pytest.approx(2 / 3)


def test_langchain_recursive_splitter_with_start_index_through_the_adapter():
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from rag_eval.adapters import langchain

    splitter = RecursiveCharacterTextSplitter(chunk_size=80, chunk_overlap=40, add_start_index=True)
    chunks = splitter.split_documents([Document(page_content=NILE, metadata={"source": "nile"})])
    for i, chunk in enumerate(chunks):
        chunk.id = f"lc-{i}"
    spans = [(c.metadata["start_index"], c.metadata["start_index"] + len(c.page_content)) for c in chunks]
    assert spans == [(0, 75), (36, 110), (72, 148), (111, 187), (149, 223), (184, 236)]  # overlapping chunks

    order = {"lake": [2, 4, 3], "dam": [3, 2, 5]}
    texts = {"What lake does the dam hold back?": "lake", "When was the dam completed?": "dam"}

    class Fixed(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager=None):
            return [chunks[i] for i in order[texts[query]]]

    pipe = Pipeline(langchain.retriever(Fixed(), name="fixed"), depth=3, budget=3)
    result = pipe.run({q: t for t, q in texts.items()})
    refs = chunk_map(result, doc_key="source")
    assert refs["lc-2"] == ChunkRef("nile", 72, 148) and refs["lc-5"] == ChunkRef("nile", 184, 236)
    labels = _answers(lake=["Lake Nasser"], dam=["1970"]).locate({"nile": NILE})
    run = result.runs["fixed"]
    # "Lake Nasser" [144, 155): lc-2 holds 4 of its 11 characters, lc-4 holds 6, lc-3 all 11
    whole = project(run, refs, labels)
    half = project(run, refs, labels, min_overlap_share=0.5)  # needs 6
    four = project(run, refs, labels, min_overlap_chars=4)
    assert statuses(whole, "lake") == ["nonrelevant", "nonrelevant", "unit"]
    assert statuses(half, "lake") == ["nonrelevant", "unit", "wasted"]
    assert statuses(four, "lake") == ["unit", "wasted", "wasted"]
    # "1970" [124, 128) lies in lc-3 and in lc-2: the second is wasted; lc-5 is judged, from the same document
    assert statuses(whole, "dam") == ["unit", "wasted", "nonrelevant"]
    report = measure(labels, {"whole": whole, "half": half, "four": four}, ["mrr", "precision@3"])
    assert [value(report, "mrr", "lake", r) for r in ("whole", "half", "four")] == pytest.approx([1 / 3, 1 / 2, 1])
    assert value(report, "precision@3", "dam", "whole") == pytest.approx(1 / 3)
    assert whole.counts["dam"] == (1, 1, 1, 3) and four.counts["lake"] == (1, 1, 2, 3)


# -- bad input -----------------------------------------------------------------------------------------------------
def test_bad_input():
    labels = SpanLabels([Span("d1", 0, 5, 1, "q")])
    with pytest.raises(InputError, match=r"chunk map: chunk 'c': offsets \[9, 3\) in document 'd1' are not a range"):
        project({"q": ["c"]}, {"c": ("d1", 9, 3)}, labels)
    with pytest.raises(InputError, match="chunk 'c': start '0' is not an integer"):
        project({"q": ["c"]}, {"c": ("d1", "0", 3)}, labels)
    with pytest.raises(InputError, match="chunk 'c': expected ChunkRef"):
        project({"q": ["c"]}, {"c": ("d1", 0)}, labels)
    with pytest.raises(InputError, match="chunk id 7 is a int"):
        project({"q": [7]}, {}, labels)
    with pytest.raises(InputError, match="mixes bare chunk ids"):
        project({"q": ["a"], "r": [("b", 1.0)]}, {}, labels)
    with pytest.raises(TypeError, match="SpanLabels"):
        project({"q": ["c"]}, {}, Qrels.from_dict({"q": {"d1": 1}}))
    with pytest.raises(ValueError, match="locate"):
        project({"q": ["c"]}, {}, _answers(q=["Nile"]))
    clash = SpanLabels(docs={"q": {"k": 1}}, chunks={"q": {"k": 1}})
    with pytest.raises(InputError, match="'k' names two labels"):
        project({"q": ["k"]}, {}, clash)
    with pytest.raises(ValueError, match="not both"):
        project({"q": ["c"]}, {}, labels, min_overlap_chars=2, min_overlap_share=0.5)


def test_chunks_missing_from_the_map_or_without_offsets_are_warned():
    labels = SpanLabels([Span("d1", 0, 5, 1, "q")])
    with pytest.warns(UserWarning, match="1 position\\(s\\) hold a chunk that is not in the chunk map"):
        p = project({"q": ["lost", "c"]}, {"c": ("d1", 0, 9)}, labels)
    assert statuses(p) == ["unjudged", "unit"]
    with pytest.warns(UserWarning, match="without character offsets"):
        p = project({"q": ["c"]}, {"c": "d1"}, labels)
    assert statuses(p) == ["nonrelevant"]


def test_chunk_map_needs_a_source_document():
    from rag_eval import Hit

    with pytest.raises(InputError, match=r"no hit carries a source document id.*doc_key="):
        chunk_map([Hit("c1", metadata={"start_index": 3})])
    refs = chunk_map([Hit("c1", text="abcd", metadata={"doc": 5, "start_index": 3}), Hit("c2")], doc_key="doc")
    assert refs == {"c1": ChunkRef("5", 3, 7)}
    refs = chunk_map({"q": [Hit("c1", metadata={"ref_doc_id": "D", "start_char_idx": 0, "end_char_idx": 4})]})
    assert refs == {"c1": ChunkRef("D", 0, 4)}
