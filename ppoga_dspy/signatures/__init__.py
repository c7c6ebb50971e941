"""DSPy signatures only: what each LLM call of the Planner and the Executor asks and returns."""

from ppoga_dspy.signatures.executor import SelectEntities, SelectRelations
from ppoga_dspy.signatures.planner import (
    Answer,
    Decision,
    Decompose,
    Evaluate,
    PlanStep,
    PredictOutcome,
    Replan,
    Think,
)

__all__ = [
    "Answer",
    "Decision",
    "Decompose",
    "Evaluate",
    "PlanStep",
    "PredictOutcome",
    "Replan",
    "SelectEntities",
    "SelectRelations",
    "Think",
]
