"""The KnowledgeGraph contract the Executor's tools call, and the types and errors it speaks.

One dialect (how ids, labels, relation filters and mediator nodes look) plus one engine (who runs
the SPARQL: a remote endpoint or the embedded store) make one KnowledgeGraph. Every backend must
honour the contract written on `KnowledgeGraph`:

* **Validated identifiers.** An entity or relation id is checked against the dialect's id syntax,
  or bound as a proper IRI, before it reaches a query string. A bad id raises `InvalidIdentifier`
  and runs nothing.
* **Timeout.** Each query has a timeout; an engine that times out retries with backoff and then
  raises `KGTimeoutError` / `KGUnavailableError`, naming where it tried. A reply that is not SPARQL
  JSON (bad JSON, non-UTF-8 bytes) is retried the same way, then `KGBadReplyError`. After `breaker`
  failed attempts in a row an endpoint is marked down: every later call raises `KGEndpointDownError`
  at once, so a dead endpoint fails the remaining questions fast instead of timing out on each.
* **Cached and idempotent.** Results are cached (LRU); a call repeated by a parallel evaluator
  returns the same answer and changes nothing.
* **Thread-safe.** Evaluations call one KnowledgeGraph from many threads.
* **Read-only.** Nothing in this interface writes to the graph.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, runtime_checkable

from ppoga_dspy.errors import ConfigError, DataError, KGError

__all__ = ["KGError"]  # re-exported: the KG layer's errors all derive from it (see ppoga_dspy.errors)


class InvalidIdentifier(KGError, ValueError):
    """An entity or relation id does not match the dialect's syntax; nothing was queried (the user's input)."""

    exit_code = ConfigError.exit_code


class EntityNotFound(KGError, LookupError):
    """A name or id is not in the KG (the user's input: check the spelling, or `ppoga kg find`)."""

    exit_code = ConfigError.exit_code


class KGUnavailableError(KGError):
    """The engine could not be reached (or kept failing) after the configured retries."""


class KGTimeoutError(KGUnavailableError):
    """The engine did not answer within its timeout, after the configured retries."""


class KGEndpointDownError(KGUnavailableError):
    """The endpoint failed so many attempts in a row that it is marked down: every later query fails at once."""


class KGBadReplyError(KGUnavailableError):
    """The endpoint kept answering with something that is not SPARQL JSON results (bad JSON, non-UTF-8 bytes)."""


class KGQueryError(KGError):
    """The engine rejected a query (a bug in a dialect, or an engine that lacks a feature)."""


class KGLoadError(KGError):
    """A file could not be loaded into a store (unknown format, parse error, missing file)."""

    exit_code = DataError.exit_code


class KGSpecError(KGError, ValueError):
    """A KG spec (what `open_kg` / `--kg` was given) is none of the accepted forms; the message lists them."""

    exit_code = ConfigError.exit_code


class Direction(str, Enum):
    """Which end of a triple the known entity sits on: OUT means (entity, relation, ?x)."""

    OUT = "out"
    IN = "in"

    def flipped(self) -> Direction:
        return Direction.IN if self is Direction.OUT else Direction.OUT


@dataclass(frozen=True)
class Entity:
    """A node of the KG: its dialect id (e.g. `m.0d05w3`, `Q42`, `Alan_PULIDO`) and a readable label.

    `facts` is filled only for mediator (CVT) nodes: the node's own outgoing facts as
    (relation, neighbour) pairs, so an n-ary fact reads through the node instead of a bare mid.
    """

    id: str
    label: str
    facts: tuple[tuple[str, Entity], ...] = ()
    literal: bool = False

    @property
    def is_mediator(self) -> bool:
        return bool(self.facts)

    def describe(self) -> str:
        """The text an LLM sees for this entity: the label, or a mediator's facts."""
        if not self.facts:
            return self.label
        inner = "; ".join(f"{rel}: {ent.label}" for rel, ent in self.facts)
        return f"[{inner}]"

    def to_dict(self) -> dict:
        data: dict = {"id": self.id, "label": self.label}
        if self.literal:
            data["literal"] = True
        if self.facts:
            data["facts"] = [{"relation": r, "entity": e.to_dict()} for r, e in self.facts]
        return data


@dataclass(frozen=True)
class Relation:
    """A relation seen from an entity: its dialect id and the direction it is walked in."""

    id: str
    direction: Direction = Direction.OUT

    def to_dict(self) -> dict:
        return {"id": self.id, "direction": self.direction.value}


@dataclass(frozen=True)
class Triple:
    """A fact, always stored head -> tail whatever direction it was found in."""

    head: Entity
    relation: str
    tail: Entity

    def to_dict(self) -> dict:
        return {"head": self.head.to_dict(), "relation": self.relation, "tail": self.tail.to_dict()}

    def text(self) -> str:
        return f"({self.head.describe()}, {self.relation}, {self.tail.describe()})"


@dataclass
class KGStats:
    """Counters a KnowledgeGraph keeps so the program can report KG cost per question."""

    by_kind: Counter[str] = field(default_factory=Counter)  # queries run, by what they asked (relations, ...)
    cache_hits: int = 0
    errors: int = 0
    seconds: float = 0.0

    @property
    def queries(self) -> int:
        """Queries sent to the engine (cache hits not counted)."""
        return sum(self.by_kind.values())


@runtime_checkable
class KnowledgeGraph(Protocol):
    """What the Executor may ask of a KG. See the module docstring for the contract."""

    name: str

    def relations(self, entity: str, direction: Direction = Direction.OUT) -> list[Relation]:
        """Relations leaving (OUT) or entering (IN) `entity`, after the dialect's filter."""
        ...

    def relations_back(self, entity: str, origin: str) -> list[Relation]:
        """Relations (either direction) by which `entity` reaches `origin` and no other node, where the
        dialect stores facts under paired reverse predicates (Freebase); empty elsewhere."""
        ...

    def neighbors(
        self, entity: str, relation: str, direction: Direction = Direction.OUT, limit: int = 100
    ) -> list[Entity]:
        """Entities reached from `entity` through `relation` in `direction`, labelled, at most `limit`.

        Mediator nodes come back with `facts` filled (the dialect decides what a mediator is).
        """
        ...

    def labels(self, entities: list[str]) -> dict[str, str]:
        """Labels of many entities in one round trip; an unlabelled entity maps to its id."""
        ...

    def find_entities(self, text: str, limit: int = 10) -> list[Entity]:
        """Entities whose label matches `text`: exact first, then normalised (case, `_`, punctuation)."""
        ...

    def stats(self) -> KGStats:
        """Counters since creation (queries run, cache hits, errors, seconds)."""
        ...

    def close(self) -> None:
        """Release the engine (stop connections, close the store)."""
        ...
