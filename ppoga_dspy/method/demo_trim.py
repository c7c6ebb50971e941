"""How much of a knn demo's inputs a prompt shows (`DemoTrim`), apart from the pool so that the CLI can name the
defaults without loading DSPy."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ppoga_dspy.errors import ArtifactError, ConfigError

#: A demo's input strings are cut to this many characters, and its input lists to this many items (`DemoTrim`).
DEMO_CHARS = 200
DEMO_ITEMS = 4
#: What a cut string or list ends with, so the model sees that the demo's input went on.
ELLIPSIS = " …"


@dataclass(frozen=True)
class DemoTrim:
    """How much of a demo's inputs a prompt shows: `chars` per string, `items` per list (None: all of it).

    A demo teaches the shape of a reply; its inputs are there so the reply reads as an answer to them. The
    fused 3-hop evaluation's demos carried 500-character memories and the entity choice's demos lists of
    forty candidates: most of a call's prompt, computed again at every call because the demos change with the
    step. A cut list keeps the items the demo's reply names (so the demo never chooses what it does not show),
    then the first others; a cut string keeps its head, cut at a word.
    """

    chars: int | None = DEMO_CHARS
    items: int | None = DEMO_ITEMS

    def __post_init__(self) -> None:
        for name in ("chars", "items"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"demo {name} {value!r}: give a whole number of at least 1, or none to keep all")

    def apply(self, fields: dict[str, Any], inputs: Any) -> dict[str, Any]:
        """`fields` (a demo's inputs and outputs) with each of `inputs` that runs over the limits cut."""
        replies = [v for k, v in fields.items() if k not in inputs]
        cut = dict(fields)
        for name in inputs:
            value = fields.get(name)
            if isinstance(value, str) and self.chars is not None and len(value) > self.chars:
                cut[name] = _cut_text(value, self.chars)
            elif isinstance(value, list) and self.items is not None and len(value) > self.items:
                cut[name] = _cut_list(value, self.items, replies)
        return cut

    def to_dict(self) -> dict[str, int | None]:
        return {"chars": self.chars, "items": self.items}

    @classmethod
    def from_dict(cls, data: Any) -> DemoTrim:
        """A stored trim; a pool saved before trims existed (no entry) shows its demos whole, as it did."""
        if data is None:
            return cls(None, None)
        if not isinstance(data, dict):
            raise ArtifactError(f"the knn pool's demo trim is {data!r}, not {{'chars': N, 'items': N}}")
        try:
            return cls(data.get("chars"), data.get("items"))
        except ConfigError as exc:
            raise ArtifactError(f"the knn pool's demo trim is damaged ({exc}); compile it again") from exc


def _cut_text(text: str, chars: int) -> str:
    head = text[:chars]
    if " " in head[chars // 2:]:
        head = head[: head.rindex(" ")]
    return head.rstrip(" ,;:") + ELLIPSIS


def _cut_list(values: list[Any], items: int, replies: list[Any]) -> list[Any]:
    text = " ".join(str(r) for r in replies).casefold()
    names = [str(n).casefold() for r in replies if isinstance(r, list) for n in r if str(n).strip()]
    named = [i for i, v in enumerate(values) if _named_in(str(v).casefold(), text, names)][:items]
    others = [i for i in range(len(values)) if i not in named][: max(0, items - len(named))]
    return [values[i] for i in sorted(named + others)] + [ELLIPSIS.strip()]


def _named_in(item: str, replies: str, names: list[str]) -> bool:
    """Whether a list item is what the reply chooses (a candidate, "name  <- (from, relation)" or "entity:
    relation", written in the reply) or holds a name the reply lists (a fact naming an answer)."""
    from ppoga_dspy.signatures.executor import line_entity  # here: the CLI reads this module's defaults without DSPy

    head = line_entity(item)
    written = bool(head) and re.search(rf"(?<!\w){re.escape(head)}(?!\w)", replies) is not None
    return written or any(name in item for name in names)
