"""`ppoga eval`: parallel, resumable runs on real WC2014 questions with the scripted gold-path planner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ppoga_dspy.evaluation.evaluate import read_run, run_evaluation, summarize
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.scripted.engine import ScriptedEngine, scripted_lm
from ppoga_dspy.scripted.gold_path import gold_path_handlers, golds_from_examples
from tests.conftest import REPO, shared_data

SUMMARY_KEYS = {"n", "hits@1", "hits@1_strict", "f1", "failed", "lm_calls_mean", "lm_calls_median", "tokens_mean",
                "seconds_mean"}


@pytest.fixture(scope="module")
def wc2014():
    from ppoga_dspy.datasets.loaders import load_dataset
    from ppoga_dspy.kg import open_kg

    questions = shared_data("wc2014", "WC-P2.txt")
    examples = load_dataset(f"wc2014:{questions}", limit=20, split="test")
    kg = open_kg(shared_data("wc2014", "WC2014.txt"))
    yield examples, kg
    kg.close()


def _program(kg, examples):
    lm = scripted_lm(ScriptedEngine(gold_path_handlers(golds_from_examples(examples))))
    return PPoGA(kg, role_lms={"planner": lm, "executor": lm})


def _totals(rows):
    summary = summarize(rows)
    return {k: summary[k] for k in ("n", "hits@1", "hits@1_strict", "f1", "failed", "lm_calls_mean", "tokens_mean")}


def test_interrupted_run_resumes_to_the_same_totals(wc2014, tmp_path):
    examples, kg = wc2014
    assert len(examples) == 20
    program = _program(kg, examples)
    full = run_evaluation(program, examples, out=tmp_path / "full.jsonl", threads=2, progress=False)
    assert full.ran == 20 and not full.interrupted

    calls = {"n": 0}

    def flaky(**kwargs):  # Ctrl-C arrives while the 8th question runs
        calls["n"] += 1
        if calls["n"] == 8:
            raise KeyboardInterrupt
        return program(**kwargs)

    part = run_evaluation(flaky, examples, out=tmp_path / "resumed.jsonl", threads=1, progress=False)
    assert part.interrupted and part.ran == 7
    assert len(read_run(tmp_path / "resumed.jsonl")) == 7
    rest = run_evaluation(program, examples, out=tmp_path / "resumed.jsonl", threads=2, progress=False)
    assert rest.skipped == 7 and rest.ran == 13
    rows = read_run(tmp_path / "resumed.jsonl")
    assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in full.rows)
    assert _totals(rows) == pytest.approx(_totals(full.rows))
    assert _totals(rows)["hits@1"] >= 0.9


def test_run_file_has_pog_fields_and_survives_a_half_written_line(wc2014, tmp_path):
    examples, kg = wc2014
    out = tmp_path / "run.jsonl"
    run_evaluation(_program(kg, examples[:3]), examples[:3], out=out, progress=False)
    rows = read_run(out)
    for row in rows:
        for key in ("question", "RawQuestion", "results", "reasoning_chains", "call_num", "input_token",
                    "output_token", "total_token", "time", "metrics", "trace", "status"):
            assert key in row
        assert row["call_num"] > 0 and row["total_token"] == row["input_token"] + row["output_token"]
        assert set(row["metrics"]) == {"hits@1", "hits@1_strict", "f1", "hits@1_pog"}
    with out.open("a") as handle:
        handle.write('{"id": "cut-off-mid-wri')  # a crash while writing
    assert len(read_run(out)) == 3
    again = run_evaluation(_program(kg, examples[:4]), examples[:4], out=out, progress=False)
    assert again.skipped == 3 and again.ran == 1 and len(read_run(out)) == 4


def test_a_failing_question_is_recorded_and_the_run_goes_on(wc2014, tmp_path):
    examples, _ = wc2014
    from ppoga_dspy.kg import open_kg

    down = open_kg("http://127.0.0.1:9/sparql", dialect="irn", timeout=0.5, retries=0)
    result = run_evaluation(_program(down, examples[:3]), examples[:3], out=tmp_path / "down.jsonl", progress=False)
    assert result.ran == 3
    summary = summarize(result.rows)
    assert summary["failed"] == 3 and summary["errors_by_kind"] == {"kg": 3}
    assert all("127.0.0.1:9" in row["error"] for row in result.rows)


def _cli(*args, **kwargs):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True",
               PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "ppoga_dspy.cli", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def test_cli_eval_ctrl_c_then_resume_then_report(tmp_path):
    questions = shared_data("wc2014", "WC-P1.txt")
    out = tmp_path / "cli.jsonl"
    spec = f"wc2014:{questions}"
    common = ["eval", "--dataset", spec, "--limit", "120", "--lm", "oracle/gold-path", "--out", str(out),
              "--no-progress", "--json"]
    process = _cli(*common)
    deadline = time.time() + 240
    while time.time() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 5):
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    first = len(read_run(out))
    assert process.returncode in (130, 0), stderr
    assert 5 <= first, stderr
    resumed = _cli(*common)
    stdout, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert SUMMARY_KEYS <= set(summary)
    assert summary["n"] == 120 and summary["skipped"] == first
    assert 0.9 <= summary["hits@1"] <= 1.0
    other = tmp_path / "first-half.jsonl"
    other.write_text("".join(out.read_text().splitlines(keepends=True)[:60]))
    report = _cli("report", str(out), str(other), "--json")
    stdout, stderr = report.communicate(timeout=120)
    assert report.returncode == 0, stderr
    both = json.loads(stdout.strip().splitlines()[-1])
    assert both[str(out)]["n"] == 120 and both[str(other)]["n"] == 60
