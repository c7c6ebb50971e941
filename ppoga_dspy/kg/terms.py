"""The neutral row format both engines return, and the only places SPARQL text is built from data.

An engine answers a SELECT query with a list of rows, each row a dict from variable name to `Term`.
The embedded store and a remote endpoint convert their own result objects into this one shape,
so the graph layer above never knows which engine ran the query.

Everything a dialect writes into a query passes through `iri_ref` or `string_literal` here: an
IRI is checked against the SPARQL/N-Triples IRIREF grammar (no quotes, angle brackets, braces,
spaces or controls) and a literal is escaped, so a caller's text can never close the term it sits in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ppoga_dspy.kg.base import InvalidIdentifier


@dataclass(frozen=True, slots=True)
class Term:
    """One RDF term in a result row: kind is "uri", "literal" or "bnode"."""

    kind: str
    value: str
    lang: str | None = None
    datatype: str | None = None

    @property
    def is_iri(self) -> bool:
        return self.kind == "uri"

    @property
    def is_literal(self) -> bool:
        return self.kind == "literal"


Row = dict[str, Term]

# IRIREF of SPARQL 1.1 / N-Triples: any character except controls, space and <>"{}|^`\ ; plus a scheme.
_IRI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\x00-\x20<>\"{}|^`\\\x7f]*")
_LANG = re.compile(r"[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*")
_MAX_IRI = 4096


def is_valid_iri(iri: str) -> bool:
    """True when `iri` may be written between angle brackets in SPARQL without escaping.

    The pattern keeps it inside its brackets; pyoxigraph's RFC 3987 parser then refuses what a SPARQL
    engine's parser would (non-characters such as U+FFF0, bad percent escapes), so an accepted id always
    yields a query that parses (tests/kg/test_identifier_properties.py).
    """
    if not (isinstance(iri, str) and len(iri) <= _MAX_IRI and _IRI.fullmatch(iri)):
        return False
    import pyoxigraph

    try:
        pyoxigraph.NamedNode(iri)
    except ValueError:
        return False
    return True


def iri_ref(iri: str) -> str:
    """`<iri>` for a query, after checking the IRI cannot break out of its brackets."""
    if not is_valid_iri(iri):
        raise InvalidIdentifier(
            f"not a valid IRI: {iri!r}; an IRI needs a scheme (like http:) and no spaces, quotes, <, >, {{, }}, "
            "|, ^, ` or backslashes"
        )
    return f"<{iri}>"


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_ESCAPE_RE = re.compile(r'[\\"\n\r\t\b\f]')


def escape_string(text: str) -> str:
    """Escape text for the inside of a double-quoted SPARQL / N-Triples string."""
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], text)


def string_literal(text: str, lang: str | None = None) -> str:
    """`"text"` or `"text"@lang`, escaped so that any text stays inside the literal."""
    if not isinstance(text, str):
        raise InvalidIdentifier(f"expected text, got {type(text).__name__}")
    body = f'"{escape_string(text)}"'
    if lang:
        if not _LANG.fullmatch(lang):
            raise InvalidIdentifier(f"not a valid language tag: {lang!r} (expected something like 'en' or 'pt-BR')")
        return f"{body}@{lang}"
    return body
