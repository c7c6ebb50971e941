"""Tracing: spans per question, stage and LM call, with the raw prompt and reply, to MLflow or OpenTelemetry.

One setting switches it on (`--tracing`, `PPOGA_TRACING`, `tracing` in the `[program]` table of ppoga.toml):

- `mlflow` or `mlflow:URI`: MLflow's DSPy autologging (`mlflow.dspy.autolog`, the DSPy ecosystem's tracer)
  into the tracking store `URI` (default: `$MLFLOW_TRACKING_URI`, else MLflow's own default), experiment
  `ppoga` (`$MLFLOW_EXPERIMENT_NAME` overrides). MLflow 3 keeps its local file store (`file:./mlruns`) in
  maintenance mode and asks for `MLFLOW_ALLOW_FILE_STORE=true`; `sqlite:///mlflow.db` is its recommended one.
  Each question is a trace: the `PPoGA` module's span, a span per predictor call (its signature names the
  stage: Decompose, SelectRelations, ...), the adapter's formatting and parsing, and the LM call with the
  messages sent and the reply received.
- `otel:ENDPOINT`: the same spans exported over OTLP/HTTP to an OpenTelemetry collector at `ENDPOINT`
  (MLflow's tracing is built on OpenTelemetry and exports there when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
  is set).
- `off` (the default): nothing is imported or recorded.

Both need the optional extra: `pip install ppoga-dspy[mlflow]`; without it the setting is refused in one line.
"""

from __future__ import annotations

import os

from ppoga_dspy.errors import ConfigError

TRACE_ENV = "PPOGA_TRACING"
EXPERIMENT = "ppoga"
_enabled: str | None = None


def parse_trace(spec: str | None) -> tuple[str, str | None] | None:
    """("mlflow" | "otel", target or None) from a trace setting; None when tracing is off."""
    text = (spec or "").strip()
    if not text or text.lower() == "off":
        return None
    kind, _, target = text.partition(":")
    kind = kind.lower()
    if kind not in ("mlflow", "otel"):
        raise ConfigError(f"--tracing {spec}: use mlflow, mlflow:TRACKING_URI, otel:OTLP_ENDPOINT or off")
    if kind == "otel" and not target:
        raise ConfigError(f"--tracing {spec}: name the collector, e.g. otel:http://127.0.0.1:4318/v1/traces")
    return kind, target or None


def enable_tracing(spec: str | None) -> str | None:
    """Switch tracing on as `spec` says (once per process; the same spec again is a no-op); a description."""
    global _enabled
    parsed = parse_trace(spec)
    if parsed is None:
        return None
    if _enabled == spec:
        return _enabled
    try:
        import mlflow
        import mlflow.dspy  # noqa: F401  (the DSPy flavour registers autolog)
    except ImportError:
        raise ConfigError(f"--tracing {spec} needs MLflow: pip install 'ppoga-dspy[mlflow]'") from None
    kind, target = parsed
    try:
        if kind == "otel":
            os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = target or ""
        elif target:
            mlflow.set_tracking_uri(target)
        mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME") or EXPERIMENT)
        mlflow.dspy.autolog(log_traces=True, log_traces_from_compile=False, log_traces_from_eval=True, silent=True)
    except Exception as exc:  # MLflow refused the store (e.g. a file store without MLFLOW_ALLOW_FILE_STORE=true)
        first = " ".join(str(exc).split())[:300]
        raise ConfigError(f"--tracing {spec}: MLflow refused it ({type(exc).__name__}: {first})") from None
    _enabled = spec
    return spec
