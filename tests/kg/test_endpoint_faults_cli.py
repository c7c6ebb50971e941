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


@pytest.mark.slow
def test_a_run_cut_short_by_a_dead_endpoint_resumes_with_retry_failed_once_it_is_back(tmp_path):
    from ppoga_dspy.kg import servers
    from tests.conftest import DEMO_KG

    if servers.oxigraph_binary() is None:
        pytest.skip("the oxigraph binary is absent (pip install oxigraph)")
    out = tmp_path / "run.jsonl"
    common = ["eval", "--dataset", "demo", "--limit", "5", "--lm", "oracle/gold-path", "--out", str(out),
              "--no-progress", "--dialect", "freebase"]
    with FaultSparqlServer("hang") as dead:
        _run(*common, "--kg", dead.url, "--timeout", "1", cwd=tmp_path)
    assert all(json.loads(line)["error_kind"] == "kg" for line in out.read_text(encoding="utf-8").splitlines())
    with servers.start_oxigraph([DEMO_KG], tmp_path / "oxigraph") as back:
        done = _run(*common, "--kg", back.url, "--retry-failed", cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    from ppoga_dspy.evaluation.evaluate import read_run

    rows = read_run(out)
    assert len(rows) == 5 and len({r["id"] for r in rows}) == 5
    assert all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]
