"""Compile PPoGA's prompts on a training split with a DSPy optimizer, scoring dev before and after.

Every planner and executor predictor is a parameter of the program, so each optimizer tunes all
eight: bootstrap (demos from successful runs of a teacher), random search over bootstrapped demo
sets, MIPROv2 (instructions and demos), GEPA (instructions rewritten from textual feedback that
names the stage that went wrong), knn (a pool of the teacher's traces; each predictor gets the stages
of the k training questions nearest to the current one, see `knn.py`). The metric is lenient Hits@1.

Each optimizer gets its own LMs and budget: MIPROv2's `prompt_lm` writes instructions, GEPA's
`reflection_lm` reflects on feedback (neither falls back to a scripted planner, which cannot);
`auto` (light/medium/heavy), `trials` (MIPROv2) and `max_metric_calls` (GEPA) bound the work, and
`log_dir` makes a long compile resumable: GEPA's run folder, or MIPROv2's kept trial scores
(`mipro_resume.py`). Optimizers that select (random search, MIPROv2,
GEPA) select on `selectset`, never on the split the scores are reported on (`devset`); without
one, the last third of the training split is held out for selection.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import dspy

from ppoga_dspy.errors import ConfigError, PPoGAError
from ppoga_dspy.evaluation.evaluate import score_program
from ppoga_dspy.evaluation.metrics import dspy_metric
from ppoga_dspy.optimizers.names import OPTIMIZERS

log = logging.getLogger(__name__)

#: Optimizers that pick among candidates on a validation set (the others only bootstrap on the training split).
SELECTING = ("random-search", "mipro", "gepa")


class OptimizerError(PPoGAError):
    """A DSPy optimizer failed inside; the message names the optimizer and the error's kind, in one line."""



@dataclass
class CompileResult:
    program: Any
    optimizer: str
    dev_before: dict[str, Any]
    dev_after: dict[str, Any]
    changed_predictors: list[str] = field(default_factory=list)
    selected_on: int = 0  # questions the optimizer selected on (held apart from the scored dev questions)
    resumed: dict[str, Any] | None = None  # MIPROv2 with a run folder: evaluations answered from it / run

    @property
    def scores(self) -> dict[str, Any]:
        keys = ("n", "hits@1", "hits@1_strict", "f1", "lm_calls_mean", "tokens_mean")
        return {
            "dev_before": {k: self.dev_before.get(k) for k in keys},
            "dev_after": {k: self.dev_after.get(k) for k in keys},
            "selected_on_questions": self.selected_on,
        }


def stage_feedback(example: Any, prediction: Any) -> str:
    """Feedback for GEPA's reflection: which stage went wrong, in words a prompt writer can act on."""
    from ppoga_dspy.evaluation.metrics import hits_at_1_lenient, normalize_lenient

    gold = list(getattr(example, "answers", []) or [])
    answers = list(getattr(prediction, "answers", []) or [])
    if getattr(prediction, "status", "ok") != "ok":
        return f"The run failed ({prediction.error_kind}): {prediction.error}."
    if answers and hits_at_1_lenient(answers[0], gold):
        return f"Correct: the answer {answers[0]!r} matches the gold answer."
    memory = getattr(prediction, "memory", {}) or {}
    cycles = memory.get("step_cycles", [])
    walked = [relation for cycle in cycles for _, relation, _ in cycle.get("paths", [])]
    gold_path = list((getattr(example, "metadata", {}) or {}).get("path") or [])
    missing = [r for r in gold_path if r not in walked]
    if gold_path and missing:
        hop = gold_path.index(missing[0]) + 1
        return (f"SelectRelations never chose the gold relation {missing[0]!r} (hop {hop}); the Executor followed "
                f"{walked or 'nothing'}. Decompose should plan one step per hop and SelectRelations should pick the "
                f"relation that matches the step.")
    entities = (memory.get("knowledge", {}) or {}).get("entities", {}).values()
    found = {normalize_lenient(e.get("label", "")) for e in entities}
    reached = [g for g in gold if normalize_lenient(g) in found]
    if reached:
        return (f"The right entity {reached[0]!r} was found on the graph, but Answer wrote {answers[:3] or 'nothing'}. "
                "Answer should copy the entity from the evidence that the question asks for.")
    decisions = [c.get("decision") for c in cycles]
    return (f"The gold answer {gold[:3]} was never reached; decisions were {decisions}, answer {answers[:3]}. "
            "The plan or the entity choices led away from it.")


def gepa_metric(gold: Any, pred: Any, trace: Any = None, pred_name: str | None = None, pred_trace: Any = None):
    """GEPA's five-argument metric: the Hits@1 score with feedback naming the failing stage."""
    return dspy.Prediction(score=dspy_metric(gold, pred), feedback=stage_feedback(gold, pred))


def _with_lm(program: Any, lm: Any) -> Any:
    """A copy whose roles all use `lm` (role LMs otherwise override the optimizer's teacher settings)."""
    clone = program.deepcopy()
    clone.role_lms = {"planner": lm, "executor": lm}
    return clone


def held_out_for_selection(trainset: list) -> tuple[list, list]:
    """(train, select): the last third of the training split (at least one question) held out for selection.

    The split is already shuffled by its seed and grouped by gold path, so its tail is as good a sample
    as any; a split of one question is both (nothing can be held out of it).
    """
    if len(trainset) < 2:
        return trainset, trainset
    cut = len(trainset) - max(1, len(trainset) // 3)
    return trainset[:cut], trainset[cut:]


def compile_program(
    program: Any,
    *,
    trainset: list,
    devset: list,
    selectset: list | None = None,
    optimizer: str = "bootstrap",
    teacher_lm: Any = None,
    prompt_lm: Any = None,
    reflection_lm: Any = None,
    max_demos: int = 3,
    num_candidates: int = 4,
    threads: int = 1,
    seed: int = 0,
    auto: str | None = "light",
    trials: int | None = None,
    max_metric_calls: int | None = None,
    log_dir: str | None = None,
    k: int = 3,
    demo_trim: Any = None,
    teacher_name: str = "",
    provenance: dict[str, Any] | None = None,
) -> CompileResult:
    """Compile `program` (its role LMs are the student's) on trainset; score devset before and after.

    `selectset`: the questions random search, MIPROv2 and GEPA select on (None: held out of trainset,
    `held_out_for_selection`). `prompt_lm` (MIPROv2) and `reflection_lm` (GEPA) default to the teacher,
    else the student. Budgets: `auto`, or `trials` (MIPROv2, with `num_candidates`), or
    `max_metric_calls` (GEPA); knn's `k` demos per call, each cut by `demo_trim` (`knn_demos.DemoTrim`; None: its
    defaults). Any LM argument may be a model string. With `log_dir`, MIPROv2 keeps each
    trial's score there and a rerun skips the finished trials; `provenance` (what the run is for) is checked
    against the folder's record before any work, and a mismatch refused.
    """
    from ppoga_dspy.lm import as_lm

    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
    if not trainset:
        raise ConfigError("the training split is empty: pass a larger dataset or another --split")
    teacher_lm = as_lm(teacher_lm, what="teacher_lm")  # a model string works wherever an LM is taken
    student_lm = program.role_lms.get("planner") or dspy.settings.lm
    writer = as_lm(prompt_lm if optimizer == "mipro" else reflection_lm, what="the prompt writer")
    teacher = _with_lm(program, teacher_lm) if teacher_lm is not None else None
    if optimizer == "finetune":
        raise ConfigError("--optimizer finetune trains a LoRA adapter: use ppoga_dspy.optimizers.finetune")
    store = None
    if optimizer == "mipro" and log_dir:
        from pathlib import Path

        from ppoga_dspy.optimizers.mipro_resume import ScoreStore

        store = ScoreStore(Path(log_dir), provenance)  # refuses another run's folder before anything is scored
    selected: list = []
    if optimizer in SELECTING:
        if selectset is None:
            trainset, selectset = held_out_for_selection(trainset)
        selected = list(selectset)
    before = score_program(program, devset, threads=threads) if devset else {}
    with dspy.context(lm=student_lm, max_errors=max(10, len(trainset))):
        if optimizer == "knn":
            from ppoga_dspy.optimizers.knn import compile_knn

            compiled = compile_knn(program, trainset, teacher_lm=teacher_lm, k=k, threads=threads,
                                   teacher_name=teacher_name, trim=demo_trim)
        else:
            budget = Budget(auto=auto, trials=trials, max_metric_calls=max_metric_calls, log_dir=log_dir,
                            num_candidates=num_candidates, scores=store)
            compiled = _guarded_run(program, teacher, optimizer, trainset, selected, writer or teacher_lm or student_lm,
                                    max_demos=max_demos, threads=threads, seed=seed, budget=budget)
    compiled.role_lms = dict(program.role_lms)  # optimizers rebuild copies; the roles stay as configured
    compiled.thresholds = program.thresholds
    after = score_program(compiled, devset, threads=threads) if devset else {}
    changed = changed_predictors(program, compiled)
    return CompileResult(program=compiled, optimizer=optimizer, dev_before=before, dev_after=after,
                         changed_predictors=changed, selected_on=len(selected),
                         resumed=store.summary() if store is not None else None)


@dataclass
class Budget:
    """How much work an optimizer may do: `auto` (DSPy's light/medium/heavy), or an explicit count."""

    auto: str | None = "light"
    trials: int | None = None  # MIPROv2: trials (with num_candidates); overrides auto
    max_metric_calls: int | None = None  # GEPA: metric calls in all; overrides auto
    log_dir: str | None = None  # GEPA: its run directory; MIPROv2: candidate programs and kept scores (both resume)
    num_candidates: int = 4
    scores: Any = None  # MIPROv2: the ScoreStore of log_dir (mipro_resume.py)


def _guarded_run(program, teacher, optimizer, trainset, selectset, writer, **options):
    """`_run_optimizer`, with a failure inside DSPy turned into one line that names the optimizer and its kind."""
    try:
        return _run_optimizer(program, teacher, optimizer, trainset, selectset, writer, **options)
    except PPoGAError:
        raise
    except Exception as exc:
        log.debug("optimizer %s failed", optimizer, exc_info=True)
        first = " ".join(str(exc).split())[:400]
        raise OptimizerError(f"--optimizer {optimizer} failed ({type(exc).__name__}: {first})") from exc


def _run_optimizer(program, teacher, optimizer, trainset, selectset, writer, *, max_demos, threads, seed, budget):
    if optimizer == "bootstrap":
        tp = dspy.BootstrapFewShot(metric=dspy_metric, max_bootstrapped_demos=max_demos, max_labeled_demos=0,
                                   max_errors=len(trainset) + 1)
        return tp.compile(program, teacher=teacher, trainset=trainset)
    if optimizer == "random-search":
        tp = dspy.BootstrapFewShotWithRandomSearch(
            metric=dspy_metric, max_bootstrapped_demos=max_demos, max_labeled_demos=0,
            num_candidate_programs=budget.num_candidates, num_threads=threads, max_errors=len(trainset) + 1,
        )
        return tp.compile(program, teacher=teacher, trainset=trainset, valset=selectset)
    if optimizer == "mipro":
        from ppoga_dspy.optimizers.mipro_resume import ResumableMIPROv2

        explicit = budget.trials is not None
        options = dict(metric=dspy_metric, prompt_model=writer, task_model=program.role_lms.get("planner"),
                       max_bootstrapped_demos=max_demos, max_labeled_demos=0, auto=None if explicit else budget.auto,
                       num_candidates=budget.num_candidates if explicit else None, num_threads=threads, seed=seed,
                       max_errors=len(trainset) + 1, log_dir=budget.log_dir)
        # with a run folder, each trial's score is kept there and a rerun skips the finished trials
        tp = dspy.MIPROv2(**options) if budget.scores is None else ResumableMIPROv2(**options, store=budget.scores)
        return tp.compile(program, trainset=trainset, teacher=teacher, valset=selectset,
                          num_trials=budget.trials if explicit else None, minibatch=len(selectset) > 35)
    limit = {"max_metric_calls": budget.max_metric_calls} if budget.max_metric_calls else {"auto": budget.auto}
    # "all": each reflection rewrites every predictor the minibatch ran. Round robin would spend whole iterations on
    # predictors of the other stage mode (or a Replan that never ran), which have no trace to reflect on.
    tp = dspy.GEPA(metric=gepa_metric, reflection_lm=writer, num_threads=threads, seed=seed, track_stats=False,
                   log_dir=budget.log_dir, component_selector="all", **limit)
    return tp.compile(program, trainset=trainset, valset=selectset)


def changed_predictors(before: Any, after: Any) -> list[str]:
    """Names of predictors whose instructions or demos differ between two programs (a pool's stages count)."""
    from ppoga_dspy.optimizers.knn import KNNPredict

    old = dict(before.named_predictors())
    changed = []
    for name, predictor in after.named_predictors():
        previous = old.get(name)
        if isinstance(predictor, KNNPredict) and predictor.pool.records.get(name):
            changed.append(name)
            continue
        if previous is None:
            changed.append(name)
            continue
        if predictor.signature.instructions != previous.signature.instructions or len(predictor.demos) != len(
            previous.demos
        ) or [dict(d) for d in predictor.demos] != [dict(d) for d in previous.demos]:
            changed.append(name)
    return changed
