"""Gated choices: the Executor decides without an LM call when the candidates leave nothing to ask.

With one candidate there is nothing to choose. With `Thresholds.gate_margin` set, an embedding
ranking whose best candidate beats the second by more than the margin is taken as decisive and the
best candidate is used. Either way the call saved is counted (`Costs.gated`, so reports show calls
saved) and the trace notes "<stage>.gated" with the reason; the margin is off by default, so paper
reproduction asks the model at every real choice.
"""

from __future__ import annotations

from ppoga_dspy.method.question_run import QuestionRun
from ppoga_dspy.method.vocabulary import Stage


def only_one(run: QuestionRun, stage: Stage, chosen: str, **where: str) -> None:
    """Record a choice with a single candidate (no call was needed)."""
    run.costs.add_gated(stage)
    run.note(f"{stage}.gated", reason="one candidate", chosen=chosen, **where)


def beats_margin(run: QuestionRun, scores: list[float]) -> bool:
    """Whether the ranking (`scores` best first) leads by more than `gate_margin` (nothing recorded)."""
    margin = run.thresholds.gate_margin
    return margin is not None and len(scores) >= 2 and scores[0] - scores[1] > margin


def decisive(run: QuestionRun, stage: Stage, scores: list[float], chosen: str, **where: str) -> bool:
    """Whether the ranking (`scores` best first) settles the choice by `gate_margin`; recorded when it does."""
    if not beats_margin(run, scores):
        return False
    run.costs.add_gated(stage)
    run.note(f"{stage}.gated", reason="margin", chosen=chosen, margin=round(scores[0] - scores[1], 4), **where)
    return True
