"""Fixtures of the LM tests: a clean LM environment, scripted loopback servers, the embedded model once per session."""

from __future__ import annotations

import pytest

from ppoga_dspy.lm.settings import CONFIG_ENV, ENV_VARS


@pytest.fixture(autouse=True)
def _clean_lm_environment(monkeypatch, tmp_path):
    """No PPOGA_* setting, provider key or ./ppoga.toml leaks into a test from the machine running it."""
    for name in (*ENV_VARS.values(), CONFIG_ENV, "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HOSTED_VLLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    from ppoga_dspy.lm import factory

    monkeypatch.setattr(factory, "_notice_shown", False)


def echo_handler(tag: str):
    """A scripted reply for any signature: each output field gets `<tag>:<field>` plus the inputs it saw."""

    def handler(inputs: dict) -> dict:
        seen = ",".join(f"{k}={v}" for k, v in sorted(inputs.items()) if not k.startswith("_"))
        return {field: f"{tag}:{field} [{seen}]" for field in inputs["_outputs"]}

    return handler


@pytest.fixture
def scripted_server():
    """Start scripted loopback servers on free ports: `scripted_server(tag, model_name)` -> (server, engine)."""
    from ppoga_dspy.lm.server import serve_lm
    from ppoga_dspy.scripted.engine import ScriptedEngine

    started = []

    def start(tag: str, model_name: str, **options):
        engine = ScriptedEngine(default=echo_handler(tag))
        server = serve_lm(engine, model_name=model_name, **options)
        started.append(server)
        return server, engine

    yield start
    for server in started:
        server.close()


@pytest.fixture(scope="session")
def embedded_engine():
    """The default embedded model, loaded once for the whole test session (the load is the slow part)."""
    from ppoga_dspy.lm.embedded import EmbeddedEngine, load_embedded

    engine = EmbeddedEngine()
    load_embedded(engine.name)
    return engine
