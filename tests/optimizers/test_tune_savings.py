"""What tuning bought: the cheapest trial at equal Hits@1 against the thresholds the study started from."""

from __future__ import annotations

import json

import optuna
import pytest

from ppoga_dspy.optimizers.tune import START_ATTR, savings_at_equal_accuracy


def study_of(points: list[tuple[dict, tuple[float, float]]], *, start_first: bool = True):
    """A real in-memory study holding these (params, (hits@1, calls)) trials; the first one marked as the start."""
    study = optuna.create_study(directions=["maximize", "minimize"])
    for index, (params, values) in enumerate(points):
        attrs = {START_ATTR: True} if index == 0 and start_first else {}
        study.add_trial(optuna.trial.create_trial(
            params=params, distributions={k: optuna.distributions.IntDistribution(0, 5) for k in params},
            values=list(values), user_attrs=attrs))
    return study


def test_the_cheapest_trial_within_one_point_counts_not_a_cheaper_less_accurate_one():
    study = study_of([({"max_replans": 2}, (0.95, 20.0)),   # the start
                      ({"max_replans": 3}, (0.945, 15.0)),  # half a point lower: equal
                      ({"max_replans": 1}, (0.90, 10.0)),   # cheaper but five points lower: not equal
                      ({"max_replans": 2}, (0.96, 18.0))])
    savings = savings_at_equal_accuracy(study)
    assert savings["start"] == {"trial": 0, "hits@1": 0.95, "lm_calls_mean": 20.0}
    assert savings["cheapest_equal"]["trial"] == 1
    assert savings["calls_saved"] == pytest.approx(0.25)


def test_ablation_trials_are_no_savings_and_a_study_without_a_mark_starts_at_its_first_trial():
    study = study_of([({"max_replans": 2}, (0.9, 12.0)), ({"max_replans": 0}, (0.9, 6.0))], start_first=False)
    savings = savings_at_equal_accuracy(study)
    assert savings["start"]["trial"] == 0 and savings["cheapest_equal"]["trial"] == 0  # max_replans=0: an ablation
    assert savings["calls_saved"] == 0.0
    assert savings_at_equal_accuracy(optuna.create_study(directions=["maximize", "minimize"])) is None


def test_ppoga_tune_reports_the_savings_against_its_starting_point(tmp_path, capsys):
    from ppoga_dspy.cli import main

    out = tmp_path / "tuned.json"
    assert main(["tune", "--dataset", "demo", "--split", "dev", "--lm", "oracle/noisy:0.3", "--out", str(out),
                 "--trials", "4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    savings = report["savings"]
    study = optuna.load_study(study_name="ppoga-thresholds", storage=f"sqlite:///{tmp_path / 'tuned.optuna.db'}")
    start = min(study.trials, key=lambda t: t.number)
    assert start.user_attrs[START_ATTR] is True and savings["start"]["trial"] == start.number
    assert savings["start"]["lm_calls_mean"] == start.values[1]
    cheap = savings["cheapest_equal"]
    assert cheap["hits@1"] >= start.values[0] - 0.01 and cheap["lm_calls_mean"] <= start.values[1]
    assert savings["calls_saved"] == pytest.approx(1 - cheap["lm_calls_mean"] / start.values[1])
