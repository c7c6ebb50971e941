"""The compact adapter (lm/adapter.py): each field stated once, and every reader of our prompts still reads them —
the scripted engine, the embedded engine's field headers, decode-time constraints — with demos rendered and replies
parsed as ChatAdapter does."""

from __future__ import annotations

import dspy
import pytest

from ppoga_dspy.inference.constraints import constraints_for, read_prompt
from ppoga_dspy.inference.guided import adapter_output_fields
from ppoga_dspy.lm.adapter import STRUCTURE, CompactChatAdapter, compact_adapter, object_schema
from ppoga_dspy.scripted.engine import SIGNATURE_OUTPUTS, parse_request
from ppoga_dspy.signatures.executor import SelectEntities, SelectRelationPairs, SelectRelations
from ppoga_dspy.signatures.planner import Decompose, DecomposePredict, Evaluate, PlanStep, Replan, ThinkEvaluate

THINK_INPUTS = dict(question="Where was the director of Inception born?", step="find the director",
                    prediction="a person", observation="(Inception, directed_by, Christopher Nolan)",
                    memory="Plan:\n1. find the director [in progress]", next_step="find the birthplace",
                    candidates=["Christopher Nolan: people.person.place_of_birth",
                                "Christopher Nolan: film.director.film"])
ENTITY_LINES = ["Lionel Messi  <- (Argentina, squad)", "Sergio Aguero  <- (Argentina, squad)"]


def chats(signature, demos=(), **inputs):
    """The same request formatted by ChatAdapter and by the compact adapter."""
    return [adapter.format(signature, demos=list(demos), inputs=inputs)
            for adapter in (dspy.ChatAdapter(), CompactChatAdapter())]


def test_each_field_is_stated_once_and_the_system_message_is_much_shorter():
    full, compact = chats(ThinkEvaluate, **THINK_INPUTS)
    system = compact[0]["content"]
    assert "All interactions will be structured" not in system and "{observation}" not in system
    assert STRUCTURE in system and "Your objective:\nJudge this step's observation" in system
    for name, info in ThinkEvaluate.fields.items():
        assert system.count(f"`{name}`") == 1, name  # named once, in the field list, with its description
        assert info.json_schema_extra["desc"] in system or info.json_schema_extra["desc"] == f"${{{name}}}"
    assert len(system) < 0.75 * len(full[0]["content"])
    # the user message: ChatAdapter's input sections, then a closing reminder without type notes
    assert len(compact[1]["content"]) < len(full[1]["content"]) and "must be formatted" not in compact[1]["content"]
    assert compact[1]["content"].split("Respond with")[0] == full[1]["content"].split("Respond with")[0]


def test_a_schema_is_written_only_for_a_field_of_objects_without_titles():
    assert object_schema(list[str]) is None and object_schema(str) is None
    schema = object_schema(list[PlanStep])
    assert "title" not in str(schema) and schema["type"] == "array"
    system = chats(DecomposePredict, question="q", topic_entities=["A"])[1][0]["content"]
    assert system.count("JSON schema of") == 1 and "JSON schema of `steps`: " in system
    assert '"enum": ["explore", "intersect", "memory"]' in system


@pytest.mark.parametrize("signature, inputs", [
    (ThinkEvaluate, THINK_INPUTS),
    (SelectRelationPairs, dict(question="q", step="s", candidates=["A: r1", "A: r2 (reverse)"])),
    (DecomposePredict, dict(question="q", topic_entities=["A", "B"], candidates=["A: r1", "B: r2"])),
])
def test_the_scripted_engine_reads_the_same_request_from_both_formats(signature, inputs):
    full, compact = chats(signature, **inputs)
    parsed = [parse_request(chat[0]["content"], chat[-1]["content"]) for chat in (full, compact)]
    assert parsed[0] == parsed[1]
    outputs, seen, _ = parsed[1]
    assert SIGNATURE_OUTPUTS[frozenset(outputs)] == signature.__name__
    assert outputs == list(signature.output_fields) and set(seen) == set(inputs)


def test_constraints_and_field_headers_read_compact_prompts_as_they_read_chat_adapter_ones():
    requests = [
        (SelectRelations, dict(question="q", step="s", entity="e", candidates=["r1", "r2 (reverse)"])),
        (SelectEntities, dict(question="q", step="s", candidates=ENTITY_LINES)),
        (Evaluate, dict(question="q", plan="p", step="s", observation="o", thought="t", memory="m")),
        (Decompose, dict(question="q", topic_entities=["A"])),
        (Replan, dict(question="q", topic_entities=["A"], failed_plan="x", knowledge="k")),
        (ThinkEvaluate, THINK_INPUTS),
    ]
    for signature, inputs in requests:
        full, compact = chats(signature, **inputs)
        assert constraints_for(compact) == constraints_for(full), signature.__name__
        assert adapter_output_fields(compact) == list(signature.output_fields)
        assert read_prompt(compact).descriptions == read_prompt(full).descriptions
    entities = constraints_for(chats(SelectEntities, question="q", step="s", candidates=ENTITY_LINES)[1])
    assert entities["entities"].options == ("Lionel Messi", ENTITY_LINES[0], "Sergio Aguero", ENTITY_LINES[1])
    assert constraints_for(chats(Decompose, question="q", topic_entities=["A"])[1])["steps"].options == (
        ("action", ("explore", "intersect", "memory")),)


def test_relations_chosen_one_step_ahead_are_constrained_as_select_relation_pairs_is():
    """The fused calls that choose the next step's relations (ThinkEvaluate, DecomposePredict) reach the embedded
    engine's choice constraint and the hosted backends' enum by the same rule as SelectRelationPairs; the
    evaluation's answers, a list beside them, stay free."""
    from ppoga_dspy.inference.constraints import Choice, FreeText
    from ppoga_dspy.lm.structured import reply_schema

    lines = THINK_INPUTS["candidates"]
    pairs = constraints_for(chats(SelectRelationPairs, question="q", step="s", candidates=lines)[1])["pairs"]
    judged = constraints_for(chats(ThinkEvaluate, **THINK_INPUTS)[1])
    planned = constraints_for(chats(DecomposePredict, question="q", topic_entities=["A"], candidates=lines)[1])
    assert judged["next_relations"] == planned["first_relations"] == pairs == Choice(tuple(lines))
    chosen = {name for name, constraint in judged.items() if not isinstance(constraint, FreeText)}  # text: capped
    assert "answers" not in judged and chosen == {"decision", "next_relations"}
    schema = reply_schema(ThinkEvaluate, THINK_INPUTS)["properties"]
    assert schema["next_relations"]["items"]["enum"] == lines
    assert schema["answers"] == {"type": "array", "items": {"type": "string"}}
    planned_schema = reply_schema(DecomposePredict, {"candidates": lines})["properties"]
    assert planned_schema["first_relations"]["items"]["enum"] == lines


def test_demos_still_render_and_replies_parse_as_chat_adapter_parses_them():
    demo = dspy.Example(question="q0", step="s0", candidates=["A: r0"], pairs=["A: r0"])
    full, compact = chats(SelectRelationPairs, demos=[demo], question="q", step="s", candidates=["A: r1"])
    assert [m["role"] for m in compact] == ["system", "user", "assistant", "user"]
    assert compact[1:3] == full[1:3]  # the demo's turns are ChatAdapter's
    assert compact[3]["content"].endswith("Respond with `[[ ## pairs ## ]]`, then `[[ ## completed ## ]]`.")
    reply = '[[ ## pairs ## ]]\n["A: r1"]\n\n[[ ## completed ## ]]'
    assert CompactChatAdapter().parse(SelectRelationPairs, reply) == {"pairs": ["A: r1"]}


def test_the_program_runs_every_predictor_with_it():
    from ppoga_dspy.method.question_run import adapter_for

    class Local:
        model = "local/embedded"

    assert isinstance(adapter_for(None), CompactChatAdapter) and adapter_for(None).use_json_adapter_fallback
    assert not adapter_for(Local()).use_json_adapter_fallback  # a tiny in-process model is not re-asked in JSON
    assert not compact_adapter(json_fallback=False).use_json_adapter_fallback
