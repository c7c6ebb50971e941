"""Handlers of the fused signatures (`--stages fused`) built from the separate stages' handlers.

Both scripted planners must make exactly the same decisions whether the program asks one fused call or
the separate calls (that is what makes fused-vs-separate comparisons fair), so each fused handler is
composed from the separate handlers here, once, rather than written again per planner.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ppoga_dspy.scripted.engine import Handler


def fact_lines(inputs: dict[str, Any]) -> list[str]:
    """The facts a fused ThinkEvaluate call reads: the observation's, then memory's "Known:" section."""
    known = str(inputs.get("memory", "")).partition("\nKnown:\n")[2]
    return [line for line in (str(inputs.get("observation", "")) + "\n" + known).splitlines() if line.strip()]


def next_step(inputs: dict[str, Any]) -> str:
    """The next step's objective a fused call was given ('' after the last step)."""
    text = str(inputs.get("next_step", "") or "").strip()
    return "" if text.casefold() in ("none", "") else text


#: A planner's relation choice for one entity's menu: (relations, whether the choice read the menu's order).
#: With `peek`, a seeded planner draws without counting the draw (the choice may yet be left to the call).
RelationChoice = Callable[[dict[str, Any], bool], tuple[list[str], bool]]


def decompose_predicting(decompose: Handler, predict: Handler, choose: RelationChoice | None = None) -> Handler:
    """DecomposePredict as the Decompose handler, then the PredictOutcome handler on the plan's first step, and
    with `choose` the first step's relations (`first_pairs`)."""

    def handler(inputs: dict[str, Any]) -> dict[str, Any]:
        steps = decompose(inputs)["steps"]
        first = predict({**inputs, "step": steps[0]["objective"]})["prediction"] if steps else ""
        chosen = first_pairs(choose, inputs, steps[0]) if steps and choose is not None else []
        return {"steps": steps, "first_prediction": first, "first_relations": chosen}

    return handler


def menus_of(lines: list[str] | None) -> dict[str, list[str]]:
    """"entity: relation" candidates as entity -> its relations, in the order shown."""
    menus: dict[str, list[str]] = {}
    for line in lines or []:
        entity, _, relation = str(line).rpartition(": ")
        menus.setdefault(entity, []).append(relation)
    return menus


def pairs_by_entity(select_relations: Handler) -> Handler:
    """SelectRelationPairs as one SelectRelations call per entity (same inputs, same draws), paired back."""

    def handler(inputs: dict[str, Any]) -> dict[str, Any]:
        pairs = []
        for entity, relations in menus_of(inputs.get("candidates")).items():
            chosen = select_relations({**inputs, "entity": entity, "candidates": relations})["relations"]
            pairs.extend(f"{entity}: {relation}" for relation in chosen)
        return {"pairs": pairs}

    return handler


def next_pairs(select_relations: Handler, inputs: dict[str, Any]) -> list[str]:
    """ThinkEvaluate's `next_relations` on proceeding: the SelectRelationPairs handler's choice on the next step's
    menus (ranked and cut as that call's would be), so the same choice and the same draws as the call it replaces."""
    if not next_step(inputs) or not inputs.get("candidates"):
        return []
    return pairs_by_entity(select_relations)({**inputs, "step": next_step(inputs)})["pairs"]


def first_pairs(choose: RelationChoice, inputs: dict[str, Any], step: dict[str, Any]) -> list[str]:
    """DecomposePredict's `first_relations`: the first step's choice on the topic entities' menus, written only
    when no entity's choice reads the menu's order (peeked first, nothing drawn).

    The plan call's menus are ranked by the question alone (the step's objective is written in that very call),
    the step's own by question and objective: a choice that depends on the order (a fallback to the best-ranked
    relation, a noisy planner's wrong pick among the others) is left to SelectRelationPairs ([]), which draws it
    on the menu paper mode shows, so both modes meet the same choices."""
    if step.get("action") == "memory":
        return []
    asks = [{**inputs, "step": step["objective"], "entity": entity, "candidates": relations}
            for entity, relations in menus_of(inputs.get("candidates")).items()]
    if not asks or any(choose(ask, True)[1] for ask in asks):
        return []
    return [f"{ask['entity']}: {relation}" for ask in asks for relation in choose(ask, False)[0]]


def predicted_next(predict: Handler, inputs: dict[str, Any]) -> str:
    """The PredictOutcome handler's prediction for the next step a fused call was given ('' after the last)."""
    return predict({**inputs, "step": next_step(inputs)})["prediction"] if next_step(inputs) else ""
