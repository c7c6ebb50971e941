"""A request's JSON schema read as the engine's decode-time constraints: every shape the program's signatures send
has a plan (so the loopback server answers them constrained), and a shape the engine cannot write has none (so
the server falls back to conforming a free reply, rather than claiming a schema it would not keep)."""

from __future__ import annotations

import dspy
import pytest

from ppoga_dspy.inference.constraints import CHOICE_LIMIT, Choice, ObjectList, OneOf
from ppoga_dspy.inference.schema_plan import FreeString, SchemaPlan, StringList, plan_for
from ppoga_dspy.lm.structured import reply_schema
from ppoga_dspy.signatures import executor, planner

CANDIDATES = ["film.film.directed_by", "film.film.starring", "film.film.music"]


def _signatures() -> list[type]:
    found = []
    for module in (planner, executor):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, dspy.Signature) and value is not dspy.Signature:
                found.append(value)
    return found


@pytest.mark.parametrize("signature", _signatures(), ids=lambda s: s.__name__)
def test_every_reply_schema_of_the_program_has_a_plan(signature):
    inputs = {"candidates": CANDIDATES} if "candidates" in signature.input_fields else {}
    schema = reply_schema(signature, inputs)
    plan = plan_for(schema)
    assert plan is not None and [name for name, _ in plan.fields] == list(schema["properties"])
    for name, value in plan.fields:
        prop = schema["properties"][name]
        if prop.get("type") == "array" and "enum" in prop.get("items", {}):
            assert value == Choice(tuple(CANDIDATES), limit=CHOICE_LIMIT)  # the schema's enum exactly
        elif "enum" in prop:
            assert value == OneOf(tuple(prop["enum"]))


def test_each_shape_gets_its_constraint():
    schema = {"type": "object", "properties": {
        "relations": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "a"]}, "maxItems": 1},
        "decision": {"type": "string", "enum": ["proceed", "finish"]},
        "thought": {"type": "string"},
        "answers": {"type": "array", "items": {"type": "string"}},
        "none": {"type": "array", "items": {"type": "string"}, "maxItems": 0},
        "steps": {"type": "array", "items": {"type": "object", "properties": {
            "objective": {"type": "string"}, "action": {"type": "string", "enum": ["explore", "memory"]}},
            "required": ["objective", "action"]}},
    }}
    assert plan_for(schema) == SchemaPlan(fields=(
        ("relations", Choice(("a", "b"), limit=1)), ("decision", OneOf(("proceed", "finish"))),
        ("thought", FreeString()), ("answers", StringList()), ("none", StringList(limit=0)),
        ("steps", ObjectList(("objective", "action"), options=(("action", ("explore", "memory")),))),
    ))
    assert plan_for({"enum": ["proceed", "finish"]}) == SchemaPlan(whole=OneOf(("proceed", "finish")))


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"count": {"type": "integer"}}},
    {"type": "object", "properties": {"ok": {"type": "boolean"}, "why": {"type": "string"}}},
    {"type": "object", "properties": {"inner": {"type": "object", "properties": {"x": {"type": "string"}}}}},
    {"type": "object", "properties": {"maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
    {"type": "object", "properties": {"levels": {"type": "array", "items": {"type": "integer", "enum": [1, 2]}}}},
    {"type": "object", "properties": {}},
    {"type": "array", "items": {"type": "string"}},
    "not a schema",
])
def test_a_shape_the_engine_cannot_write_has_no_plan(schema):
    assert plan_for(schema) is None
