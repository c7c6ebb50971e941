"""Signals and thread counts (#30, class 10): SIGTERM writes the questions in flight, says how to resume and exits
143; --threads has a ceiling."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.testing.faults import FaultLMServer
from tests.conftest import REPO


def _ids(path) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.endswith("}")]


def test_sigterm_writes_the_questions_in_flight_and_the_resume_finishes(tmp_path):
    out = tmp_path / "r.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO), "DSPY_CACHEDIR": str(tmp_path / "cache"), "PPOGA_NO_CACHE": "1"}
    with FaultLMServer("ok") as server:
        command = [sys.executable, "-m", "ppoga_dspy", "eval", "--dataset", "demo", "--limit", "12", "--threads", "2",
                   "--out", str(out), "--lm", server.spec(), "--no-progress"]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                   cwd=tmp_path)
        deadline = time.monotonic() + 240
        while not _ids(out) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        asked, at_signal = server.requests, len(_ids(out))
        process.send_signal(signal.SIGTERM)  # two questions are in flight (threads 2): both must be written
        _, err = process.communicate(timeout=240)
        assert process.returncode == 143, err
        assert "Traceback" not in err and "rerun the same command to resume" in err
        saved = _ids(out)
        assert at_signal < len(saved) < 12 and len(set(saved)) == len(saved)  # 12: the signal lands mid-run
        assert asked > 0
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
    counts = Counter(_ids(out))
    assert len(counts) == 12 and max(counts.values()) == 1


@pytest.mark.parametrize("threads", ["129", "1000"])
def test_threads_have_a_ceiling(threads, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["eval", "--dataset", "demo", "--lm", "none", "--out", str(tmp_path / "r.jsonl"), "--threads", threads])
    assert stop.value.code == 2 and "at most 128" in capsys.readouterr().err
