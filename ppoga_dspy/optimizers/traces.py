"""A teacher's traces on the training split: every stage's inputs and outputs, one trace per question.

Both nearest-neighbour demos (`knn.py`) and fine-tuning (`finetune.py`) learn from the same thing: what
a teacher (the scripted perfect planner, or any LM) sent and replied at each stage of a question it
answered correctly. DSPy records every predictor call in `dspy.settings.trace` (the mechanism
BootstrapFewShot uses); each question runs in its own `dspy.context(trace=[])`, so questions run in
parallel threads never mix their stages.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ppoga_dspy.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass
class StageRecord:
    """One predictor call of the teacher: the predictor's name in the program, its inputs and outputs."""

    predictor: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]


@dataclass
class QuestionTrace:
    """The teacher's run of one training question: its stages in call order, and whether it was right."""

    question: str
    stages: list[StageRecord] = field(default_factory=list)
    score: float = 0.0


def _plain(value: Any) -> Any:
    from ppoga_dspy.method.question_run import jsonable

    return jsonable(value)


def teacher_program(program: Any, teacher_lm: Any | None) -> Any:
    """A copy of `program` whose roles all use the teacher (the student's own LMs when `teacher_lm` is None).

    The teacher asks at every choice (no gating): a gated choice makes no call and leaves no demo, and the
    student needs that stage's demos for the choices its gates do not settle. It follows its plan as written (no
    bridging): its plans name each hop.
    """
    clone = program.deepcopy()
    clone.thresholds = clone.thresholds.model_copy(update={"gate_margin": None, "follow_named_relations": False,
                                                                "back_to_named_relation": False})
    if teacher_lm is not None:
        clone.role_lms = {"planner": teacher_lm, "executor": teacher_lm}
    return clone


def trace_question(teacher: Any, example: Any, names: dict[int, str]) -> QuestionTrace:
    """Run one question with DSPy's trace on; every predictor call becomes a StageRecord."""
    import dspy

    from ppoga_dspy.evaluation.metrics import dspy_metric

    with dspy.context(trace=[]):
        prediction = teacher(question=example.question, topic_entities=getattr(example, "topic_entities", None))
        calls = list(dspy.settings.trace)
    record = QuestionTrace(question=example.question, score=float(dspy_metric(example, prediction)))
    for predictor, inputs, outputs in calls:
        name = names.get(id(predictor))
        if name is None:  # a predictor outside the program (none today); it has no slot to take demos
            continue
        fields = predictor.signature.output_fields
        values = {k: _plain(v) for k, v in dict(outputs.items()).items() if k in fields}
        record.stages.append(StageRecord(name, {k: _plain(v) for k, v in inputs.items()}, values))
    return record


def collect_traces(
    program: Any, examples: list, *, teacher_lm: Any | None = None, threads: int = 1, keep_failed: bool = False
) -> list[QuestionTrace]:
    """The teacher's traces of `examples`, in order; only questions it answered right unless `keep_failed`.

    A wrong run's stages are wrong demos (a plan that misses the answer, a relation off the path), so
    they are dropped the way BootstrapFewShot drops traces that fail the metric.
    """
    from ppoga_dspy.evaluation.evaluate import parallel_map

    if not examples:
        raise ConfigError("the training split is empty: pass a larger dataset or another --split")
    teacher = teacher_program(program, teacher_lm)
    names = {id(p): name for name, p in teacher.named_predictors()}
    traces = parallel_map(lambda ex: trace_question(teacher, ex, names), examples, threads=threads)
    kept = [t for t in traces if keep_failed or t.score > 0]
    log.info("teacher answered %d of %d training questions right", sum(t.score > 0 for t in traces), len(traces))
    if not kept:
        raise ConfigError(
            f"the teacher answered none of the {len(examples)} training questions right, so there is nothing to "
            "learn from; use a stronger --teacher-lm (e.g. oracle/gold-path on a benchmark with gold paths)"
        )
    return kept
