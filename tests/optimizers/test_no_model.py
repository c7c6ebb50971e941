"""`--lm none`: the program with no model makes no LM call and answers exactly as its fallbacks do."""

from __future__ import annotations

import pytest

from ppoga_dspy.app import open_program
from ppoga_dspy.app.session import ProgramSettings
from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.evaluation.evaluate import answer_one
from ppoga_dspy.lm.errors import LMConfigError
from ppoga_dspy.lm.no_model import NoModel
from ppoga_dspy.lm.settings import LMSettings
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.scripted.engine import ScriptedEngine, scripted_lm

LM_STAGES = {"decompose", "predict", "think", "evaluate", "answer", "select_relations", "select_entities", "replan"}


@pytest.fixture(scope="module")
def questions():
    return load_dataset("demo")


def test_no_model_makes_no_call_and_every_stage_falls_back(questions):
    with open_program(ProgramSettings(lm=LMSettings(lm="none"))) as opened:
        assert opened.lm_description == "none"
        rows = [answer_one(opened.program, ex) for ex in questions]
    assert sum(r["call_num"] for r in rows) == 0 and sum(r["total_token"] for r in rows) == 0
    for row in rows:
        assert row["status"] == "ok"
        stages = [e for e in row["trace"] if e["stage"] in LM_STAGES]
        assert stages and all(e.get("error") == "no model (--lm none)" for e in stages)
        names = [e["stage"] for e in row["trace"]]
        assert "decompose.fallback" in names and "answer.fallback" in names
    assert any(r["metrics"]["hits@1"] for r in rows)  # the fallbacks alone answer some 1-hop questions


def test_no_model_answers_from_the_fallbacks_while_a_model_with_only_unusable_replies_fails(demo_kg, questions):
    """The baseline is the program's own fallbacks, taken without asking; a model that was asked and gave no usable
    reply at all is an LM failure (kind `lm`), never scored as the fallbacks' answer (issue 41)."""
    garbage = scripted_lm(ScriptedEngine(default=lambda inputs: ""))  # an empty reply: nothing to salvage
    none = PPoGA(demo_kg, role_lms={"planner": NoModel(), "executor": NoModel()})
    junk = PPoGA(demo_kg, role_lms={"planner": garbage, "executor": garbage})
    for example in questions:
        a, b = answer_one(none, example), answer_one(junk, example)
        assert a["status"] == "ok" and a["call_num"] == 0, example.question
        assert b["status"] == "failed" and b["error_kind"] == "lm" and b["call_num"] > 0, example.question


def test_no_model_refuses_a_direct_call():
    with pytest.raises(LMConfigError, match="without a model"):
        NoModel()(messages=[])
