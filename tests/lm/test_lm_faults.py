"""LM faults against a real loopback server (ppoga_dspy.testing.faults): timeouts, retries, breaker, settings."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ppoga_dspy.lm import load_lm_settings, make_lm
from ppoga_dspy.lm.errors import LMUnavailableError
from ppoga_dspy.lm.settings import NO_CACHE_ENV
from ppoga_dspy.testing.faults import FaultLMServer

REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def test_a_hanging_server_times_out_each_attempt_and_retries_then_raises_one_lm_error():
    with FaultLMServer("hang") as server:
        lm = make_lm(server.spec(), timeout=1, num_retries=1, cache=False)
        started = time.perf_counter()
        with pytest.raises(LMUnavailableError, match=r"did not answer within 1s, 2 tries.*--lm-timeout"):
            lm("hello")
        elapsed = time.perf_counter() - started
        assert server.requests == 2  # one attempt plus one retry, each cut at the timeout
    assert 2.0 <= elapsed < 6.0
    assert lm.stats.retries == 1


def test_http_500_is_retried_with_backoff_then_names_the_server():
    with FaultLMServer("http500") as server:
        lm = make_lm(server.spec(), num_retries=2, cache=False)
        with pytest.raises(LMUnavailableError, match=r"failed 3 tries .*fault server: internal error"):
            lm("hello")
        assert server.requests == 3


def test_the_breaker_marks_a_dead_lm_down_so_later_calls_fail_at_once():
    with FaultLMServer("http500") as server:
        lm = make_lm(server.spec(), num_retries=0, cache=False)
        for _ in range(2):
            with pytest.raises(LMUnavailableError, match="failed 1 tries"):
                lm("hello")
        started = time.perf_counter()
        with pytest.raises(LMUnavailableError, match="marked down after 2 calls.*resume the run"):
            lm("hello")
        assert time.perf_counter() - started < 0.5
        assert server.requests == 2  # the third call never reached the server


def test_a_reply_resets_the_breaker():
    with FaultLMServer("ok") as server:
        lm = make_lm(server.spec(), num_retries=0, cache=False)
        lm.stats.failed_in_a_row = 1
        assert lm("hello")
        assert lm.stats.failed_in_a_row == 0


def test_timeout_and_retries_come_from_flags_env_and_toml(tmp_path, monkeypatch):
    assert load_lm_settings().timeout == 120.0 and load_lm_settings().num_retries == 3
    (tmp_path / "ppoga.toml").write_text("[lm]\ntimeout = 40\nnum_retries = 1\ncache = false\n", encoding="utf-8")
    from_toml = load_lm_settings()
    assert (from_toml.timeout, from_toml.num_retries, from_toml.cache) == (40.0, 1, False)
    monkeypatch.setenv("PPOGA_LM_TIMEOUT", "30")
    assert load_lm_settings().timeout == 30.0
    assert load_lm_settings(timeout=5).timeout == 5.0


def test_lm_flags_parse_into_settings():
    import argparse

    from ppoga_dspy.lm import add_lm_options, lm_settings_from_args

    parser = argparse.ArgumentParser()
    add_lm_options(parser)
    settings = lm_settings_from_args(parser.parse_args(["--lm-timeout", "5", "--lm-retries", "0", "--no-cache"]))
    assert (settings.timeout, settings.num_retries, settings.cache) == (5.0, 0, False)
    untouched = lm_settings_from_args(parser.parse_args([]))
    assert (untouched.timeout, untouched.num_retries, untouched.cache) == (120.0, 3, True)


def test_no_cache_environment_variable(monkeypatch):
    monkeypatch.setenv(NO_CACHE_ENV, "1")
    assert load_lm_settings().cache is False


@pytest.mark.parametrize("bad", ["0", "-3", "inf", "abc"])
def test_a_bad_timeout_is_a_one_line_config_error(bad, monkeypatch):
    from ppoga_dspy.lm.errors import LMConfigError

    monkeypatch.setenv("PPOGA_LM_TIMEOUT", bad)
    with pytest.raises(LMConfigError, match="timeout"):
        load_lm_settings()


def test_the_timeout_reaches_every_built_lm():
    from ppoga_dspy.lm import build_role_lms

    lms = build_role_lms(load_lm_settings(lm="openai/m@http://127.0.0.1:9/v1", timeout=7, num_retries=1))
    assert lms["planner"].kwargs["timeout"] == 7.0 and lms["planner"].retries == 1


@pytest.mark.slow
def test_ask_against_a_hanging_lm_ends_within_a_minute_with_kind_lm(tmp_path):
    """--lm-timeout 5 (the default is 120 s): two exhausted calls trip the LM breaker; the minute's bound leaves
    room for start-up on a loaded machine and still fails if the flag did not reach the calls."""
    with FaultLMServer("hang") as server:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "ppoga_dspy", "ask", "--lm", server.spec(), "--lm-timeout", "5", "--json"],
            capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=120,
        )
        elapsed = time.perf_counter() - started
    assert elapsed < 60, elapsed
    assert done.returncode == 5, done.stderr[-2000:]
    import json

    result = json.loads(done.stdout)
    assert result["status"] == "failed" and result["error_kind"] == "lm"
    assert "did not answer within 5s" in result["error"]
    assert "Traceback" not in done.stderr


def test_guarded_lm_state_round_trips_and_pickles():
    import pickle

    import dspy

    lm = make_lm("openai/m@http://127.0.0.1:9/v1", timeout=7, num_retries=2)
    restored = dspy.BaseLM.load_state(lm.dump_state(), allow_custom_lm_class=True)
    assert type(restored) is type(lm) and restored.retries == 2 and restored.kwargs["timeout"] == 7.0
    assert restored.num_retries == 0
    again = pickle.loads(pickle.dumps(lm))
    again.stats.add(calls=1)
    assert again.retries == 2 and again.stats.calls == 1
