"""DSPy signatures only: what each LLM call of the Planner and the Executor asks and returns."""

from ppoga_dspy.signatures.executor import SelectEntities, SelectRelationPairs, SelectRelations
from ppoga_dspy.signatures.planner import (
    Answer,
    Decompose,
    DecomposePredict,
    Evaluate,
    PlanStep,
    PredictOutcome,
    Replan,
    Think,
    ThinkEvaluate,
)
from ppoga_dspy.signatures.vocabulary import Decision, DecisionName, Role, Stage, StageMode

__all__ = [
    "Answer",
    "Decision",
    "DecisionName",
    "Role",
    "Stage",
    "StageMode",
    "Decompose",
    "DecomposePredict",
    "Evaluate",
    "PlanStep",
    "PredictOutcome",
    "Replan",
    "SelectEntities",
    "SelectRelationPairs",
    "SelectRelations",
    "Think",
    "ThinkEvaluate",
]
