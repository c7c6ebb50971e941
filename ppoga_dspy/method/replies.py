"""Salvage usable outputs from a reply DSPy's adapter could not parse.

Small models often write the right content in the wrong shape: a bare relation name where a JSON
list was asked for, "finish." instead of `finish`, numbered lines instead of a list of plan steps.
Rather than throwing such a reply away, each output field's section is read leniently and coerced
to its declared type. The callers still validate the result (a choice must name a real candidate,
an answer salvaged from a malformed reply must name an entity seen on the graph), and the trace
marks the reply as salvaged.
"""

from __future__ import annotations

import json
import re
import typing
from typing import Any

_SECTION = re.compile(r"\[\[\s*##\s*(\w+)\s*##\s*\]\]\s*\n?(.*?)(?=\[\[\s*##|\Z)", re.S)
_BULLET = re.compile(r"^\s*(?:\d+[.):]|[-*•])\s*")


class Unsalvageable(ValueError):
    """Nothing usable for a field."""


def _items(raw: str) -> list[str]:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, ValueError):
        value = None
    if isinstance(value, list):
        return [json.dumps(v) if isinstance(v, dict) else str(v) for v in value]
    lines = [line for line in raw.splitlines() if line.strip()]
    if len(lines) <= 1:
        lines = re.split(r"[;,]", raw)
    items = [_BULLET.sub("", item).strip().strip("[]'\"` ").strip() for item in lines]
    return [item for item in items if item]


def coerce(raw: str, annotation: Any) -> Any:
    """`raw` text as a value of `annotation` (str, list[str], Literal[...], list[BaseModel])."""
    raw = raw.strip()
    origin = typing.get_origin(annotation)
    if annotation is str:
        if not raw:
            raise Unsalvageable("empty")
        return raw
    if origin is typing.Literal:
        options = typing.get_args(annotation)
        key = raw.casefold().replace(" ", "_")
        found = sorted((key.find(str(o).casefold()), str(o)) for o in options if str(o).casefold() in key)
        if not found:
            raise Unsalvageable(f"none of {options}")
        return found[0][1]
    if origin is list:
        (inner,) = typing.get_args(annotation) or (str,)
        items = _items(raw)
        if not items:
            raise Unsalvageable("no items")
        if inner is str:
            return items
        fields = getattr(inner, "model_fields", None)
        if fields:
            first = next(iter(fields))
            values = []
            for item in items:
                try:
                    values.append(inner.model_validate(json.loads(item)))
                except (json.JSONDecodeError, ValueError):
                    values.append(inner(**{first: item}))
            return values
    raise Unsalvageable(f"no rule for {annotation}")


def salvage(lm_response: Any, signature: Any) -> dict[str, Any] | None:
    """Every output field of `signature` read from the raw reply, or None when a required field has nothing usable.

    An optional field (one with a default) the reply leaves out is left out here too: the caller reads its default.
    """
    text = lm_response if isinstance(lm_response, str) else str(lm_response or "")
    sections = {name: body for name, body in _SECTION.findall(text)}
    outputs = signature.output_fields
    if not sections and len(outputs) == 1:
        sections = {next(iter(outputs)): text}
    values: dict[str, Any] = {}
    for name, field in outputs.items():
        raw = sections.get(name)
        if raw is None and not field.is_required():  # an optional output (fused signatures): its default
            continue
        if raw is None:
            return None
        try:
            values[name] = coerce(raw, field.annotation)
        except Unsalvageable:
            if field.is_required():
                return None
    return values
