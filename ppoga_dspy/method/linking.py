"""Topic entities: use the ones given, or link them from the question text.

Benchmarks give topic entities (id -> name); `ppoga ask` users usually do not. Linking tries the
question's word spans longest first against the KG's name lookup (exact, then normalised), keeps
non-overlapping matches, and skips spans made only of common words, so "Who directed Inception?"
links "Inception" and not "Who".
"""

from __future__ import annotations

import re

from ppoga_dspy.kg.base import Entity, InvalidIdentifier, KGUnavailableError

_STOP = set(
    "a an the of in on at to for from by with and or is are was were be been who whom whose what which where when "
    "how why does did do name list give me tell many much s 's ? play plays played".split()
)
_TOKEN = re.compile(r"[^\s?!,;:\"()]+")


def question_spans(question: str, max_words: int = 6) -> list[tuple[int, int, str]]:
    """Candidate (start, end, text) spans, longest first, then left to right."""
    tokens = [t.strip(".'") for t in _TOKEN.findall(question)]
    tokens = [t for t in tokens if t]
    spans = []
    for size in range(min(max_words, len(tokens)), 0, -1):
        for start in range(0, len(tokens) - size + 1):
            words = tokens[start : start + size]
            if all(w.lower() in _STOP for w in words):
                continue
            spans.append((start, start + size, " ".join(words)))
    return spans


def link_entities(tools, question: str, *, max_entities: int = 2, max_lookups: int = 60) -> list[Entity]:
    """Entities named in the question (non-overlapping spans, longest first)."""
    found: list[Entity] = []
    covered: set[int] = set()
    for lookups, (start, end, text) in enumerate(question_spans(question)):
        if lookups >= max_lookups or len(found) >= max_entities:
            break
        if covered.intersection(range(start, end)):
            continue
        try:
            matches = tools.find(text, 3)
        except KGUnavailableError:
            raise
        except InvalidIdentifier:
            continue
        if matches:
            found.append(matches[0])
            covered.update(range(start, end))
    return found


def resolve_topics(tools, question: str, topic_entities: dict[str, str] | list[str] | str | None) -> list[Entity]:
    """Turn whatever the caller gave into entities: ids with names, names to look up, or nothing (link)."""
    if isinstance(topic_entities, dict):
        return [Entity(str(k), str(v or k)) for k, v in topic_entities.items()]
    if isinstance(topic_entities, str):
        topic_entities = [topic_entities]
    if not topic_entities:
        return link_entities(tools, question)
    entities: list[Entity] = []
    for item in topic_entities:
        matches = tools.find(str(item), 1)
        if matches:
            entities.append(matches[0])
            continue
        try:
            label = tools.labels([str(item)]).get(str(item))
        except InvalidIdentifier:
            label = None
        if label:
            entities.append(Entity(str(item), label))
    return entities
