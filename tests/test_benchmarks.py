"""Benchmarks from a fresh clone: data from --data, $PPOGA_DATA or ../shared/data, else one clear line."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO, shared_data

SCRIPTS = ("cost_bench.py", "kg_bench.py")


def _run(script, cwd, env_extra, *args):
    env = {k: v for k, v in os.environ.items() if k != "PPOGA_DATA"}
    env.update(env_extra, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_fresh_clone_without_data_gets_the_command_to_run(script, tmp_path):
    clone = tmp_path / "clone"  # no shared/data beside it
    shutil.copytree(REPO / "benchmarks", clone / "benchmarks")
    result = _run(clone / "benchmarks" / script, clone, {})
    assert result.returncode != 0
    line = result.stderr.strip().splitlines()[-1]
    assert "no benchmark data" in line or "no IRN KB" in line
    assert "--data" in line and (script == "kg_bench.py" or "PPOGA_DATA" in line)
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _run(clone / "benchmarks" / script, clone, {"PPOGA_DATA": str(empty)})
    assert result.returncode != 0 and str(empty) in result.stderr


def test_data_folder_precedence(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_data", REPO / "benchmarks" / "_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    real = shared_data("wc2014", "WC2014.txt").parents[1]
    monkeypatch.setenv("PPOGA_DATA", str(real))
    assert module.data_dir(None, needs="wc2014/WC2014.txt") == real
    with pytest.raises(SystemExit, match="--data"):
        module.data_dir(tmp_path / "none")  # --data wins over the variable
    with pytest.raises(SystemExit, match="wc2014"):
        module.data_dir(tmp_path, needs="wc2014/WC2014.txt")  # a folder without the files the script reads


def test_lm_bench_questions_report_compares_two_engine_runs(tmp_path):
    """`lm_bench.py questions --report` over two real run files (the perfect planner stands in for both engines)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True",
               PYTHONPATH=str(REPO))
    for engine in ("old", "new"):
        done = subprocess.run([sys.executable, "-m", "ppoga_dspy", "eval", "--dataset", "demo", "--lm",
                               "oracle/gold-path", "--limit", "3", "--no-progress",
                               "--out", str(tmp_path / f"WC-P2.{engine}.jsonl")],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    report = subprocess.run([sys.executable, str(REPO / "benchmarks" / "lm_bench.py"), "questions", "--report",
                             "--out-dir", str(tmp_path), "--n", "3"], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    rows = [line for line in report.stdout.splitlines() if line.startswith("| old") or line.startswith("| new")]
    assert len(rows) == 2 and rows[0].split("|")[2].strip() == "3" and rows[0].split("|")[-2].strip() == "1.00"
    assert "same answer from both engines on 3 of 3 questions" in report.stdout
