"""`--stages fused`: one relation choice for the whole frontier, as "entity: relation" pairs.

Paper mode asks `SelectRelations` once per frontier entity with two or more relations; the calls
read the same question and step, so fused mode asks once with every entity's ranked relations as
"entity: relation" candidates. The rules stay per entity, the same as paper mode's: an entity with one
relation, whose ranking is decisive (`gate_margin`), or whose menu holds the relations the step's objective
names (`follow_named_relations`), is settled without the model; each entity follows at most
`relations_per_step` relations; an entity the reply names no valid pair for falls back to its
best-ranked relation, as in paper mode, and the trace says so.

The call before a step already reads what that step needs (the plan call for the first step, the
ThinkEvaluate that proceeds for the others), so it is shown the step's menus ahead (`open_menus`,
`menu_lines`) and chooses there: a carried choice (`CarriedRelations`) takes the place of the
SelectRelationPairs reply when it holds (`carried_indices`), and the call is made otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppoga_dspy.kg.base import Entity, Relation
from ppoga_dspy.method import gating
from ppoga_dspy.method.choices import Matched, match_choices
from ppoga_dspy.method.memory import CarriedRelations, relation_key
from ppoga_dspy.method.question_run import QuestionRun
from ppoga_dspy.method.vocabulary import Role, Stage


@dataclass
class Menu:
    """One frontier entity's relations as shown to the model (ranked and capped) and their scores."""

    entity: Entity
    shown: list[Relation]
    scores: list[float]

    @property
    def keys(self) -> list[str]:
        """The shown relations as the model reads them ("written_by", "written_by (reverse)")."""
        return [relation_key(r) for r in self.shown]

    def lines(self) -> list[str]:
        return [f"{self.entity.describe()}: {key}" for key in self.keys]


def settled(run: QuestionRun, menu: Menu, stage: Stage = Stage.SELECT_RELATION_PAIRS,
            objective: str = "") -> list[Relation] | None:
    """The relations an entity follows without the model (one candidate, a decisive margin, or the relations the
    step's objective names), else None. One rule for both stage modes: a fused step is gated as a paper one."""
    keys = menu.keys
    if len(menu.shown) == 1:
        gating.only_one(run, stage, keys[0], entity=menu.entity.id)
        return menu.shown
    if gating.decisive(run, stage, menu.scores, keys[0], entity=menu.entity.id):
        return menu.shown[:1]
    if (found := gating.named(run, stage, objective, keys, entity=menu.entity.id)) is not None:
        return [menu.shown[i] for i in found]
    return None


def open_menus(run: QuestionRun, menus: list[Menu], objective: str = "") -> list[Menu]:
    """The menus `settled` leaves to the model (more than one relation, no decisive margin, no relation the
    objective names), recording nothing."""
    return [m for m in menus if len(m.shown) > 1 and not gating.beats_margin(run, m.scores)
            and gating.named_positions(run, objective, m.keys) is None]


def menu_lines(menus: list[Menu]) -> list[str]:
    """The "entity: relation" candidates of these menus, each entity's best-ranked first."""
    return [line for m in menus for line in m.lines()]


def carried_indices(run: QuestionRun, carried: CarriedRelations | None, asked: list[Menu],
                    lines: list[str]) -> list[int] | None:
    """The candidates a carried choice names, read as the SelectRelationPairs reply would be; None (the call is
    made) when there is none, it names nothing, any pair is off these menus, or an entity asked about was not
    on the menus the carrying call saw."""
    if carried is None:
        return None
    matched = match_choices(carried.pairs, lines)
    unseen = [m.entity.id for m in asked if m.entity.id not in carried.entities]
    if matched.invalid or not matched.indices or unseen:
        run.note("relations.carried_rejected", pairs=carried.pairs, invalid=matched.invalid, unseen=unseen)
        return None
    run.note("relations.carried", pairs=[lines[i] for i in matched.indices])
    return matched.indices


def choose_pairs(run: QuestionRun, predictor, *, question: str, objective: str, menus: list[Menu],
                 carried: CarriedRelations | None = None) -> list[tuple[Entity, Relation]]:
    """(entity, relation) to follow, in frontier order; one LM call for every entity the rules leave open, unless
    a valid choice was carried from the call before (`carried_indices`)."""
    decided = {id(m): settled(run, m, objective=objective) for m in menus}
    asked = [m for m in menus if decided[id(m)] is None]
    if asked:
        lines = menu_lines(asked)
        indices = carried_indices(run, carried, asked, lines)
        if indices is None:
            prediction = run.call(Stage.SELECT_RELATION_PAIRS, Role.EXECUTOR, predictor,
                                  question=question, step=objective, candidates=lines)
            matched = match_choices(getattr(prediction, "pairs", None), lines)
        else:
            matched = Matched(indices=indices)
        owners = [(m, r) for m in asked for r in m.shown]
        for menu in asked:
            picked = [r for i in matched.indices for m, r in [owners[i]] if m is menu]
            decided[id(menu)] = picked[: run.thresholds.relations_per_step] or menu.shown[:1]
            if not picked:
                run.note("select_relation_pairs.fallback", entity=menu.entity.id, invalid=matched.invalid,
                         used=relation_key(menu.shown[0]))
    return [(m.entity, r) for m in menus for r in decided[id(m)]]
