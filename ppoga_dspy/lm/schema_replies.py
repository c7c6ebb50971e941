"""The loopback server's side of structured outputs: read a request's schema in any wire form, and make the reply
obey it.

`lm/structured.py` sends a call's JSON schema the way each backend takes it; the project's server
(`lm/server.py`) must answer all of those forms, so that tests prove end to end over HTTP that the
request carries the schema and the reply obeys it:

| form | request field |
|---|---|
| OpenAI, SGLang | `response_format: {"type": "json_schema", "json_schema": {"schema": ...}}` |
| vLLM | `guided_json: schema`, `guided_choice: [...]` (also inside `extra_body`) |
| Ollama | `format: schema` |
| llama.cpp server | `json_schema: schema` |

An engine that can decode under the schema (the embedded engine: `EmbeddedEngine.complete_structured`, for
the shapes of `inference/schema_plan.py`) answers so by construction, and its reply is sent as it is. For any
other engine or shape the engine answers freely and `conform` is the fallback: it writes that answer as the
schema's object. The reply is read as JSON or as `[[ ## field ## ]]` sections, an `enum` array keeps only
members (an exact or a same-name match, no repeats), an `enum` string is the member it names (else the
first: a schema's reply has no "none of these"), and missing fields get their empty value. So a choice in
the reply is always one of the request's candidates, whatever the engine wrote.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SECTION = re.compile(r"\[\[ ## (\w+) ## \]\]\s*\n(.*?)(?=\n\s*\[\[ ## \w+ ## \]\]|\Z)", re.S)


def requested_schema(payload: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(wire form, schema) of a chat-completions body that asks for structured output; None for free text."""
    extra = payload.get("extra_body") if isinstance(payload.get("extra_body"), dict) else {}
    body = {**extra, **payload}
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        if isinstance(schema, dict):
            return "openai", schema
    if isinstance(body.get("guided_json"), dict):
        return "vllm", body["guided_json"]
    if isinstance(body.get("guided_choice"), list):
        return "vllm-choice", {"enum": [str(c) for c in body["guided_choice"]]}
    if isinstance(body.get("format"), dict):
        return "ollama", body["format"]
    if isinstance(body.get("json_schema"), dict):
        return "llamacpp", body["json_schema"]
    return None


def _norm(text: Any) -> str:
    return " ".join(str(text).replace("_", " ").split()).casefold()


def _member(value: Any, options: list[Any]) -> Any | None:
    if value in options:
        return value
    wanted = _norm(value)
    return next((o for o in options if _norm(o) == wanted), None)


def _read(text: str) -> dict[str, Any]:
    """The reply's fields: a JSON object anywhere in it, else its `[[ ## field ## ]]` sections (JSON-decoded)."""
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            found = json.loads(text[start:end + 1])
            if isinstance(found, dict):
                return found
        except json.JSONDecodeError:
            pass
    fields: dict[str, Any] = {}
    for name, raw in _SECTION.findall(text):
        value = raw.strip()
        try:
            fields[name] = json.loads(value)
        except json.JSONDecodeError:
            fields[name] = value
    return fields


def _conform_value(value: Any, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if "enum" in schema:
        options = list(schema["enum"])
        chosen = _member(value, options)
        return chosen if chosen is not None else (options[0] if options else "")
    if kind == "array":
        items = schema.get("items") or {}
        values = value if isinstance(value, list) else ([] if value in (None, "") else [value])
        if "enum" in items:
            kept: list[Any] = []
            for item in values:
                chosen = _member(item, list(items["enum"]))
                if chosen is not None and chosen not in kept:
                    kept.append(chosen)
            values = kept
        else:
            values = [_conform_value(v, items) if items else v for v in values]
        limit = schema.get("maxItems")
        return values[:limit] if isinstance(limit, int) else values
    if kind == "object":
        return conform_object(value if isinstance(value, dict) else {}, schema)
    if kind == "string":
        return value if isinstance(value, str) else ("" if value is None else json.dumps(value))
    return value


_EMPTY = {"string": "", "array": [], "object": {}, "boolean": False, "integer": 0, "number": 0}


def conform_object(fields: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """`fields` as the object `schema` describes: its properties only, each conformed, the required ones present."""
    properties = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for name, sub in properties.items():
        if name in fields:
            out[name] = _conform_value(fields[name], sub)
        elif name in (schema.get("required") or []):
            out[name] = _conform_value(None, sub) if ("enum" in sub or sub.get("type") == "array") else \
                _EMPTY.get(sub.get("type"), None)
    return out


def conform(text: str, form: str, schema: dict[str, Any]) -> str:
    """The engine's reply `text`, rewritten so that it obeys `schema` (JSON; a bare member for a choice)."""
    if form == "vllm-choice":
        chosen = _member(text.strip(), list(schema["enum"]))
        return str(chosen if chosen is not None else schema["enum"][0])
    return json.dumps(conform_object(_read(text), schema), ensure_ascii=False)
