"""Reports and gate verdicts logged to MLflow (rag_eval.renderers.mlflow_log, rag_eval.drivers.gate_mlflow, the
--mlflow option; docs/mlflow.md), each read back with MLflow's own client from a real local file store under
tmp_path: the metrics equal the report's summary and the gate's numbers, the params the card's, the artifacts are
there; telemetry stays off and no socket is opened. Skipped without the mlflow extra, except under CI=true."""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import rag_eval
from rag_eval import Hit, Pipeline
from rag_eval.adapters import functions
from rag_eval.cli import main
from rag_eval.drivers.gate_mlflow import RULE_VALUES, gate_metrics, log_gate
from rag_eval.drivers.gating import Rule, gate
from rag_eval.errors import DegenerateInterval, InputError
from rag_eval.renderers.mlflow_log import LOGGED_COLUMNS, log_report, mlflow_name

from .conftest import ROOT, _skip_or_fail

try:
    from mlflow import MlflowClient
except ImportError:  # the mlflow extra is not installed
    MlflowClient = None

EXAMPLES = ROOT / "rag_eval" / "examples"
QRELS = EXAMPLES / "qrels.txt"
BM25 = EXAMPLES / "bm25.trec"
RERANK = EXAMPLES / "bm25_rerank.trec"


@pytest.fixture(autouse=True)
def _needs_mlflow():
    if MlflowClient is None:
        _skip_or_fail("needs the mlflow extra (mlflow-skinny): pip install 'rag-eval-stages[mlflow]'")


@pytest.fixture
def store(tmp_path):
    """A local file store's URI under tmp_path (its folder is made by MLflow)."""
    return (tmp_path / "mlruns").as_uri()


def _client(uri: str, monkeypatch) -> MlflowClient:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks a file store's user to opt in
    return MlflowClient(tracking_uri=uri)


def _plain_report():
    """The examples' two runs on ndcg@5, P@5 and recall@20: intervals of non-zero width."""
    return rag_eval.evaluate(
        rag_eval.Qrels.from_trec(QRELS),
        {"bm25": rag_eval.Run.from_trec(BM25), "bm25_rerank": rag_eval.Run.from_trec(RERANK)},
        ["ndcg@5", "P(rel=2)@5", "recall@20"],
        judged_threshold=0,
    )


CORPUS = {f"d{i:02d}": f"chunk {i}" for i in range(30)}
QUERIES = {f"q{i}": f"question {i}" for i in range(8)}
PIPELINE_QRELS = {f"q{i}": {f"d{i:02d}": 2, f"d{i + 4:02d}": 1, f"d{i + 1:02d}": 0} for i in range(8)}


def _search(query, k):
    n = int(query.split()[1])
    order = sorted(CORPUS, key=lambda d: ((int(d[1:]) - n) % 30, d))
    return [Hit(d, float(30 - j), CORPUS[d]) for j, d in enumerate(order)]


def _rerank(query, hits):
    """Odd queries' first five reversed: the stages differ."""
    ids = [h.doc_id for h in hits]
    return ids[:5][::-1] + ids[5:] if int(query.split()[1]) % 2 else ids


def _pipeline_report():
    pipeline = Pipeline(
        functions.retriever(_search, name="keyword"), functions.reranker(_rerank, name="rerank"), depth=20, budget=3
    )
    result = pipeline.run(QUERIES, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a small hand-made set: the judged-share and capped warnings are expected
        return rag_eval.evaluate(PIPELINE_QRELS, {"kw": result}), result


def _p10_report(hits: dict[str, int]):
    """P@10 where query q's value is hits[q] / 10 (as tests/test_gate.py makes them)."""
    qrels = {q: {f"{q}-r{i}": 1 for i in range(10)} for q in hits}
    ranking = {q: [f"{q}-r{i}" for i in range(j)] + [f"{q}-n{i}" for i in range(10 - j)] for q, j in hits.items()}
    run = rag_eval.Run.from_ranking(ranking)
    return rag_eval.evaluate(rag_eval.Qrels.from_dict(qrels), {"sys": run}, ["P@10"], judged_threshold=0)


IDS = [f"q{i:02d}" for i in range(30)]
BASE = _p10_report(dict.fromkeys(IDS, 5))
DROPPED = _p10_report(dict(zip(IDS, [3] * 20 + [4] * 10, strict=True)))


def _metrics(client, run_id: str) -> dict[str, float]:
    return client.get_run(run_id).data.metrics


def test_names_are_spelled_for_mlflow():
    assert mlflow_name("ndcg@10") == "ndcg_at_10"
    assert mlflow_name("P(rel=2)@5") == "P.rel_2_at_5"
    assert mlflow_name("ndcg(gains=1:3;2:9)@10") == "ndcg.gains_1_3_2_9_at_10"
    assert mlflow_name("loss.reranked_out") == "loss.reranked_out"
    assert mlflow_name("a/b") == "a_b" and mlflow_name("..") == "__" and mlflow_name("") == "_"
    assert mlflow_name("bm25 + rerank") == "bm25 _ rerank"


def test_a_plain_report_logs_every_summary_number(store, monkeypatch, tmp_path):
    report = _plain_report()
    logged = report.log_to_mlflow(tracking_uri=store, run_name="examples")
    client = _client(store, monkeypatch)
    run = client.get_run(logged.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "examples"
    assert client.get_experiment(run.info.experiment_id).name == "rag-eval"
    metrics = run.data.metrics
    summary = report.summary
    assert len(metrics) == len(summary) * 5  # mean, ci_low, ci_high, n, n_nan per run and metric
    for row in summary.itertuples():
        prefix = f"{row.run}/{mlflow_name(row.metric)}"
        assert metrics[f"{prefix}/mean"] == row.mean
        assert (metrics[f"{prefix}/ci_low"], metrics[f"{prefix}/ci_high"]) == (row.ci_low, row.ci_high)
        assert (metrics[f"{prefix}/n"], metrics[f"{prefix}/n_nan"]) == (row.n, row.n_nan)
    assert metrics["bm25_rerank/ndcg_at_5/mean"] == report.mean("bm25_rerank", "ndcg@5")
    assert metrics["bm25/precision.rel_2_at_5/ci_low"] < metrics["bm25/precision.rel_2_at_5/mean"]  # a real interval
    params = run.data.params
    assert params["metrics"] == "ndcg@5, precision(rel=2)@5, recall@20"  # canonical names
    assert params["conventions"] == "default" and params["hashes.qrels"] == report.card.hashes.qrels
    assert params["interval"] == "bootstrap 95%, 1000 resamples, seed 0"
    assert run.data.tags["rag_eval.kind"] == "report"
    names = {f.path for f in client.list_artifacts(logged.run_id, "rag_eval")}
    assert names == {f"rag_eval/{n}" for n in ("card.json", "card.md", "names.json", "summary.csv")}
    folder = Path(client.download_artifacts(logged.run_id, "rag_eval", str(tmp_path)))
    assert rag_eval.MetricCard.model_validate_json((folder / "card.json").read_text()) == report.card
    assert json.loads((folder / "names.json").read_text())["bm25/precision.rel_2_at_5"] == {
        "run": "bm25",
        "stage": None,
        "metric": "precision(rel=2)@5",
    }


def test_a_pipeline_report_logs_its_stages_params_and_html(store, monkeypatch, tmp_path):
    report, result = _pipeline_report()
    logged = log_report(report, tracking_uri=store, experiment="pipelines", html=True, results={"kw": result})
    client = _client(store, monkeypatch)
    run = client.get_run(logged.run_id)
    metrics = run.data.metrics
    summary = report.summary
    assert set(summary["stage"]) == {"keyword", "rerank"}
    for row in summary.itertuples():
        prefix = f"kw/{row.stage}/{mlflow_name(row.metric)}"
        for column in ("mean", "ci_low", "ci_high", "n", "n_nan", "n_failed"):
            assert metrics[f"{prefix}/{column}"] == getattr(row, column), (prefix, column)
    assert len(metrics) == len(summary) * 6
    assert metrics["kw/rerank/ndcg_at_budget/mean"] == report.mean("kw", "ndcg@budget", "rerank")
    spec = report.card.pipeline
    params = run.data.params
    assert params["pipeline.kw.structure"] == spec["structure"] == "keyword %20 >> rerank %budget(3)"
    assert params["pipeline.kw.depth"] == "20" and params["pipeline.kw.budget"] == "budget(3)"
    assert params["pipeline.kw.stage.keyword"] == "first" and params["pipeline.kw.stage.rerank"] == "reranker"
    assert params["budget"] == "budget(3)" and params["hashes.corpus"] == report.card.hashes.corpus
    assert client.get_experiment(run.info.experiment_id).name == "pipelines"
    assert (
        run.data.tags["mlflow.note.content"].startswith("```\n")
        and "metric card" in run.data.tags["mlflow.note.content"]
    )
    page = Path(client.download_artifacts(logged.run_id, "rag_eval/report.html", str(tmp_path)))
    assert page.read_text("utf-8").startswith("<!DOCTYPE html>")
    assert logged.artifacts == tuple(
        f"rag_eval/{n}" for n in ("card.json", "card.md", "names.json", "report.html", "summary.csv")
    )


def test_a_written_html_page_is_logged_as_it_is(store, monkeypatch, tmp_path):
    page = tmp_path / "page.html"
    page.write_bytes(b"<!DOCTYPE html><p>the page</p>\n")
    logged = log_report(_plain_report(), tracking_uri=store, html=page)
    got = _client(store, monkeypatch).download_artifacts(logged.run_id, "rag_eval/report.html", str(tmp_path / "x"))
    assert Path(got).read_bytes() == page.read_bytes()
    with pytest.raises(InputError, match="no such HTML report"):
        log_report(_plain_report(), tracking_uri=store, html=tmp_path / "missing.html")


def test_the_gate_logs_its_verdict_into_the_candidates_run(store, monkeypatch):
    logged = DROPPED.log_to_mlflow(tracking_uri=store, run_name="candidate")
    result = gate(BASE, DROPPED, [Rule("P@10", 0.02)])
    assert result.verdict == "regression"
    log_gate(result, tracking_uri=store, run_id=logged.run_id)
    client = _client(store, monkeypatch)
    run = client.get_run(logged.run_id)
    metrics, tags = run.data.metrics, run.data.tags
    (rule,) = result.rules
    assert metrics["gate/passed"] == 0.0 and metrics["gate/exit_code"] == 1.0
    assert metrics["gate/sys/precision_at_10/difference"] == rule.difference == pytest.approx(-1 / 6)
    assert (metrics["gate/sys/precision_at_10/ci_low"], metrics["gate/sys/precision_at_10/ci_high"]) == (
        rule.ci_low,
        rule.ci_high,
    )
    assert metrics["gate/sys/precision_at_10/threshold"] == -0.02 and metrics["gate/sys/precision_at_10/n"] == 30
    assert metrics["gate/sys/precision_at_10/p_adjusted"] == rule.p_adjusted
    assert metrics["sys/precision_at_10/mean"] == DROPPED.mean("sys", "P@10")  # the report's numbers are still there
    assert tags["rag_eval.gate.verdict"] == "REGRESSION" and tags["rag_eval.gate.outcome"] == "FAIL"
    assert tags["gate/sys/precision_at_10/verdict"] == "regression" and tags["rag_eval.kind"] == "report"
    assert run.data.params["gate.rules"] == "P@10 max drop 0.02" and run.data.params["gate.test"] == "randomization"
    assert {f.path for f in client.list_artifacts(logged.run_id, "rag_eval")} >= {"rag_eval/gate.md"}


def test_gate_metrics_number_repeated_rules_and_say_the_direction():
    with pytest.warns(DegenerateInterval):  # the same report twice: every difference 0
        result = gate(BASE, BASE, [Rule("P@10", 0.02), Rule("P@10", 0.05)])
    metrics, tags = gate_metrics(result)
    assert result.verdict == "pass" and tags["rag_eval.gate.outcome"] == "PASS"
    assert (
        metrics["gate/sys/precision_at_10/max_drop"] == 0.02 and metrics["gate/sys/precision_at_10.2/max_drop"] == 0.05
    )
    assert metrics["gate/sys/precision_at_10.2/passed"] == 1.0 and metrics["gate/passed"] == 1.0
    assert len(metrics) == 2 + 2 * len(RULE_VALUES)


def test_rag_eval_gate_mlflow_logs_a_new_run(store, monkeypatch, tmp_path, capsys):
    BASE.save(tmp_path / "base.parquet")
    DROPPED.save(tmp_path / "cand.parquet")
    argv = ["gate", str(tmp_path / "base.parquet"), str(tmp_path / "cand.parquet"), "-m", "P@10"]
    status = main([*argv, "--max-drop", "0.02", "--mlflow", store])
    assert status == 1
    assert "logged to MLflow: run " in capsys.readouterr().err
    client = _client(store, monkeypatch)
    (run,) = client.search_runs([client.get_experiment_by_name("rag-eval").experiment_id])
    assert run.info.run_name == f"gate {tmp_path / 'cand.parquet'}"
    assert run.data.tags["rag_eval.kind"] == "gate" and run.data.metrics["gate/exit_code"] == status
    expected = gate(BASE, DROPPED, [Rule("P@10", 0.02)]).rules[0]
    assert run.data.metrics["gate/sys/precision_at_10/ci_high"] == expected.ci_high


def test_rag_eval_evaluate_mlflow_logs_the_printed_intervals(store, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "nightly")
    argv = ["evaluate", str(QRELS), str(BM25), "-m", "ndcg@5", "--judged-threshold", "0", "--format", "json"]
    assert main([*argv, "--resamples", "200", "--seed", "3", "--no-card", "--mlflow", store]) == 0
    printed = json.loads(capsys.readouterr().out)["summary"][0]
    client = _client(store, monkeypatch)
    (run,) = client.search_runs([client.get_experiment_by_name("nightly").experiment_id])
    assert run.data.metrics["bm25/ndcg_at_5/ci_low"] == printed["ci_low"]
    assert run.data.metrics["bm25/ndcg_at_5/ci_high"] == printed["ci_high"]
    assert run.data.params["interval"] == "bootstrap 95%, 200 resamples, seed 3"
    monkeypatch.setenv("MLFLOW_RUN_ID", run.info.run_id)  # as MLflow's own tools do: add to that run
    assert main([*argv, "--resamples", "200", "--seed", "3", "--no-card", "--mlflow", store]) == 0
    assert len(client.search_runs([run.info.experiment_id])) == 1
    assert len(client.get_metric_history(run.info.run_id, "bm25/ndcg_at_5/mean")) == 2
    capsys.readouterr()
    assert main([*argv, "--no-card", "--mlflow", store]) == 2  # other resamples: MLflow keeps a param once
    assert "MLflow refused" in capsys.readouterr().err and "interval" in run.data.params


def test_rag_eval_report_mlflow_logs_each_folder_with_the_page(store, monkeypatch, tmp_path, capsys):
    report, result = _pipeline_report()
    report.save_folder(tmp_path / "kw", qrels=PIPELINE_QRELS, runs={"kw": result}, plots=False)
    out = tmp_path / "page.html"
    assert main(["report", str(tmp_path / "kw"), "-o", str(out), "--no-plots", "--mlflow", store]) == 0
    client = _client(store, monkeypatch)
    (run,) = client.search_runs([client.get_experiment_by_name("rag-eval").experiment_id])
    got = client.download_artifacts(run.info.run_id, "rag_eval/report.html", str(tmp_path / "down"))
    assert Path(got).read_bytes() == out.read_bytes()
    assert run.data.metrics["kw/rerank/recall_at_budget/mean"] == report.mean("kw", "recall@budget", "rerank")
    shutil.copytree(tmp_path / "kw", tmp_path / "again")  # two folders: a run each, the page with both
    argv = ["report", str(tmp_path / "kw"), str(tmp_path / "again"), "-o", str(out), "--no-plots", "--mlflow", store]
    assert main(argv) == 0
    names = sorted(r.info.run_name for r in client.search_runs([run.info.experiment_id]))
    assert names == ["again", "kw", "kw"]  # the first command's run, then one per folder
    monkeypatch.setenv("MLFLOW_RUN_ID", run.info.run_id)
    capsys.readouterr()
    assert main(argv) == 2 and "MLFLOW_RUN_ID names one run" in capsys.readouterr().err


def test_mlflow_refusals_are_input_errors(tmp_path, monkeypatch):
    report = _plain_report()
    with pytest.raises(InputError, match=r"mlflow-skinny \(the mlflow extra\) opens file: stores"):
        report.log_to_mlflow(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    twice = rag_eval.evaluate(
        rag_eval.Qrels.from_trec(QRELS),
        {"x/y": rag_eval.Run.from_trec(BM25), "x_y": rag_eval.Run.from_trec(RERANK)},
        ["ndcg@5"],
        judged_threshold=0,
    )
    with pytest.raises(InputError, match="MLflow names 'x_y/ndcg_at_5' twice"):
        twice.log_to_mlflow(tracking_uri=(tmp_path / "mlruns").as_uri())
    with pytest.raises(InputError, match="no MLflow run 'abc123' to log to"):
        report.log_to_mlflow(tracking_uri=(tmp_path / "mlruns").as_uri(), run_id="abc123")
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as where the extra is not installed
    with pytest.raises(ImportError, match=r"pip install 'rag-eval-stages\[mlflow\]'"):
        report.log_to_mlflow(tracking_uri=(tmp_path / "mlruns").as_uri())


def test_a_path_is_a_file_store_and_the_opt_in_is_not_left_behind(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    logged = _plain_report().log_to_mlflow(tracking_uri="runs")
    assert logged.tracking_uri == (tmp_path / "runs").as_uri()
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ
    assert (tmp_path / "runs" / logged.experiment_id / logged.run_id / "metrics" / "bm25").is_dir()


def test_logging_opens_no_socket(store, monkeypatch):
    """A file store needs no network: no socket connects, sends or looks a name up while a report and a verdict
    are logged (the suite's guard refuses any off loopback; this refuses loopback too)."""
    used = []

    def record(name):
        def refuse(*args, **kwargs):
            used.append((name, args[1:] if name.startswith("socket.") else args))
            raise OSError(f"{name} called while logging to a file store")

        return refuse

    for name in ("connect", "connect_ex", "sendto", "send", "sendall"):
        monkeypatch.setattr(socket.socket, name, record(f"socket.{name}"))
    monkeypatch.setattr(socket, "getaddrinfo", record("getaddrinfo"))
    monkeypatch.setattr(socket, "create_connection", record("create_connection"))
    logged = _plain_report().log_to_mlflow(tracking_uri=store)
    log_gate(gate(BASE, DROPPED, [Rule("P@10", 0.02)]), tracking_uri=store, run_id=logged.run_id)
    assert used == []


def test_telemetry_is_off_unless_the_user_turned_it_on(tmp_path):
    """In a process with no telemetry setting (and not seen as a test or CI by MLflow), logging leaves MLflow's
    telemetry client unset and says so in the environment; a user's own setting is kept."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK", "CI", "PYTEST_CURRENT_TEST", "MLFLOW_ALLOW_FILE_STORE")
    }
    code = (
        "import os, rag_eval\n"
        "from rag_eval.renderers.mlflow_log import log_report\n"
        f"q, b = rag_eval.Qrels.from_trec({str(QRELS)!r}), rag_eval.Run.from_trec({str(BM25)!r})\n"
        "r = rag_eval.evaluate(q, {'b': b}, ['P@5'], judged_threshold=0)\n"
        f"log_report(r, tracking_uri={(tmp_path / 'mlruns').as_uri()!r})\n"
        "from mlflow.telemetry import get_telemetry_client\n"
        "print(os.environ.get('MLFLOW_DISABLE_TELEMETRY'), get_telemetry_client())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["true", "None"]


def test_importing_the_loggers_loads_no_mlflow():
    code = "import sys, rag_eval.renderers.mlflow_log, rag_eval.drivers.gate_mlflow; print('mlflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert done.stdout.strip() == "False"


def test_every_summary_column_logged_is_a_summary_column():
    """LOGGED_COLUMNS names the summary's columns (plain, staged and traffic-weighted): none is misspelled."""
    from rag_eval.reports.summary import STAGE_SUMMARY_COLUMNS
    from rag_eval.reports.weighted import TRAFFIC_COLUMNS

    assert set(LOGGED_COLUMNS) <= set(STAGE_SUMMARY_COLUMNS) | set(TRAFFIC_COLUMNS)


def test_a_nan_is_logged_as_nan_and_a_long_param_is_cut_and_named(store, monkeypatch):
    """A mean of no counted value stays NaN (not 0); a param past MLflow's 6,000 characters is cut, and said."""
    from rag_eval.renderers.mlflow_log import log_values

    logged = log_values({"r/m/mean": float("nan"), "r/m/n": 0.0}, {"long": "x" * 7000}, {}, None, tracking_uri=store)
    run = _client(store, monkeypatch).get_run(logged.run_id)
    assert math.isnan(run.data.metrics["r/m/mean"]) and run.data.metrics["r/m/n"] == 0.0
    assert run.data.params["long"] == "x" * 5960 + " ... (cut: see card.json)"
    assert run.data.tags["rag_eval.cut_params"] == "long"


def test_a_query_sets_traffic_weighted_interval_is_logged_too(store, monkeypatch):
    qrels = rag_eval.Qrels.from_dict({f"q{i}": {f"d{j}": (i + j) % 3 for j in range(6)} for i in range(40)})
    run = rag_eval.Run.from_scores({f"q{i}": {f"d{j}": float((i * j) % 7) for j in range(8)} for i in range(40)})
    report = rag_eval.evaluate(qrels, {"r": run}, ["ndcg@10"], judged_threshold=0)
    report = report.with_query_set(rag_eval.QuerySet({f"q{i}": f"question {i}" for i in range(40)}))
    (row,) = report.summary.itertuples()
    metrics = _metrics(_client(store, monkeypatch), report.log_to_mlflow(tracking_uri=store).run_id)
    assert metrics["r/ndcg_at_10/traffic_mean"] == row.traffic_mean
    assert (metrics["r/ndcg_at_10/traffic_ci_low"], metrics["r/ndcg_at_10/traffic_ci_high"]) == (
        row.traffic_ci_low,
        row.traffic_ci_high,
    )
    assert len(metrics) == 8


def test_a_report_of_text_metrics_only_logs_its_card_and_no_metric(store, monkeypatch):
    qrels = rag_eval.Qrels.from_dict({"q1": {"d1": 1}})
    report = rag_eval.evaluate(qrels, {"r": rag_eval.Run.from_ranking({"q1": ["d1", "d2"]})}, ["relstring@3"])
    logged = report.log_to_mlflow(tracking_uri=store)
    run = _client(store, monkeypatch).get_run(logged.run_id)
    assert run.data.metrics == {} and run.data.params["metrics"] == "relstring@3"
    assert "rag_eval/card.json" in logged.artifacts
