"""The one name normaliser: how two spellings of an entity or relation name are compared everywhere.

Choice matching (a model's "alan pulido" vs the candidate "Alan_PULIDO"), dialect label matching
(`find_entities`) and the strict metrics all compare names through `normalize_name`, so a name that
matches in one place matches in the others. (PoG's lenient Hits@1 keeps PoG's own rule, see
`ppoga_dspy.evaluation.metrics`, because it reproduces PoG's published numbers.)
"""

from __future__ import annotations

import unicodedata

# Dropped without a trace: they sit inside one word ("O'Brien", "D.C.").
_JOINERS = {"'", "\u2019", "\u2018", "`", "."}


def normalize_name(text: str) -> str:
    """Case-folded, accents removed, apostrophes and dots dropped, other punctuation and `_` as space.

    >>> normalize_name("O'Brien"), normalize_name("O\u2019BRIEN")
    ('obrien', 'obrien')
    >>> normalize_name("Pelé"), normalize_name("Alan_PULIDO?")
    ('pele', 'alan pulido')
    >>> normalize_name("Washington, D.C."), normalize_name("  film.film.starring ")
    ('washington dc', 'filmfilmstarring')
    """
    decomposed = unicodedata.normalize("NFKD", str(text))
    out: list[str] = []
    for ch in decomposed:
        if unicodedata.combining(ch) or ch in _JOINERS:
            continue
        category = unicodedata.category(ch)
        out.append(" " if ch == "_" or category[0] in "PSZC" else ch)
    return " ".join("".join(out).casefold().split())


def relation_phrase(relation: str) -> str:
    """The words of a relation id, as a sentence says them: `people.person.place_of_birth (reverse)` -> `place of
    birth` (what a plan's expected outcome calls the entity a relation leads to)."""
    base = relation.replace(" (reverse)", "").strip()
    return base.rsplit(".", 1)[-1].replace("_", " ").strip() or base
