"""Handlers of the fused signatures (`--stages fused`) built from the separate stages' handlers.

Both scripted planners must make exactly the same decisions whether the program asks one fused call or
the separate calls (that is what makes fused-vs-separate comparisons fair), so each fused handler is
composed from the separate handlers here, once, rather than written again per planner.
"""

from __future__ import annotations

from typing import Any

from ppoga_dspy.experiments.scripted_engine import Handler


def fact_lines(inputs: dict[str, Any]) -> list[str]:
    """The facts a fused ThinkEvaluate call reads: the observation's, then memory's "Known:" section."""
    known = str(inputs.get("memory", "")).partition("\nKnown:\n")[2]
    return [line for line in (str(inputs.get("observation", "")) + "\n" + known).splitlines() if line.strip()]


def next_step(inputs: dict[str, Any]) -> str:
    """The next step's objective a fused call was given ('' after the last step)."""
    text = str(inputs.get("next_step", "") or "").strip()
    return "" if text.casefold() in ("none", "") else text


def decompose_predicting(decompose: Handler, predict: Handler) -> Handler:
    """DecomposePredict as the Decompose handler, then the PredictOutcome handler on the plan's first step."""

    def handler(inputs: dict[str, Any]) -> dict[str, Any]:
        steps = decompose(inputs)["steps"]
        first = predict({**inputs, "step": steps[0]["objective"]})["prediction"] if steps else ""
        return {"steps": steps, "first_prediction": first}

    return handler


def pairs_by_entity(select_relations: Handler) -> Handler:
    """SelectRelationPairs as one SelectRelations call per entity (same inputs, same draws), paired back."""

    def handler(inputs: dict[str, Any]) -> dict[str, Any]:
        menus: dict[str, list[str]] = {}
        for line in inputs.get("candidates") or []:
            entity, _, relation = str(line).rpartition(": ")
            menus.setdefault(entity, []).append(relation)
        pairs = []
        for entity, relations in menus.items():
            chosen = select_relations({**inputs, "entity": entity, "candidates": relations})["relations"]
            pairs.extend(f"{entity}: {relation}" for relation in chosen)
        return {"pairs": pairs}

    return handler


def predicted_next(predict: Handler, inputs: dict[str, Any]) -> str:
    """The PredictOutcome handler's prediction for the next step a fused call was given ('' after the last)."""
    return predict({**inputs, "step": next_step(inputs)})["prediction"] if next_step(inputs) else ""
