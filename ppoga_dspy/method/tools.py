"""The KG operations as `dspy.Tool` objects, metered and traced for one question.

The Executor acts on the graph only through these tools (the typed methods below call them), so
every KG query of a question is counted in its costs and appears in its trace; the same tools can
be handed to a tool-calling module (e.g. `dspy.ReAct`) unchanged. Invalid identifiers and query
errors surface as `KGError`; the Executor decides whether that degrades a step or fails the question.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ppoga_dspy.kg.base import Direction, Entity, KnowledgeGraph, Relation
from ppoga_dspy.method.memory import TraceEvent

if TYPE_CHECKING:
    from ppoga_dspy.method.costs import Costs
    from ppoga_dspy.method.memory import Memory


#: Look-ups a question repeats with the same arguments: fused stages build a step's relation menus one call early
#: and the step builds them again. The graph does not change within a question, so the second answer is the first.
MEMO_OPS = frozenset({"relations", "relations_back", "count_neighbors"})


class KGTools:
    """One question's view of a KnowledgeGraph: the five tools, with counting and tracing.

    Menu look-ups (`MEMO_OPS`) are asked of the KG once per question: a repeat is answered from this question's
    memo, not counted as a KG query and not traced again.
    """

    def __init__(self, kg: KnowledgeGraph, costs: Costs, memory: Memory) -> None:
        self.kg = kg
        self._costs = costs
        self._memory = memory
        self._memo: dict[tuple, list] = {}
        self.tools = self._make_tools()
        self.calls = 0  # KG calls made, and how many of them raised (see `all_failed`)
        self.failures = 0
        self.last_error = ""

    def all_failed(self) -> tuple[str, str] | None:
        """("kg", why) when this question called the KG and every call failed: its answer cannot come from the
        graph, so the question fails with kind "kg" rather than ending "ok" on fallbacks; else None."""
        if self.calls and self.failures == self.calls:
            return "kg", f"every KG query of this question failed ({self.calls}; last: {self.last_error})"
        return None

    def _make_tools(self) -> dict[str, Any]:
        import dspy

        def get_relations(entity: str, direction: str = "out") -> list[Relation]:
            """List the relations of an entity id, outgoing ("out") or incoming ("in")."""
            return self._metered("relations", {"entity": entity, "direction": direction},
                                 lambda: self.kg.relations(entity, Direction(direction)))

        def get_neighbors(entity: str, relation: str, direction: str = "out", limit: int = 100) -> list[Entity]:
            """List the entities reached from an entity id through a relation, in a direction."""
            args = {"entity": entity, "relation": relation, "direction": direction, "limit": limit}
            return self._metered("neighbors", args,
                                 lambda: self.kg.neighbors(entity, relation, Direction(direction), limit))

        def get_relations_back(entity: str, origin: str) -> list[Relation]:
            """List the relations that lead from an entity id back to `origin` and nowhere else."""
            return self._metered("relations_back", {"entity": entity, "origin": origin},
                                 lambda: self.kg.relations_back(entity, origin))

        def get_labels(entities: list[str]) -> dict[str, str]:
            """Give the readable names of entity ids."""
            return self._metered("labels", {"entities": entities[:20]}, lambda: self.kg.labels(entities))

        def find_entities(text: str, limit: int = 10) -> list[Entity]:
            """Find entities whose name matches a text."""
            return self._metered("find_entities", {"text": text}, lambda: self.kg.find_entities(text, limit))

        tools = (get_relations, get_relations_back, get_neighbors, get_labels, find_entities)
        return {fn.__name__: dspy.Tool(fn) for fn in tools}

    def _metered(self, op: str, args: dict[str, Any], fn):
        key = (op, tuple(sorted(args.items()))) if op in MEMO_OPS else None
        if key in self._memo:
            return list(self._memo[key])
        started = time.perf_counter()
        event = TraceEvent(stage=f"kg.{op}", inputs=args)
        self.calls += 1
        try:
            result = fn()
        except Exception as exc:
            event.error = f"{type(exc).__name__}: {exc}"
            self.failures += 1
            self.last_error = event.error[:300]
            raise
        finally:
            elapsed = time.perf_counter() - started
            self._costs.add_kg(elapsed)
            event.seconds = round(elapsed, 4)
            self._memory.record(event)
        event.outputs = {"count": len(result)}
        if key is not None:
            self._memo[key] = list(result)
        return result

    def relations(self, entity: str, direction: Direction) -> list[Relation]:
        return self.tools["get_relations"](entity=entity, direction=direction.value)

    def relations_back(self, entity: str, origin: str) -> list[Relation]:
        return self.tools["get_relations_back"](entity=entity, origin=origin)

    def neighbors(self, entity: str, relation: str, direction: Direction, limit: int) -> list[Entity]:
        return self.tools["get_neighbors"](entity=entity, relation=relation, direction=direction.value, limit=limit)

    def count_neighbors(self, entity: str, relation: str, direction: Direction) -> int | None:
        """How many entities the relation reaches in all, metered as `kg.count_neighbors`; None when the KG
        cannot count (the `KnowledgeGraph` protocol does not require it)."""
        count = getattr(self.kg, "count_neighbors", None)
        if count is None:
            return None
        args = {"entity": entity, "relation": relation, "direction": direction.value}
        return self._metered("count_neighbors", args, lambda: [count(entity, relation, direction)])[0]

    def labels(self, entities: list[str]) -> dict[str, str]:
        return self.tools["get_labels"](entities=entities)

    def find(self, text: str, limit: int = 10) -> list[Entity]:
        return self.tools["find_entities"](text=text, limit=limit)
