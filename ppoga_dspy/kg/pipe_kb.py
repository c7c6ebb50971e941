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
from ppoga_dspy.kg.dialects import RDFS_LABEL, NamesDialect
from ppoga_dspy.kg.terms import escape_string

_SNIFF_LINES = 20


def looks_like_pipe_kb(path: str | Path) -> bool:
    """True when the first non-empty line is `a|b|c` and no early line has a tab (MetaQA), not IRN's `a<TAB>b<TAB>c`."""
    seen = 0
    try:
        with Path(path).open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                if "\t" in line or (seen == 0 and line.count("|") != 2):  # a later bad line is the importer's to name
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
    from ppoga_dspy.kg.base import InvalidIdentifier

    path = Path(path)
    if not path.is_file():
        raise KGLoadError(f"no such KG file: {path}")
    dialect = NamesDialect()
    seen = set() if seen is None else seen
    label = f"<{RDFS_LABEL}>"
    with path.open(encoding="utf-8", errors="strict") as handle:
        try:
            for number, line in enumerate(handle, 1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                parts = [p.strip() for p in line.split("|")]
                if len(parts) != 3 or not all(parts):
                    raise KGLoadError(
                        f"{path}:{number}: a MetaQA KB line needs exactly three |-separated fields "
                        f"(head|relation|tail); got {line[:120]!r}"
                    )
                head, relation, tail = parts
                try:
                    s, r, o = dialect.entity_iri(head), dialect.relation_iri(relation), dialect.entity_iri(tail)
                except InvalidIdentifier as exc:
                    raise KGLoadError(f"{path}:{number}: {exc}") from exc
                yield f"<{s}> <{r}> <{o}> .\n"
                for name, iri in ((head, s), (tail, o)):
                    if name not in seen:
                        seen.add(name)
                        yield f'<{iri}> {label} "{escape_string(name)}" .\n'
        except UnicodeDecodeError as exc:
            raise KGLoadError(f"{path} is not UTF-8 text ({exc}); MetaQA KBs are UTF-8 files") from exc
