"""How a run row's reasoning is read back (`ppoga_dspy.evaluation.row_reasoning` writes it).

`timeline(row)` reads the trace back into cycles: which note (a rule that changed the decision, a path
correction, a replan, a fallback) belongs to which step cycle. Trace notes are written by
`ppoga_dspy.method` in one order per cycle (the cycle's work, its one evaluation call, then the rules and
corrections that evaluation triggered), and that order is what this module relies on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The call that ends each step cycle (paper mode, `--stages fused`): one per cycle, always traced.
CYCLE_END_STAGES = ("evaluate", "think_evaluate")
#: Notes that follow a cycle's evaluation: what the rules and corrections made of its decision.
AFTER_DECISION = ("evaluate.fallback", "think_evaluate.fallback", "decision_changed", "path_correction",
                  "backtrack", "plan_correction", "replan", "replan.fallback", "answer.written_by_evaluate",
                  "answer.written_rejected")
#: Notes a reader looks for: corrections, the rules that overrode the model, fallbacks, caps.
CORRECTION_STAGES = ("path_correction", "plan_correction", "decision_changed", "backtrack", "max_steps")
_BEFORE_PLAN = ("topics", "decompose.fallback", "decompose_predict.fallback")


@dataclass
class CycleView:
    """One step cycle and the notes that belong to it: `during` (the Executor's fallbacks, gates, mediators)
    and `after` (the rules and corrections its decision triggered)."""

    cycle: dict[str, Any]
    during: list[dict[str, Any]] = field(default_factory=list)
    after: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0  # LM calls made in this cycle (from its first call to its evaluation)

    @property
    def overridden(self) -> dict[str, Any] | None:
        """The `decision_changed` note when a rule replaced the model's decision (not the routine finish on the
        last step), else None."""
        return next((n for n in self.after if n.get("stage") == "decision_changed" and not is_routine_override(n)),
                    None)


@dataclass
class Timeline:
    """A row's reasoning in reading order: notes before the first cycle, the cycles, notes about the answer."""

    before: list[dict[str, Any]]
    cycles: list[CycleView]
    answer: list[dict[str, Any]]


def _is_note(event: dict[str, Any]) -> bool:
    stage = str(event.get("stage", ""))
    return not stage.startswith("kg.") and stage not in _LM_STAGES


_LM_STAGES = {"decompose", "predict", "think", "evaluate", "replan", "answer", "select_relations", "select_entities",
              "decompose_predict", "think_evaluate", "select_relation_pairs"}


def timeline(row: dict[str, Any]) -> Timeline:
    """The row's step cycles with the trace notes that belong to each (see the module doc for the rule)."""
    cycles = [CycleView(dict(c)) for c in ((row.get("memory") or {}).get("step_cycles") or [])]
    before: list[dict[str, Any]] = []
    answer: list[dict[str, Any]] = []
    ended = 0  # cycles whose evaluation call has been seen
    for event in row.get("trace") or []:
        stage = str(event.get("stage", ""))
        if stage in CYCLE_END_STAGES:
            if ended < len(cycles):
                cycles[ended].calls += 1
            ended += 1
            continue
        in_cycle = ended < len(cycles) and stage in _LM_STAGES and stage not in ("decompose", "decompose_predict",
                                                                                 "answer", "replan")
        if in_cycle:
            cycles[ended].calls += 1
        if not _is_note(event):
            continue
        if stage == "topics":
            continue  # the topic entities are in memory's strategic layer
        if stage in _BEFORE_PLAN:
            before.append(event)
        elif stage in AFTER_DECISION and 0 < ended <= len(cycles):
            cycles[ended - 1].after.append(event)
        elif ended < len(cycles) and not stage.startswith("answer") and stage not in ("failed", "max_steps"):
            cycles[ended].during.append(event)
        else:
            answer.append(event)
    return Timeline(before=before, cycles=cycles, answer=answer)


def is_routine_override(event: dict[str, Any]) -> bool:
    """A rule change that is the plan's ordinary end: "proceed" past the last step is applied as "finish"."""
    outputs = event.get("outputs") or {}
    return event.get("stage") == "decision_changed" and (outputs.get("model"), outputs.get("applied")) == (
        "proceed", "finish")


def corrections(row: dict[str, Any]) -> dict[str, int]:
    """How many path corrections, replans and rule overrides a row went through (from its trace); the routine
    proceed-to-finish on the last step is not counted as an override."""
    counts = {"path_correction": 0, "plan_correction": 0, "decision_changed": 0}
    for event in row.get("trace") or []:
        stage = event.get("stage")
        if stage in counts and not is_routine_override(event):
            counts[stage] += 1
    return counts


def has_reasoning(row: dict[str, Any]) -> bool:
    """Whether the row keeps the reasoning (rows written before this module kept only the raw trace)."""
    return bool((row.get("memory") or {}).get("strategic"))
