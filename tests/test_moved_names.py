"""Old import paths of names that moved (rag_eval.statistics, rag_eval.renderers, rag_eval.drivers): each still
imports, is the very object of the new path, and warns a DeprecationWarning naming that path."""

from __future__ import annotations

import importlib

import pytest

from .test_layers import ALIASES

NEW = {
    "rag_eval.ground_truth._agreement_text": "rag_eval.ground_truth.agreement_text",
    "rag_eval.reports._fates": "rag_eval.reports.fates",
    "rag_eval.reports._markdown": "rag_eval._markdown",
    "rag_eval.reports._stage_pairs": "rag_eval.renderers.stage_pairs",
    "rag_eval.reports._systems": "rag_eval.statistics.systems",
    "rag_eval.reports.comparison": "rag_eval.statistics.comparison",
    "rag_eval.reports.formats": "rag_eval.renderers.formats",
    "rag_eval.reports.gate": "rag_eval.drivers.gating",
    "rag_eval.reports.html_report": "rag_eval.renderers.html_report",
    "rag_eval.reports.power_analysis": "rag_eval.statistics.power_analysis",
    "rag_eval.reports.prediction_powered": "rag_eval.statistics.prediction_powered",
    "rag_eval.reports.result_folder": "rag_eval.renderers.result_folder",
    "rag_eval.reports.statistics": "rag_eval.statistics.paired",
    "rag_eval.reports.trec_eval": "rag_eval.renderers.trec_eval",
    "rag_eval.reports.tuning": "rag_eval.drivers.tuning",
}


def test_every_alias_has_its_new_path():
    assert sorted(NEW) == ALIASES


@pytest.mark.parametrize("old", sorted(NEW))
def test_an_old_module_path_gives_the_new_module_s_names_with_a_warning(old):
    new = importlib.import_module(NEW[old])
    module = importlib.import_module(old)
    names = getattr(new, "__all__", None) or [n for n in vars(new) if not n.startswith("__")]
    assert names
    for name in names:
        with pytest.warns(DeprecationWarning, match=rf"^{old}\.{name} moved to {NEW[old]}\.{name}$"):
            assert getattr(module, name) is getattr(new, name)
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018


def test_from_import_of_an_old_path_warns_at_the_importer():
    with pytest.warns(
        DeprecationWarning, match="rag_eval.reports.gate.gate moved to rag_eval.drivers.gating.gate"
    ) as got:
        from rag_eval.reports.gate import gate
    from rag_eval.drivers import gate as new

    assert gate is new
    assert got[0].filename == __file__  # where the user wrote the import, not rag_eval's code


FACES = [
    ("rag_eval.reports", "compare", "rag_eval.statistics"),
    ("rag_eval.reports", "Comparison", "rag_eval.statistics"),
    ("rag_eval.reports", "power", "rag_eval.statistics"),
    ("rag_eval.reports", "PowerAnalysis", "rag_eval.statistics"),
    ("rag_eval.reports", "judge_assisted", "rag_eval.statistics"),
    ("rag_eval.reports", "JudgeAssisted", "rag_eval.statistics"),
    ("rag_eval.reports", "ppi_interval", "rag_eval.statistics"),
    ("rag_eval.reports", "PPIInterval", "rag_eval.statistics"),
    ("rag_eval.reports", "human_interval", "rag_eval.statistics"),
    ("rag_eval.reports", "judge_interval", "rag_eval.statistics"),
    ("rag_eval.reports", "FORMATS", "rag_eval.renderers"),
    ("rag_eval.reports", "format_report", "rag_eval.renderers"),
    ("rag_eval.reports", "format_comparison", "rag_eval.renderers"),
    ("rag_eval.reports", "format_trec_eval", "rag_eval.renderers"),
    ("rag_eval.ground_truth", "RankingAgreement", "rag_eval.statistics"),
    ("rag_eval.ground_truth", "ranking_agreement", "rag_eval.statistics"),
    ("rag_eval.ground_truth.agreement", "RankingAgreement", "rag_eval.statistics"),
    ("rag_eval.ground_truth.agreement", "ranking_agreement", "rag_eval.statistics"),
]


@pytest.mark.parametrize(("face", "name", "new"), FACES)
def test_a_name_that_left_a_face_still_resolves_with_a_warning(face, name, new):
    module = importlib.import_module(face)
    assert name not in module.__all__ if hasattr(module, "__all__") else True
    with pytest.warns(DeprecationWarning, match=rf"^{face}\.{name} moved to {new}\.{name}$"):
        assert getattr(module, name) is getattr(importlib.import_module(new), name)


def test_every_name_that_left_a_face_is_tested_here():
    for face in ("rag_eval.reports", "rag_eval.ground_truth", "rag_eval.ground_truth.agreement"):
        moved = importlib.import_module(face).__dict__["__getattr__"].moved
        assert sorted(moved) == sorted(n for f, n, _ in FACES if f == face)


def test_the_top_level_names_come_from_the_new_rooms():
    import rag_eval

    assert rag_eval.compare.__module__ == "rag_eval.statistics.comparison"
    assert rag_eval.format_trec_eval.__module__ == "rag_eval.renderers.trec_eval"
    assert rag_eval.gate.__module__ == "rag_eval.drivers.gating"
    assert rag_eval.tune.__module__ == "rag_eval.drivers.tuning"
    assert rag_eval.Report.__module__ == "rag_eval.reports.report"
