"""Spec strings: every accepted form parses to the right parts; anything else fails with the accepted forms."""

from __future__ import annotations

import pytest

from ppoga_dspy.errors import ConfigError
from ppoga_dspy.lm.errors import LMConfigError
from ppoga_dspy.lm.spec import ACCEPTED_FORMS, LMSpec, parse_spec


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("openai/gpt-4o-mini", LMSpec("openai", "gpt-4o-mini")),
        ("anthropic/claude-3-5-haiku-latest", LMSpec("anthropic", "claude-3-5-haiku-latest")),
        ("hosted_vllm/Qwen/Qwen2.5-7B-Instruct", LMSpec("hosted_vllm", "Qwen/Qwen2.5-7B-Instruct")),
        ("ollama_chat/llama3.1:8b", LMSpec("ollama_chat", "llama3.1:8b")),
        ("openai/qwen@http://127.0.0.1:8000/v1", LMSpec("openai", "qwen", "http://127.0.0.1:8000/v1")),
        ("openai/qwen@https://llm.example.org/v1/", LMSpec("openai", "qwen", "https://llm.example.org/v1")),
        # An @ that does not start a URL belongs to the model id (Vertex AI spells versions that way).
        ("vertex_ai/claude-3-5-sonnet@20240620", LMSpec("vertex_ai", "claude-3-5-sonnet@20240620")),
        ("local/embedded", LMSpec("local", "embedded")),
        ("  local/smollm2-135m ", LMSpec("local", "smollm2-135m")),
    ],
)
def test_accepted_forms_parse(text, expected):
    parsed = parse_spec(text)
    assert parsed == expected
    assert parsed.model_string == f"{expected.provider}/{expected.model}"
    assert parse_spec(str(parsed)) == parsed  # str() round-trips, base URL included


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("gpt-4o-mini", "no provider prefix"),
        ("openai/", "model id"),
        ("OpenAI/gpt-4o", "lower-case"),
        ("openai/gpt 4o", "whitespace"),
        ("openai/qwen@http://", "not an absolute http(s) URL"),
        ("local/embedded@http://127.0.0.1:8000/v1", "takes no base URL"),
        (42, "expected a string"),
    ],
)
def test_invalid_specs_name_the_problem_and_the_accepted_forms(text, why):
    with pytest.raises(LMConfigError) as caught:
        parse_spec(text)
    message = str(caught.value)
    assert why in message
    assert ACCEPTED_FORMS in message
    assert isinstance(caught.value, ConfigError)  # the CLI turns every ConfigError into a clean exit 2
