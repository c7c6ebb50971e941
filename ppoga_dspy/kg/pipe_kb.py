"""MetaQA's KB format, `head|relation|tail` per line, read as RDF for the `names` dialect.

The WikiMovies KB of MetaQA names its entities by their text ("Monsters, Inc.", "Tom Hanks"), so
its triples go under http://ppoga-dspy.org/names/ with each name percent-encoded into its IRI, plus
one `rdfs:label` per entity so that find_entities matches a name with an indexed lookup. A `.txt`
file is told apart from an IRN (tab-separated) KB by its first lines: pipes and no tabs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ppoga_dspy.kg.base import KGLoadError
from ppoga_dspy.kg.delimited import delimited_ntriples
from ppoga_dspy.kg.dialects import NamesDialect

_SNIFF_LINES = 20


def looks_like_pipe_kb(path: str | Path) -> bool:
    """True when the first non-empty line has a `|` and no early line has a tab (MetaQA), not IRN's `a<TAB>b<TAB>c`.

    The first line's count of fields is not asked: a pipe KB whose first line has two or four fields is still a pipe
    KB, and its bad line is the importer's to name (as a MetaQA line, not as a bad IRN line)."""
    seen = 0
    try:
        with Path(path).open(encoding="utf-8-sig", errors="replace", newline="\n") as handle:
            for line in handle:
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                if "\t" in line or (seen == 0 and "|" not in line):
                    return False
                seen += 1
                if seen >= _SNIFF_LINES:
                    break
    except OSError:
        return False
    return seen > 0


def pipe_ntriples(path: str | Path, seen: set[str] | None = None) -> Iterator[str]:
    """N-Triples lines for a `head|relation|tail` KB: one per fact, an rdfs:label line per new entity.

    Every name goes through the `names` dialect, so a name the dialect would refuse at query time
    (a control character, a bad relation) is refused here, with its line number.
    """
    path = Path(path)
    if not path.is_file():
        raise KGLoadError(f"no such KG file: {path}")
    dialect = NamesDialect()
    return delimited_ntriples(
        path, set() if seen is None else seen, split=lambda line: line.split("|"),
        shape="a MetaQA KB line needs exactly three |-separated fields (head|relation|tail)",
        iris=lambda h, r, t: (dialect.entity_iri(h), dialect.relation_iri(r), dialect.entity_iri(t)), kind="MetaQA")
