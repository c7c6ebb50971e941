"""One dialect + one engine = one KnowledgeGraph: the queries, the cache and the counters.

`SparqlGraph` writes every query itself (ids checked and mapped to IRIs by the dialect, text
escaped by terms.py), hands it to the engine, caches the rows in a thread-safe LRU keyed by the
query text, and turns rows into `Entity`/`Relation` objects. Because both engines answer the same
queries with the same neutral rows, the embedded store and any endpoint give identical results.

Results are sorted by id so they do not depend on engine order. `neighbors(limit=N)` asks the
engine for N rows without ORDER BY (sorting millions of Freebase rows per hop would cost more
than it is worth), so when more than N neighbours exist, which N come back is the engine's choice.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from ppoga_dspy.kg.base import Direction, Entity, InvalidIdentifier, KGError, KGStats, Relation
from ppoga_dspy.kg.cache import LRUCache
from ppoga_dspy.kg.dialects import Dialect, normalise_label, spelling_variants
from ppoga_dspy.kg.terms import Row, iri_ref
from ppoga_dspy.text import clean

VALUES_CHUNK = 200
MAX_LIMIT = 10_000
MAX_TEXT = 1000


class Engine(Protocol):
    """What the graph layer needs from an engine; see store.EmbeddedStore and sparql.SparqlEndpoint."""

    name: str
    kind: str
    can_scan_labels: bool

    def select(self, query: str) -> list[Row]: ...

    def count_triples(self) -> int: ...

    def close(self) -> None: ...


def _direction(value: Direction | str) -> Direction:
    if isinstance(value, Direction):
        return value
    if isinstance(value, str) and value.lower() in ("in", "out"):
        return Direction(value.lower())
    raise InvalidIdentifier(f"direction must be 'in' or 'out', got {value!r}")


def _limit(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidIdentifier(f"limit must be an integer from 1 to {MAX_LIMIT}, got {value!r}")
    return value


def _chunks(items: Sequence[str], size: int = VALUES_CHUNK) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class SparqlGraph(AbstractContextManager):  # `with` closes it
    """A KnowledgeGraph over any engine that answers SPARQL SELECT queries.

    Thread-safe: the cache and counters are locked, engines are safe to call concurrently.
    `mediator_facts` caps how many facts one mediator node shows.
    """

    def __init__(
        self,
        engine: Engine,
        dialect: Dialect,
        *,
        name: str | None = None,
        cache_size: int = 4096,
        mediator_facts: int = 32,
    ) -> None:
        self.engine = engine
        self.dialect = dialect
        self.name = name or f"{dialect.name}@{engine.name}"
        self.mediator_facts = mediator_facts
        self._cache: LRUCache[tuple[Row, ...]] = LRUCache(cache_size)
        self._stats = KGStats()
        self._lock = threading.Lock()
        self._label_index: dict[str, list[str]] | None = None

    # -- plumbing ------------------------------------------------------------------------------------
    def _select(self, kind: str, query: str) -> tuple[Row, ...]:
        cached = self._cache.get(query)
        if not LRUCache.missing(cached):
            with self._lock:
                self._stats.cache_hits += 1
            return cached  # type: ignore[return-value]
        started = time.perf_counter()
        try:
            rows = tuple(self.engine.select(query))
        except KGError:
            with self._lock:
                self._stats.errors += 1
            raise
        finally:
            elapsed = time.perf_counter() - started
            with self._lock:
                self._stats.seconds += elapsed
                self._stats.by_kind[kind] += 1
        self._cache.put(query, rows)
        return rows

    def _entity_ref(self, entity: str) -> str:
        return iri_ref(self.dialect.entity_iri(entity))

    def _relation_ref(self, relation: str) -> str:
        return iri_ref(self.dialect.relation_iri(relation))

    def _values(self, iris: Iterable[str]) -> str:
        return " ".join(iri_ref(i) for i in iris)

    @staticmethod
    def _per_predicate(bound: str, values: str, subject: str, obj: str, predicates: Sequence[str]) -> str:
        """`VALUES bound {values}` matched by `subject <p> obj` for each predicate in turn: one UNION branch per
        predicate, bound to `?p`. Why not `VALUES ?p {..}`: pyoxigraph joins `VALUES ?x {..} VALUES ?p {..} ?x ?p ?o`
        by scanning every triple of the store (38 ms for 20 labels on 200k triples, linear in the store: minutes at
        Freebase's size), while a constant predicate is an index look-up (0.2 ms). A two-variable `VALUES (?l ?p)`
        block was as fast on pyoxigraph, but Virtuoso 7 matched no language-tagged literal in it."""
        return " UNION ".join(
            f"{{ VALUES {bound} {{ {values} }} {subject} {iri_ref(p)} {obj} BIND({iri_ref(p)} AS ?p) }}"
            for p in predicates
        )

    # -- the KnowledgeGraph interface ----------------------------------------------------------------
    def relations(self, entity: str, direction: Direction | str = Direction.OUT) -> list[Relation]:
        """Relations leaving (OUT) or entering (IN) `entity`, after the dialect's filter, sorted."""
        direction = _direction(direction)
        ref = self._entity_ref(entity)
        pattern = f"{ref} ?r ?x" if direction is Direction.OUT else f"?x ?r {ref}"
        rows = self._select("relations", f"SELECT DISTINCT ?r WHERE {{ {pattern} }}")
        found: set[str] = set()
        for row in rows:
            term = row.get("r")
            if term is None or not term.is_iri:
                continue
            rel = self.dialect.relation_id(term.value)
            if rel is not None and self.dialect.keep_relation(rel):
                found.add(rel)
        return [Relation(rel, direction) for rel in sorted(found)]

    def relations_back(self, entity: str, origin: str) -> list[Relation]:
        """Relations by which `entity` reaches `origin` and nothing else: the way back a step came by.

        PoG drops the relation a step arrived by; Freebase also stores most facts a second time under
        a paired reverse predicate (film.music_contributor.film / film.film.music), which that rule
        misses, so a model copying its demos walks straight back. One query for both directions.
        Empty, with no query, for a dialect without paired predicates: there a walk back can be the
        question's real path (PathQuestion asks for "the couple of julie_london 's couple")."""
        ref, back = self._entity_ref(entity), self._entity_ref(origin)  # validated even when unused
        if not self.dialect.paired_reverse_predicates:
            return []
        only_out = f"{ref} ?r {back} . FILTER NOT EXISTS {{ {ref} ?r ?x . FILTER(?x != {back}) }}"
        only_in = f"{back} ?r {ref} . FILTER NOT EXISTS {{ ?x ?r {ref} . FILTER(?x != {back}) }}"
        query = (f'SELECT DISTINCT ?r ?d WHERE {{ {{ {only_out} BIND("out" AS ?d) }} '
                 f'UNION {{ {only_in} BIND("in" AS ?d) }} }}')
        found: set[Relation] = set()
        for row in self._select("relations_back", query):
            term, way = row.get("r"), row.get("d")
            if term is None or not term.is_iri or way is None:
                continue
            rel = self.dialect.relation_id(term.value)
            if rel is not None and self.dialect.keep_relation(rel):
                found.add(Relation(rel, Direction(way.value)))
        return sorted(found, key=lambda r: (r.id, r.direction.value))

    def neighbors(
        self, entity: str, relation: str, direction: Direction | str = Direction.OUT, limit: int = 100
    ) -> list[Entity]:
        """Entities reached from `entity` through `relation`, labelled, mediators expanded, sorted by id."""
        direction = _direction(direction)
        limit = _limit(limit)
        ref, rel = self._entity_ref(entity), self._relation_ref(relation)
        pattern = f"{ref} {rel} ?x" if direction is Direction.OUT else f"?x {rel} {ref}"
        rows = self._select("neighbors", f"SELECT DISTINCT ?x WHERE {{ {pattern} }} LIMIT {limit}")
        literals: dict[str, Entity] = {}
        nodes: dict[str, str] = {}  # id -> IRI
        for row in rows:
            term = row.get("x")
            if term is None:
                continue
            if term.is_literal:
                literals.setdefault(term.value, Entity(term.value, term.value, literal=True))
            elif term.is_iri:
                node = self.dialect.entity_id(term.value)
                if node is not None:
                    nodes[node] = term.value
        out = list(literals.values())
        if nodes:
            out += self._describe_nodes(nodes, came_from=entity)
        return sorted(out, key=lambda e: (e.literal, e.id))

    def count_neighbors(self, entity: str, relation: str, direction: Direction | str = Direction.OUT) -> int:
        """How many distinct nodes `neighbors` would reach without a limit (one COUNT query): what a caller
        that fetched a hub's first N needs to say how much it did not see."""
        direction = _direction(direction)
        ref, rel = self._entity_ref(entity), self._relation_ref(relation)
        pattern = f"{ref} {rel} ?x" if direction is Direction.OUT else f"?x {rel} {ref}"
        rows = self._select("count_neighbors", f"SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE {{ {pattern} }}")
        term = rows[0].get("n") if rows else None
        try:
            return int(term.value) if term is not None else 0
        except ValueError:
            return 0

    def labels(self, entities: list[str]) -> dict[str, str]:
        """Labels of many entities, fetched in VALUES batches; an unlabelled entity maps to its fallback label."""
        ids = list(dict.fromkeys(entities))
        iris = {e: self.dialect.entity_iri(e) for e in ids}  # validates every id before any query
        if self.dialect.labels_are_ids:
            return {e: e for e in ids}
        found = self._node_info(iris, with_types=False)
        return {e: found[e][0] if found[e][0] is not None else self.dialect.fallback_label(e) for e in ids}

    def find_entities(self, text: str, limit: int = 10) -> list[Entity]:
        """Entities whose label is `text` (exact), else a variant spelling, else (small embedded stores) a
        normalised match. Never a regex scan on an endpoint."""
        if not isinstance(text, str):
            raise InvalidIdentifier(f"find_entities needs text, got {type(text).__name__}")
        limit = _limit(limit)
        text = text.strip()
        if not text or len(text) > MAX_TEXT:
            return []
        ids = self._match_labels([text])
        if not ids:
            ids = self._match_labels(spelling_variants(text))
        if not ids and self.engine.can_scan_labels:
            ids = sorted(self._scan_index().get(normalise_label(text), []))
        ids = ids[:limit]
        names = self.labels(ids) if ids else {}
        return [Entity(i, names.get(i, i)) for i in ids]

    def stats(self) -> KGStats:
        """A copy of the counters (queries run, cache hits, errors, seconds, queries by kind)."""
        with self._lock:
            s = self._stats
            return KGStats(Counter(s.by_kind), s.cache_hits, s.errors, s.seconds)

    def close(self) -> None:
        self._cache.clear()
        self.engine.close()

    # -- extras --------------------------------------------------------------------------------------
    def count_triples(self) -> int:
        """Triples in the engine (all graphs); uncached, for checks that nothing changed."""
        return self.engine.count_triples()

    def clear_cache(self) -> None:
        self._cache.clear()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<SparqlGraph {self.name!r} dialect={self.dialect.name} engine={self.engine.kind}>"

    # -- internals -----------------------------------------------------------------------------------
    def _node_info(self, iris: dict[str, str], *, with_types: bool) -> dict[str, tuple[str | None, frozenset[str]]]:
        """Best label and type ids of each node, in VALUES batches."""
        preds = list(self.dialect.label_predicates)
        type_pred = self.dialect.type_predicate if with_types else None
        if type_pred:
            preds.append(type_pred)
        by_iri = {iri: node for node, iri in iris.items()}
        best: dict[str, tuple[int, str]] = {}
        types: dict[str, set[str]] = {}
        for chunk in _chunks(sorted(by_iri)):
            query = f"SELECT ?x ?p ?o WHERE {{ {self._per_predicate('?x', self._values(chunk), '?x', '?o', preds)} }}"
            for row in self._select("labels", query):
                x, p, o = row.get("x"), row.get("p"), row.get("o")
                if x is None or p is None or o is None or x.value not in by_iri:
                    continue
                node = by_iri[x.value]
                if type_pred and p.value == type_pred:
                    if o.is_iri:
                        type_id = self.dialect.relation_id(o.value)
                        if type_id:
                            types.setdefault(node, set()).add(type_id)
                elif o.is_literal:
                    key = (self.dialect.label_rank(o.lang), clean(o.value))  # KG text is outside text
                    if node not in best or key < best[node]:
                        best[node] = key
        return {node: (best[node][1] if node in best else None, frozenset(types.get(node, ()))) for node in iris}

    def _describe_nodes(self, nodes: dict[str, str], *, came_from: str) -> list[Entity]:
        dialect = self.dialect
        if dialect.labels_are_ids:
            return [Entity(node, node) for node in nodes]
        info = self._node_info(nodes, with_types=dialect.wants_types)
        mediators = (
            [n for n, (label, kinds) in info.items() if dialect.is_mediator(named=label is not None, types=kinds)]
            if dialect.expands_mediators
            else []
        )
        facts = self._mediator_facts({n: nodes[n] for n in mediators}, came_from=came_from) if mediators else {}
        out = []
        for node, (label, _kinds) in info.items():
            text = label if label is not None else dialect.fallback_label(node)
            out.append(Entity(node, text, facts=facts.get(node, ())))
        return out

    def _mediator_facts(self, nodes: dict[str, str], *, came_from: str) -> dict[str, tuple[tuple[str, Entity], ...]]:
        """Each mediator's outgoing facts (filtered relations, the way back to `came_from` dropped), labelled."""
        by_iri = {iri: node for node, iri in nodes.items()}
        raw: dict[str, list[tuple[str, str, bool]]] = {}  # node -> (relation, value/id, literal?)
        for chunk in _chunks(sorted(by_iri)):
            query = f"SELECT ?m ?r ?y WHERE {{ VALUES ?m {{ {self._values(chunk)} }} ?m ?r ?y }}"
            for row in self._select("mediator_facts", query):
                m, r, y = row.get("m"), row.get("r"), row.get("y")
                if m is None or r is None or y is None or m.value not in by_iri or not r.is_iri:
                    continue
                rel = self.dialect.relation_id(r.value)
                if rel is None or not self.dialect.keep_relation(rel):
                    continue
                if y.is_literal:
                    raw.setdefault(by_iri[m.value], []).append((rel, y.value, True))
                elif y.is_iri:
                    target = self.dialect.entity_id(y.value)
                    if target is not None and target != came_from:
                        raw.setdefault(by_iri[m.value], []).append((rel, target, False))
        targets = sorted({value for items in raw.values() for _, value, lit in items if not lit})
        names = self.labels(targets) if targets else {}
        out: dict[str, tuple[tuple[str, Entity], ...]] = {}
        for node, items in raw.items():
            unique = sorted(set(items))[: self.mediator_facts]
            out[node] = tuple(
                (rel, Entity(value, value, literal=True) if lit else Entity(value, names.get(value, value)))
                for rel, value, lit in unique
            )
        return out

    def _match_labels(self, spellings: list[str]) -> list[str]:
        """Ids of entities with a label exactly equal to one of `spellings` (indexed lookups), sorted."""
        if not spellings:
            return []
        literals = " ".join(lit for s in spellings for lit in self.dialect.label_literals(s))
        branches = self._per_predicate("?l", literals, "?e", "?l", list(self.dialect.label_predicates))
        query = f"SELECT DISTINCT ?e WHERE {{ {branches} }} LIMIT {MAX_LIMIT}"
        found = set()
        for row in self._select("find", query):
            term = row.get("e")
            if term is not None and term.is_iri:
                node = self.dialect.entity_id(term.value)
                if node is not None:
                    found.add(node)
        return sorted(found)

    def _scan_index(self) -> dict[str, list[str]]:
        """normalised label -> ids, built once from every label (only on small embedded stores)."""
        if self._label_index is None:
            preds = self._values(self.dialect.label_predicates)
            rows = self._select("find_scan", f"SELECT ?e ?l WHERE {{ VALUES ?p {{ {preds} }} ?e ?p ?l }}")
            index: dict[str, list[str]] = {}
            for row in rows:
                e, lab = row.get("e"), row.get("l")
                if e is None or lab is None or not e.is_iri or not lab.is_literal:
                    continue
                node = self.dialect.entity_id(e.value)
                if node is not None:
                    bucket = index.setdefault(normalise_label(lab.value), [])
                    if node not in bucket:
                        bucket.append(node)
            self._label_index = index
        return self._label_index
