"""Tracing: one setting switches MLflow's DSPy autologging on, and each question lands in the local file store as a
trace with spans for the question (the PPoGA module), each stage's predictor and each LM call with its raw prompt
and reply. The MLflow test needs the optional extra (`pip install ppoga-dspy[mlflow]`) and is skipped without it."""

from __future__ import annotations

import importlib.util

import pytest

from ppoga_dspy.app.tracing import parse_trace
from ppoga_dspy.errors import ConfigError
from tests.conftest import DEMO_KG

HAS_MLFLOW = importlib.util.find_spec("mlflow") is not None


@pytest.fixture(autouse=True)
def _clean_dspy_settings():
    """Overrides the suite's fixture of this name: its `dspy.context` would hide the callbacks that autologging
    registers with `dspy.configure`, as no context hides them in `ppoga ask/eval` or a user's script."""
    yield


def test_the_setting_is_checked():
    assert parse_trace(None) is None and parse_trace("off") is None
    assert parse_trace("mlflow") == ("mlflow", None)
    assert parse_trace("mlflow:file:///tmp/mlruns") == ("mlflow", "file:///tmp/mlruns")
    assert parse_trace("otel:http://127.0.0.1:4318/v1/traces") == ("otel", "http://127.0.0.1:4318/v1/traces")
    for bad in ("zipkin", "otel"):
        with pytest.raises(ConfigError):
            parse_trace(bad)


@pytest.mark.skipif(HAS_MLFLOW, reason="MLflow is installed: the missing-extra message cannot be shown")
def test_without_the_extra_the_setting_is_one_line():
    from ppoga_dspy.app import ProgramSettings, open_program

    with pytest.raises(ConfigError, match=r"pip install 'ppoga-dspy\[mlflow\]'"):
        with open_program(ProgramSettings(kg=str(DEMO_KG), lm="none", program="none", tracing="mlflow")):
            pass


@pytest.mark.skipif(not HAS_MLFLOW, reason="needs the optional extra: pip install 'ppoga-dspy[mlflow]'")
def test_a_question_is_one_trace_with_stage_and_lm_spans(tmp_path, monkeypatch):
    import mlflow

    from ppoga_dspy.app import ProgramSettings, open_program
    from ppoga_dspy.datasets.loaders import load_dataset

    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "ppoga-test")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the local file store in maintenance mode
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")  # written before the question returns
    store = (tmp_path / "mlruns").as_uri()
    examples = load_dataset("demo", limit=1)
    settings = ProgramSettings(kg=str(DEMO_KG), lm="oracle/gold-path", program="none", tracing=f"mlflow:{store}")
    with open_program(settings, examples=examples) as opened:
        prediction = opened.program(question=examples[0].question)
    assert prediction.status == "ok"
    mlflow.flush_trace_async_logging()
    experiment = mlflow.get_experiment_by_name("ppoga-test")
    traces = mlflow.search_traces(locations=[experiment.experiment_id], return_type="list")
    assert len(traces) == 1
    spans = traces[0].data.spans
    names = [span.name for span in spans]
    assert any(name.startswith("PPoGA") for name in names), names  # the question
    assert sum(name.startswith("Predict") for name in names) >= 3, names  # a span per stage's predictor call
    lm_spans = [span for span in spans if str(span.span_type) == "CHAT_MODEL" or "LM" in span.name]
    assert lm_spans, names
    prompt = str(lm_spans[0].inputs)
    reply = str(lm_spans[0].outputs)
    assert examples[0].question in str([str(s.inputs) for s in lm_spans]) and "[[ ## " in reply + prompt
