"""The response cache knows its endpoint and engine, never keeps a bad reply, and can be turned off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ppoga_dspy.lm import make_lm
from ppoga_dspy.lm.guard import engine_identity, reply_scope
from ppoga_dspy.testing.faults import FaultLMServer

REPO = Path(__file__).resolve().parents[2]


def _prompt() -> str:
    return f"a prompt no other test sends {uuid.uuid4()}"  # the cache is shared by the whole session


def test_the_same_model_name_on_two_servers_never_shares_replies():
    prompt = _prompt()
    with FaultLMServer("ok") as first, FaultLMServer("garbage") as second:
        a = make_lm(first.spec("same-name"))
        b = make_lm(second.spec("same-name"))
        assert a(prompt) == a(prompt)
        assert first.requests == 1 and a.stats.cache_hits == 1  # the first server's reply is reused there
        reply = b(prompt)
        assert second.requests == 1 and b.stats.cache_hits == 0
        assert reply != a(prompt)


def test_an_empty_reply_is_never_cached():
    prompt = _prompt()
    with FaultLMServer("empty") as server:
        lm = make_lm(server.spec())
        lm(prompt)
        lm(prompt)
        assert server.requests == 2 and lm.stats.cache_hits == 0


def test_a_reply_that_failed_validation_in_a_scope_is_dropped_and_a_committed_one_kept():
    prompt = _prompt()
    with FaultLMServer("ok") as server:
        lm = make_lm(server.spec())
        with reply_scope() as scope:
            lm(prompt)
            scope.discard()  # what QuestionRun.call does when the adapter could not parse it
        with reply_scope() as scope:
            lm(prompt)
            assert server.requests == 2
            scope.commit()
        with reply_scope() as scope:
            lm(prompt)
            assert scope.cache_hits == 1
        assert server.requests == 2


def test_a_scope_left_without_a_verdict_caches_nothing():
    prompt = _prompt()
    with FaultLMServer("ok") as server:
        lm = make_lm(server.spec())
        with pytest.raises(RuntimeError), reply_scope():
            lm(prompt)
            raise RuntimeError("the predictor failed")
        lm(prompt)
        assert server.requests == 2


def test_only_the_last_reply_of_a_scope_is_cached():
    first_prompt, fallback_prompt = _prompt(), _prompt()
    with FaultLMServer("ok") as server:
        lm = make_lm(server.spec())
        with reply_scope() as scope:
            lm(first_prompt)  # ChatAdapter's reply that did not parse
            lm(fallback_prompt)  # the JSON fallback that did
            scope.commit()
        lm(fallback_prompt)
        lm(first_prompt)
        assert server.requests == 3  # the fallback came from the cache, the unparsed reply did not


def test_no_cache_always_asks_the_server():
    prompt = _prompt()
    with FaultLMServer("ok") as server:
        lm = make_lm(server.spec(), cache=False)
        lm(prompt)
        lm(prompt)
        assert server.requests == 2 and lm.stats.cache_hits == 0


def test_engine_identity_tells_engines_apart():
    from ppoga_dspy.lm.embedded import EmbeddedEngine

    assert engine_identity("auto") == "auto"
    small, other = EmbeddedEngine("smollm2-135m"), EmbeddedEngine("gemma3-270m")
    assert engine_identity(small) != engine_identity(other)
    assert engine_identity(small) == engine_identity(EmbeddedEngine("smollm2-135m"))
    key_a = make_lm("local/smollm2-135m").cache_key("p", None, {})
    key_b = make_lm("local/gemma3-270m").cache_key("p", None, {})
    assert key_a["engine"] != key_b["engine"] and key_a["endpoint"] == key_b["endpoint"]


def test_the_cache_key_holds_the_endpoint_but_never_the_key():
    lm = make_lm("openai/m@http://127.0.0.1:9/v1", api_key="secret-value")
    key = lm.cache_key("p", None, {})
    assert key["endpoint"] == "http://127.0.0.1:9/v1"
    assert "secret-value" not in json.dumps(key, default=str)


def _ask(server: FaultLMServer, cache_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "DSPY_CACHEDIR": str(cache_dir)}
    # the fault server answers in the chat adapter's text form, not a structured-output schema's JSON
    return subprocess.run([sys.executable, "-m", "ppoga_dspy", "ask", "--lm", server.spec(), "--structured", "off",
                           "--json", *extra],
                          capture_output=True, text=True, env=env, cwd=cache_dir, timeout=300)


@pytest.mark.slow
def test_ask_says_how_many_replies_came_from_the_cache(tmp_path):
    with FaultLMServer("ok") as server:
        first = _ask(server, tmp_path)
        assert first.returncode in (0, 1), first.stderr[-2000:]
        asked = server.requests
        assert asked > 0 and "came from the cache" not in first.stderr
        second = _ask(server, tmp_path)
        assert server.requests == asked  # every reply parsed the first time, so all were cached
        assert f"{asked} of {asked} LM replies came from the cache" in second.stderr
        assert json.loads(second.stdout)["lm_replies"]["cache_hits"] == asked
        _ask(server, tmp_path, "--no-cache")
        assert server.requests == 2 * asked


def test_a_cached_reply_counts_the_tokens_of_its_first_call():
    """Cost tables must not show 0 tokens for a run whose replies came from the cache."""
    import dspy

    prompt = _prompt()
    with FaultLMServer("ok") as server:
        lm = make_lm(server.spec())
        with dspy.context(lm=lm), dspy.track_usage() as fresh:
            lm(prompt)
        with dspy.context(lm=lm), dspy.track_usage() as replay:
            lm(prompt)
        assert server.requests == 1 and lm.stats.cache_hits == 1
        first, again = fresh.get_total_tokens(), replay.get_total_tokens()
        assert first and first == again
        assert next(iter(again.values())).get("prompt_tokens", 0) > 0
