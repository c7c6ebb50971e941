"""Executor signatures: the choices the Executor asks the model to make while exploring the graph.

Candidates are shown as a numbered-free list of exact names; the Executor accepts a choice only when
it names a real candidate (after normalisation) and otherwise falls back to the best-ranked one, so a
weak model degrades a step instead of derailing it.
"""

from __future__ import annotations

import dspy


class SelectRelations(dspy.Signature):
    """Choose the relations to follow from an entity to reach this step's objective.

    Copy the chosen relation names exactly from the candidates, most promising first. Candidates
    marked "(reverse)" are followed from the other end of the fact.
    """

    question: str = dspy.InputField()
    step: str = dspy.InputField(desc="the objective of the current step")
    entity: str = dspy.InputField(desc="the entity the relations start from")
    candidates: list[str] = dspy.InputField(desc="relations of the entity, best-ranked first")
    relations: list[str] = dspy.OutputField(desc="chosen relation names, copied from the candidates")


#: What joins a SelectEntities candidate's entity to where it was found: `entity  <- (from, relation)`.
ENTITY_LINE_MARK = "  <- "


def line_entity(line: str) -> str:
    """The entity a SelectEntities candidate line names (the whole text when it is a bare name)."""
    return line.split(ENTITY_LINE_MARK, 1)[0].strip()


class SelectEntities(dspy.Signature):
    """Choose the entities found on the graph that best serve this step's objective.

    Copy the chosen entity names exactly from the candidates, most promising first, and say why.
    """

    question: str = dspy.InputField()
    step: str = dspy.InputField(desc="the objective of the current step")
    candidates: list[str] = dspy.InputField(
        desc="entities found, as 'entity  <- (from, relation)' or, through a mediator, "
             "'entity  <- (head, relation, [mediator]) -> relation'")
    entities: list[str] = dspy.OutputField(desc="chosen entity names, copied from the candidates")
    rationale: str = dspy.OutputField(desc="why these entities serve the objective")


class SelectRelationPairs(dspy.Signature):
    """Choose the relations to follow from each of the entities below to reach this step's objective.

    Each candidate is "entity: relation". Copy the chosen candidates exactly, most promising first, at
    least one for every entity worth following. Relations marked "(reverse)" are followed from the
    other end of the fact.
    """

    # `--stages fused`: one call for the whole frontier instead of one SelectRelations call per entity
    question: str = dspy.InputField()
    step: str = dspy.InputField(desc="the objective of the current step")
    candidates: list[str] = dspy.InputField(desc="'entity: relation' pairs, each entity's best-ranked first")
    pairs: list[str] = dspy.OutputField(desc="chosen 'entity: relation' pairs, copied from the candidates")
