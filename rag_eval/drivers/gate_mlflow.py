"""A gate's verdict logged to MLflow (``rag-eval gate --mlflow``, docs/mlflow.md): the outcome and exit code, and
per rule the paired difference, its interval, the threshold and what it rests on (n paired, left out), into the
candidate's run or a new one, through :mod:`rag_eval.renderers.mlflow_log`."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .._files import atomic_write
from ..renderers.mlflow_log import ARTIFACT_FOLDER, LoggedRun, log_values, mlflow_name
from .gating import GateResult

__all__ = ["RULE_VALUES", "gate_metrics", "log_gate"]

#: what each rule logs, as the metric ``gate/<candidate run>[/<stage>]/<metric>/<name>``
RULE_VALUES = (
    "difference",
    "ci_low",
    "ci_high",
    "threshold",
    "max_drop",
    "n",
    "n_nan",
    "n_unpaired",
    "min_n",
    "baseline_mean",
    "candidate_mean",
    "p_value",
    "p_adjusted",
    "confidence",
    "passed",
)


def gate_metrics(result: GateResult) -> tuple[dict[str, float], dict[str, str]]:
    """The metrics (name -> value) and tags (each rule's verdict, the outcome) that :func:`log_gate` logs.
    ``threshold`` is the bound the interval is held against: ``-max_drop``, or ``+max_drop`` where lower is better;
    a rule whose metric and system repeat another's gets ``.2``, ``.3``... after its metric."""
    metrics = {"gate/exit_code": float(result.exit_code), "gate/passed": float(result.passed)}
    tags = {"rag_eval.gate.verdict": result.verdict.upper(), "rag_eval.gate.outcome": _outcome(result)}
    seen: dict[str, int] = {}
    for rule in result.rules:
        key = "/".join(["gate", *map(mlflow_name, rule.candidate_system.split("/")), mlflow_name(rule.metric)])
        seen[key] = seen.get(key, 0) + 1
        key += f".{seen[key]}" if seen[key] > 1 else ""
        drop = rule.rule.drop  # 0 for a floor rule: its difference is from the floor
        values = {
            "difference": rule.difference,
            "ci_low": rule.ci_low,
            "ci_high": rule.ci_high,
            "threshold": -drop if rule.higher_is_better else drop,
            "max_drop": drop,
            "n": rule.n,
            "n_nan": rule.n_nan,
            "n_unpaired": rule.n_unpaired,
            "min_n": rule.min_n,
            "baseline_mean": rule.baseline_mean,
            "candidate_mean": rule.candidate_mean,
            "p_value": rule.p_value,
            "p_adjusted": rule.p_adjusted,
            "confidence": rule.confidence,
            "passed": rule.verdict == "pass",
        }
        metrics |= {f"{key}/{name}": float(values[name]) for name in RULE_VALUES}
        tags[f"{key}/verdict"] = rule.verdict
    return metrics, tags


def log_gate(
    result: GateResult,
    *,
    tracking_uri: str | None = None,
    experiment: str | None = None,
    run_id: str | None = None,
    run_name: str | None = None,
) -> LoggedRun:
    """Log the gate's verdict to ``run_id`` (e.g. the candidate report's run) or a new run: :func:`gate_metrics`,
    its settings as ``gate.*`` params, and ``rag_eval/gate.md`` (the Markdown summary) and ``gate.txt``. MLflow
    keeps a run's params once: a second gate of other settings goes to another run."""
    metrics, tags = gate_metrics(result)
    params = {
        "gate.test": result.test,
        "gate.correction": result.correction,
        "gate.alpha": repr(result.alpha),
        "gate.alpha_rule": repr(result.alpha_rule),
        "gate.inconclusive": result.inconclusive,
        "gate.baseline": result.baseline,
        "gate.candidate": result.candidate,
        "gate.rules": "; ".join(str(r.rule) for r in result.rules),
    }
    if result.overrides:
        params["gate.overrides"] = "; ".join(result.overrides)
    with tempfile.TemporaryDirectory(prefix="rag-eval-mlflow-") as tmp:
        folder = Path(tmp) / ARTIFACT_FOLDER
        folder.mkdir()
        atomic_write(folder / "gate.md", result.to_markdown().encode())
        atomic_write(folder / "gate.txt", (result.to_text() + "\n").encode())
        return log_values(
            metrics,
            params,
            tags | ({"rag_eval.kind": "gate"} if run_id is None else {}),
            folder,
            tracking_uri=tracking_uri,
            experiment=experiment,
            run_id=run_id,
            run_name=run_name,
        )


def _outcome(result: GateResult) -> str:
    """PASS when the gate lets the candidate through (exit 0), else FAIL."""
    return "PASS" if result.passed else "FAIL"
