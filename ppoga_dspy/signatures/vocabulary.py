"""The method's words, each defined once: the stages of a question, the Planner's decisions, the roles.

They live beside the signatures because the signatures speak them (Evaluate's `decision` is one of
`Decision`) and `signatures` may import nothing else of ours; `ppoga_dspy.method.vocabulary` is
the name the rest of the package uses. Values are save keys and cost-counter keys: renaming one
changes run files and artifacts.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal


class Stage(StrEnum):
    """One LLM call of the method (cost counters and the trace are keyed by these values)."""

    DECOMPOSE = "decompose"
    PREDICT = "predict"
    THINK = "think"
    EVALUATE = "evaluate"
    REPLAN = "replan"
    ANSWER = "answer"
    SELECT_RELATIONS = "select_relations"
    SELECT_ENTITIES = "select_entities"
    # `--stages fused`: one call where paper mode makes several that read the same inputs
    DECOMPOSE_PREDICT = "decompose_predict"  # Decompose + the first step's prediction
    THINK_EVALUATE = "think_evaluate"  # Think + Evaluate (+ the next step's prediction, or the answer)
    SELECT_RELATION_PAIRS = "select_relation_pairs"  # SelectRelations for every frontier entity at once


class StageMode(StrEnum):
    """How stages map to LLM calls: `paper` (one call per paper stage) or `fused` (calls sharing inputs merged)."""

    PAPER = "paper"
    FUSED = "fused"


class Decision(StrEnum):
    """What the Planner decides after a step (the paper's Evaluate outcomes)."""

    PROCEED = "proceed"
    CORRECT_PATH = "correct_path"
    REPLAN = "replan"
    FINISH = "finish"


class StepAction(StrEnum):
    """What a plan step asks of the Executor (the plan's `action` field)."""

    EXPLORE = "explore"  # follow relations from what the last step found (one semantic hop)
    INTERSECT = "intersect"  # keep only the entities reached from every topic entity / the current frontier
    MEMORY = "memory"  # compare, count or pick among what is already known: no graph action


class Role(StrEnum):
    """Who makes a call: the Planner (decides) or the Executor (acts on the graph); one LM may serve each."""

    PLANNER = "planner"
    EXECUTOR = "executor"


#: `Decision` as the Literal type a signature field declares (the model sees "one of: proceed; ...").
DecisionName = Literal[tuple(d.value for d in Decision)]  # type: ignore[valid-type]

__all__ = ["Decision", "DecisionName", "Role", "Stage", "StageMode", "StepAction"]
