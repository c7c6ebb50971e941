"""Hostile LM servers (#41, items 1 and 2, and usage): a server that trickles bytes is cut at `--lm-timeout` in total
and cannot hold a stop; an LM whose every reply is empty fails the question with kind "lm"; usage figures are a hint.
Every server is a real loopback one (`ppoga_dspy.testing.faults`), every loop is bounded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.lm import make_lm
from ppoga_dspy.lm.errors import LMUnavailableError
from ppoga_dspy.testing.faults import TRICKLE_MODES, FaultLMServer
from tests.conftest import REPO

# A trickle long enough to outlive any sane limit (one byte every 0.5 s of a ~300-byte body), bounded by hang_seconds.
TRICKLE = {"trickle_seconds": 0.5, "hang_seconds": 60}


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# -- 1: a server that trickles bytes ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", TRICKLE_MODES)
def test_a_trickling_server_is_cut_at_the_timeout_in_total_per_attempt(mode):
    with FaultLMServer(mode, **TRICKLE) as server:
        lm = make_lm(server.spec(), timeout=2, num_retries=1, cache=False)
        started = time.monotonic()
        with pytest.raises(LMUnavailableError, match=r"did not answer within 2s, 2 tries"):
            lm("hello")
        elapsed = time.monotonic() - started
        assert server.requests == 2  # each attempt reached the server, and each was cut at its deadline
    assert elapsed < 8.0, elapsed  # 2 attempts x 2 s + a backoff; the trickle alone lasts a minute


def test_ask_against_a_trickling_server_fails_with_kind_lm_in_bounded_time(capsys):
    with FaultLMServer("trickle-chunked", **TRICKLE) as server:
        started = time.monotonic()
        code = main(["ask", "Who directed Inception?", "--lm", server.spec(), "--lm-timeout", "2",
                     "--lm-retries", "1", "--no-cache", "--json"])
        elapsed = time.monotonic() - started
    assert code == 5, capsys.readouterr().err  # the LM's exit code
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "failed" and result["error_kind"] == "lm"
    assert elapsed < 30, elapsed


def _as_a_foreground_process() -> None:
    """Ctrl-C reaches `ppoga eval` as it reaches a terminal's foreground job. A shell without job control starts a
    background job (`pytest ... &`, as a script or CI may) with SIGINT ignored, and Python keeps an inherited
    ignore instead of raising KeyboardInterrupt: the child would never see the SIGINT this test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_ends_an_eval_held_by_a_trickling_server_promptly(sig, tmp_path):
    out = tmp_path / "r.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO), "DSPY_CACHEDIR": str(tmp_path / "cache"), "PPOGA_NO_CACHE": "1"}
    with FaultLMServer("trickle", **TRICKLE) as server:
        command = [sys.executable, "-m", "ppoga_dspy", "eval", "--dataset", "demo", "--limit", "3", "--out", str(out),
                   "--lm", server.spec(), "--lm-timeout", "50", "--no-progress"]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                   cwd=tmp_path, preexec_fn=_as_a_foreground_process)
        try:
            deadline = time.monotonic() + 120
            while server.requests == 0 and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.1)
            assert server.requests > 0, process.communicate(timeout=5)
            time.sleep(1.0)  # the request is being trickled now
            stopped = time.monotonic()
            process.send_signal(sig)
            _, err = process.communicate(timeout=60)
            took = time.monotonic() - stopped
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == (143 if sig == signal.SIGTERM else 130), err
    assert took < 15, took  # not the ~150 s the trickle would take
    assert "Traceback" not in err and "rerun the same command to resume" in err
    assert [row["error_kind"] for row in _rows(out)] == ["lm"]  # the question in flight is written, resumable


# -- 2: an LM whose every reply is empty ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["no-choices", "null-content", "empty"])
def test_a_question_no_reply_of_which_was_usable_fails_with_kind_lm(mode, tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    with FaultLMServer(mode) as server:
        code = main(["eval", "--dataset", "demo", "--limit", "2", "--out", str(out), "--lm", server.spec(),
                     "--no-progress", "--no-cache", "--json"])
    captured = capsys.readouterr()
    assert code == 7, captured.err  # an evaluation with failed questions
    rows = _rows(out)
    assert [r["status"] for r in rows] == ["failed", "failed"] and {r["error_kind"] for r in rows} == {"lm"}
    assert all(r["metrics"]["hits@1"] == 0 for r in rows) and all(r["unusable_replies"] > 0 for r in rows)
    assert "no LM call of this question gave a usable reply" in rows[0]["error"]
    summary = json.loads(captured.out)
    summary = next(iter(summary.values())) if "n" not in summary else summary
    assert summary["failed"] == 2 and summary["unusable_replies"] == sum(r["unusable_replies"] for r in rows)


def test_good_replies_are_not_counted_as_unusable(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    with FaultLMServer("ok") as server:
        main(["eval", "--dataset", "demo", "--limit", "1", "--out", str(out), "--lm", server.spec(), "--no-progress",
              "--no-cache"])
    assert [r["status"] for r in _rows(out)] == ["ok"]


# -- usage figures are a hint ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["usage-strings", "usage-huge"])
def test_usage_figures_are_coerced_or_dropped_never_fail_a_good_reply(mode, tmp_path):
    out = tmp_path / "r.jsonl"
    with FaultLMServer(mode) as server:
        assert main(["eval", "--dataset", "demo", "--limit", "1", "--out", str(out), "--lm", server.spec(),
                     "--no-progress", "--no-cache"]) == 0
    (row,) = _rows(out)
    assert row["status"] == "ok"
    if mode == "usage-strings":  # "10" is read as 10
        assert row["input_token"] >= 10
    else:  # 1e30 is not believed: dropped, never summed
        assert row["total_token"] < 1_000_000


def test_token_count_rule():
    from ppoga_dspy.lm.usage import hinted, token_count

    assert [token_count(v) for v in ("12", 12.0, 7, "x", -1, 1e30, float("nan"), True, None)] == [
        12, 12, 7, None, None, None, None, None, None]
    assert hinted({"prompt_tokens": "3", "completion_tokens": 1e30, "prompt_tokens_details": {"cached_tokens": "2"},
                   "completion_tokens_details": None}) \
        == {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 2}, "completion_tokens_details": None}
