"""Drift in the HTML report and in the gate: ``rag-eval report A B --qrels Q`` adds a Drift view, the drift page's
facts for each folder against the first; without --qrels there is none; ``rag-eval gate --drift`` reads the chunk
maps as ``rag-eval drift`` does (docs/drift.md, docs/html-report.md)."""

from __future__ import annotations

import json

import pytest

from rag_eval.cli import main
from rag_eval.data import Qrels
from rag_eval.reports import evaluate
from rag_eval.statistics.snapshot_drift import drift

from .test_drift import AFTER, BEFORE, QRELS, RANK_AFTER, RANK_BEFORE, _corpus_file, _folder, _table, snapshot

pytest.importorskip("jinja2", reason="the HTML report needs the html extra (jinja2)")

EXPECTED_CAUSES = {
    ("lost", "crowded_out"): 1,
    ("lost", "content_changed"): 1,
    ("lost", "removed"): 1,
    ("lost", "stage_changed"): 1,
    ("gained", "stage_changed"): 1,
}


@pytest.fixture
def folders(tmp_path):
    result_b, before = _folder(tmp_path, "before", RANK_BEFORE, BEFORE, "v1")
    result_a, after = _folder(tmp_path, "after", RANK_AFTER, AFTER, "v2")
    Qrels.from_dict(QRELS).to_trec(tmp_path / "qrels.txt")
    corpora = ["--corpus-before", str(_corpus_file(tmp_path / "b.jsonl", BEFORE))]
    corpora += ["--corpus-after", str(_corpus_file(tmp_path / "a.jsonl", AFTER))]
    return result_b, result_a, str(before), str(after), str(tmp_path / "qrels.txt"), corpora


def test_a_two_folder_report_with_qrels_shows_the_drift_view(tmp_path, folders, capsys):
    result_b, result_a, before, after, qrels, corpora = folders
    page_path = tmp_path / "page.html"
    argv = ["report", before, after, "-o", str(page_path), "--no-plots"]
    assert main([*argv, "--qrels", qrels, *corpora]) == 0
    err = capsys.readouterr().err
    found = drift(result_b, result_a, QRELS, corpus_before=BEFORE, corpus_after=AFTER)
    assert f"rag-eval: drift of after from before: {found.causes()}; {found.verdict()}" in err
    page = page_path.read_text("utf-8")
    assert '<button type="button" data-view="drift" aria-pressed="false">Drift</button>' in page
    assert '<section class="view" id="view-drift" hidden aria-label="drift">' in page
    assert "<h2>Drift: after from before</h2>" in page
    causes = {(d, c): int(n) for d, c, n in _table(page, "drift-causes")}
    assert causes == EXPECTED_CAUSES
    assert causes == {(r["direction"], r["cause"]): r["items"] for r in found.by_cause().to_dict("records")}
    stages = [(d, s, c, int(n)) for d, s, c, n in _table(page, "drift-stages")]
    assert stages == [tuple(r.values()) for r in found.by_stage().to_dict("records")]
    queries = [[q, int(lost), int(gained), int(net)] for q, lost, gained, net in _table(page, "drift-queries")]
    assert queries == found.queries(10).to_numpy().tolist() and len(queries) == 5
    (test,) = _table(page, "drift-test")  # what the change rests on: n paired, left out, method and its min n
    assert test == ["0.8000", "0.2000", "-0.6000", "no interval", "n/a", "5", "randomization, min n 6",
                    "n 5 paired; none left out; fewer than 6: no interval"]  # fmt: skip
    assert len(_table(page, "drift-items")) == 5
    assert 'id="drift-1-verdict"' in page and 'id="drift-1-causes"' in page  # ids of their own in the report
    # without --qrels: no Drift view, nothing about drift said
    assert main(argv) == 0
    assert "drift" not in capsys.readouterr().err
    page = page_path.read_text("utf-8")
    assert 'data-view="drift"' not in page and "view-drift" not in page and _table(page, "drift-causes") == []
    # refusals, one line each, exit 2: corpora without --qrels, --qrels with one folder
    assert main([*argv, *corpora]) == 2
    assert "--corpus-before/--corpus-after and --chunks-before/--chunks-after go with --qrels" in (
        capsys.readouterr().err
    )
    assert main(["report", before, "-o", str(page_path), "--no-plots", "--qrels", qrels]) == 2
    assert "--qrels gives the drift between folders: give two or more" in capsys.readouterr().err


def test_three_folders_give_a_drift_each_against_the_first(tmp_path, folders, capsys):
    _, _, before, after, qrels, corpora = folders
    page_path = tmp_path / "page.html"
    argv = ["report", before, after, before, "-o", str(page_path), "--no-plots", "--qrels", qrels, *corpora]
    assert main(argv) == 0
    capsys.readouterr()
    page = page_path.read_text("utf-8")
    assert "<h2>Drift: B: after from A: before</h2>" in page and "<h2>Drift: C: before from A: before</h2>" in page
    assert 'id="drift-2-verdict"' in page
    # the first folder against itself: nothing lost or gained, recall unchanged
    tests = [row for row in _table(page, "drift-test") if row[0] != "before"]  # the second table's header left out
    assert [row[:3] for row in tests] == [["0.8000", "0.2000", "-0.6000"], ["0.8000", "0.8000", "+0.0000"]]
    assert sum(1 for row in _table(page, "drift-causes") if row[0].startswith("no relevant item")) == 1


def test_write_html_shows_the_drifts_it_is_given(tmp_path, folders):
    from rag_eval.renderers.html_report import render_html, side_of

    result_b, result_a, *_ = folders
    sides = [side_of(evaluate(QRELS, r), results=r, name=n) for r, n in ((result_b, "v1"), (result_a, "v2"))]
    found = drift(result_b, result_a, QRELS, corpus_before=BEFORE, corpus_after=AFTER)
    page = render_html(sides, plots=False, drifts={"v2 from v1": found})
    assert "<h2>Drift: v2 from v1</h2>" in page
    assert {(d, c): int(n) for d, c, n in _table(page, "drift-causes")} == EXPECTED_CAUSES
    assert "view-drift" not in render_html(sides, plots=False)
    with pytest.raises(TypeError, match=r"drifts\['x'\] must be a Drift"):
        render_html(sides, plots=False, drifts={"x": found.to_frame()})


def test_the_gate_with_chunk_maps_names_chunking_changed(tmp_path, capsys):
    # q0-q3: their evidence re-chunked (doc#0-10 cut into doc#0-5 and doc#5-20); q4, q5: kept
    before_corpus = {"doc#0-10": "0123456789", "other": "x"}
    after_corpus = {"doc#0-5": "01234", "doc#5-20": "56789 and more", "other": "x"}
    queries = [f"q{i}" for i in range(6)]
    qrels = {q: {"doc#0-10" if i < 4 else "other": 1} for i, q in enumerate(queries)}
    for name, first, corpus, version in (
        ("base", "doc#0-10", before_corpus, "v1"),
        ("cand", "doc#0-5", after_corpus, "v2"),
    ):
        result = snapshot({q: [first, "other"] for q in queries}, corpus, version)
        evaluate(qrels, result).save_folder(tmp_path / name, qrels=qrels, runs=result, plots=False)
    Qrels.from_dict(qrels).to_trec(tmp_path / "qrels.txt")
    maps = {
        "b.jsonl": [("doc#0-10", "doc", 0, 10), ("other", "other", None, None)],
        "a.jsonl": [("doc#0-5", "doc", 0, 5), ("doc#5-20", "doc", 5, 20), ("other", "other", None, None)],
    }
    for file, rows in maps.items():
        lines = [json.dumps({"chunk_id": c, "doc_id": d, "start": s, "end": e}) for c, d, s, e in rows]
        (tmp_path / file).write_text("\n".join(lines) + "\n")
    argv = ["gate", str(tmp_path / "base"), str(tmp_path / "cand"), "--rule", "recall@budget:0.1", "--test", "t"]
    argv += ["--allow-different", "corpus", "--drift", str(tmp_path / "qrels.txt")]
    argv += ["--corpus-before", str(_corpus_file(tmp_path / "cb.jsonl", before_corpus))]
    argv += ["--corpus-after", str(_corpus_file(tmp_path / "ca.jsonl", after_corpus))]
    chunks = ["--chunks-before", str(tmp_path / "b.jsonl"), "--chunks-after", str(tmp_path / "a.jsonl")]
    assert main([*argv, *chunks]) == 1  # a regression: recall@budget 1 -> 1/3
    out = capsys.readouterr().out
    assert "drift between the snapshots: 4 relevant item(s) lost (chunking_changed 4), 0 gained" in out
    # without the chunk maps the same items read as removed: the maps are what tells them apart
    assert main(argv) == 1
    assert "drift between the snapshots: 4 relevant item(s) lost (removed 4), 0 gained" in capsys.readouterr().out
    # chunk maps without --drift: refused, one line, exit 2
    assert main([*argv[:-6], *chunks]) == 2
    assert "go with --drift QRELS" in capsys.readouterr().err
