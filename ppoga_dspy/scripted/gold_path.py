"""The scripted perfect planner (`--lm oracle/gold-path`): follows each question's gold path, still reading the graph.

It is the cost floor of the method and the model of control-flow tests: every reply is a function of
the request's inputs, so it reaches the answer only if the program walks the graph correctly. The gold
facts it plans from (`golds_from_examples`) and the plan text it writes (`plan_steps`, read back with
`FOLLOW`) are shared with the noisy planner.
"""

from __future__ import annotations

import re
from typing import Any

from ppoga_dspy.scripted import texts
from ppoga_dspy.scripted.engine import Handler, ScriptedEngine, scripted_lm
from ppoga_dspy.scripted.fused_handlers import (
    decompose_predicting,
    fact_lines,
    next_pairs,
    next_step,
    pairs_by_entity,
    predicted_next,
)

#: The relation a plan step names ("follow relation r").
FOLLOW = re.compile(r"follow relation ([^\s]+)")


def label_of(line: str) -> str:
    """The entity label of a candidate line (`label  <- how it was reached`)."""
    return line.split("  <- ", 1)[0].strip()


_THROUGH = re.compile(r"read through to ([^\s]+)")


def _through_wanted(step: str, lines: list[str]) -> list[str]:
    """The candidates a step that reads through a mediator asks for: those reached by its second relation."""
    wanted = _THROUGH.search(step)
    kept = [line for line in lines if wanted and line.endswith(f"-> {wanted.group(1)}")]
    return kept or lines


def plan_steps(gold: dict[str, Any], *, tagged: bool = False) -> list[dict[str, str]]:
    """The plan a gold-path planner writes: one step per semantic hop (see `semantic_steps`).

    A step through a mediator names both relations ("follow relation r1 and read through to r2");
    a conjunction of one-hop branches (WC-C) is one `intersect` step naming each branch's relation.
    `tagged` adds "(hop N)", N the 1-based index of the step's last relation.
    """
    relations = gold["relations"] or ["unknown"]
    branches = gold.get("paths") or []
    if len(branches) > 1 and all(len(branch) == 1 for branch in branches):  # a conjunction of one-hop branches
        text = "follow relation " + " and relation ".join(relations) + ", keep the entities reached by all"
        return [{"objective": text + (f" (hop {len(relations)})" if tagged else ""),
                 "expected_outcome": "the entities that satisfy every constraint", "action": "intersect"}]
    groups = gold.get("steps") or [[i] for i in range(len(relations))]
    steps = []
    for group in groups:
        names = [relations[i] for i in group]
        text = f"follow relation {names[0]}" + "".join(f" and read through to {r}" for r in names[1:])
        steps.append({"objective": text + (f" (hop {group[-1] + 1})" if tagged else ""),
                      "expected_outcome": texts.expected_outcome(names)})
    return steps


def gold_path_handlers(golds: dict[str, dict[str, Any]]) -> dict[str, Handler]:
    """Handlers of a planner that knows each question's gold path and still reads the graph.

    `golds` maps question text -> {"relations": [r1, r2, ...], "entities": [names on the path, answer
    included], "answers": [...]}. Every reply is a function of the request's inputs: the plan names
    one relation per step ("follow relation r"), relation choice copies the step's relation when it
    is a candidate, entity choice keeps candidates on the gold path, and the answer names the gold
    answers that the evidence really contains (else the last fact's tail): it reaches the answer only
    if the program walks the graph correctly.
    """

    def gold(inputs: dict[str, Any]) -> dict[str, Any]:
        return golds.get(str(inputs.get("question", "")).strip(), {"relations": [], "entities": [], "answers": []})

    def decompose(inputs: dict[str, Any]) -> dict[str, Any]:
        steps = plan_steps(gold(inputs))
        return {"new_steps" if "new_steps" in inputs.get("_outputs", []) else "steps": steps}

    def relation_choice(inputs: dict[str, Any], peek: bool = False) -> tuple[list[str], bool]:
        """The step's relation when it is a candidate, else another of the question's (one branch of it), else the
        best-ranked candidate; and whether the choice read the menu's order (never errs, so `peek` changes nothing)."""
        wanted = FOLLOW.search(str(inputs.get("step", "")))
        candidates = list(inputs.get("candidates") or [])
        if wanted and wanted.group(1) in candidates:
            return [wanted.group(1)], False
        on_path = [c for c in candidates if c in gold(inputs)["relations"]]  # another branch of the question
        return on_path[:1] or candidates[:1], len(on_path) != 1

    def select_relations(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"relations": relation_choice(inputs)[0]}

    def select_entities(inputs: dict[str, Any]) -> dict[str, Any]:
        names = {n.casefold() for n in gold(inputs)["entities"]}
        lines = _through_wanted(str(inputs.get("step", "")), list(inputs.get("candidates") or []))
        chosen = [label_of(line) for line in lines if label_of(line).casefold() in names]
        if not chosen and lines:
            chosen = [label_of(lines[0])]
        return {"entities": chosen, "rationale": texts.rationale(inputs, chosen)}

    def failed(inputs: dict[str, Any]) -> bool:
        return str(inputs.get("observation", "")).startswith(("Nothing was found", "No entity"))

    def astray(inputs: dict[str, Any]) -> bool:
        """A careful planner's reading of an observation that says the step followed none of the relations it
        names: not done, whatever the facts (it never accepts a relation it did not ask for)."""
        return "Mismatch: the step names" in str(inputs.get("observation", ""))

    def think(inputs: dict[str, Any]) -> dict[str, Any]:
        met = not failed(inputs) and not astray(inputs)
        return {"thought": texts.thought(inputs, met=met), "missing": texts.missing(inputs, met=met)}

    def evaluate(inputs: dict[str, Any]) -> dict[str, Any]:
        decision = "correct_path" if failed(inputs) or astray(inputs) else "proceed"
        return {"decision": decision, "reason": texts.reason(inputs, decision)}

    def found(inputs: dict[str, Any], evidence: list[str]) -> list[str]:
        text = "\n".join(evidence).casefold()
        return [a for a in gold(inputs)["answers"] if a.casefold() in text]

    def answer(inputs: dict[str, Any]) -> dict[str, Any]:
        evidence = [str(e) for e in inputs.get("evidence") or []]
        answers = found(inputs, evidence)
        if not answers and evidence:
            answers = [evidence[-1].rstrip(")").rsplit(", ", 1)[-1]]
        reasoning = texts.answer_reasoning(evidence, answers, str(inputs.get("question", "")))
        return {"answers": answers, "reasoning": reasoning}

    def predict(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"prediction": texts.prediction(str(inputs.get("step", "")))}

    def think_evaluate(inputs: dict[str, Any]) -> dict[str, Any]:
        """Think's and Evaluate's replies; on proceeding the next step predicted and its relations chosen (as its
        SelectRelationPairs reply would), the answer after the last step (only answers the facts hold: otherwise
        none, and the program asks Answer as paper mode does)."""
        judged = {**think(inputs), **evaluate(inputs)}
        proceeding = judged["decision"] == "proceed"
        answers = found(inputs, fact_lines(inputs)) if proceeding and not next_step(inputs) else []
        return {**judged, "next_prediction": predicted_next(predict, inputs) if proceeding else "", "answers": answers,
                "next_relations": next_pairs(select_relations, inputs) if proceeding else []}

    return {
        "Decompose": decompose,
        "Replan": decompose,
        "PredictOutcome": predict,
        "Think": think,
        "Evaluate": evaluate,
        "Answer": answer,
        "SelectRelations": select_relations,
        "SelectEntities": select_entities,
        "DecomposePredict": decompose_predicting(decompose, predict, relation_choice),
        "ThinkEvaluate": think_evaluate,
        "SelectRelationPairs": pairs_by_entity(select_relations),
    }


def golds_from_examples(examples, *, kg: Any = None) -> dict[str, dict[str, Any]]:
    """Gold-path facts of loaded examples (see `ppoga_dspy.datasets.loaders`), keyed by question text.

    Relations come from `metadata["paths"]` (branches in order); entities on the path from the IRN
    gold-path text when there is one (`a#r1#b#r2#c`), plus the answers. `hops[i]` names the entities
    that relation `i` reaches (answers at the last hop), where the path text gives one per relation.
    `steps` groups the relations into the steps a planner writes: one per *semantic* hop, so a
    relation that reaches only mediator (CVT) nodes shares its step with the next (see `semantic_steps`;
    without `kg`, one step per relation).
    """
    golds: dict[str, dict[str, Any]] = {}
    for example in examples:
        metadata = dict(getattr(example, "metadata", {}) or {})
        relations = [r for branch in metadata.get("paths") or [metadata.get("path") or []] for r in branch]
        entities: list[str] = []
        group = metadata.get("group")
        if isinstance(group, str) and "#" in group:
            for branch in group.split("*"):
                parts = [p for p in branch.split("#<end>#")[0].split("#") if p]
                entities.extend(parts[2::2])
        answers = list(getattr(example, "answers", []) or [])
        hops = [[name] for name in entities] if len(entities) == len(relations) else []
        if hops:  # the last hop reaches the answer: every accepted answer name counts there
            hops[-1] = list(dict.fromkeys(hops[-1] + answers))
        golds[example.question.strip()] = {"relations": relations, "entities": entities + answers, "answers": answers,
                                           "hops": hops, "topics": list(dict(getattr(example, "topic_entities", {})
                                                                             or {})),
                                           "branches": len(metadata.get("paths") or [relations]),
                                           "paths": [list(b) for b in metadata.get("paths") or [relations]]}
        gold = golds[example.question.strip()]
        gold["steps"] = semantic_steps(kg, gold) if kg is not None else [[i] for i in range(len(relations))]
    return golds


REVERSE = " (reverse)"


def walk_directions(relation: str) -> tuple[str, tuple[Any, ...]]:
    """The relation's name and the directions to walk it in: a gold path that writes a hop as the menu does
    (MetaQA's `starred_actors (reverse)`) is walked backwards only; a bare name tries forwards, then backwards."""
    from ppoga_dspy.kg.base import Direction

    if relation.endswith(REVERSE):
        return relation.removesuffix(REVERSE), (Direction.IN,)
    return relation, (Direction.OUT, Direction.IN)


def semantic_steps(kg: Any, gold: dict[str, Any]) -> list[list[int]]:
    """The gold relations (by index) grouped one group per semantic hop, read off the graph.

    A planner asked "who played the Joker in The Dark Knight" writes one step ("find the actor"), not
    one per KG edge: film -> performance -> actor crosses a mediator node. Walking the gold path on
    `kg`, a relation whose reached nodes are all mediators joins the next relation's step. Only for
    one-branch paths (conjunctions keep one step per relation); a KG error keeps one per relation.
    """
    from ppoga_dspy.kg.base import KGError

    relations, topics = gold["relations"], gold.get("topics") or []
    single = [[i] for i in range(len(relations))]
    if not relations or not topics or gold.get("branches", 1) != 1:
        return single
    steps: list[list[int]] = []
    frontier, through = list(topics), False  # through: the last relation reached only mediators
    try:
        for i, relation in enumerate(relations):
            reached = []
            name, directions = walk_directions(relation)
            for direction in directions:
                reached = [e for source in frontier[:50] for e in kg.neighbors(source, name, direction, 500)]
                if reached:
                    break
            if through:
                steps[-1].append(i)
            else:
                steps.append([i])
            through = bool(reached) and all(e.is_mediator for e in reached)
            frontier = [e.id for e in reached]
    except KGError:
        return single
    return steps


def oracle_lm(examples: list, *, kg: Any = None, **kwargs: Any):
    """The scripted perfect planner for these examples: one definition for eval, compile's teacher and tune.

    With `kg` it plans one step per semantic hop (through mediators); without, one step per relation.
    """
    handlers = gold_path_handlers(golds_from_examples(examples, kg=kg))
    return scripted_lm(ScriptedEngine(handlers), "oracle-gold-path", **kwargs)
