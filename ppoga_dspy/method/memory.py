"""PPoGA's three-layer memory, and the trace of a question, both serialisable to JSON.

* Strategic: the question, the current plan, archived (failed) plans, the replan counter.
* Step cycle: for the step in progress, its objective, prediction, observation and thought.
* Knowledge: explored entities and relations, exploration paths, reasoning chains, and the
  paths that failed, which path correction must avoid.

The Planner reads summaries of these layers (as text for prompts); the trace records every stage
so a run can be audited, evaluated and compared with PoG's output files.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ppoga_dspy.kg.base import Direction, Entity, Relation, Triple


@dataclass
class CarriedRelations:
    """`--stages fused`: the relations a step follows, chosen ahead by the call before it (DecomposePredict for the
    first step, the ThinkEvaluate that proceeded here for the others) from the menus it was shown.

    `pairs` are the model's "entity: relation" lines as written; `entities` the ids of the entities whose menus
    it saw (the Executor uses the choice only if every entity it would ask about was among them)."""

    pairs: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)


@dataclass
class PlanStepState:
    """A plan step and where it stands."""

    objective: str
    expected_outcome: str = ""
    status: str = "not started"  # not started | in progress | completed | failed
    attempts: int = 0
    outcome: str = ""  # what the step found (completed) or why it failed
    missing: str = ""  # Think's thought on the last try (what it reached against the prediction): shapes a retry
    prediction: str = ""  # `--stages fused`: predicted ahead (by Decompose, or the evaluation that proceeded here)
    action: str = "explore"  # a StepAction value: explore, intersect (a conjunction) or memory (no graph action)
    relations: CarriedRelations | None = None  # `--stages fused`: chosen ahead, used on the first try only

    def text(self) -> str:
        expected = f" (expect: {self.expected_outcome})" if self.expected_outcome else ""
        outcome = f" -> {self.outcome}" if self.outcome else ""
        action = f" <{self.action}>" if self.action != "explore" else ""
        return f"{self.objective}{action}{expected} [{self.status}]{outcome}"


@dataclass
class StrategicMemory:
    question: str
    topic_entities: list[Entity] = field(default_factory=list)
    plan: list[PlanStepState] = field(default_factory=list)
    archived_plans: list[list[PlanStepState]] = field(default_factory=list)
    replan_count: int = 0

    def plan_text(self, plan: list[PlanStepState] | None = None) -> str:
        steps = self.plan if plan is None else plan
        return "\n".join(f"{i + 1}. {step.text()}" for i, step in enumerate(steps)) or "(no plan)"


@dataclass
class StepCycle:
    """The current step's predict -> act -> observe -> think record."""

    index: int
    objective: str
    attempt: int = 0
    prediction: str = ""
    observation: str = ""
    thought: str = ""
    missing: str = ""
    decision: str = ""
    reason: str = ""
    rationale: str = ""  # the Executor's reason for the entities it selected
    triples: list[Triple] = field(default_factory=list)
    frontier: list[Entity] = field(default_factory=list)
    paths: list[tuple[str, str, str]] = field(default_factory=list)  # (entity id, relation id, direction)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # the texts as they are; then the graph parts
        data.update(triples=[t.to_dict() for t in self.triples], frontier=[e.to_dict() for e in self.frontier],
                    paths=[list(p) for p in self.paths])
        return data


@dataclass
class KnowledgeMemory:
    """Everything learned on the graph for this question."""

    entities: dict[str, Entity] = field(default_factory=dict)
    relations: dict[str, set[str]] = field(default_factory=dict)  # entity id -> explored relation keys
    triples: list[Triple] = field(default_factory=list)
    reasoning_chains: list[list[Triple]] = field(default_factory=list)
    # path correction: failures of the current plan, keyed by the step they failed in
    failed_by_step: dict[int, set[tuple[str, str, str]]] = field(default_factory=dict)
    lessons: list[str] = field(default_factory=list)  # "tried, and why it failed", kept across plans
    # path correction: entities chosen in a step and judged wrong there (the relation that reached them stays open)
    failed_entities: dict[int, set[str]] = field(default_factory=dict)

    @property
    def failed_paths(self) -> set[tuple[str, str, str]]:
        """Every failed (entity, relation, direction) of the current plan."""
        return set().union(*self.failed_by_step.values()) if self.failed_by_step else set()

    def add_entities(self, entities: list[Entity]) -> None:
        for entity in entities:
            self.entities.setdefault(entity.id, entity)
            for _, inner in entity.facts:
                self.entities.setdefault(inner.id, inner)

    def add_triples(self, triples: list[Triple]) -> None:
        seen = {(t.head.id, t.relation, t.tail.id) for t in self.triples}
        for triple in triples:
            key = (triple.head.id, triple.relation, triple.tail.id)
            if key not in seen:
                seen.add(key)
                self.triples.append(triple)
            self.add_entities([triple.head, triple.tail])

    def mark_explored(self, entity_id: str, relation: Relation) -> None:
        self.relations.setdefault(entity_id, set()).add(relation_key(relation))

    def record_failure(
        self, step: int, paths: list[tuple[str, str, str]], reason: str = "", entities: Iterable[str] = (),
    ) -> None:
        """What failed in plan step `step`: paths (entity, relation, direction) and entities chosen there and
        judged wrong; a retry of that step avoids both, and may take a failed choice's relation to other entities."""
        self.failed_by_step.setdefault(step, set()).update(paths)
        entities = list(entities)
        if entities:
            self.failed_entities.setdefault(step, set()).update(entities)
        why = f": {reason}" if reason else ""
        self.lessons.extend(f"{self.path_text(p)} was tried and failed{why}" for p in paths)
        if entities:
            names = ", ".join(self._name(e) for e in entities)
            self.lessons.append(f"choosing {names} was tried and failed{why}")

    def is_failed(self, step: int, entity_id: str, relation: Relation) -> bool:
        return (entity_id, relation.id, relation.direction.value) in self.failed_by_step.get(step, set())

    def avoid_text(self, step: int) -> str:
        """What a retry of `step` is told to avoid, or "" on a first try."""
        failed = [self.path_text(p) for p in sorted(self.failed_by_step.get(step, set()))]
        failed += [f"choosing {self._name(e)}" for e in sorted(self.failed_entities.get(step, set()))]
        return "; ".join(failed)

    def new_plan(self) -> None:
        """Plan correction: a new plan starts with a clean exclusion set; the lessons stay for Replan to read."""
        self.failed_by_step.clear()
        self.failed_entities.clear()

    def path_text(self, path: tuple[str, str, str]) -> str:
        entity, relation, direction = path
        return f"{self._name(entity)} -{relation}" + (" (reverse)" if direction == "in" else "")

    def evidence(
        self, budget_tokens: int, current: list[Triple] | None = None, shown: Iterable[Triple] = (), rest: bool = True,
    ) -> list[str]:
        """The facts the Planner reads, most useful first, within a token budget.

        Reasoning chains come first (topic -> ... -> frontier, mediator facts read through), then the
        current step's selected facts, then the other observed facts, newest first, as room allows. A
        wide exploration's unselected candidates therefore never push a chain out. Facts in `shown`
        (the observation the same prompt already carries) are left out: repeating a step's forty
        facts in its memory doubled Think's prompt and told it nothing new. `rest=False` keeps only the
        chains and the `current` step's facts (what a judgement of this step needs), not earlier steps'
        unselected candidates. Facts that share a subject and relation (or a relation and object) are one
        line, `(Germany, plays_for_country_inverse, Sejad_SALIHOVIC; Admir_MEHMEDI)`, and the budget counts
        what that line costs (see `FactGroups`).
        """
        return self._within(budget_tokens, current, shown, rest)[0].lines()

    def held(
        self, budget_tokens: int, current: list[Triple] | None = None, shown: Iterable[Triple] = (), rest: bool = True,
    ) -> list[Triple]:
        """The facts `evidence` keeps within the budget, in its order: what tells whether a chain fits a budget
        (benchmarks/cut_sizes_bench.py sizes `evidence_tokens` with it)."""
        return self._within(budget_tokens, current, shown, rest)[1]

    def _within(
        self, budget_tokens: int, current: list[Triple] | None, shown: Iterable[Triple], rest: bool,
    ) -> tuple[FactGroups, list[Triple]]:
        groups, kept = FactGroups(), []
        seen = {t.text() for t in shown}
        used = 0
        for triple in self._ranked_facts(current or [], rest=rest):
            text = triple.text()
            if text in seen:
                continue
            cost = groups.cost(triple)
            if used + cost > budget_tokens:
                break
            seen.add(text)
            groups.add(triple)
            kept.append(triple)
            used += cost
        return groups, kept

    def _ranked_facts(self, current: list[Triple], *, rest: bool = True):
        for chain in self.reasoning_chains:
            for triple in chain:
                yield from with_mediator_facts(triple)
        for triple in current:
            yield from with_mediator_facts(triple)
        if rest:
            yield from reversed(self.triples)

    def summary(
        self, budget_tokens: int, current: list[Triple] | None = None, shown: Iterable[Triple] = (), rest: bool = True,
    ) -> str:
        """Evidence and failed paths as one text: what Predict, Evaluate and Replan read (`current`, `shown`,
        `rest`: see `evidence`; without the rest, a line says how many other facts memory holds)."""
        shown = list(shown)
        lines = self.evidence(budget_tokens, current=current, shown=shown, rest=rest)
        text = "\n".join(lines) if lines else "(nothing found yet)"
        if not rest and (others := len(self.triples) - len(lines) - len(shown)) > 0:
            text += f"\n(and {others} other facts found earlier, not on a reasoning chain)"
        if self.lessons:
            text += "\nTried and failed:\n" + "\n".join(self.lessons[-10:])
        return text

    def _name(self, entity_id: str) -> str:
        entity = self.entities.get(entity_id)
        return entity.label if entity else entity_id

    def to_dict(self) -> dict[str, Any]:
        return {
            "entities": {k: v.to_dict() for k, v in self.entities.items()},
            "explored_relations": {k: sorted(v) for k, v in self.relations.items()},
            "triples": [t.to_dict() for t in self.triples],
            "reasoning_chains": [[t.to_dict() for t in chain] for chain in self.reasoning_chains],
            "failed_paths": [list(p) for p in sorted(self.failed_paths)],
            "failed_by_step": {str(k): [list(p) for p in sorted(v)] for k, v in sorted(self.failed_by_step.items())},
            "failed_entities": {str(k): sorted(v) for k, v in sorted(self.failed_entities.items())},
            "lessons": list(self.lessons),
        }


#: Facts an observation's text shows (the rest are counted in one line); memory lists the ones it does not show.
OBSERVATION_FACTS = 20


@dataclass
class _FactGroup:
    """Facts with one relation and either one subject (many objects) or one object (many subjects)."""

    heads: list[str]
    relation: str
    tails: list[str]

    def text(self) -> str:
        return f"({'; '.join(self.heads)}, {self.relation}, {'; '.join(self.tails)})"


class FactGroups:
    """Facts written as few lines: those sharing a subject and relation become `(s, r, o1; o2; o3)`, those
    sharing a relation and object `(s1; s2, r, o)`; any other fact is its own triple line.

    A wide step (forty players of one country) repeated `(Germany, plays_for_country_inverse, ...)` forty
    times; grouped, the names are the line. Facts are grouped in the order they are added, so the lines
    keep the caller's ranking (a group sits where its first fact ranked). `cost` is what adding a fact
    would add to the text, in tokens, so token budgets count the grouped text.
    """

    def __init__(self) -> None:
        self._groups: list[_FactGroup] = []
        self._by_subject: dict[tuple[str, str], _FactGroup] = {}
        self._by_object: dict[tuple[str, str], _FactGroup] = {}
        self._chars = 0  # of the lines joined by newlines

    def _joins(self, head: str, relation: str, tail: str) -> tuple[_FactGroup | None, str]:
        """The group a fact would join and which side grows ("tails" or "heads"), or (None, "")."""
        group = self._by_subject.get((head, relation))
        if group is not None and group.heads == [head]:
            return group, "tails"
        group = self._by_object.get((relation, tail))
        if group is not None and group.tails == [tail]:
            return group, "heads"
        return None, ""

    def _added(self, triple: Triple) -> tuple[_FactGroup | None, str, int]:
        """Where a fact goes (see `_joins`) and how many characters it adds to the text."""
        head, tail = triple.head.describe(), triple.tail.describe()
        group, side = self._joins(head, triple.relation, tail)
        if group is None:
            return None, "", len(_FactGroup([head], triple.relation, [tail]).text()) + (1 if self._groups else 0)
        return group, side, len("; " + (tail if side == "tails" else head))

    def cost(self, triple: Triple) -> int:
        """Tokens the text grows by with this fact (the costs of all facts added sum to the text's estimate)."""
        added = self._added(triple)[2]
        return (self._chars + added) // 4 - self._chars // 4

    def add(self, triple: Triple) -> None:
        group, side, added = self._added(triple)
        self._chars += added
        head, relation, tail = triple.head.describe(), triple.relation, triple.tail.describe()
        if group is None:
            group = _FactGroup([head], relation, [tail])
            self._groups.append(group)
            self._by_subject[(head, relation)] = group
            self._by_object[(relation, tail)] = group
        elif side == "tails":
            group.tails.append(tail)
        else:
            group.heads.append(head)

    def lines(self) -> list[str]:
        return [group.text() for group in self._groups]


def grouped_facts(triples: Iterable[Triple]) -> list[str]:
    """The lines of `FactGroups` for these facts, in their order (duplicates written once)."""
    groups, seen = FactGroups(), set()
    for triple in triples:
        if (key := triple.text()) not in seen:
            seen.add(key)
            groups.add(triple)
    return groups.lines()


def estimate_tokens(text: str) -> int:
    """Tokens of a text for budgeting (about 4 characters per token, as tokenizers of English average)."""
    return max(1, len(text) // 4)


def with_mediator_facts(triple: Triple) -> list[Triple]:
    """A triple and, for a mediator (CVT) node at either end, the node's own facts, read through."""
    out = [triple]
    for node in (triple.head, triple.tail):
        out.extend(Triple(node, relation, inner) for relation, inner in node.facts)
    return out


#: How a menu writes a relation followed from its object to its subject ("directed_by (reverse)").
REVERSE = " (reverse)"


def relation_key(relation: Relation) -> str:
    return relation.id if relation.direction is Direction.OUT else f"{relation.id}{REVERSE}"


@dataclass
class TraceEvent:
    """One stage of the run: an LM call, a KG query, a decision or a correction."""

    stage: str
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0
    at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["error"] is None:
            del data["error"]
        return data


@dataclass
class Memory:
    """The three layers together, plus the per-question trace and step history."""

    strategic: StrategicMemory
    knowledge: KnowledgeMemory = field(default_factory=KnowledgeMemory)
    current: StepCycle | None = None
    history: list[StepCycle] = field(default_factory=list)
    trace: list[TraceEvent] = field(default_factory=list)

    def record(self, event: TraceEvent) -> TraceEvent:
        self.trace.append(event)
        return event

    def to_dict(self) -> dict[str, Any]:
        s = self.strategic
        return {
            "strategic": {
                "question": s.question,
                "topic_entities": [e.to_dict() for e in s.topic_entities],
                "plan": [asdict(p) for p in s.plan],
                "archived_plans": [[asdict(p) for p in plan] for plan in s.archived_plans],
                "replan_count": s.replan_count,
            },
            "step_cycles": [c.to_dict() for c in self.history],
            "knowledge": self.knowledge.to_dict(),
        }
