"""A 100 KB reply is cut to a multiple of max_tokens before parsing, and the cut is in the trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ppoga_dspy.lm import make_lm
from ppoga_dspy.lm.guard import CAP_FACTOR, CHARS_PER_TOKEN, reply_cap, reply_scope
from ppoga_dspy.testing.faults import HUGE_REPLY_BYTES, FaultLMServer

REPO = Path(__file__).resolve().parents[2]


def test_reply_cap_is_chars_per_token_times_budget_times_factor():
    assert reply_cap(100) == CHARS_PER_TOKEN * CAP_FACTOR * 100 == 800


def test_a_huge_reply_is_cut_counted_and_not_cached():
    prompt = f"huge {uuid.uuid4()}"
    with FaultLMServer("huge") as server:
        lm = make_lm(server.spec(), max_tokens=50)
        with reply_scope() as scope:
            (text,) = lm(prompt)
            scope.commit()
        assert len(text) == reply_cap(50) == 400
        assert scope.truncations and scope.truncations[0]["chars"] > HUGE_REPLY_BYTES * 0.9
        assert lm.stats.truncated == 1
        lm(prompt)
        assert server.requests == 2  # a cut reply is never replayed from the cache


@pytest.mark.slow
def test_ask_with_huge_replies_records_the_cut_in_the_trace_and_ends_fast(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "DSPY_CACHEDIR": str(tmp_path)}
    with FaultLMServer("huge") as server:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "ppoga_dspy", "ask", "--lm", server.spec(), "--max-tokens", "64",
                               "--json"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        elapsed = time.perf_counter() - started
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    result = json.loads(done.stdout)
    cut = [e for e in result["trace"] if e.get("outputs", {}).get("_reply_truncated")]
    assert cut, [e["stage"] for e in result["trace"]]
    assert all(note["kept"] == reply_cap(64) for e in cut for note in e["outputs"]["_reply_truncated"])
    assert elapsed < 60, elapsed
