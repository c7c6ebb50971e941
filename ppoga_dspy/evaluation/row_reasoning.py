"""What a run row keeps of a question's reasoning: the writing side of the run format.

A row must let a question be looked at again after `eval` (`ppoga show`, the HTML report) without
keeping everything the program produced: at 10,000 questions a run file has to stay practical. So a
row keeps the *reasoning*, compactly:

- `memory`: the strategic layer (topic entities, the plan with each step's status and outcome, the
  abandoned plans, the replan count), every step cycle (prediction, observation, thought, decision, the
  model's reason, the Executor's rationale, the paths walked and the entities reached, as ids and
  labels), and the lessons path correction learned. The facts each cycle observed are in its
  observation text, so the triple objects are not repeated; the answer's evidence is the row's
  `reasoning_chains`.
- `trace`: every stage in order (LM calls with their parsed replies, KG queries, the notes of
  corrections, fallbacks and the rules that overrode the model), without the prompts' input fields and
  the wall-clock stamps. `keep_prompts=True` keeps each call's inputs too (the prompt is those fields in
  the adapter's format), for audits of what the model was shown; it multiplies a row's size.

`ppoga_dspy.report.reasoning` reads it back.
"""

from __future__ import annotations

from typing import Any

_ENTITY_KEYS = ("id", "label")


def _entity(entity: dict[str, Any]) -> dict[str, Any]:
    return {k: entity[k] for k in _ENTITY_KEYS if k in entity}


def compact_cycle(cycle: dict[str, Any]) -> dict[str, Any]:
    """A step cycle without its triple objects (its observation text shows them); entities as id and label."""
    kept = {k: v for k, v in cycle.items() if k not in ("triples", "frontier") and v not in ("", None, [])}
    kept.update(index=cycle.get("index", 0), attempt=cycle.get("attempt", 0), decision=cycle.get("decision", ""))
    if cycle.get("frontier"):
        kept["frontier"] = [_entity(e) for e in cycle["frontier"]]
    return kept


def compact_memory(memory: dict[str, Any] | None) -> dict[str, Any]:
    """The parts of `Memory.to_dict()` a reader needs (see the module doc); {} for no memory."""
    if not memory:
        return {}
    strategic = memory.get("strategic") or {}
    knowledge = memory.get("knowledge") or {}
    out: dict[str, Any] = {
        "strategic": {
            "topic_entities": [_entity(e) for e in strategic.get("topic_entities") or []],
            "plan": [_step(s) for s in strategic.get("plan") or []],
            "archived_plans": [[_step(s) for s in plan] for plan in strategic.get("archived_plans") or []],
            "replan_count": strategic.get("replan_count", 0),
        },
        "step_cycles": [compact_cycle(c) for c in memory.get("step_cycles") or []],
    }
    if knowledge.get("lessons"):
        out["knowledge"] = {"lessons": list(knowledge["lessons"])}
    return out


def _step(step: dict[str, Any]) -> dict[str, Any]:
    """A plan step with its empty fields left out (a 10,000-row file repeats these keys on every row)."""
    keep = {"objective", "status"}
    return {k: v for k, v in step.items() if k in keep or v not in ("", 0, None, "explore")}


def compact_trace(trace: list[dict[str, Any]] | None, *, keep_prompts: bool = False) -> list[dict[str, Any]]:
    """Every stage in order with its outputs, error and seconds; inputs only for KG queries or `keep_prompts`."""
    out = []
    for event in trace or []:
        stage = str(event.get("stage", ""))
        kept: dict[str, Any] = {"stage": stage}
        if event.get("inputs") and (keep_prompts or stage.startswith("kg.")):
            kept["inputs"] = event["inputs"]
        if event.get("outputs"):
            kept["outputs"] = event["outputs"]
        if event.get("error"):
            kept["error"] = event["error"]
        if event.get("seconds"):
            kept["seconds"] = event["seconds"]
        out.append(kept)
    return out


def reasoning_fields(prediction: Any, *, keep_prompts: bool = False) -> dict[str, Any]:
    """The `memory` and `trace` a run row keeps for a prediction of `PPoGA` (see the module doc)."""
    return {
        "memory": compact_memory(getattr(prediction, "memory", None)),
        "trace": compact_trace(getattr(prediction, "trace", None), keep_prompts=keep_prompts),
    }
