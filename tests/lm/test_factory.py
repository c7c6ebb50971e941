"""make_lm and build_role_lms: specs become configured dspy.LMs, keys come from the environment, roles share LMs."""

from __future__ import annotations

import copy

import dspy
import pytest

from ppoga_dspy.lm import factory
from ppoga_dspy.lm.embedded import DEFAULT_EMBEDDED_MAX_TOKENS, DEFAULT_EMBEDDED_MODEL, EmbeddedEngine
from ppoga_dspy.lm.errors import LMConfigError
from ppoga_dspy.lm.factory import (
    DEFAULT_REMOTE_MAX_TOKENS,
    PLACEHOLDER_API_KEY,
    build_role_lms,
    default_lm_notice,
    lm_spec_of,
    make_lm,
)
from ppoga_dspy.lm.settings import LMSettings, load_lm_settings


@pytest.mark.parametrize(
    "spec",
    [
        "openai/gpt-4o-mini",
        "anthropic/claude-3-5-haiku-latest",
        "hosted_vllm/Qwen/Qwen2.5-7B-Instruct",
        "ollama_chat/llama3.1@http://127.0.0.1:11434/v1",
        "local/embedded",
        "local/gemma3-270m",
    ],
)
def test_temperature_and_max_tokens_are_always_set(spec):
    lm = make_lm(spec)
    assert isinstance(lm, dspy.LM)
    assert lm.kwargs["temperature"] == 0.0
    expected = DEFAULT_EMBEDDED_MAX_TOKENS if spec.startswith("local/") else DEFAULT_REMOTE_MAX_TOKENS
    assert lm.kwargs["max_tokens"] == expected


def test_overrides_reach_the_lm():
    lm = make_lm("openai/gpt-4o-mini", temperature=0.3, max_tokens=99, cache=False, num_retries=1)
    assert (lm.kwargs["temperature"], lm.kwargs["max_tokens"], lm.cache, lm.retries) == (0.3, 99, False, 1)
    assert lm.num_retries == 0  # DSPy's own loop is off: GuardedLM retries around it


def test_openai_reasoning_models_get_the_values_they_accept():
    lm = make_lm("openai/o3-mini")
    assert lm.kwargs["temperature"] == 1.0 and lm.kwargs["max_completion_tokens"] == 16000
    with pytest.raises(LMConfigError, match="reasoning models require"):
        make_lm("openai/o3-mini", max_tokens=100)


def test_base_url_from_the_spec_or_a_keyword(monkeypatch):
    from_spec = make_lm("openai/qwen@http://127.0.0.1:8000/v1")
    from_keyword = make_lm("openai/qwen", api_base="http://127.0.0.1:8000/v1/")
    for lm in (from_spec, from_keyword):
        assert lm.model == "openai/qwen"
        assert lm.kwargs["api_base"] == "http://127.0.0.1:8000/v1"
        # No key anywhere: a loopback server needs none, but the client must send something.
        assert lm.kwargs["api_key"] == PLACEHOLDER_API_KEY
        assert lm_spec_of(lm) == "openai/qwen@http://127.0.0.1:8000/v1"
    with pytest.raises(LMConfigError, match="also given"):
        make_lm("openai/qwen@http://127.0.0.1:8000/v1", api_base="http://127.0.0.1:9000/v1")


def test_keys_come_from_the_environment_only(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-usual-variable")
    at_server = make_lm("openai/qwen@http://127.0.0.1:8000/v1")
    assert "api_key" not in at_server.kwargs  # DSPy reads OPENAI_API_KEY itself: no placeholder over a real key
    hosted = make_lm("openai/gpt-4o-mini")
    assert "api_key" not in hosted.kwargs

    monkeypatch.setenv("TEAM_KEY", "sk-team")
    named = make_lm("openai/gpt-4o-mini", api_key_env="TEAM_KEY")
    assert named.kwargs["api_key"] == "sk-team"
    assert "sk-team" not in str(named.dump_state())  # saved programs never carry the key

    with pytest.raises(LMConfigError, match=r"\$MISSING_KEY"):
        make_lm("openai/gpt-4o-mini", api_key_env="MISSING_KEY")


def test_embedded_specs_build_an_engine_lm_without_loading_weights():
    from ppoga_dspy.lm import embedded

    lm = make_lm("local/embedded")
    assert lm.model == f"local/{DEFAULT_EMBEDDED_MODEL}"
    assert isinstance(lm.engine, EmbeddedEngine) and lm.engine.name == DEFAULT_EMBEDDED_MODEL
    assert lm.retries == 0
    assert make_lm("local/gemma3-270m").model == "local/gemma3-270m"
    # No test calls the non-default model, so its weights must still be unloaded: loading is lazy.
    assert make_lm("local/smollm2-135m").model == "local/smollm2-135m"
    assert not embedded.is_loaded("smollm2-135m")
    assert lm.supports_response_schema is False


def test_embedded_engine_survives_deep_copies_and_save_state():
    lm = make_lm("local/embedded")
    assert copy.deepcopy(lm).engine is lm.engine  # optimizers deep-copy programs; weights are never copied
    state = lm.dump_state()
    assert state["engine"]["class"] == "ppoga_dspy.lm.embedded:EmbeddedEngine"
    restored = dspy.LM.load_state(state, allow_custom_lm_class=True)
    assert isinstance(restored.engine, EmbeddedEngine) and restored.engine.name == lm.engine.name


@pytest.mark.parametrize(
    ("spec", "options", "fragment"),
    [
        ("local/embedded", {"api_base": "http://127.0.0.1:8000/v1"}, "takes no api_base"),
        ("local/embedded", {"api_key": "x"}, "takes no api_base"),
        ("local/llama-70b", {}, "unknown embedded model"),
        ("gpt-4o", {}, "no provider prefix"),
        ("openai/x", {"api_base": "127.0.0.1:8000"}, "not an absolute http(s) URL"),
    ],
)
def test_invalid_specs_and_options_raise_lm_config_error(spec, options, fragment):
    with pytest.raises(LMConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        make_lm(spec, **options)


def test_an_existing_lm_passes_through_or_is_copied_with_overrides():
    lm = make_lm("openai/gpt-4o-mini")
    assert make_lm(lm) is lm
    hotter = make_lm(lm, temperature=0.9)
    assert hotter is not lm and hotter.kwargs["temperature"] == 0.9 and lm.kwargs["temperature"] == 0.0


def test_no_lm_configured_uses_the_embedded_model_with_one_notice(capsys):
    lms = build_role_lms(LMSettings())
    assert lms["planner"] is lms["executor"]
    assert lms["planner"].model == f"local/{DEFAULT_EMBEDDED_MODEL}"
    build_role_lms(LMSettings())  # a second build in the same process says nothing more
    err = capsys.readouterr().err
    assert err == default_lm_notice() + "\n"
    assert "\n" not in default_lm_notice()
    assert "--lm openai/gpt-4o-mini" in err and "PPOGA_LM=" in err and "weak" in err


def test_an_explicit_embedded_spec_prints_no_notice(capsys):
    make_lm("local/embedded")
    assert capsys.readouterr().err == ""


def test_roles_share_one_lm_unless_the_executor_differs():
    same = build_role_lms(LMSettings(lm="openai/gpt-4o-mini"))
    assert set(same) == {"planner", "executor"} and same["planner"] is same["executor"]
    named_twice = build_role_lms(LMSettings(lm="openai/gpt-4o-mini", executor_lm="openai/gpt-4o-mini"))
    assert named_twice["planner"] is named_twice["executor"]

    split = build_role_lms(
        LMSettings(lm="openai/gpt-4o", executor_lm="hosted_vllm/small@http://127.0.0.1:8001/v1", temperature=0.1)
    )
    assert split["planner"].model == "openai/gpt-4o"
    assert split["executor"].model == "hosted_vllm/small"
    assert split["executor"].kwargs["api_base"] == "http://127.0.0.1:8001/v1"
    assert split["planner"].kwargs["temperature"] == split["executor"].kwargs["temperature"] == 0.1


def test_shared_settings_apply_to_both_roles_but_a_spec_url_wins(monkeypatch):
    monkeypatch.setenv("PPOGA_LM", "openai/big")
    monkeypatch.setenv("PPOGA_EXECUTOR_LM", "openai/small@http://127.0.0.1:8002/v1")
    monkeypatch.setenv("PPOGA_LM_API_BASE", "http://127.0.0.1:8001/v1")
    monkeypatch.setenv("PPOGA_LM_MAX_TOKENS", "512")
    lms = build_role_lms(load_lm_settings())
    assert lms["planner"].kwargs["api_base"] == "http://127.0.0.1:8001/v1"
    assert lms["executor"].kwargs["api_base"] == "http://127.0.0.1:8002/v1"
    assert lms["planner"].kwargs["max_tokens"] == lms["executor"].kwargs["max_tokens"] == 512


def test_build_role_lms_reads_the_environment_when_given_no_settings(monkeypatch, capsys):
    monkeypatch.setenv("PPOGA_LM", "anthropic/claude-3-5-haiku-latest")
    lms = build_role_lms()
    assert lms["planner"].model == "anthropic/claude-3-5-haiku-latest"
    assert capsys.readouterr().err == ""
    assert factory._notice_shown is False
