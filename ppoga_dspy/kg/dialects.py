"""What ids, labels, relation filters and mediator nodes look like in each KG family.

A dialect never runs a query. It turns the short ids callers use (`m.0abc`, `Q42`, `Alan_PULIDO`,
a full IRI) into IRIs after checking them, turns IRIs found in results back into ids, names the
label predicate, says which relations the Executor should see, and decides which nodes are
mediators (Freebase CVTs) whose facts are read through. The graph layer (graph.py) combines one
dialect with one engine.

Dialects: `freebase`, `wikidata`, `rdf` (plain RDF with rdfs:label) and `irn` (the tab-separated
KBs of PathQuestion / WC2014, stored under http://ppoga-dspy.org/irn/).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote, unquote

from ppoga_dspy.kg.base import InvalidIdentifier, KGError
from ppoga_dspy.kg.names import normalize_name
from ppoga_dspy.kg.terms import is_valid_iri, string_literal

RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
FREEBASE_NS = "http://rdf.freebase.com/ns/"
WIKIDATA_ENTITY = "http://www.wikidata.org/entity/"
WIKIDATA_DIRECT = "http://www.wikidata.org/prop/direct/"
IRN_BASE = "http://ppoga-dspy.org/irn/"
IRN_ENTITY = IRN_BASE + "entity/"
IRN_RELATION = IRN_BASE + "relation/"
NAMES_BASE = "http://ppoga-dspy.org/names/"
NAMES_ENTITY = NAMES_BASE + "entity/"
NAMES_RELATION = NAMES_BASE + "relation/"

DIALECT_NAMES = ("freebase", "wikidata", "rdf", "irn", "names")
ONTOLOGY_ENV = "PPOGA_GRAILQA_ONTOLOGY"


def _require_str(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidIdentifier(f"{what} must be a non-empty string, got {value!r}")
    return value


class Dialect:
    """Base dialect: ids are full IRIs, labels are rdfs:label, every relation is kept, no mediators."""

    name: ClassVar[str] = "rdf"
    label_predicates: tuple[str, ...] = (RDFS_LABEL,)
    # Predicate whose objects are a node's types; fetched with labels only when the dialect needs types.
    type_predicate: str | None = None
    # When true, an id is its own label (IRN) and labels() needs no query.
    labels_are_ids: bool = False
    # When true, the schema stores each fact twice, under a predicate and its paired reverse
    # (Freebase: film.film.music / film.music_contributor.film), so a relation that leads only back
    # where a step came from is never a question's path (see SparqlGraph.relations_back).
    paired_reverse_predicates: bool = False

    def __init__(self, *, language: str | None = "en") -> None:
        self.language = language

    # -- ids <-> IRIs ---------------------------------------------------------------------------
    def entity_iri(self, entity_id: str) -> str:
        """The IRI of `entity_id`, or InvalidIdentifier when it is not a well-formed id of this dialect."""
        iri = _require_str(entity_id, "an entity id")
        if not is_valid_iri(iri):
            raise InvalidIdentifier(
                f"{self.name} dialect: entity id {entity_id!r} is not a valid IRI (expected e.g. http://example.org/x)"
            )
        return iri

    def relation_iri(self, relation_id: str) -> str:
        """The IRI of `relation_id`, or InvalidIdentifier."""
        iri = _require_str(relation_id, "a relation id")
        if not is_valid_iri(iri):
            raise InvalidIdentifier(
                f"{self.name} dialect: relation id {relation_id!r} is not a valid IRI "
                "(expected e.g. http://example.org/p)"
            )
        return iri

    def entity_id(self, iri: str) -> str | None:
        """The id for an IRI found in a result, or None when the IRI is outside this dialect's entities."""
        return iri

    def relation_id(self, iri: str) -> str | None:
        """The id for a predicate IRI, or None when it is not a relation of this dialect."""
        return None if iri in self.label_predicates else iri

    # -- what the Executor sees ------------------------------------------------------------------
    def keep_relation(self, relation_id: str) -> bool:
        """False for relations the Executor should never be offered (schema bookkeeping, sameAs links)."""
        return True

    def fallback_label(self, entity_id: str) -> str:
        """The text shown for an entity without a label: the IRI's local name, percent-decoded."""
        local = re.split(r"[#/]", entity_id.rstrip("/#"))[-1] if "/" in entity_id or "#" in entity_id else entity_id
        return unquote(local) or entity_id

    def label_literals(self, text: str) -> list[str]:
        """SPARQL literals a stored label equal to `text` may be written as (with and without language)."""
        forms = [string_literal(text)]
        if self.language:
            forms.insert(0, string_literal(text, self.language))
        return forms

    def label_rank(self, lang: str | None) -> int:
        """Lower is better: the dialect's language first, then untagged, then any other language."""
        if self.language and lang and lang.lower() == self.language.lower():
            return 0
        return 1 if not lang else 2

    # -- mediators -------------------------------------------------------------------------------
    @property
    def wants_types(self) -> bool:
        """True when mediator detection needs each neighbour's types fetched with its labels."""
        return False

    @property
    def expands_mediators(self) -> bool:
        return False

    def is_mediator(self, *, named: bool, types: frozenset[str]) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} language={self.language!r}>"


class RdfDialect(Dialect):
    """Plain RDF: full IRIs as ids, rdfs:label else the IRI's local name; rdfs:label is not a relation."""

    name = "rdf"


class PrefixedDialect(Dialect):
    """A dialect whose ids are short local names under fixed namespaces, checked by a pattern each.

    Subclasses set the namespaces, the id patterns and the examples the error messages show; ids that
    do not match are refused before they reach a query (no injection through an id).
    """

    entity_ns: ClassVar[str]
    relation_ns: ClassVar[str]
    _ENTITY: ClassVar[re.Pattern[str]]
    _RELATION: ClassVar[re.Pattern[str]]
    entity_example: ClassVar[str]
    relation_example: ClassVar[str]

    def entity_iri(self, entity_id: str) -> str:
        return self._iri(entity_id, self._ENTITY, self.entity_ns, self.entity_example)

    def relation_iri(self, relation_id: str) -> str:
        return self._iri(relation_id, self._RELATION, self.relation_ns, self.relation_example)

    def entity_id(self, iri: str) -> str | None:
        return _local_id(iri, self.entity_ns, self._ENTITY)

    def relation_id(self, iri: str) -> str | None:
        return _local_id(iri, self.relation_ns, self._RELATION)

    def _iri(self, local: str, pattern: re.Pattern[str], namespace: str, expected: str) -> str:
        if not isinstance(local, str) or not pattern.fullmatch(local):
            raise InvalidIdentifier(f"{self.name} dialect: {local!r} is not a valid {expected}")
        return namespace + local


def _local_id(iri: str, namespace: str, pattern: re.Pattern[str]) -> str | None:
    """The local name of `iri` under `namespace` when it matches the dialect's pattern, else None."""
    if not iri.startswith(namespace):
        return None
    local = iri[len(namespace) :]
    return local if pattern.fullmatch(local) else None


class WikidataDialect(PrefixedDialect):
    """Wikidata: entities `Q42` (also `P31`, `L1` as objects), truthy relations `P31` under wdt:."""

    name = "wikidata"
    entity_ns = WIKIDATA_ENTITY
    relation_ns = WIKIDATA_DIRECT
    _ENTITY = re.compile(r"[QPL][1-9][0-9]{0,11}")
    _RELATION = re.compile(r"P[1-9][0-9]{0,11}")
    entity_example = "Wikidata entity id (expected e.g. Q42)"
    relation_example = "Wikidata property id (expected e.g. P31)"

    def fallback_label(self, entity_id: str) -> str:
        return entity_id


# -- Freebase ---------------------------------------------------------------------------------------

# Topic types that every entity carries; they must never make a node a mediator.
_UNIVERSAL_TYPE_DOMAINS = ("type.",)
_UNIVERSAL_TYPES = frozenset({"common.topic"})


@dataclass(frozen=True)
class FreebaseOntology:
    """The part of the GrailQA Freebase schema the dialect needs: which types are mediators (CVTs).

    A mediator type is a type that is the domain of some property in `fb_roles` but is not declared
    `meta.subclassOf common.topic` in `fb_types` (film.performance, people.marriage, ...).
    """

    folder: Path
    mediator_types: frozenset[str]

    @classmethod
    def load(cls, folder: str | Path) -> FreebaseOntology:
        root = Path(folder)
        roles, types = root / "fb_roles", root / "fb_types"
        if not roles.is_file() or not types.is_file():
            raise KGError(
                f"{root} is not the GrailQA ontology folder: it needs the files fb_roles and fb_types "
                f"(pass the folder that holds them, or set {ONTOLOGY_ENV})"
            )
        domains: set[str] = set()
        with roles.open(encoding="utf-8-sig") as handle:
            for line in handle:
                parts = line.split()
                if len(parts) >= 3:
                    domains.add(parts[0])
        topics: set[str] = set()
        with types.open(encoding="utf-8-sig") as handle:
            for line in handle:
                parts = line.split()
                if len(parts) >= 3 and parts[1] == "meta.subclassOf" and parts[2] == "common.topic":
                    topics.add(parts[0])
        mediators = {
            t for t in domains - topics if t not in _UNIVERSAL_TYPES and not t.startswith(_UNIVERSAL_TYPE_DOMAINS)
        }
        return cls(folder=root, mediator_types=frozenset(mediators))


def find_ontology(path: str | Path | None = None) -> Path | None:
    """The GrailQA ontology folder: `path`, else $PPOGA_GRAILQA_ONTOLOGY, else ../shared/data beside the repo."""
    if path is not None:
        return Path(path)
    env = os.environ.get(ONTOLOGY_ENV)
    if env:
        return Path(env)
    beside = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "grailqa-ontology"
    return beside if (beside / "fb_roles").is_file() else None


@lru_cache(maxsize=4)
def _load_ontology(folder: str) -> FreebaseOntology:
    return FreebaseOntology.load(folder)


class FreebaseDialect(PrefixedDialect):
    """Freebase as served by the ToG/PoG Virtuoso setups: ns: IRIs, type.object.name labels, CVT nodes.

    `ontology` is the GrailQA ontology folder (or None to look for it, or False to never use one).
    It is read lazily, once, the first time a mediator decision needs it. Without it a node is a
    mediator exactly when it has no name.
    """

    name = "freebase"
    label_predicates = (FREEBASE_NS + "type.object.name",)
    paired_reverse_predicates = True
    type_predicate = FREEBASE_NS + "type.object.type"
    _ENTITY = re.compile(r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)+")
    _RELATION = re.compile(r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)+")
    entity_ns = relation_ns = FREEBASE_NS
    entity_example = "Freebase id (expected a mid like m.0d05w3 or g.11b6)"
    relation_example = "Freebase relation (expected dotted names like people.person.nationality)"

    def __init__(self, *, language: str | None = "en", ontology: str | Path | None | bool = None) -> None:
        super().__init__(language=language)
        self._ontology_arg = ontology
        self._ontology: FreebaseOntology | None = None
        self._ontology_loaded = False
        self._lock = threading.Lock()

    def keep_relation(self, relation_id: str) -> bool:
        """PoG's filter: drop type.object.type/name, common.*, freebase.* and sameAs links; keep kg.*, base.*.

        One addition to PoG's list: `type.object.key` (Freebase's internal key/namespace entries, on
        nearly every topic) never leads to an answer and only crowds the candidates.
        """
        return not (
            relation_id in ("type.object.type", "type.object.name", "type.object.key")
            or relation_id.startswith(("common.", "freebase."))
            or "sameAs" in relation_id
        )

    def fallback_label(self, entity_id: str) -> str:
        return entity_id

    @property
    def ontology(self) -> FreebaseOntology | None:
        """The loaded ontology, or None when none was given or found (read once, on first use)."""
        if not self._ontology_loaded:
            with self._lock:
                if not self._ontology_loaded:
                    arg = self._ontology_arg
                    folder = None if arg is False else find_ontology(None if arg in (None, True) else arg)
                    self._ontology = _load_ontology(str(folder)) if folder is not None else None
                    self._ontology_loaded = True
        return self._ontology

    @property
    def wants_types(self) -> bool:
        return self.ontology is not None

    @property
    def expands_mediators(self) -> bool:
        return True

    def is_mediator(self, *, named: bool, types: frozenset[str]) -> bool:
        """A CVT: a node without a name, or one typed with a mediator type of the ontology."""
        if not named:
            return True
        onto = self.ontology
        return bool(onto and types & onto.mediator_types)


# -- IRN tab-separated KBs --------------------------------------------------------------------------

# An IRN name: anything printable without whitespace (the KBs write spaces as `_`). Quotes and
# backslashes do occur (`David_\"Buck\"_Wheat`), so names are percent-encoded into IRIs.
# One name rule for the IRN loader (kg/importers.py) and the dialect, so a KB that loads can be queried: 1-1000
# characters, inner spaces allowed (MetaQA's names hold them), no tab, line break or control, no outer space.
_IRN_NAME = re.compile(r"[^\s\x00-\x1f\x7f-\x9f](?:[^\t\n\r\x0b\x0c\x00-\x1f\x7f-\x9f\u2028\u2029]{0,998}"
                       r"[^\s\x00-\x1f\x7f-\x9f])?")


def pql_relation(name: str) -> str:
    """PathQuestion-Large writes Freebase relations as `__people__person__gender`; read `people.person.gender`."""
    if name.startswith("__") and len(name) > 2:
        return ".".join(part for part in name[2:].split("__"))
    return name


class IrnDialect(Dialect):
    """IRN KBs (PathQuestion, WC2014): names as-is, relations as-is (PQL `__a__b__c` read as `a.b.c`)."""

    name = "irn"
    labels_are_ids = True

    def __init__(self, *, language: str | None = None) -> None:
        super().__init__(language=language)

    @staticmethod
    def check_name(value: object, what: str) -> str:
        """`value` when it is a valid IRN name (the loader stores only such names); else InvalidIdentifier."""
        if not isinstance(value, str) or not _IRN_NAME.fullmatch(value):
            raise InvalidIdentifier(
                f"irn dialect: {value!r} is not a valid {what} name (names are 1-1000 characters without "
                "tabs, line breaks, control characters or outer spaces)"
            )
        return value

    def entity_iri(self, entity_id: str) -> str:
        return IRN_ENTITY + quote(self.check_name(entity_id, "entity"), safe="")

    def relation_iri(self, relation_id: str) -> str:
        return IRN_RELATION + quote(pql_relation(self.check_name(relation_id, "relation")), safe="")

    def entity_id(self, iri: str) -> str | None:
        return unquote(iri[len(IRN_ENTITY) :]) if iri.startswith(IRN_ENTITY) else None

    def relation_id(self, iri: str) -> str | None:
        return unquote(iri[len(IRN_RELATION) :]) if iri.startswith(IRN_RELATION) else None

    def fallback_label(self, entity_id: str) -> str:
        return entity_id


# -- KBs whose entities are their names (MetaQA's `head|relation|tail`) -------------------------------

# A name: 1-1000 characters, no control characters, no leading or trailing space. Spaces, commas,
# quotes and brackets occur ("Monsters, Inc.", "Jack Frost"); the IRI percent-encodes them all.
_NAME = re.compile(r"(?=\S)[^\x00-\x1f\x7f]{1,1000}(?<=\S)")
_NAMED_RELATION = re.compile(r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*")


class NamesDialect(Dialect):
    """KBs that identify an entity by its name, spaces and punctuation included (MetaQA's WikiMovies KB).

    Ids are the names themselves; the IRI is the name percent-encoded under http://ppoga-dspy.org/names/,
    so any name maps to a valid IRI and nothing the caller writes can reach a query unescaped. Relations
    are plain identifiers (`directed_by`).
    """

    name = "names"
    labels_are_ids = True

    def __init__(self, *, language: str | None = None) -> None:
        super().__init__(language=language)

    def entity_iri(self, entity_id: str) -> str:
        if not isinstance(entity_id, str) or not _NAME.fullmatch(entity_id):
            raise InvalidIdentifier(
                f"names dialect: {entity_id!r} is not a valid entity name (1-1000 characters, no line breaks or "
                "control characters, no leading or trailing space)"
            )
        return NAMES_ENTITY + quote(entity_id, safe="")

    def relation_iri(self, relation_id: str) -> str:
        if not isinstance(relation_id, str) or len(relation_id) > 200 or not _NAMED_RELATION.fullmatch(relation_id):
            raise InvalidIdentifier(
                f"names dialect: {relation_id!r} is not a valid relation (letters, digits, _ and -, e.g. directed_by)"
            )
        return NAMES_RELATION + relation_id

    def entity_id(self, iri: str) -> str | None:
        return unquote(iri[len(NAMES_ENTITY) :]) if iri.startswith(NAMES_ENTITY) else None

    def relation_id(self, iri: str) -> str | None:
        local = iri[len(NAMES_RELATION) :] if iri.startswith(NAMES_RELATION) else None
        return local if local and _NAMED_RELATION.fullmatch(local) else None

    def fallback_label(self, entity_id: str) -> str:
        return entity_id


_DIALECTS: dict[str, type[Dialect]] = {
    "freebase": FreebaseDialect,
    "wikidata": WikidataDialect,
    "rdf": RdfDialect,
    "irn": IrnDialect,
    "names": NamesDialect,
}


def get_dialect(
    spec: str | Dialect, *, language: str | None = None, ontology: str | Path | None | bool = None
) -> Dialect:
    """A dialect from its name (`freebase`, `wikidata`, `rdf`, `irn`) or an existing Dialect (returned as is)."""
    if isinstance(spec, Dialect):
        return spec
    key = str(spec).strip().lower()
    cls = _DIALECTS.get(key)
    if cls is None:
        raise KGError(f"unknown KG dialect {spec!r}; choose one of: {', '.join(DIALECT_NAMES)}")
    kwargs: dict = {}
    if language is not None:
        kwargs["language"] = language
    if cls is FreebaseDialect:
        kwargs["ontology"] = ontology
    return cls(**kwargs)


# -- text matching for find_entities ----------------------------------------------------------------


def normalise_label(text: str) -> str:
    """Labels compare through the project's one name normaliser: "Alan_PULIDO?" -> "alan pulido"."""
    return normalize_name(text)


def spelling_variants(text: str, *, limit: int = 24) -> list[str]:
    """A few spellings of `text` to try as exact (indexed) label matches, the text itself excluded.

    Covers `_` vs space, lower/upper/title case and trailing punctuation, so an endpoint never needs a
    regex scan over all labels.
    """
    base = text.strip()
    stripped = base.rstrip("?.!,;:").strip()
    seeds: list[str] = []
    for seed in (base, stripped):
        seeds += [seed, seed.replace("_", " "), seed.replace(" ", "_")]
    out: list[str] = []
    seen = {text}
    for seed in seeds:
        words = seed.replace("_", " ").split(" ")
        caps = " ".join(w[:1].upper() + w[1:] for w in words)
        sep = "_" if "_" in seed else " "
        forms = (seed, seed.lower(), seed.upper(), seed.title(), seed[:1].upper() + seed[1:], caps.replace(" ", sep))
        for form in forms:
            if form and form not in seen:
                seen.add(form)
                out.append(form)
    return out[:limit]
