"""Planner signatures: what each of the Planner's LLM calls asks and returns.

Each docstring is the instruction the model sees (optimizers rewrite it); field names are save keys
of compiled artifacts, so rename or reorder only with an artifact schema bump. Every signature has a
distinct set of output field names, which lets scripted test engines tell them apart.
"""

from __future__ import annotations

import dspy
from pydantic import BaseModel, Field

from ppoga_dspy.signatures.vocabulary import DecisionName, StepAction


class PlanStep(BaseModel):
    """One step of a plan: what to find on the graph, and what the finder expects to get."""

    objective: str = Field(description="what this step must find, e.g. 'find the director of the film'")
    expected_outcome: str = Field(default="", description="the kind of entity expected, e.g. 'a person'")
    action: str = Field(
        default="explore",
        description="explore: follow relations from what was found; intersect: keep only the entities reached "
        "from every topic entity (e.g. 'the forward of club X'); memory: compare, count or pick among the facts "
        "already found, with no graph action",
        # shown to the model and read by the embedded engine's constraints; parsing stays lenient (any text
        # is taken, and the planner reads an unknown action as explore), so a stray word never fails a plan
        json_schema_extra={"enum": [a.value for a in StepAction]},
    )


class Decompose(dspy.Signature):
    """Break the question into a short plan for answering it from a knowledge graph.

    Start from the topic entities. Each step should move one relation away from what the previous
    step found (one hop), so a question about "the spouse of the director of X" needs two steps:
    find the director of X, then find that person's spouse. A question that joins two constraints
    ("the player of club X who plays as forward") is one `intersect` step; a comparison or count over
    entities already found is a `memory` step. Use as few steps as the question needs.
    """

    question: str = dspy.InputField()
    topic_entities: list[str] = dspy.InputField(desc="names of the entities the question is about")
    steps: list[PlanStep] = dspy.OutputField(desc="ordered steps, usually 1 to 3")


class PredictOutcome(dspy.Signature):
    """Before acting on the graph, predict what this step will find.

    Name the kind of relation to follow and the kind of entity expected (and a guess of the entity
    itself if you know it). The prediction is later compared with what the graph really returns.
    """

    question: str = dspy.InputField()
    step: str = dspy.InputField(desc="the objective of the current step")
    knowledge: str = dspy.InputField(desc="facts gathered so far")
    prediction: str = dspy.OutputField(desc="the expected relation, entity type and, if known, entity")


class Think(dspy.Signature):
    """Compare what was predicted for this step with what the graph returned.

    Say whether the observation meets the step's objective, what differs from the prediction, and
    what is still missing to answer the question.
    """

    question: str = dspy.InputField()
    step: str = dspy.InputField(desc="the objective of the current step")
    prediction: str = dspy.InputField(desc="what was expected before acting")
    observation: str = dspy.InputField(desc="the facts the graph returned for this step")
    # `thought` was `reflection` before artifact schema 2 (fields load by position; old demos carry `reflection`)
    thought: str = dspy.OutputField(desc="does the observation meet the objective, and how it differs")
    missing: str = dspy.OutputField(desc="what is still missing to answer the question, or 'nothing'")
    # inputs added after the outputs keep the positions older artifacts load by
    memory: str = dspy.InputField(desc="the plan with each step's status and outcome, the chains found, what failed")


class Evaluate(dspy.Signature):
    """Decide what to do next after a step.

    proceed: the step's objective is met and more steps remain.
    correct_path: the step failed (wrong or empty facts) but the plan is sound; retry it on another path.
    replan: the plan itself is wrong or keeps failing; make a new plan.
    finish: the facts gathered are enough to answer the question now.
    """

    question: str = dspy.InputField()
    plan: str = dspy.InputField(desc="the plan, with the status of each step")
    step: str = dspy.InputField(desc="the objective of the current step")
    observation: str = dspy.InputField(desc="the facts the graph returned for this step")
    thought: str = dspy.InputField(desc="the thought on this step")
    decision: DecisionName = dspy.OutputField()
    reason: str = dspy.OutputField(desc="one sentence justifying the decision")
    # an input added after the outputs keeps the positions older artifacts load by
    memory: str = dspy.InputField(desc="the reasoning chains found so far and the paths that failed")


class Replan(dspy.Signature):
    """The previous plan failed. Write a new plan for the question using what was learned.

    Avoid the relations and paths that failed; use the facts already gathered; keep steps one hop each.
    """

    question: str = dspy.InputField()
    topic_entities: list[str] = dspy.InputField(desc="names of the entities the question is about")
    failed_plan: str = dspy.InputField(desc="the plan that failed, with the status of each step")
    knowledge: str = dspy.InputField(desc="facts gathered so far and the paths that failed")
    new_steps: list[PlanStep] = dspy.OutputField(desc="ordered steps of the new plan")


class Answer(dspy.Signature):
    """Answer the question from the evidence gathered on the knowledge graph.

    Give the answer entities exactly as they are named in the evidence, best first. If the evidence
    does not contain the answer, answer from your own knowledge and say so in the reasoning.
    """

    question: str = dspy.InputField()
    evidence: list[str] = dspy.InputField(desc="facts from the graph as (head, relation, tail); 'a; b' lists "
                                          "several heads or tails of one relation")
    answers: list[str] = dspy.OutputField(desc="answer entity names, best first")
    reasoning: str = dspy.OutputField(desc="the chain of facts that leads to the answer")


# -- `--stages fused`: one call where the paper makes several that read the same inputs -----------


class DecomposePredict(dspy.Signature):
    """Break the question into a short plan for answering it from a knowledge graph, and predict the first step.

    Start from the topic entities. Each step should move one relation away from what the previous
    step found (one hop), so a question about "the spouse of the director of X" needs two steps:
    find the director of X, then find that person's spouse. Use as few steps as the question needs.
    Then, before anything is looked up, predict what the first step will find: the kind of relation
    to follow and the kind of entity expected (and a guess of the entity itself if you know it), and
    choose the relations the first step follows from the topic entities, copying "entity: relation"
    candidates exactly (relations marked "(reverse)" are followed from the other end of the fact).
    """

    question: str = dspy.InputField()
    topic_entities: list[str] = dspy.InputField(desc="names of the entities the question is about")
    steps: list[PlanStep] = dspy.OutputField(desc="ordered steps, usually 1 to 3")
    first_prediction: str = dspy.OutputField(desc="the first step's expected relation, entity type and, if known, "
                                             "entity")
    # added last: artifacts saved before them load their other fields by name (method/program.py)
    candidates: list[str] = dspy.InputField(desc="the topic entities' relations as 'entity: relation' pairs, each "
                                            "entity's best-ranked first")
    first_relations: list[str] = dspy.OutputField(default=[], desc="the first step's 'entity: relation' pairs to "
                                                  "follow, copied from the candidates")


class ThinkEvaluate(dspy.Signature):
    """Judge this step's observation against its prediction, then decide what to do next.

    proceed: the step's objective is met and more steps remain.
    correct_path: the step failed (wrong or empty facts) but the plan is sound; retry it on another path.
    replan: the plan itself is wrong or keeps failing; make a new plan.
    finish: the facts gathered are enough to answer the question now.
    On proceed, predict the next step and choose the relations it follows, copying "entity: relation"
    candidates exactly; on finish or after the last step, answer with names from the facts.
    """

    question: str = dspy.InputField()
    step: str = dspy.InputField(desc="the current step's objective")
    prediction: str = dspy.InputField(desc="what was expected before acting")
    observation: str = dspy.InputField(desc="the facts the graph returned for this step")
    memory: str = dspy.InputField(desc="the plan with each step's status, the facts found, what failed")
    next_step: str = dspy.InputField(desc="the next step's objective, or 'none' after the last step")
    thought: str = dspy.OutputField(desc="does the observation meet the objective, and how it differs")
    decision: DecisionName = dspy.OutputField()
    # No `missing` before the decision and no `reason` after it, as Think and Evaluate have. `reason`, written after
    # the choice, could not inform it; `missing` ("Nothing for this step; next, ...") restated the next step, and the
    # one thing read from it, a retry's note of what to look for, `thought` says as well (it names the entity kind
    # the prediction expected). For the small model each was a field to write in every call and a sentence more in
    # every demo (together about 45 of 150 written tokens, 150 of 1,750 prompt tokens).
    next_prediction: str = dspy.OutputField(default="", desc="on proceed: the next step's expected relation and entity")
    answers: list[str] = dspy.OutputField(default=[], desc="on finish: answer entity names, best first; else []")
    # added last: artifacts saved before them load their other fields by name (method/program.py)
    candidates: list[str] = dspy.InputField(desc="the next step's relations as 'entity: relation' pairs, each "
                                            "entity's best-ranked first; [] when there is none to choose")
    next_relations: list[str] = dspy.OutputField(default=[], desc="on proceed: the next step's 'entity: relation' "
                                                 "pairs to follow, copied from the candidates; else []")
