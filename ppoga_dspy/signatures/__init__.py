"""DSPy signatures only: what each LLM call of the Planner and the Executor asks and returns."""

from ppoga_dspy.signatures.executor import SelectEntities, SelectRelations
from ppoga_dspy.signatures.planner import (
    Answer,
    Decompose,
    Evaluate,
    PlanStep,
    PredictOutcome,
    Replan,
    Think,
)
from ppoga_dspy.signatures.vocabulary import Decision, DecisionName, Role, Stage

__all__ = [
    "Answer",
    "Decision",
    "DecisionName",
    "Role",
    "Stage",
    "Decompose",
    "Evaluate",
    "PlanStep",
    "PredictOutcome",
    "Replan",
    "SelectEntities",
    "SelectRelations",
    "Think",
]
