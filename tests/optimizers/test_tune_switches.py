"""`ppoga tune` keeps the method: stage switches frozen on by default, ablations only by opt-in and labelled."""

from __future__ import annotations

import doctest
import json

import optuna
import pytest

import ppoga_dspy.optimizers.tune as tune
from ppoga_dspy.app import ProgramSettings, open_program
from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.optimizers.tune import SWITCHES, ablation_of, suggest_thresholds, tune_thresholds


def test_docstring_examples_hold():
    assert doctest.testmod(tune).failed == 0


def test_the_frozen_space_cannot_switch_a_stage_off():
    """Whatever a sampler proposes inside the default space, every stage stays on."""
    from ppoga_dspy.method.thresholds import Thresholds

    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(40):
        trial = study.ask()
        thresholds = suggest_thresholds(trial, Thresholds())
        assert all(getattr(thresholds, name) for name in SWITCHES)
        assert thresholds.max_path_corrections >= 1 and thresholds.max_replans >= 1
        assert not set(SWITCHES) & set(trial.params) and ablation_of(trial.params) == []
        study.tell(trial, 0.0)


def test_tune_freezes_the_switches_by_default(tmp_path):
    examples = load_dataset("demo", split="dev")
    from ppoga_dspy.lm.settings import LMSettings

    settings = ProgramSettings(dataset="demo", lm=LMSettings(lm="oracle/gold-path"))
    with open_program(settings, examples=examples) as opened:
        result = tune_thresholds(opened.program, examples, trials=6, storage=f"sqlite:///{tmp_path / 's.db'}")
    assert len(result.study.trials) == 6
    for trial in result.study.trials:
        assert not set(SWITCHES) & set(trial.params)
        assert trial.params["max_path_corrections"] >= 1 and trial.params["max_replans"] >= 1
        assert trial.user_attrs["ablation"] == []
    assert all(getattr(result.best, name) for name in SWITCHES)
    assert all(point["ablation"] == [] for point in result.pareto)


def test_search_switches_opts_in_and_labels_ablations(tmp_path, capsys):
    from ppoga_dspy.cli import main
    from ppoga_dspy.optimizers.artifact import load_artifact

    out = tmp_path / "tuned.json"
    assert main(["tune", "--dataset", "demo", "--split", "dev", "--lm", "oracle/gold-path", "--out", str(out),
                 "--trials", "10", "--search-switches", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["search_switches"] is True
    study = optuna.load_study(study_name="ppoga-thresholds", storage=f"sqlite:///{tmp_path / 'tuned.optuna.db'}")
    assert all(set(SWITCHES) <= set(t.params) for t in study.trials)
    labelled = [t for t in study.trials if t.user_attrs["ablation"]]
    assert labelled, "ten sampled trials switch some stage off"
    for trial in study.trials:
        assert trial.user_attrs["ablation"] == ablation_of(trial.params)
    for point in report["pareto_front"]:
        assert point["ablation"] == ablation_of(point["params"])
    assert report["chosen"]["ablation"] == report["pareto_front"][0]["ablation"]
    assert load_artifact(out).tuning["search_switches"] is True


def test_the_flag_is_documented(capsys):
    from ppoga_dspy.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune", "--help"])
    assert "--search-switches" in capsys.readouterr().out
