"""LM settings: CLI over environment over TOML over defaults, the CLI options, and clear errors."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from ppoga_dspy.lm.errors import LMConfigError
from ppoga_dspy.lm.settings import (
    CONFIG_ENV,
    ENV_VARS,
    LMSettings,
    add_lm_options,
    lm_settings_from_args,
    load_lm_settings,
)


def write_toml(path, body: str):
    path.write_text(body, encoding="utf-8")
    return path


def parse(argv):
    parser = argparse.ArgumentParser()
    add_lm_options(parser)
    return parser.parse_args(argv)


def test_defaults_mean_embedded_model_greedy_cached():
    settings = load_lm_settings()
    assert settings == LMSettings()
    assert settings.lm is None and settings.executor_spec is None
    assert settings.temperature == 0.0
    assert settings.max_tokens is None  # make_lm picks the backend's default budget
    assert settings.cache is True and settings.num_retries == 3


def test_each_layer_overrides_the_one_below(tmp_path, monkeypatch):
    config = write_toml(
        tmp_path / "ppoga.toml",
        '[lm]\nlm = "openai/from-toml"\nexecutor_lm = "openai/exec-toml"\ntemperature = 0.5\nmax_tokens = 300\n'
        "num_retries = 1\n",
    )
    toml_only = load_lm_settings(config=config)
    assert (toml_only.lm, toml_only.executor_lm, toml_only.temperature, toml_only.max_tokens) == (
        "openai/from-toml",
        "openai/exec-toml",
        0.5,
        300,
    )

    monkeypatch.setenv("PPOGA_LM", "openai/from-env")
    monkeypatch.setenv("PPOGA_LM_TEMPERATURE", "0.7")
    env_over_toml = load_lm_settings(config=config)
    assert env_over_toml.lm == "openai/from-env"
    assert env_over_toml.temperature == 0.7
    assert env_over_toml.executor_lm == "openai/exec-toml"  # not in the environment: TOML still counts
    assert env_over_toml.num_retries == 1

    cli_over_env = lm_settings_from_args(parse(["--lm", "anthropic/from-cli", "--config", str(config)]))
    assert cli_over_env.lm == "anthropic/from-cli"
    assert cli_over_env.temperature == 0.7  # the flag was not given: the environment's value stays
    assert cli_over_env.max_tokens == 300

    everything = lm_settings_from_args(
        parse(["--lm", "openai/a", "--executor-lm", "openai/b", "--temperature", "0.2", "--max-tokens", "64"])
    )
    assert (everything.lm, everything.executor_lm, everything.temperature, everything.max_tokens) == (
        "openai/a",
        "openai/b",
        0.2,
        64,
    )


def test_default_config_file_is_read_from_the_working_directory(tmp_path):
    # The autouse fixture made tmp_path the working directory.
    write_toml(tmp_path / "ppoga.toml", '[lm]\nlm = "openai/cwd-model"\ncache = false\n')
    settings = load_lm_settings()
    assert settings.lm == "openai/cwd-model" and settings.cache is False


def test_config_file_from_the_environment(tmp_path, monkeypatch):
    path = write_toml(tmp_path / "elsewhere.toml", '[lm]\napi_key_env = "MY_KEY"\n')
    monkeypatch.setenv(CONFIG_ENV, str(path))
    assert load_lm_settings().api_key_env == "MY_KEY"


def test_other_tables_of_the_file_are_ignored(tmp_path):
    path = write_toml(tmp_path / "all.toml", '[kg]\nendpoint = "x"\n[thresholds]\nmax_steps = 3\n')
    assert load_lm_settings(config=path) == LMSettings()


def test_every_setting_has_an_environment_variable(monkeypatch):
    values = {
        "lm": "openai/m",
        "executor_lm": "openai/e@http://127.0.0.1:9/v1",
        "temperature": "1.5",
        "max_tokens": "77",
        "api_base": "http://127.0.0.1:8000/v1/",
        "api_key_env": "SOME_KEY",
        "cache": "false",
        "num_retries": "0",
        "timeout": "9.5",
        "constrain": "0",
        "structured": "vllm",
    }
    assert set(values) == set(ENV_VARS) == set(LMSettings.model_fields)
    for field, value in values.items():
        monkeypatch.setenv(ENV_VARS[field], value)
    settings = load_lm_settings()
    assert settings.model_dump() == {
        "lm": "openai/m",
        "executor_lm": "openai/e@http://127.0.0.1:9/v1",
        "temperature": 1.5,
        "max_tokens": 77,
        "api_base": "http://127.0.0.1:8000/v1",
        "api_key_env": "SOME_KEY",
        "cache": False,
        "num_retries": 0,
        "timeout": 9.5,
        "constrain": False,
        "structured": "vllm",
    }


def test_empty_environment_variable_counts_as_unset(monkeypatch):
    monkeypatch.setenv("PPOGA_LM", "")
    assert load_lm_settings().lm is None


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ('[lm]\nlm = "gpt-4o"\n', "no provider prefix"),
        ("[lm]\ntemperature = 9\n", "temperature"),
        ('[lm]\nmodel = "openai/x"\n', "unknown setting"),
        ('[lm]\napi_key_env = "sk-abc123"\n', "not an environment variable name"),
        ('[lm]\napi_base = "localhost:8000"\n', "not an absolute http(s) URL"),
        ('lm = "openai/x"\n[lm\n', "cannot read config file"),
        ('lm = "openai/x"\n', "must be a table"),  # a top-level key where the [lm] table belongs
    ],
)
def test_bad_toml_values_raise_lm_config_errors(tmp_path, body, fragment):
    path = write_toml(tmp_path / "bad.toml", body)
    with pytest.raises(LMConfigError, match=re.escape(fragment)):
        load_lm_settings(config=path)


def test_missing_config_file_says_so(tmp_path):
    with pytest.raises(LMConfigError, match="does not exist"):
        load_lm_settings(config=tmp_path / "nope.toml")


def test_bad_environment_value_names_the_setting(monkeypatch):
    monkeypatch.setenv("PPOGA_LM_MAX_TOKENS", "lots")
    with pytest.raises(LMConfigError, match="max_tokens"):
        load_lm_settings()


def test_options_default_to_not_given_and_coexist_with_another_config_flag():
    args = parse([])
    assert (args.lm, args.executor_lm, args.config, args.temperature, args.max_tokens) == (None,) * 5
    parser = argparse.ArgumentParser()
    parser.add_argument("--config")  # e.g. the KG options registered first
    add_lm_options(parser)
    assert parser.parse_args(["--config", "x.toml", "--lm", "openai/m"]).config == "x.toml"


def test_settings_module_imports_neither_dspy_nor_torch():
    code = (
        "import sys, argparse\n"
        "import ppoga_dspy.lm as lm\n"
        "p = argparse.ArgumentParser(); lm.add_lm_options(p)\n"
        "lm.lm_settings_from_args(p.parse_args([]))\n"
        "print(sorted(m for m in ('dspy', 'torch', 'transformers', 'litellm') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
