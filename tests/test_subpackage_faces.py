"""Every subpackage's face is pinned: an explicit ``__all__`` of what users import, each name resolving, and no
module of the subpackage sharing its name with a name the subpackage exports (``rag_eval.statistics.compare`` is the
function, never a module that the function's import would shadow)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

FACES = {
    "rag_eval.adapters": [],
    "rag_eval.builtin": [],
    "rag_eval.builtin.demo_data": [],
    "rag_eval.cli": [
        "EXIT_BAD_INPUT",
        "EXIT_INCOMPLETE",
        "SHARED_OPTIONS",
        "build_parser",
        "main",
        "resolve_metrics",
        "run_names",
    ],
    "rag_eval.data": [
        "Chunk",
        "ChunkRef",
        "Collection",
        "GradedBy",
        "JudgeShare",
        "Qrels",
        "QueryProvenance",
        "QuerySet",
        "QuerySetCard",
        "Run",
        "Source",
        "Span",
        "SpanLabels",
    ],
    "rag_eval.examples": ["BEIR_FOLDER", "FOLDER"],
    "rag_eval.ground_truth": [
        "Agreement",
        "HumanSample",
        "JudgeAgreement",
        "JudgedAnswers",
        "Judgement",
        "JudgementLog",
        "JudgingRun",
        "Kappa",
        "Merged",
        "Pool",
        "PoolItem",
        "Projection",
        "ProjectionRules",
        "QueryCounts",
        "UtilityLabels",
        "check_complete",
        "cohen_kappa",
        "draw_human_sample",
        "impact_order",
        "impact_weights",
        "judge",
        "judge_agreement",
        "judge_answers",
        "judge_uncertainty",
        "load_judge",
        "log_agreement",
        "merge",
        "merge_near_duplicates",
        "pool",
        "project",
        "sample_queries",
        "utility_labels",
        "write_qrels",
    ],
    "rag_eval.labelling": [
        "LabellingServer",
        "LabellingSession",
        "RequestError",
        "log_path_for",
        "parse_scale",
        "serve",
    ],
    "rag_eval.metrics": [
        "PRESETS",
        "Conventions",
        "Metric",
        "direction",
        "higher_is_better",
        "load_plugins",
        "parse_metric",
        "parse_metrics",
        "register",
    ],
    "rag_eval.drivers": ["GateResult", "Space", "gate", "tune"],
    "rag_eval.renderers": [
        "FORMATS",
        "format_comparison",
        "format_report",
        "format_trec_eval",
        "load_manifest",
        "load_results",
        "write_folder",
        "write_html",
    ],
    "rag_eval.reports": ["DEFAULT_METRICS", "MetricCard", "Report", "evaluate"],
    "rag_eval.statistics": [
        "AnswerAgreement",
        "AnswerPrediction",
        "Comparison",
        "ConditionEffects",
        "Drift",
        "JudgeAssisted",
        "PPIInterval",
        "PowerAnalysis",
        "RankingAgreement",
        "answer_agreement",
        "answer_predictors",
        "budget_curve",
        "compare",
        "condition_effects",
        "drift",
        "human_interval",
        "judge_assisted",
        "judge_interval",
        "power",
        "ppi_interval",
        "ranking_agreement",
    ],
    "rag_eval.stages": [
        "BaseJudge",
        "Budget",
        "Executor",
        "Fingerprint",
        "Fusion",
        "Hit",
        "Judge",
        "JudgeGrade",
        "JudgeItem",
        "Outcome",
        "Pipeline",
        "PipelineResult",
        "PipelineSpec",
        "RayExecutor",
        "Reranker",
        "Retriever",
        "Stage",
        "StageCache",
        "StageOutput",
        "StageSpec",
        "Uncacheable",
        "chunk_map",
        "count_tokens",
        "from_traces",
        "fuse",
    ],
}


def test_every_subpackage_is_pinned_here():
    import rag_eval

    found = {
        info.name
        for info in pkgutil.walk_packages(rag_eval.__path__, prefix="rag_eval.", onerror=lambda name: None)
        if info.ispkg
    } | {"rag_eval.adapters"}
    assert found == set(FACES)


@pytest.mark.parametrize("package", sorted(FACES))
def test_the_face_is_pinned_and_resolves(package):
    module = importlib.import_module(package)
    assert module.__all__ == FACES[package]
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"


@pytest.mark.parametrize("package", sorted(FACES))
def test_no_module_is_named_after_an_exported_name(package):
    module = importlib.import_module(package)
    modules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    assert modules & set(module.__all__) == set()


def test_a_subpackage_name_never_resolves_to_a_module_where_a_function_is_meant():
    import types

    import rag_eval.ground_truth
    import rag_eval.reports
    import rag_eval.stages
    import rag_eval.statistics

    for function in (
        rag_eval.reports.evaluate,
        rag_eval.statistics.compare,
        rag_eval.ground_truth.pool,
        rag_eval.stages.chunk_map,
    ):
        assert callable(function) and not isinstance(function, types.ModuleType)
