"""Bad input for result folders (docs/bad-input/reports.md, "Result folders"): a folder is loaded only when every file
its manifest lists is there with the SHA-256 written, and written only with the qrels and runs its report was computed
on. Each refusal is an InputError naming the file or the run."""

from __future__ import annotations

import json
import warnings

import pytest

import rag_eval
from rag_eval import InputError, Qrels, Report, Run, evaluate
from rag_eval.renderers.result_folder import MANIFEST

JUDGED = {"q1": {"d1": 2, "d2": 0}, "q2": {"d4": 1}}
RUN = Run.from_ranking({"q1": ["d2", "d1"], "q2": ["d4"]}, name="bm25")


def _report(runs=RUN) -> Report:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rag_eval.RagEvalWarning)
        return evaluate(JUDGED, runs, ["ndcg@2", "P@1"])


@pytest.fixture
def folder(tmp_path):
    _report().save_folder(tmp_path / "f", qrels=JUDGED, runs={"bm25": RUN}, plots=False)
    return tmp_path / "f"


def _manifest(folder):
    return json.loads((folder / MANIFEST).read_text())


def _rewrite(folder, manifest):
    (folder / MANIFEST).write_text(json.dumps(manifest))


def test_a_changed_file_of_a_result_folder_is_refused(folder):
    summary = folder / "summary.csv"
    summary.write_text(summary.read_text().replace("bm25", "bm26"))
    with pytest.raises(
        InputError, match=r"summary\.csv: its SHA-256 is .* as manifest\.json says: the file was changed"
    ) as error:
        Report.load_folder(folder)
    assert error.value.source == str(folder / "summary.csv")


def test_a_file_missing_from_a_result_folder_is_refused(folder):
    (folder / "runs" / "bm25.trec").unlink()
    with pytest.raises(InputError, match=r"runs/bm25\.trec: missing: manifest\.json lists it"):
        Report.load_folder(folder)


def test_a_folder_without_a_manifest_is_refused(folder):
    (folder / MANIFEST).unlink()
    with pytest.raises(InputError, match=r"no manifest\.json: not a result folder written by Report\.save_folder"):
        Report.load_folder(folder)
    assert Report.load(folder / "report.parquet").runs == ["bm25"]  # the report alone still reads, unchecked


def test_a_malformed_manifest_is_refused(folder):
    (folder / MANIFEST).write_text("{not json")
    with pytest.raises(InputError, match=r"manifest\.json: not a result folder's manifest"):
        Report.load_folder(folder)
    manifest = _manifest_of_fresh(folder)
    manifest["files"]["report.parquet"] = "abc"
    _rewrite(folder, manifest)
    with pytest.raises(InputError, match=r"the SHA-256 of 'report\.parquet' is not 64 hex digits"):
        Report.load_folder(folder)


def _manifest_of_fresh(folder):
    _report().save_folder(folder, qrels=JUDGED, runs={"bm25": RUN}, plots=False)
    return _manifest(folder)


@pytest.mark.parametrize("name", ["../outside.txt", "/etc/passwd", "runs/../../x", "manifest.json"])
def test_a_manifest_listing_a_path_outside_the_folder_is_refused(folder, name):
    manifest = _manifest(folder)
    manifest["files"][name] = "0" * 64
    _rewrite(folder, manifest)
    with pytest.raises(InputError, match=f"it lists {name!r}, which is not a file inside the folder"):
        Report.load_folder(folder)


def test_a_manifest_of_a_newer_format_is_refused(folder):
    manifest = _manifest(folder)
    manifest["format_version"] = 99
    _rewrite(folder, manifest)
    with pytest.raises(InputError, match="format version 99: written by a newer rag_eval"):
        Report.load_folder(folder)


def test_a_manifest_whose_hashes_are_not_the_cards_is_refused(folder):
    manifest = _manifest(folder)
    manifest["hashes"]["qrels"] = "0" * 64  # every file still matches its SHA-256: the hashes disagree
    _rewrite(folder, manifest)
    with pytest.raises(
        InputError, match=r"the content hashes of report\.parquet's card are not those of manifest\.json"
    ):
        Report.load_folder(folder)


def test_save_folder_refuses_qrels_the_report_was_not_computed_on(tmp_path):
    other = {"q1": {"d1": 1, "d2": 0}, "q2": {"d4": 1}}  # one grade differs
    with pytest.raises(InputError, match=r"the qrels given \(sha256:[0-9a-f]{12}\) are not those the report was"):
        _report().save_folder(tmp_path / "f", qrels=other, plots=False)
    assert not (tmp_path / "f" / MANIFEST).exists()
    _report().save_folder(tmp_path / "g", qrels=Qrels.from_dict(JUDGED), plots=False)  # the same judgements: fine


def test_save_folder_refuses_a_run_the_report_did_not_measure(tmp_path):
    with pytest.raises(InputError, match=r"run 'dense' is not one the report measured \(\['bm25'\]\)"):
        _report().save_folder(tmp_path / "f", runs={"dense": RUN}, plots=False)


def test_save_folder_refuses_runs_whose_file_names_collide(tmp_path):
    runs = {"a b": RUN, "a_b": RUN}
    with pytest.raises(InputError, match=r"'a b' and 'a_b' would both be written to runs/a_b\.trec"):
        _report(runs).save_folder(tmp_path / "f", runs=runs, plots=False)
    assert not (tmp_path / "f" / "runs").exists()  # refused before anything is written
