"""A Report logged to MLflow through MLflow's own client (``mlflow.MlflowClient``, no fluent global state): each
summary row's mean, interval bounds and counts as metrics, the card and the HTML report as artifacts, the
pipelines' settings and the content hashes as params. Names, defaults and what leaves the machine: docs/mlflow.md.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from .._escape import markdown_code
from .._files import atomic_write
from .._optional import require
from ..errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from ..data.collection import Collection
    from ..data.qrels import Qrels
    from ..reports.report import Report
    from ..stages.result import PipelineResult

__all__ = ["DEFAULT_EXPERIMENT", "LOGGED_COLUMNS", "LoggedRun", "log_report", "log_values", "mlflow_name"]

#: the experiment a run goes to when neither ``experiment=`` nor ``MLFLOW_EXPERIMENT_NAME`` names one
DEFAULT_EXPERIMENT = "rag-eval"
#: the summary's columns logged per run (stage) and metric, each as the metric ``<run>[/<stage>]/<metric>/<column>``
LOGGED_COLUMNS = (
    "mean",
    "ci_low",
    "ci_high",
    "n",
    "n_nan",
    "n_failed",
    "traffic_mean",
    "traffic_ci_low",
    "traffic_ci_high",
)
ARTIFACT_FOLDER = "rag_eval"  #: where in the run's artifacts the files go
# MLflow's limits (mlflow.utils.validation): a batch's metrics, params and tags, a param's value, a tag's value
_BATCH_METRICS, _BATCH_PARAMS, _MAX_PARAM, _MAX_TAG = 1000, 100, 6000, 8000
# how the metric grammar's characters that MLflow refuses in a name are spelled (any other character outside
# [A-Za-z0-9_.- ] becomes "_"; "/" too, as it separates a name's parts)
_SPELLED = {"@": "_at_", "(": ".", ",": ".", ")": "", "=": "_"}
_KEPT = re.compile(r"[A-Za-z0-9_.\- ]")


def mlflow_name(text: str) -> str:
    """One part of an MLflow metric or param name: ``ndcg@10`` -> ``ndcg_at_10``, ``err(max_grade=3)@10`` ->
    ``err.max_grade_3_at_10`` (docs/mlflow.md's table); a part that would read as a path step (``.``, ``..``, empty)
    has its dots replaced."""
    out = "".join(_SPELLED.get(c, c if _KEPT.fullmatch(c) else "_") for c in str(text))
    return out if out.strip(". ") else out.replace(".", "_") or "_"


@dataclass(frozen=True)
class LoggedRun:
    """Where a report or a verdict went: the MLflow run, its experiment, the tracking URI, and what was logged
    (metric name -> value, param name -> value, artifact paths)."""

    run_id: str
    experiment_id: str
    tracking_uri: str
    metrics: dict[str, float] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    artifacts: tuple[str, ...] = ()


def log_report(
    report: Report,
    *,
    tracking_uri: str | None = None,
    experiment: str | None = None,
    run_id: str | None = None,
    run_name: str | None = None,
    html: bool | str | os.PathLike[str] = False,
    results: Mapping[str, PipelineResult] | PipelineResult | None = None,
    qrels: Qrels | Mapping[str, Mapping[str, int]] | None = None,
    collection: Collection | None = None,
    tags: Mapping[str, str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> LoggedRun:
    """Log ``report`` to MLflow: the summary's ``LOGGED_COLUMNS`` per run (stage) and metric (its intervals:
    :meth:`Report.summarize` with ``resamples`` and ``seed``), the card's settings as params, ``card.json``,
    ``card.md``, ``summary.csv`` and ``names.json`` (each MLflow name -> run, stage, metric) under ``rag_eval/``, and
    with ``html`` the HTML report (True: written by :meth:`Report.to_html` with ``results``, ``qrels``,
    ``collection``; a path: that file). ``tracking_uri``: default MLflow's own (``MLFLOW_TRACKING_URI``);
    ``run_id``: an existing run to add to, else a new run in ``experiment``. See docs/mlflow.md."""
    summary = report.summary if (resamples, seed) == (1000, 0) else report.summarize(resamples=resamples, seed=seed)
    metrics, names = report_metrics(summary)
    params = report_params(report) | {"interval": f"bootstrap 95%, {resamples} resamples, seed {seed}"}
    card = report.card
    with tempfile.TemporaryDirectory(prefix="rag-eval-mlflow-") as tmp:
        folder = Path(tmp) / ARTIFACT_FOLDER
        folder.mkdir()
        atomic_write(folder / "card.json", (card.model_dump_json(indent=2) + "\n").encode())
        atomic_write(folder / "card.md", markdown_code(card.render()).encode())
        atomic_write(folder / "summary.csv", summary.to_csv(index=False).encode())
        atomic_write(folder / "names.json", (json.dumps(names, indent=1, ensure_ascii=False) + "\n").encode())
        if html is True:
            report.to_html(folder / "report.html", results=results, qrels=qrels, collection=collection)
        elif html is not False:
            source = Path(html)
            if not source.is_file():
                raise InputError("no such HTML report to log to MLflow", source=str(html))
            atomic_write(folder / "report.html", source.read_bytes())
        note = markdown_code(card.render())
        run_tags = {"rag_eval.kind": "report", "rag_eval.version": card.rag_eval_version}
        run_tags["mlflow.note.content"] = note if len(note) <= _MAX_TAG else note[: _MAX_TAG - 40] + "\n... (cut)\n"
        return log_values(
            metrics,
            params,
            run_tags | dict(tags or {}),
            folder,
            tracking_uri=tracking_uri,
            experiment=experiment,
            run_id=run_id,
            run_name=run_name,
        )


def report_metrics(summary: pd.DataFrame) -> tuple[dict[str, float], dict[str, dict[str, str | None]]]:
    """The metrics :func:`log_report` logs from a report's ``summary`` (name -> value) and what each name's prefix
    stands for (``<run>[/<stage>]/<metric>`` -> run, stage, metric). Two rows whose names would be one are
    refused."""
    columns = [c for c in LOGGED_COLUMNS if c in summary.columns]
    stages = summary["stage"].tolist() if "stage" in summary.columns else [None] * len(summary)
    metrics: dict[str, float] = {}
    names: dict[str, dict[str, str | None]] = {}
    table = summary[columns].to_numpy(dtype="float64")
    for i, (run, stage, metric) in enumerate(zip(summary["run"], stages, summary["metric"], strict=True)):
        parts = [run] if stage is None else [run, stage]
        prefix = "/".join(mlflow_name(p) for p in [*parts, metric])
        given = {"run": run, "stage": stage, "metric": metric}
        if names.setdefault(prefix, given) != given:
            raise InputError(
                f"MLflow names {prefix!r} twice: {names[prefix]} and {given} (docs/mlflow.md: how names are spelled)"
            )
        metrics.update({f"{prefix}/{c}": float(v) for c, v in zip(columns, table[i], strict=True)})
    _check_no_folder_clash(metrics)
    return metrics, names


def report_params(report: Report) -> dict[str, str]:
    """The params :func:`log_report` logs: rag_eval's version, the conventions (preset and fields), the metrics,
    the budget, the judged threshold, the content hashes and each pipeline's structure, depth, budget and stage
    kinds (``pipeline.<run>.<key>``)."""
    card = report.card
    params = {
        "rag_eval_version": card.rag_eval_version,
        "conventions": card.preset or "custom",
        "metrics": ", ".join(card.metrics),
    }
    params |= {f"conventions.{k}": _text(v) for k, v in card.conventions.model_dump().items()}
    if card.budget is not None:
        params["budget"] = card.budget
    if card.judged_threshold is not None:
        params["judged_threshold"] = _text(card.judged_threshold)
    if card.hashes is not None:
        params |= {f"hashes.{k}": _text(v) for k, v in card.hashes.model_dump().items() if v is not None}
    pipelines = (card.pipeline or {}).get("all") or ([card.pipeline] if card.pipeline else [])
    for spec in pipelines:
        run = mlflow_name(spec.get("run", ""))
        for key, value in spec.items():
            if key in ("run", "all"):
                continue
            if key == "stages" and isinstance(value, Mapping):
                params |= {f"pipeline.{run}.stage.{mlflow_name(s)}": _text(kind) for s, kind in value.items()}
            else:
                params[f"pipeline.{run}.{mlflow_name(key)}"] = _text(value)
    return params


def log_values(
    metrics: Mapping[str, float],
    params: Mapping[str, str],
    tags: Mapping[str, str],
    folder: str | os.PathLike[str] | None,
    *,
    tracking_uri: str | None = None,
    experiment: str | None = None,
    run_id: str | None = None,
    run_name: str | None = None,
) -> LoggedRun:
    """Log ``metrics``, ``params`` and ``tags`` (names as given) and the files of ``folder`` (kept as the artifact
    folder of that name) to ``run_id``, or to a new run of ``experiment`` (``MLFLOW_EXPERIMENT_NAME``, else
    ``rag-eval``) that is then marked finished, or failed if logging fails."""
    with _client(tracking_uri) as (client, uri, errors):
        experiment_id, run_id, created = _run_of(client, experiment, run_id, run_name, errors, uri)
        try:
            cut = {k: v for k, v in params.items() if len(v) > _MAX_PARAM}
            values = {
                k: (v[: _MAX_PARAM - 40] + " ... (cut: see card.json)" if k in cut else v) for k, v in params.items()
            }
            all_tags = dict(tags) | ({"rag_eval.cut_params": ", ".join(cut)} if cut else {})
            _batches(client, run_id, metrics, values, all_tags)
            artifacts: tuple[str, ...] = ()
            if folder is not None:
                client.log_artifacts(run_id, str(folder), artifact_path=Path(folder).name)
                artifacts = tuple(
                    f"{Path(folder).name}/{p.relative_to(folder).as_posix()}"
                    for p in sorted(Path(folder).rglob("*"))
                    if p.is_file()
                )
        except BaseException:
            if created:
                client.set_terminated(run_id, status="FAILED")
            raise
        if created:
            client.set_terminated(run_id, status="FINISHED")
    return LoggedRun(run_id, experiment_id, uri, dict(metrics), values, artifacts)


def _batches(
    client: Any, run_id: str, metrics: Mapping[str, float], params: Mapping[str, str], tags: Mapping[str, str]
) -> None:
    """MLflow's ``log_batch`` within its limits per call (1000 metrics, 100 params, 100 tags)."""
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    rows = [Metric(k, v, now, 0) for k, v in metrics.items()]
    for at in range(0, len(rows), _BATCH_METRICS):
        client.log_batch(run_id, metrics=rows[at : at + _BATCH_METRICS])
    given = [Param(k, v) for k, v in params.items()]
    for at in range(0, len(given), _BATCH_PARAMS):
        client.log_batch(run_id, params=given[at : at + _BATCH_PARAMS])
    marks = [RunTag(k, v) for k, v in tags.items()]
    for at in range(0, len(marks), _BATCH_PARAMS):
        client.log_batch(run_id, tags=marks[at : at + _BATCH_PARAMS])


@contextlib.contextmanager
def _client(tracking_uri: str | None) -> Iterator[tuple[Any, str, type[Exception]]]:
    """MLflow's client for ``tracking_uri`` (a path is a ``file:`` store), with telemetry off unless the user set
    ``MLFLOW_DISABLE_TELEMETRY`` (read when mlflow is first imported) and, for a ``file:`` store, the opt-in MLflow
    3 asks for (``MLFLOW_ALLOW_FILE_STORE``) set while it works; MLflow's refusals become InputErrors."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    mlflow = require("mlflow", extra="mlflow", feature="logging to MLflow")
    from mlflow.exceptions import MlflowException

    uri = tracking_uri if tracking_uri is not None else mlflow.get_tracking_uri()
    if len(urlparse(uri).scheme) <= 1:  # a path (or a Windows drive letter): a file store there
        uri = Path(uri).absolute().as_uri()
    allow = urlparse(uri).scheme == "file" and "MLFLOW_ALLOW_FILE_STORE" not in os.environ
    if allow:
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        try:
            client = mlflow.MlflowClient(tracking_uri=uri)
        except (MlflowException, ImportError) as exc:  # a store this install cannot open: sqlite without alembic
            raise _cannot_open(uri, exc) from exc
        yield client, uri, MlflowException
    except MlflowException as exc:
        raise InputError(f"MLflow refused: {exc.message}", source=uri) from exc
    finally:
        if allow:
            os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)


def _run_of(
    client: Any, experiment: str | None, run_id: str | None, run_name: str | None, errors: type[Exception], uri: str
) -> tuple[str, str, bool]:
    """(experiment id, run id, whether the run was made here): ``run_id`` as it is, or a new run of the named
    experiment (made if absent)."""
    if run_id is not None:
        try:
            return client.get_run(run_id).info.experiment_id, run_id, False
        except errors as exc:
            raise InputError(f"no MLflow run {run_id!r} to log to: {getattr(exc, 'message', exc)}", source=uri) from exc
    try:
        name = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
        found = client.get_experiment_by_name(name)
        experiment_id = found.experiment_id if found is not None else client.create_experiment(name)
    except (errors, ImportError) as exc:
        raise _cannot_open(uri, exc) from exc
    return experiment_id, client.create_run(experiment_id, run_name=run_name).info.run_id, True


def _cannot_open(uri: str, exc: BaseException) -> InputError:
    """MLflow's refusal of a tracking store, with what the mlflow extra opens where it is a database."""
    hint = (
        ""
        if urlparse(uri).scheme in ("file", "http", "https", "databricks")
        else "; mlflow-skinny (the mlflow extra) opens file: stores and MLflow servers: give file:./mlruns or a "
        "server's http(s) URI, or install the full mlflow for a database"
    )
    return InputError(f"MLflow cannot use this tracking store: {getattr(exc, 'message', exc)}{hint}", source=uri)


def _check_no_folder_clash(metrics: Mapping[str, float]) -> None:
    """No name is another's folder (``a/b`` beside ``a/b/mean``): a file store keeps each name as a file path."""
    for name in metrics:
        parts = name.split("/")
        for i in range(1, len(parts)):
            if (head := "/".join(parts[:i])) in metrics:
                raise InputError(f"MLflow names {head!r} both a metric and the folder of {name!r}")


def _text(value: Any) -> str:
    """A param's value: strings as they are, numbers as Python prints them (NaN as ``nan``), the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (bool, int, float)) or value is None:
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
