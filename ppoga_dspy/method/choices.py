"""Map a model's free-text choices back to real candidates.

Small models paraphrase, add numbering, quotes or explanations, or name things that do not exist.
A choice counts only when it can be tied to exactly one candidate; everything else is reported as
invalid so the caller can fall back (to the best-ranked candidate) and the trace shows what happened.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from ppoga_dspy.kg.names import normalize_name

_NUMBERING = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*")


def _key(text: str) -> str:
    return normalize_name(text)


def same_name(a: str, b: str) -> bool:
    """Names equal up to case, `_` vs space and punctuation ("Alan_PULIDO" == "alan pulido")."""
    return bool(_key(a)) and _key(a) == _key(b)


@dataclass
class Matched:
    indices: list[int] = field(default_factory=list)  # candidate indices, in the model's order, no repeats
    invalid: list[str] = field(default_factory=list)  # choices that named no (or several) candidates


def match_choices(
    choices: list[str] | str | None, candidates: list[str], *, aliases: list[str] | None = None
) -> Matched:
    """Tie each choice to one candidate: exact, then normalised, then unique containment, then close spelling.

    `aliases[i]`, when given, is a second name of candidate i (e.g. an entity's bare label beside the
    candidate line that also shows its fact).
    """
    if choices is None:
        choices = []
    if isinstance(choices, str):
        choices = [c for c in re.split(r"[\n,;]+", choices) if c.strip()]
    names = [[c] + ([aliases[i]] if aliases and aliases[i] else []) for i, c in enumerate(candidates)]
    keys = [[_key(n) for n in group] for group in names]
    result = Matched()
    for raw in choices:
        choice = _NUMBERING.sub("", str(raw)).strip().strip("'\"`")
        index = _resolve(choice, names, keys)
        if index is None:
            result.invalid.append(str(raw))
        elif index not in result.indices:
            result.indices.append(index)
    return result


def _resolve(choice: str, names: list[list[str]], keys: list[list[str]]) -> int | None:
    if not choice:
        return None
    exact = [i for i, group in enumerate(names) if choice in group]
    if len(exact) == 1:
        return exact[0]
    key = _key(choice)
    if not key:
        return None
    normal = [i for i, group in enumerate(keys) if key in group]
    if len(normal) == 1:
        return normal[0]
    if len(normal) > 1:
        return normal[0]  # the same name twice (e.g. both directions): the best-ranked one
    inside = [i for i, group in enumerate(keys) if any(k and (k in key or key in k) for k in group)]
    if len(inside) == 1:
        return inside[0]
    flat = {k: i for i, group in enumerate(keys) for k in group if k}
    close = difflib.get_close_matches(key, list(flat), n=2, cutoff=0.85)
    if len(close) == 1 or (close and flat[close[0]] == flat[close[-1]]):
        return flat[close[0]]
    return None
