"""Bridging: a plan step that names a relation its frontier does not have.

A small planner names relations in its steps, yet copies a neighbouring demo's plan and drops a hop ("films that
share writers with X, released when": written_by, then release_year, without the writers' other films between),
or the step before kept entities the named relation does not leave from (three films, none with a language).
The step then follows whatever its menu offers and the walk ends one hop short or on the wrong kind of entity.
With `Thresholds.bridge_named_relation` (off by default, on in the embedded model's artifact) the graph says
which, and the plan's own words say where to go:

- before the step acts (`refocus`): when no frontier entity has a relation the step names, the last step's other
  candidates that have it become the frontier (PoG's backtracking, told what to look for);
- when the step would end the walk (finish, the Planner's or the plan's last step; `bridges`): when its frontier
  had none of the relations it names (so it followed another) and the entities it reached have one, the step was
  a bridge; the loop does it again from there, once. A step that proceeds to a next one is left to that step.

A relation counts in either direction: a plan that writes `directed_by` from a director means the films it
directed (the Executor's menu shows `directed_by (reverse)`), and must not be carried a hop further.

Both are traced ("bridge.frontier", "bridge.carried") and cost KG queries only (a relation list per entity,
memoised per question), never an LM call.
"""

from __future__ import annotations

from ppoga_dspy.kg.base import Direction, Entity, KGError, KGUnavailableError
from ppoga_dspy.method.gating import close_names
from ppoga_dspy.method.memory import REVERSE, relation_key
from ppoga_dspy.method.question_run import QuestionRun


def _either_way(key: str, name: str) -> bool:
    """Whether a menu key is the named relation in either direction: a plan that writes `directed_by` from a
    director means the films it directed, and a step that followed `directed_by (reverse)` did what it named."""
    return close_names(key.removesuffix(REVERSE), name.removesuffix(REVERSE))


def has_named(run: QuestionRun, entity: Entity, names: list[str]) -> bool:
    """Whether the entity has one of the named relations, either way (a KG that cannot say: no)."""
    for direction in (Direction.OUT, Direction.IN):
        try:
            keys = [relation_key(r) for r in run.tools.relations(entity.id, direction)]
        except KGUnavailableError:
            raise
        except KGError:
            continue
        if any(_either_way(key, name) for key in keys for name in names):
            return True
    return False


def followed(paths: list[tuple[str, str, str]], names: list[str]) -> bool:
    """Whether the step's paths (entity, relation, direction) followed one of the named relations, either way."""
    return any(_either_way(relation, name) for _, relation, _ in paths for name in names)


def refocus(run: QuestionRun, frontier: list[Entity], pool: list[Entity], names: list[str]) -> list[Entity]:
    """The pool's entities (best ranked first) that have a named relation, when no frontier entity has one; []
    when the frontier has one, or the pool none. At most `prune_threshold` of the pool are asked, and
    `entities_per_step` taken."""
    th = run.thresholds
    if not names or not pool or any(has_named(run, e, names) for e in frontier[: th.frontier_limit]):
        return []
    taken: list[Entity] = []
    for entity in pool[: th.prune_threshold]:
        if has_named(run, entity, names):
            taken.append(entity)
            if len(taken) == th.entities_per_step:
                break
    return taken


def bridges(run: QuestionRun, names: list[str], paths: list[tuple[str, str, str]], sources: list[Entity],
            reached: list[Entity]) -> bool:
    """Whether a step that proceeded was a bridge: it could not follow the relations it names where it stood (no
    source entity has one), it followed none of them, and what it reached has one. A step whose frontier had the
    named relation and chose another made a choice, not a missing hop: it is judged as it is."""
    limit = run.thresholds.frontier_limit
    return (bool(names) and not followed(paths, names)
            and not any(has_named(run, e, names) for e in sources[:limit])
            and any(has_named(run, e, names) for e in reached[:limit]))
