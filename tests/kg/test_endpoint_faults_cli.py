"""The CLI against faulty SPARQL endpoints: eval fails fast on a dead endpoint, bad bytes give one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ppoga_dspy.errors import KGError
from ppoga_dspy.testing.faults import FaultSparqlServer

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "ppoga_dspy", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("mode", ["non-utf8", "garbage-json"])
def test_kg_relations_on_a_bad_reply_prints_one_line_and_exits_with_the_kg_code(mode, tmp_path):
    with FaultSparqlServer(mode) as server:
        done = _run("kg", "relations", "m.0demo001", "--kg", server.url, "--retries", "1", cwd=tmp_path)
        assert server.requests >= 2  # retried before giving up
    assert done.returncode == KGError.exit_code, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ppoga kg: error:") and "bad reply" in lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_eval_of_20_questions_on_a_hanging_endpoint_ends_within_60_seconds(tmp_path):
    out = tmp_path / "run.jsonl"
    with FaultSparqlServer("hang") as server:
        started = time.perf_counter()
        done = _run("eval", "--dataset", "demo", "--limit", "20", "--kg", server.url, "--timeout", "2",
                    "--lm", "oracle/gold-path", "--out", str(out), "--no-progress", cwd=tmp_path)
        elapsed = time.perf_counter() - started
        requests = server.requests
    assert elapsed < 60, elapsed
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 20 and len({r["id"] for r in rows}) == 20  # none lost, none twice
    assert all(r["status"] == "failed" and r["error_kind"] == "kg" for r in rows)
    down = [r for r in rows if "marked down" in r["error"]]
    assert down and all("--retry-failed" in r["error"] for r in down)
    assert requests <= 3  # the breaker's three attempts, then nothing more reached the endpoint
