"""Back to the named relation: a plan step that names a relation its frontier does not have.

A planner names relations in its steps, yet a set-valued step before it kept entities the named relation does not
leave from (three of a film's actors' films, none with a language), or its plan dropped a hop ("films that share
writers with X, released when": written_by, then release_year, without the writers' other films between). The step
then follows whatever its menu offers and the walk ends one hop short or on the wrong kind of entity. With
`Thresholds.back_to_named_relation` (on by default: it is PoG's backtracking, told by the graph what to look for)
the graph says which, and the plan's own words say where to go:

- before the step acts (`refocus`): when no frontier entity has a relation the step names, the last step's other
  candidates that have it become the frontier;
- when the step would end the walk (finish, the Planner's or the plan's last step; `bridges`): when its frontier
  had none of the relations it names (so it followed another) and the entities it reached have one, the step was
  a bridge over a hop the plan skipped; the loop does it again from there, once. A step that proceeds to a next
  one is left to that step.

What a step names is read against the graph's own relation keys (`gating.names_relation`), so a name of any shape
counts: `written_by`, `people.person.place_of_birth`, a Wikidata `P26`, a camelCase `birthPlace`, one word. A
relation counts in either direction: a plan that writes `directed_by` from a director means the films it directed
(the Executor's menu shows `directed_by (reverse)`), and must not be carried a hop further.

- while the step acts (`leading_on`, with `Thresholds.follow_named_relations`): when some frontier entities have a
  relation the step names, only they are explored; the others would follow whatever their menus offer (a film
  without a language follows its actors) and put facts of the wrong kind beside the answer.

All are traced ("named_relation.back", "named_relation.again", "named_relation.only") and cost KG queries only (a
relation list per entity, memoised per question), never an LM call.
"""

from __future__ import annotations

from ppoga_dspy.kg.base import Direction, Entity, KGError, KGUnavailableError
from ppoga_dspy.method.gating import names_relation, step_words
from ppoga_dspy.method.memory import REVERSE, relation_key
from ppoga_dspy.method.question_run import QuestionRun
from ppoga_dspy.method.relation_pairs import Menu


def names_either_way(key: str, objective: str) -> bool:
    """Whether the objective names the relation `key` in either direction: a plan that writes `directed_by` from a
    director means the films it directed, and a step that followed `directed_by (reverse)` did what it named."""
    base = key.removesuffix(REVERSE)
    return names_relation(base, objective) or names_relation(base + REVERSE, objective)


def named_on(run: QuestionRun, entity: Entity, objective: str) -> list[str]:
    """The relations of the entity (either way, by name) that the objective names; [] when the KG cannot say."""
    words = step_words(objective)
    found: list[str] = []
    for direction in (Direction.OUT, Direction.IN):
        try:
            keys = [relation_key(r).removesuffix(REVERSE) for r in run.tools.relations(entity.id, direction)]
        except KGUnavailableError:
            raise
        except KGError:
            continue
        found += [key for key in keys if key not in found and names_either_way(key, words)]
    return found


def named_from(run: QuestionRun, entities: list[Entity], objective: str) -> bool:
    """Whether any of the first `frontier_limit` entities has a relation the objective names (`named_on`)."""
    return any(named_on(run, e, objective) for e in entities[: run.thresholds.frontier_limit])


def followed(paths: list[tuple[str, str, str]], objective: str) -> bool:
    """Whether the step's paths (entity, relation, direction) followed a relation the objective names, either way."""
    words = step_words(objective)
    return any(names_either_way(relation, words) for _, relation, _ in paths)


def refocus(run: QuestionRun, frontier: list[Entity], pool: list[Entity], objective: str) -> list[Entity]:
    """The pool's entities (best ranked first) that have a relation the objective names, when no frontier entity
    has one; [] when the frontier has one, or the pool none. At most `prune_threshold` of the pool are asked, and
    `entities_per_step` taken."""
    th = run.thresholds
    if not pool or named_from(run, frontier, objective):
        return []
    taken: list[Entity] = []
    for entity in pool[: th.prune_threshold]:
        if named_on(run, entity, objective):
            taken.append(entity)
            if len(taken) == th.entities_per_step:
                break
    return taken


def bridges(run: QuestionRun, objective: str, paths: list[tuple[str, str, str]], sources: list[Entity],
            reached: list[Entity]) -> list[str]:
    """The named relations a finishing step could not follow where it stood and that what it reached has: non-empty
    when the step was a bridge (no source entity has a named relation, it followed none, and what it reached has
    one). A step whose frontier had the named relation and chose another made a choice, not a missing hop: []."""
    limit = run.thresholds.frontier_limit
    if followed(paths, objective) or named_from(run, sources, objective):
        return []
    ahead: list[str] = []
    for entity in reached[:limit]:
        ahead += [key for key in named_on(run, entity, objective) if key not in ahead]
    return ahead


def leading_on(run: QuestionRun, menus: list[Menu], objective: str) -> list[Menu]:
    """The menus that hold a relation the step names (either way), when any does; else all of them. A frontier
    entity without the named relation has nothing the step asks for: exploring it costs a choice (an LM call when
    its menu is open) and puts another relation's facts where the step's answer is read."""
    if not run.thresholds.follow_named_relations:
        return menus
    words = step_words(objective)
    naming = [any(names_either_way(key, words) for key in m.keys) for m in menus]
    if all(naming) or not any(naming):
        return menus
    kept = [m for m, names in zip(menus, naming, strict=True) if names]
    run.note("named_relation.only", kept=[m.entity.id for m in kept],
             left=[m.entity.id for m, names in zip(menus, naming, strict=True) if not names])
    return kept
