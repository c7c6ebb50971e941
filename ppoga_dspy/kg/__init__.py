"""The KG layer: one KnowledgeGraph interface over Freebase, Wikidata, plain RDF and IRN KBs.

`open_kg(spec)` turns a file, a list of files, a store directory, an endpoint URL or an existing
KnowledgeGraph into a KnowledgeGraph. Importing this package loads neither pyoxigraph nor
SPARQLWrapper; the engines import them when a KG is opened.
"""

from ppoga_dspy.kg.base import (
    Direction,
    Entity,
    EntityNotFound,
    InvalidIdentifier,
    KGBadReplyError,
    KGEndpointDownError,
    KGError,
    KGLoadError,
    KGQueryError,
    KGSpecError,
    KGStats,
    KGTimeoutError,
    KGUnavailableError,
    KnowledgeGraph,
    Relation,
    Triple,
)
from ppoga_dspy.kg.dialects import (
    DIALECT_NAMES,
    Dialect,
    FreebaseDialect,
    FreebaseOntology,
    IrnDialect,
    RdfDialect,
    WikidataDialect,
    get_dialect,
)
from ppoga_dspy.kg.factory import open_kg
from ppoga_dspy.kg.graph import SparqlGraph

__all__ = [
    "DIALECT_NAMES",
    "Dialect",
    "Direction",
    "Entity",
    "EntityNotFound",
    "FreebaseDialect",
    "FreebaseOntology",
    "InvalidIdentifier",
    "IrnDialect",
    "KGError",
    "KGLoadError",
    "KGBadReplyError",
    "KGEndpointDownError",
    "KGQueryError",
    "KGSpecError",
    "KGStats",
    "KGTimeoutError",
    "KGUnavailableError",
    "KnowledgeGraph",
    "RdfDialect",
    "Relation",
    "SparqlGraph",
    "Triple",
    "WikidataDialect",
    "get_dialect",
    "open_kg",
]
