"""Structured outputs on every backend, end to end over loopback HTTP: the request carries the call's schema in the
backend's wire form (OpenAI `response_format`, vLLM `guided_json`, Ollama `format`, llama.cpp `json_schema`), the
project's server makes the reply obey it (here by conforming a scripted engine's free reply; the embedded engine
decodes under the schema, test_structured_embedded.py), and a served model that answers off the menu when
unconstrained names 0 non-candidates when constrained."""

from __future__ import annotations

import json

import pytest

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.evaluation.evaluate import run_evaluation, summarize
from ppoga_dspy.lm import LMConfigError, make_lm, serve_lm
from ppoga_dspy.lm.schema_replies import conform, requested_schema
from ppoga_dspy.lm.structured import reply_schema, wire_form, wire_kwargs
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.scripted.engine import ScriptedEngine
from ppoga_dspy.scripted.gold_path import gold_path_handlers, golds_from_examples
from ppoga_dspy.signatures.executor import SelectRelations
from ppoga_dspy.signatures.planner import Evaluate


@pytest.fixture(scope="module")
def examples():
    return load_dataset("demo", limit=2)


class OffMenuEngine(ScriptedEngine):
    """The gold-path planner, except that every choice also names something that is not on the menu, first.
    It records each request body's structured-output fields as the server passed them on (none: free text)."""

    def __init__(self, examples):
        handlers = gold_path_handlers(golds_from_examples(examples))
        relations, entities = handlers["SelectRelations"], handlers["SelectEntities"]
        handlers["SelectRelations"] = lambda i: {"relations": ["made.up.relation", *relations(i)["relations"]]}
        handlers["SelectEntities"] = lambda i: {**entities(i), "entities": ["Nobody Real", *entities(i)["entities"]]}
        super().__init__(handlers)


def test_the_reply_schema_makes_candidates_an_enum():
    schema = reply_schema(SelectRelations, {"question": "q", "step": "s", "entity": "e",
                                            "candidates": ["film.film.directed_by", "film.film.starring"]})
    assert schema["properties"]["relations"] == {"type": "array", "items": {
        "type": "string", "enum": ["film.film.directed_by", "film.film.starring"]}}
    assert schema["additionalProperties"] is False and schema["required"] == ["relations"]
    decision = reply_schema(Evaluate, {})["properties"]["decision"]
    assert set(decision["enum"]) >= {"proceed", "finish"}
    assert wire_kwargs("openai", SelectRelations, schema)["response_format"]["json_schema"]["strict"] is True
    assert wire_kwargs("vllm", SelectRelations, schema) == {"guided_json": schema}
    assert wire_kwargs("ollama", SelectRelations, schema) == {"format": schema}
    assert wire_kwargs("llamacpp", SelectRelations, schema) == {"json_schema": schema}


def test_the_setting_picks_the_wire_form():
    assert wire_form("openai/gpt-4o-mini") == "openai" and wire_form("hosted_vllm/qwen") == "vllm"
    assert wire_form("ollama_chat/llama3.2") == "ollama" and wire_form("openai/x", "llamacpp") == "llamacpp"
    assert wire_form("anthropic/claude-3-5-haiku-latest") is None  # auto: salvaged
    assert wire_form("openai/gpt-4o-mini", "off") is None and wire_form("local/embedded") is None
    with pytest.raises(LMConfigError, match="structured=provider"):
        wire_form("anthropic/claude-3-5-haiku-latest", "provider")
    with pytest.raises(LMConfigError, match="structured='sometimes'"):
        make_lm("openai/gpt-4o-mini", structured="sometimes")
    assert make_lm("openai/gpt-4o-mini").structured_form == "openai"


@pytest.mark.parametrize(("payload", "form"), [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}},
     "openai"),
    ({"guided_json": {"type": "object"}}, "vllm"),
    ({"extra_body": {"guided_json": {"type": "object"}}}, "vllm"),
    ({"format": {"type": "object"}}, "ollama"),
    ({"json_schema": {"type": "object"}}, "llamacpp"),
])
def test_the_server_reads_every_wire_form(payload, form):
    assert requested_schema(payload)[0] == form


def test_conform_keeps_members_only():
    schema = {"type": "object", "properties": {
        "entities": {"type": "array", "items": {"type": "string", "enum": ["Christopher Nolan", "Emma Thomas"]}},
        "decision": {"type": "string", "enum": ["proceed", "finish"]}, "rationale": {"type": "string"}},
        "required": ["entities", "decision", "rationale"]}
    reply = '{"entities": ["Nobody Real", "christopher nolan", "Christopher Nolan"], "decision": "Finish"}'
    assert json.loads(conform(reply, "openai", schema)) == {
        "entities": ["Christopher Nolan"], "decision": "finish", "rationale": ""}
    sections = ('[[ ## entities ## ]]\n["Emma Thomas", "x"]\n\n[[ ## decision ## ]]\nproceed\n\n'
                "[[ ## completed ## ]]")
    assert json.loads(conform(sections, "vllm", schema))["entities"] == ["Emma Thomas"]
    assert conform(" finish\n", "vllm-choice", {"enum": ["proceed", "finish"]}) == "finish"


def _run(spec: str, structured: str, examples, demo_kg, out):
    lm = make_lm(spec, structured=structured, cache=False, num_retries=0)
    # the Executor's choices are what is constrained: asked, not settled by the named-relation gate
    program = PPoGA(demo_kg, role_lms={"planner": lm, "executor": lm},
                    thresholds=Thresholds(follow_named_relations=False))
    rows = run_evaluation(program, examples, out=out, progress=False).rows
    return lm, summarize(rows)


@pytest.mark.parametrize(("provider", "structured", "form"), [
    ("openai", "auto", "openai"),        # OpenAI structured outputs (also SGLang, any OpenAI-compatible server)
    ("hosted_vllm", "auto", "vllm"),     # vLLM guided decoding
    ("openai", "ollama", "ollama"),      # Ollama's format schema, named explicitly
    ("openai", "llamacpp", "llamacpp"),  # llama.cpp server's json_schema
])
def test_constrained_over_http_names_only_candidates(provider, structured, form, examples, demo_kg, tmp_path):
    engine = OffMenuEngine(examples)
    with serve_lm(engine, model_name="off-menu") as server:
        free_lm, free = _run(f"{provider}/off-menu@{server.url}", "off", examples, demo_kg, tmp_path / "free.jsonl")
        assert free_lm.structured_form is None and not server.stats.structured
        assert free["choice_calls"] > 0 and free["non_candidate_choices"] > 0  # off the menu when free
        lm, constrained = _run(f"{provider}/off-menu@{server.url}", structured, examples, demo_kg,
                               tmp_path / "constrained.jsonl")
        assert lm.structured_form == form
        assert server.stats.structured[form] >= constrained["choice_calls"] > 0  # every call carried its schema
        # a scripted engine cannot decode under a schema: its free replies were conformed (lm/schema_replies.py)
        assert set(server.stats.structured_paths) == {(form, "conformed")}
        assert constrained["non_candidate_choices"] == 0
        assert constrained["hits@1"] >= free["hits@1"]
