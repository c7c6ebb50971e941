"""`ppoga compile --optimizer mipro` resumes from its run folder: a rerun with the same flags evaluates no finished
trial again (counted at the metric), a larger `--trials` evaluates only the new ones and ends where one uninterrupted
run ends, and a folder of other work is refused in one line. Offline: scripted student and prompt writer."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.errors import ConfigError
from ppoga_dspy.optimizers import compile as compile_module
from ppoga_dspy.optimizers.artifact import load_artifact
from ppoga_dspy.optimizers.mipro_resume import SCORES_FILE, CompileMismatch, ScoreStore

BASE = ["compile", "--dataset", "demo-train", "--split", "train", "--lm", "oracle/noisy:0.5", "--limit", "6",
        "--dev-limit", "1", "--max-demos", "1", "--json", "--optimizer", "mipro", "--prompt-lm", "oracle/proposer",
        "--candidates", "2"]
SELECTED = 2  # 6 training questions: the last third is held out for selection


@pytest.fixture
def metric_calls(monkeypatch):
    """Calls of MIPROv2's metric, split by who called: Evaluate scores a trial (no trace), bootstrapping a teacher
    run passes its trace."""
    calls: Counter = Counter()
    real = compile_module.dspy_metric

    def counted(example, prediction, trace=None):
        calls["trial" if trace is None else "bootstrap"] += 1
        return real(example, prediction, trace)

    monkeypatch.setattr(compile_module, "dspy_metric", counted)
    return calls


def _compile(capsys, out, *flags: str) -> dict:
    capsys.readouterr()
    assert main([*BASE, "--out", str(out), *flags]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _predictors(path) -> dict:
    return load_artifact(path).program_state


def test_a_rerun_skips_finished_trials_and_a_larger_budget_runs_only_the_new_ones(capsys, tmp_path, metric_calls):
    folder = tmp_path / "run"
    first = _compile(capsys, tmp_path / "a.json", "--trials", "2", "--log-dir", str(folder))
    assert first["resumed"]["evaluations_resumed"] == 0 and first["resumed"]["evaluations_run"] >= 2
    assert metric_calls["trial"] == SELECTED * first["resumed"]["evaluations_run"]
    kept = (folder / SCORES_FILE).read_text().splitlines()
    assert len(kept) == 1 + first["resumed"]["evaluations_run"]  # the provenance line, then one line per evaluation

    metric_calls.clear()
    again = _compile(capsys, tmp_path / "b.json", "--trials", "2", "--log-dir", str(folder))
    assert again["resumed"] == {**first["resumed"], "evaluations_resumed": first["resumed"]["evaluations_run"]
                                                                       + first["resumed"]["evaluations_resumed"],
                                "evaluations_run": 0}
    assert metric_calls["trial"] == 0  # no finished trial's questions were answered again
    assert _predictors(tmp_path / "b.json") == _predictors(tmp_path / "a.json")

    metric_calls.clear()
    longer = _compile(capsys, tmp_path / "c.json", "--trials", "5", "--log-dir", str(folder))
    assert longer["resumed"]["evaluations_resumed"] >= first["resumed"]["evaluations_run"]
    assert metric_calls["trial"] == SELECTED * longer["resumed"]["evaluations_run"]

    metric_calls.clear()
    fresh = _compile(capsys, tmp_path / "d.json", "--trials", "5", "--log-dir", str(tmp_path / "fresh"))
    # one uninterrupted run measures what the two runs measured between them, and picks the same program
    assert fresh["resumed"]["evaluations_run"] == (first["resumed"]["evaluations_run"]
                                                   + longer["resumed"]["evaluations_run"])
    assert metric_calls["trial"] == SELECTED * fresh["resumed"]["evaluations_run"]
    assert _predictors(tmp_path / "d.json") == _predictors(tmp_path / "c.json")


@pytest.mark.parametrize(("flags", "says"), [
    (["--seed", "1"], "made with seed 0, and this run uses seed 1"),
    (["--lm", "oracle/noisy:0.2"], "made with lm 'oracle/noisy:0.5'"),
    (["--max-demos", "2"], "made with max_demos 1"),
])
def test_a_folder_of_other_work_is_refused_in_one_line(flags, says, capsys, tmp_path):
    folder = tmp_path / "run"
    _compile(capsys, tmp_path / "a.json", "--trials", "1", "--log-dir", str(folder))
    before = (folder / SCORES_FILE).read_text()
    capsys.readouterr()
    assert main([*BASE, "--out", str(tmp_path / "b.json"), "--trials", "1", "--log-dir", str(folder),
                 *flags]) == ConfigError.exit_code
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("ppoga compile: error:") and says in error and "--log-dir" in error
    assert (folder / SCORES_FILE).read_text() == before and not (tmp_path / "b.json").exists()


def test_the_store_drops_a_line_torn_by_a_kill_and_refuses_other_provenance(tmp_path):
    store = ScoreStore(tmp_path, {"lm": "x", "seed": 0})
    store.put("cand-1", "2:abc", 50.0)
    with (tmp_path / SCORES_FILE).open("a") as handle:
        handle.write('{"candidate": "cand-2", "questions": "2:abc", "sco')  # the process died mid-write
    reopened = ScoreStore(tmp_path, {"lm": "x", "seed": 0})
    assert reopened.get("cand-1", "2:abc") == 50.0 and reopened.get("cand-2", "2:abc") is None
    reopened.put("cand-2", "2:abc", 100.0)
    assert ScoreStore(tmp_path, {"lm": "x"}).get("cand-2", "2:abc") == 100.0  # a key left out is no conflict
    with pytest.raises(CompileMismatch, match="made with lm 'x', and this run uses lm 'y'"):
        ScoreStore(tmp_path, {"lm": "y", "seed": 0})
