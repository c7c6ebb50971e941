"""Run files stay honest: one writer at a time, one row per question id, no mixing of LMs or programs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ppoga_dspy.errors import ConfigError
from ppoga_dspy.evaluation.evaluate import program_fingerprint, read_run, run_evaluation, summarize
from ppoga_dspy.evaluation.runs import RunLocked, RunMismatch, lock_path, read_rows, run_lock
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.scripted.engine import ScriptedEngine, scripted_lm
from ppoga_dspy.scripted.gold_path import gold_path_handlers, golds_from_examples
from tests.conftest import DEMO_KG, REPO

ENV = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True",
           PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO))


@pytest.fixture(scope="module")
def demo():
    from ppoga_dspy.datasets.loaders import load_dataset
    from ppoga_dspy.kg import open_kg

    examples = load_dataset("demo", limit=4)
    kg = open_kg(DEMO_KG)
    yield examples, kg
    kg.close()


def _program(kg, examples):
    lm = scripted_lm(ScriptedEngine(gold_path_handlers(golds_from_examples(examples))))
    return PPoGA(kg, role_lms={"planner": lm, "executor": lm})


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ppoga_dspy", *args], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def test_a_file_with_duplicate_rows_reads_as_one_row_per_id_last_wins(tmp_path):
    path = tmp_path / "dup.jsonl"
    rows = [{"id": "a", "status": "failed", "metrics": {"hits@1": 0.0, "hits@1_strict": 0.0, "f1": 0.0}},
            {"id": "b", "status": "ok", "metrics": {"hits@1": 1.0, "hits@1_strict": 1.0, "f1": 1.0}},
            {"id": "a", "status": "ok", "metrics": {"hits@1": 1.0, "hits@1_strict": 1.0, "f1": 1.0}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert len(read_rows(path)) == 3
    assert [(r["id"], r["status"]) for r in read_run(path)] == [("a", "ok"), ("b", "ok")]
    summary = summarize(read_run(path))
    assert summary["n"] == 2 and summary["failed"] == 0 and summary["hits@1"] == 1.0
    report = _cli("report", str(path), "--json", timeout=120)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["n"] == 2


def test_second_writer_is_refused_at_once_and_a_stale_lock_is_taken_over(tmp_path):
    out = tmp_path / "run.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from ppoga_dspy.evaluation.runs import run_lock\n"
         f"with run_lock({str(out)!r}):\n    print('held', flush=True); time.sleep(60)"],
        cwd=REPO, env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLocked, match=f"pid {holder.pid}"):
            with run_lock(out):
                pass
        started = time.perf_counter()
        second = _cli("eval", "--dataset", "demo", "--lm", "oracle/gold-path", "--limit", "2", "--out", str(out),
                      "--no-progress", timeout=120)
        assert second.returncode == ConfigError.exit_code
        assert time.perf_counter() - started < 30  # before any model or KG is loaded
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "being written by another ppoga process" in lines[0] and "--out" in lines[0]
    finally:
        holder.kill()
        holder.wait()
    assert not out.exists()
    # The holder was killed: its lock file (with its dead pid) stays, but nobody holds it.
    assert lock_path(out).read_text().strip() == str(holder.pid)
    with run_lock(out) as lock:
        assert lock.read_text().strip() == str(os.getpid())
        with run_lock(out):  # re-entrant in one process (the CLI holds it around run_evaluation)
            pass
    assert not lock_path(out).exists()


def test_two_eval_processes_on_one_file_leave_no_duplicates(tmp_path):
    out = tmp_path / "both.jsonl"
    args = [sys.executable, "-m", "ppoga_dspy", "eval", "--dataset", "demo", "--lm", "oracle/gold-path",
            "--limit", "12", "--out", str(out), "--no-progress", "--json"]
    first, second = (subprocess.Popen(args, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True) for _ in range(2))
    results = [p.communicate(timeout=300) + (p.returncode,) for p in (first, second)]
    codes = sorted(code for _, _, code in results)
    assert codes == [0, ConfigError.exit_code], results
    refused = next(err for _, err, code in results if code)
    assert "being written by another ppoga process" in refused
    rows = read_rows(out)
    assert len(rows) == 12 and len({r["id"] for r in rows}) == 12


def test_rows_record_lm_and_program_and_a_resume_with_another_is_refused(demo, tmp_path):
    examples, kg = demo
    program = _program(kg, examples)
    out = tmp_path / "prov.jsonl"
    mine = {"lm": "oracle/gold-path", "program": program_fingerprint(program)}
    run_evaluation(program, examples[:2], out=out, progress=False, provenance=mine)
    assert all(r["lm"] == "oracle/gold-path" and r["program"] == mine["program"] for r in read_run(out))
    with pytest.raises(RunMismatch, match="lm 'oracle/gold-path'.*another --out"):
        run_evaluation(program, examples, out=out, progress=False, provenance={**mine, "lm": "openai/gpt-4o-mini"})
    other = _program(kg, examples)
    other.thresholds = other.thresholds.model_copy(update={"max_replans": 0})
    assert program_fingerprint(other) != mine["program"]
    assert program_fingerprint(_program(kg, examples)) == mine["program"]  # stable across instances
    with pytest.raises(RunMismatch, match="program"):
        run_evaluation(other, examples, out=out, progress=False,
                       provenance={**mine, "program": program_fingerprint(other)})
    assert len(read_run(out)) == 2  # nothing was added
    resumed = run_evaluation(program, examples, out=out, progress=False, provenance=mine)
    assert resumed.skipped == 2 and resumed.ran == len(examples) - 2


def test_cli_refuses_to_resume_with_another_program(tmp_path):
    out = tmp_path / "cli.jsonl"
    base = ["eval", "--dataset", "demo", "--lm", "oracle/gold-path", "--limit", "2", "--out", str(out), "--no-progress"]
    assert _cli(*base).returncode == 0
    again = _cli(*base, "--set", "max_replans=0")
    assert again.returncode == ConfigError.exit_code
    assert again.stderr.strip().splitlines()[-1].startswith("ppoga eval: error: ")
    assert "another --out" in again.stderr and len(read_rows(out)) == 2


def test_retry_failed_reruns_failures_and_supersedes_their_rows(demo, tmp_path):
    examples, kg = demo
    from ppoga_dspy.kg import open_kg

    out = tmp_path / "retry.jsonl"
    down = open_kg("http://127.0.0.1:9/sparql", timeout=0.5, retries=0)
    first = run_evaluation(_program(down, examples[:3]), examples[:3], out=out, progress=False)
    assert summarize(first.rows)["failed"] == 3
    program = _program(kg, examples)
    plain = run_evaluation(program, examples[:3], out=out, progress=False)
    assert plain.ran == 0  # failures are kept unless asked
    retried = run_evaluation(program, examples[:3], out=out, progress=False, retry_failed=True)
    assert retried.ran == 3 and retried.skipped == 0
    rows = read_rows(out)
    assert len(rows) == 3 and all(r["status"] == "ok" for r in rows)  # the failed rows left the file
    summary = summarize(read_run(out))
    assert summary["n"] == 3 and summary["failed"] == 0 and summary["hits@1"] == 1.0
