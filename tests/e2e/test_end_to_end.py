"""The whole program end to end: over real HTTP (the OpenAI wire format), and with the real embedded model."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.scripted.engine import ScriptedEngine
from ppoga_dspy.scripted.gold_path import gold_path_handlers, golds_from_examples
from tests.conftest import REPO

STAGES = {"decompose", "predict", "select_relations", "select_entities", "think", "evaluate", "replan", "answer"}


def test_program_over_two_loopback_openai_servers_one_per_role(demo_kg):
    """Per-role LMs through DSPy's HTTP client: wire format, routing and usage accounting."""
    from ppoga_dspy.lm import make_lm, serve_lm

    examples = [ex for ex in load_dataset("demo") if (ex.metadata.get("hops") or 0) >= 2][:3]
    golds = golds_from_examples(examples)
    planner_engine = ScriptedEngine(gold_path_handlers(golds))
    executor_engine = ScriptedEngine(gold_path_handlers(golds))
    with serve_lm(planner_engine, model_name="planner-model") as planner_server, \
            serve_lm(executor_engine, model_name="executor-model") as executor_server:
        role_lms = {
            "planner": make_lm(f"openai/planner-model@{planner_server.url}", cache=False),
            "executor": make_lm(f"openai/executor-model@{executor_server.url}", cache=False),
        }
        # the Executor's relation choices asked (not settled by the named-relation gate), so both roles are served
        program = PPoGA(demo_kg, role_lms=role_lms, thresholds=Thresholds(follow_named_relations=False))
        totals = {"planner": 0, "executor": 0, "tokens": 0}
        for example in examples:
            prediction = program(question=example.question, topic_entities=example.topic_entities)
            assert prediction.status == "ok", prediction.error
            assert prediction.answers and prediction.answers[0] in example.answers
            for role in ("planner", "executor"):
                totals[role] += prediction.costs["lm_calls_by_role"].get(role, 0)
            totals["tokens"] += prediction.costs["total_tokens"]
        assert planner_server.stats.requests == totals["planner"] > 0
        assert executor_server.stats.requests == totals["executor"] > 0
        assert set(executor_engine.calls) <= {"SelectRelations", "SelectEntities"}
        assert not set(planner_engine.calls) & {"SelectRelations", "SelectEntities"}
        served = sum(s.stats.prompt_tokens + s.stats.completion_tokens for s in (planner_server, executor_server))
        assert totals["tokens"] == served, "the program's token counts are the servers' usage figures"


@pytest.mark.slow
def test_real_embedded_model_answers_demo_questions_with_a_well_formed_trace(demo_kg):
    """The real local model drives every stage; accuracy is reported by the eval, not asserted here."""
    from ppoga_dspy.lm import make_lm

    lm = make_lm("local/embedded", cache=False, max_tokens=96)
    program = PPoGA(demo_kg, role_lms={"planner": lm, "executor": lm},
                    thresholds=Thresholds(max_steps=4, max_replans=1, max_path_corrections=1))
    examples = load_dataset("demo", split="test")[:2]
    for example in examples:
        prediction = program(question=example.question, topic_entities=example.topic_entities)
        assert prediction.status == "ok", prediction.error
        costs = prediction.costs
        assert costs["lm_calls"] >= 3 and costs["prompt_tokens"] > 0 and costs["completion_tokens"] > 0
        assert set(costs["lm_calls_by_stage"]) <= STAGES and "decompose" in costs["lm_calls_by_stage"]
        assert costs["lm_calls_by_role"]["planner"] >= 3 and costs["kg_queries"] > 0
        memory = prediction.memory
        assert memory["strategic"]["plan"] and memory["step_cycles"]
        assert all(c["decision"] in {"proceed", "correct_path", "replan", "finish"} for c in memory["step_cycles"])
        lm_stages = [e for e in prediction.trace if e["stage"] in STAGES]
        assert len(lm_stages) == costs["lm_calls"]
        json.dumps({"trace": prediction.trace, "memory": memory})
        assert isinstance(prediction.answers, list)


@pytest.mark.slow
def test_readme_main_command_answers_offline():
    """`ppoga ask` with no options: demo KG, embedded model, an answer and a trace on stdout."""
    result = subprocess.run([sys.executable, "-m", "ppoga_dspy.cli", "ask", "--json", "--set", "max_steps=3"],
                            cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode in (0, 3), result.stderr
    assert "embedded demo model" in result.stderr
    data = json.loads(result.stdout)
    assert data["lm"] == "local/gemma3-270m" and data["kg"].startswith("freebase@demo-kg")
    assert data["memory"]["step_cycles"] and data["costs"]["lm_calls"] > 0
