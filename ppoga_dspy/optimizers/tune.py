"""Tune `Thresholds` with Optuna: Hits@1 up, LM calls per question down, prompts frozen.

Each trial builds the thresholds from `trial.suggest_*`, runs the (compiled) program on the tuning
examples and reports (Hits@1, mean LM calls). The study lives in an Optuna storage (SQLite by
default; PostgreSQL lets workers on several machines share one study; a journal file serves
workers on one machine; see `ppoga_dspy.optimizers.study`) and resumes: a second call with the
same storage and study name runs only the trials still missing, after failing (and enqueueing
again) the trials of workers that died. The chosen point is the most accurate Pareto-optimal
trial, the cheaper one on ties.

The method stays the method: prediction, path correction and plan correction are frozen at the
program's values (and their caps searched from 1, never 0), because switching a stage off makes a
cheaper program that is no longer PPoGA; an earlier study's best trial did exactly that.
`search_switches=True` (`ppoga tune --search-switches`) opts in, and every trial that switches a
stage off is labelled an ablation in the Pareto front and on the trial.
"""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppoga_dspy.errors import ConfigError
from ppoga_dspy.evaluation.evaluate import score_program
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.optimizers.study import (
    DEFAULT_HEARTBEAT,
    WORKER_ATTR,
    check_study_provenance,
    complete_count,
    default_storage,
    fail_dead_trials,
    open_storage,
    worker_identity,
)

log = logging.getLogger(__name__)

OBJECTIVES = ("hits@1", "lm_calls_mean")
__all__ = ["OBJECTIVES", "SEARCHED", "TuneResult", "default_storage", "open_study", "remaining_trials",
           "save_plots", "savings_at_equal_accuracy", "suggest_thresholds", "tune_thresholds"]

#: The user attribute that marks the study's first trial: the thresholds tuning started from.
START_ATTR = "start"
#: "Equal Hits@1": a trial at most this far below the starting point's Hits@1 still counts as equal.
EQUAL_HITS = 0.01


#: The method's stage switches: frozen unless the study opts in (`search_switches`).
SWITCHES = ("use_prediction", "use_path_correction", "use_plan_correction")


def suggest_thresholds(trial: Any, base: Thresholds, *, search_switches: bool = False) -> Thresholds:
    """The search space: every knob that trades accuracy against LM calls, within its safe bounds.

    Without `search_switches` the stage switches keep `base`'s values and the correction caps start at
    1: a cap of 0 would switch path or plan correction off as surely as its switch.
    """
    floor = 0 if search_switches else 1
    update: dict[str, Any] = {
        "max_path_corrections": trial.suggest_int("max_path_corrections", floor, 3),
        "max_replans": trial.suggest_int("max_replans", floor, 3),
        "prune_threshold": trial.suggest_int("prune_threshold", 10, 200, log=True),
        "relations_per_step": trial.suggest_int("relations_per_step", 1, 4),
        "entities_per_step": trial.suggest_int("entities_per_step", 1, 6),
        "relation_candidates": trial.suggest_int("relation_candidates", 5, 50, log=True),
        "max_depth": trial.suggest_int("max_depth", 2, 5),
        "gate_margin": trial.suggest_categorical("gate_margin", GATE_MARGINS),
    }
    if search_switches:
        update.update({name: trial.suggest_categorical(name, [True, False]) for name in SWITCHES})
    return base.model_copy(update=update)


#: `gate_margin` choices: None (never gate on the margin) or a similarity lead that settles a choice without a call;
#: 0.0 (the embedding's best always settles it) is the far end of the front, where a model adds nothing to choices.
GATE_MARGINS: tuple[float | None, ...] = (None, 0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)

SEARCHED = ("max_path_corrections", "max_replans", "prune_threshold", "relations_per_step", "entities_per_step",
            "relation_candidates", "max_depth", "gate_margin")


def ablation_of(params: dict[str, Any]) -> list[str]:
    """The stages a trial switches off (switch False, or a correction cap of 0); [] for the full method.

    >>> ablation_of({"use_prediction": False, "max_replans": 0, "max_path_corrections": 2})
    ['no prediction', 'no plan correction']
    >>> ablation_of({"max_replans": 1})
    []
    """
    off = []
    if params.get("use_prediction") is False:
        off.append("no prediction")
    if params.get("use_path_correction") is False or params.get("max_path_corrections") == 0:
        off.append("no path correction")
    if params.get("use_plan_correction") is False or params.get("max_replans") == 0:
        off.append("no plan correction")
    return off


@dataclass
class TuneResult:
    study: Any
    best: Thresholds
    best_values: tuple[float, float]
    pareto: list[dict[str, Any]]
    trials_run: int
    images: list[Path]


def open_study(storage: str, *, study_name: str, seed: int, trials: int, base: Thresholds,
               heartbeat: int = DEFAULT_HEARTBEAT, search_switches: bool = False,
               provenance: dict[str, Any] | None = None) -> Any:
    """Create or load the study; a new one gets the starting thresholds enqueued as its first trial.

    `provenance` (LM, dataset, split, seed, questions; `tune_provenance`) is recorded on a new study, and
    a study that recorded other values is refused in one line (`StudyMismatch`) before any trial runs.

    `ppoga tune --workers N` calls this once before starting the workers, so that N processes
    loading the same new study do not each enqueue the starting point.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(20, trials)))
    study = optuna.create_study(
        study_name=study_name, storage=open_storage(storage, heartbeat=heartbeat),
        directions=["maximize", "minimize"], sampler=sampler, load_if_exists=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # set_metric_names is marked experimental
        study.set_metric_names(list(OBJECTIVES))
    check_study_provenance(study, provenance, where=storage)
    if not study.trials:  # the starting point is always measured, so the front shows what tuning bought
        searched = SEARCHED + (SWITCHES if search_switches else ())
        start = {name: getattr(base, name) for name in searched}
        if not search_switches:  # inside the frozen space, whatever the base says
            start.update({k: max(1, start[k]) for k in ("max_path_corrections", "max_replans")})
        if start["gate_margin"] not in GATE_MARGINS:  # the nearest choice of the categorical space
            start["gate_margin"] = min(GATE_MARGINS[1:], key=lambda m: abs(m - start["gate_margin"]))
        study.enqueue_trial(start, user_attrs={START_ATTR: True})
    return study


def tune_provenance(*, lm: str, dataset: str | None, split: str | None, seed: int, examples: list) -> dict[str, Any]:
    """What a study tunes for: the LM, the dataset and split, the seed, and a digest of the questions' ids."""
    from ppoga_dspy.optimizers.study import questions_digest

    return {"lm": lm, "dataset": dataset, "split": split, "seed": seed, "questions": questions_digest(examples)}


def savings_at_equal_accuracy(study: Any, tolerance: float = EQUAL_HITS) -> dict[str, Any] | None:
    """What tuning bought over its starting thresholds: the cheapest trial whose Hits@1 is within `tolerance`.

    The starting point is the trial `open_study` enqueued (the program's own thresholds, e.g. the paper
    defaults); a study made before that mark existed uses its first finished trial. None while the
    starting point has not finished. Ablation trials (`--search-switches`) never count as savings.
    """
    from optuna.trial import TrialState

    done = sorted(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=lambda t: t.number)
    if not done:
        return None
    start = next((t for t in done if t.user_attrs.get(START_ATTR)), done[0])
    start_hits, start_calls = start.values
    equal = [t for t in done if t.values[0] >= start_hits - tolerance - 1e-9 and not ablation_of(t.params)]
    cheapest = min(equal, key=lambda t: (t.values[1], -t.values[0], t.number))
    saved = 1.0 - cheapest.values[1] / start_calls if start_calls else 0.0
    return {"start": {"trial": start.number, "hits@1": start_hits, "lm_calls_mean": start_calls},
            "cheapest_equal": {"trial": cheapest.number, "hits@1": cheapest.values[0],
                               "lm_calls_mean": cheapest.values[1], "params": cheapest.params},
            "tolerance": tolerance, "calls_saved": saved}


def remaining_trials(study: Any, trials: int) -> int:
    """Trials still to run so that the study holds `trials` finished ones (after failing dead workers' trials)."""
    failed = fail_dead_trials(study)
    if failed:
        log.warning("trials %s of a dead worker were marked FAIL and enqueued again", failed)
    return max(0, trials - complete_count(study))


def tune_thresholds(
    program: Any,
    examples: list,
    *,
    trials: int,
    storage: str,
    study_name: str = "ppoga-thresholds",
    seed: int = 0,
    threads: int = 1,
    heartbeat: int = DEFAULT_HEARTBEAT,
    share: int | None = None,
    worker: int = 0,
    search_switches: bool = False,
    provenance: dict[str, Any] | None = None,
) -> TuneResult:
    """Run (or resume) the study until it holds `trials` finished trials; return the chosen thresholds.

    `share` caps the trials this process runs (one worker of several; `worker` offsets its sampler
    seed so that workers try different points); every process stops as soon as the study holds
    `trials` finished trials, whoever ran them.

    `search_switches` lets trials switch stages off (ablations, labelled so); by default they are frozen.
    """
    import optuna
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState

    if not examples:
        raise ConfigError("no examples to tune on: pass a dataset/split with questions")
    base = program.thresholds
    study = open_study(storage, study_name=study_name, seed=seed + worker, trials=trials, base=base,
                       heartbeat=heartbeat, search_switches=search_switches, provenance=provenance)
    remaining = remaining_trials(study, trials)
    if share is not None:
        remaining = min(share, remaining)

    def objective(trial: Any) -> tuple[float, float]:
        trial.set_user_attr(WORKER_ATTR, worker_identity())  # first: a dead worker's trial can be told apart
        candidate = program.deepcopy()
        candidate.thresholds = suggest_thresholds(trial, base, search_switches=search_switches)
        trial.set_user_attr("ablation", ablation_of(trial.params))
        summary = score_program(candidate, examples, threads=threads)
        trial.set_user_attr("summary", {k: summary[k] for k in ("n", "hits@1", "hits@1_strict", "f1",
                                                                 "lm_calls_mean", "tokens_mean", "failed")})
        return summary["hits@1"], summary["lm_calls_mean"]

    planned = remaining
    while remaining:
        try:
            study.optimize(objective, n_trials=remaining,
                           callbacks=[MaxTrialsCallback(trials, states=(TrialState.COMPLETE,))])
            break
        except optuna.exceptions.UpdateFinishedTrialError as exc:
            # Our heartbeat came late (a long pause, a busy database) and another worker already
            # failed this trial and enqueued it again: the point is not lost, so go on.
            log.warning("another worker declared a trial of this one dead (its heartbeat was late): %s", exc)
            mine = sum(1 for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                       if (t.user_attrs.get(WORKER_ATTR) or {}).get("pid") == os.getpid())
            remaining = min(planned - mine, remaining_trials(study, trials))
    if not study.best_trials:
        raise ConfigError(f"study {study_name!r} in {storage} holds no finished trial yet: run `ppoga tune` "
                          "again with the same --storage and --study to resume it")
    pareto = sorted(study.best_trials, key=lambda t: (-t.values[0], t.values[1], t.number))
    chosen = pareto[0]
    best = base.model_copy(update=chosen.params)
    front = [{"trial": t.number, "hits@1": t.values[0], "lm_calls_mean": t.values[1], "params": t.params,
              "ablation": ablation_of(t.params)} for t in pareto]
    return TuneResult(study=study, best=Thresholds.model_validate(best.model_dump()),
                      best_values=(chosen.values[0], chosen.values[1]), pareto=front, trials_run=planned, images=[])


def save_plots(study: Any, out: Path) -> list[Path]:
    """Pareto front and parameter importances for both objectives (Optuna's matplotlib plots), PNGs beside `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna
    from optuna.visualization import matplotlib as ovm

    images: list[Path] = []
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna marks its matplotlib backend experimental
        plots = {
            "pareto": lambda: ovm.plot_pareto_front(study, target_names=list(OBJECTIVES)),
            "importance": lambda: ovm.plot_param_importances(study),  # one bar per objective
        }
        for name, make in plots.items():
            path = out.with_name(f"{out.stem}.{name}.png")
            try:
                axes = make()
            except (ValueError, RuntimeError) as exc:  # too few trials, or no variance to rank importances
                log.warning("no %s plot: %s", name, exc)
                continue
            figure = axes.figure if hasattr(axes, "figure") else axes.flat[0].figure
            figure.tight_layout()
            figure.savefig(path, dpi=110)
            plt.close(figure)
            images.append(path)
    return images
