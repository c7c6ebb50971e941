"""A request's JSON schema read as decode-time constraints: what each property of the reply may be.

The loopback server (`lm/server.py`) takes a structured-output request in each backend's wire form
(OpenAI `response_format`, vLLM `guided_json` / `guided_choice`, Ollama `format`, llama.cpp
`json_schema`); when it serves this engine, the engine writes the reply as the schema's object by
construction (`EmbeddedGenerator.generate_json`): the engine writes the braces, keys, quotes and
commas, and the model writes only the values, each through the constraint its schema gives:

| property schema | constraint |
|---|---|
| array of string `enum` (a choice) | `Choice`: a JSON list of members, no repeats, at most `maxItems` (or 3) |
| string `enum` (a decision) | `OneOf`: exactly one member, as a JSON string |
| array of objects of string properties (plan steps) | `ObjectList` (an `enum` property chosen among its members) |
| string | `FreeString`: one line of the model's text, escaped as a JSON string |
| array of strings | `StringList`: one to `OBJECT_LIMIT` free strings |

A whole schema that is a string `enum` (vLLM's `guided_choice`) is one `OneOf`. Any other shape (numbers,
booleans, nested objects, unions) makes `plan_for` return None: the engine does not claim a schema it
cannot keep, and the server answers that request freely and conforms the reply afterwards. Unlike the
prompt-read constraints of `constraints.py`, a choice here is the schema's `enum` exactly (the schema,
not the prompt, says what a valid reply is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ppoga_dspy.inference.constraints import CHOICE_LIMIT, OBJECT_LIMIT, Choice, ObjectList, OneOf, object_list


@dataclass(frozen=True)
class FreeString:
    """A JSON string the model writes (one line; cut at a quote or a newline)."""


@dataclass(frozen=True)
class StringList:
    """A JSON list of one to `limit` free strings."""

    limit: int = OBJECT_LIMIT


Value = Choice | OneOf | ObjectList | FreeString | StringList


@dataclass(frozen=True)
class SchemaPlan:
    """The reply's shape: an object's properties in order, each with its constraint; or one bare `OneOf`."""

    fields: tuple[tuple[str, Value], ...] = ()
    whole: OneOf | None = None  # the schema is a string enum (vLLM guided_choice): the reply is one member


def _strings(values: Any) -> tuple[str, ...] | None:
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        return tuple(dict.fromkeys(values))
    return None


def _limit(schema: dict[str, Any], default: int) -> int:
    limit = schema.get("maxItems")
    return min(default, limit) if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0 else default


def value_for(schema: Any) -> Value | None:
    """The constraint of one property's schema, or None for a shape the engine cannot write."""
    if not isinstance(schema, dict):
        return None
    if "enum" in schema:
        options = _strings(schema["enum"])
        return OneOf(options) if options is not None and schema.get("type", "string") == "string" else None
    kind = schema.get("type")
    if kind == "string":
        return FreeString()
    if kind != "array" or not isinstance(schema.get("items"), dict):
        return None
    items = schema["items"]
    if "enum" in items:
        options = _strings(items["enum"])
        if options is None or items.get("type", "string") != "string":
            return None
        return Choice(options, limit=_limit(schema, CHOICE_LIMIT))
    if items.get("type") == "string":
        return StringList(limit=_limit(schema, OBJECT_LIMIT))
    objects = object_list(schema)
    if objects is None:
        return None
    return ObjectList(objects.properties, limit=_limit(schema, objects.limit), options=objects.options)


def plan_for(schema: Any) -> SchemaPlan | None:
    """The constraints that write a reply obeying `schema`, or None when some part of it has no constraint here."""
    if not isinstance(schema, dict):
        return None
    if "enum" in schema and schema.get("type", "string") == "string":
        whole = value_for(schema)
        return SchemaPlan(whole=whole) if isinstance(whole, OneOf) else None
    properties = schema.get("properties")
    if schema.get("type", "object") != "object" or not isinstance(properties, dict) or not properties:
        return None
    fields = []
    for name, sub in properties.items():
        value = value_for(sub)
        if value is None:
            return None
        fields.append((str(name), value))
    return SchemaPlan(fields=tuple(fields))
