"""The loopback server in front of the embedded engine decodes a structured-output request under the engine's own
constraints: the reply is the schema's object by construction, for every wire form, and the response says so
(`X-PPoGA-Structured: constrained`); a schema shape the engine cannot constrain is answered freely and conformed
(`conformed`). End to end, PPoGA over HTTP with the OpenAI and vLLM wire forms gets only constrained replies and
names 0 non-candidates.

Marked slow: a real model (the session's embedded engine) answers every request on the CPU.
"""

from __future__ import annotations

import json
import urllib.request

import jsonschema
import pytest

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.evaluation.evaluate import run_evaluation, summarize
from ppoga_dspy.lm import make_lm, serve_lm
from ppoga_dspy.lm.server import STRUCTURED_HEADER
from ppoga_dspy.lm.structured import reply_schema, structured_adapter, wire_kwargs
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.signatures.executor import SelectRelations
from ppoga_dspy.signatures.planner import Evaluate

pytestmark = pytest.mark.slow

CHOICE = {"question": "Who directed Inception?", "step": "find the director of the film", "entity": "Inception",
          "candidates": ["film.film.directed_by", "film.film.starring", "film.film.initial_release_date"]}
DECISION = {"question": "Who directed Inception?", "plan": ["find the director of the film"],
            "step": "find the director of the film", "prediction": "a person",
            "observation": "(Inception, film.film.directed_by, Christopher Nolan)",
            "thought": "The director was found.", "missing": ""}


def _post(server, body: dict) -> tuple[str | None, str]:
    request = urllib.request.Request(f"{server.url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        path = response.headers.get(STRUCTURED_HEADER)
        return path, json.loads(response.read())["choices"][0]["message"]["content"]


def _body(signature, inputs: dict, **fields) -> dict:
    messages = structured_adapter("openai").format(signature, demos=[], inputs=inputs)
    return {"model": "gemma", "messages": messages, "max_tokens": 96, **fields}


@pytest.mark.parametrize("form", ["openai", "vllm", "ollama", "llamacpp"])
def test_every_wire_form_is_answered_under_the_engines_constraints(form, embedded_engine):
    evaluate_inputs = {k: v for k, v in DECISION.items() if k in Evaluate.input_fields}
    with serve_lm(embedded_engine) as server:
        for signature, inputs in ((SelectRelations, CHOICE), (Evaluate, evaluate_inputs)):
            schema = reply_schema(signature, inputs)
            path, text = _post(server, _body(signature, inputs, **wire_kwargs(form, signature, schema)))
            assert path == "constrained"
            jsonschema.validate(json.loads(text), schema)  # the schema's object: enums, required, nothing else
        assert server.stats.structured_paths == {(form, "constrained"): 2}


def test_guided_choice_is_one_bare_member_and_an_unconstrainable_shape_is_conformed(embedded_engine):
    with serve_lm(embedded_engine) as server:
        path, text = _post(server, _body(SelectRelations, CHOICE, guided_choice=["proceed", "finish"]))
        assert path == "constrained" and text in ("proceed", "finish")
        counted = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"],
                   "additionalProperties": False}  # an integer: no constraint of the engine writes one
        path, text = _post(server, _body(SelectRelations, CHOICE, guided_json=counted))
        assert path == "conformed"
        jsonschema.validate(json.loads(text), counted)
        assert server.stats.structured_paths == {("vllm-choice", "constrained"): 1, ("vllm", "conformed"): 1}


@pytest.mark.parametrize(("provider", "form"), [("openai", "openai"), ("hosted_vllm", "vllm")])
def test_ppoga_over_http_gets_constrained_replies_and_names_only_candidates(provider, form, embedded_engine,
                                                                            demo_kg, tmp_path):
    examples = load_dataset("demo", limit=1)
    with serve_lm(embedded_engine) as server:
        lm = make_lm(f"{provider}/gemma@{server.url}", cache=False, num_retries=0, max_tokens=192)
        assert lm.structured_form == form
        program = PPoGA(demo_kg, role_lms={"planner": lm, "executor": lm}, stages="fused",
                        thresholds=Thresholds(max_steps=1, max_path_corrections=0, max_replans=0))
        rows = run_evaluation(program, examples, out=tmp_path / "run.jsonl", progress=False).rows
        summary = summarize(rows)
        assert rows[0]["status"] == "ok"
        calls = rows[0]["costs"]["lm_calls"]
        # every call carried its schema and was decoded under it; none needed the conform fallback
        assert server.stats.structured_paths == {(form, "constrained"): calls} and calls == server.stats.requests
        assert summary["choice_calls"] > 0 and summary["non_candidate_choices"] == 0
