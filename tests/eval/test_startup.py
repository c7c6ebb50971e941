"""Time per question excludes start-up: models load once, before the first question's timer."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ppoga_dspy.evaluation.runs import read_run
from tests.conftest import REPO


def test_first_question_does_not_pay_for_loading_the_embedder(tmp_path):
    out = tmp_path / "run.jsonl"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True",
               PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-m", "ppoga_dspy", "eval", "--dataset", "demo", "--lm",
                             "oracle/gold-path", "--limit", "3", "--out", str(out), "--no-progress", "--json"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["startup_seconds"] > 0 and "not counted in the time per question" in result.stderr
    rows = read_run(out)
    # A fresh process: the sentence embedder loads in start-up, not in question 1.
    assert rows[0]["time"] < summary["startup_seconds"]
    assert summary["seconds_mean"] < summary["startup_seconds"]


def test_warm_up_loads_the_embedder(demo_kg):
    from ppoga_dspy.app.warmup import warm_up
    from ppoga_dspy.method.program import PPoGA
    from ppoga_dspy.method.pruning import EmbeddingRanker

    assert warm_up(PPoGA(demo_kg), {}) >= 0
    assert EmbeddingRanker._model is not None
