"""`--stages fused`: the relation choice carried from the call before a step (DecomposePredict for the first step,
the ThinkEvaluate that proceeds for the others) takes the place of the step's SelectRelationPairs call when it
holds; anything else asks the call, as a retry always does. Paper mode is untouched. On the demo KG (the embedded
pyoxigraph store) with the scripted gold-path planner."""

from __future__ import annotations

from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.scripted.engine import ScriptedEngine
from ppoga_dspy.scripted.gold_path import gold_path_handlers

from .test_program import GOLD, QUESTION, stages
from .test_stage_modes import ask, carrying_nothing


def names(engine: ScriptedEngine) -> list[str]:
    return [name for name, _ in engine.requests]


def test_a_valid_carried_choice_skips_select_relation_pairs_and_walks_the_same_paths(demo_kg):
    asked, asked_engine = ask(demo_kg, carrying_nothing(gold_path_handlers(GOLD)), mode="fused")
    carried, engine = ask(demo_kg, gold_path_handlers(GOLD), mode="fused")
    assert names(asked_engine) == ["DecomposePredict", "SelectRelationPairs", "ThinkEvaluate", "SelectRelationPairs",
                                   "ThinkEvaluate"]
    assert names(engine) == ["DecomposePredict", "ThinkEvaluate", "ThinkEvaluate"]
    # the menus shown ahead are the ones each step's SelectRelationPairs call is shown: same code, ranking, width
    menus = [inputs["candidates"] for name, inputs in asked_engine.requests if name == "SelectRelationPairs"]
    ahead = [inputs["candidates"] for name, inputs in engine.requests if name in ("DecomposePredict", "ThinkEvaluate")]
    assert set(ahead[0]) == set(menus[0]), "the plan call's menus are ranked by the question alone: same relations"
    assert ahead[1] == menus[1], "the next step's menus, in the order the step would rank them"
    assert ahead[2] == [], "nothing to choose after the last step"
    assert [c["paths"] for c in carried.memory["step_cycles"]] == [c["paths"] for c in asked.memory["step_cycles"]]
    assert carried.answers == asked.answers == ["London"]
    assert len(stages(carried, "relations.carried")) == 2 and not stages(carried, "relations.carried_rejected")
    # building the menus ahead writes none of the step's own notes (the instruments read those once per menu)
    assert len(stages(carried, "relations.menu")) == len(stages(asked, "relations.menu"))
    assert [e["outputs"]["step"] for e in stages(carried, "relations.ahead")] == [0, 1]
    # ... and its KG queries are made once: the step reads the menus built ahead from the question's memo
    # (method/tools.py, MEMO_OPS), so fused mode asks the graph for each entity's relations as paper mode does
    paper, _ = ask(demo_kg, gold_path_handlers(GOLD), mode="paper")
    reads = [len(stages(run, "kg.relations")) for run in (paper, carried)]
    assert reads[1] == reads[0]
    for name in ("kg.relations_back", "kg.count_neighbors"):  # the way home; the way back's dead-end count
        assert len(stages(carried, name)) == len(stages(paper, name)), name
    assert carried.costs["kg_queries"] == paper.costs["kg_queries"]


def test_an_off_menu_carried_choice_falls_back_to_the_call(demo_kg):
    handlers = gold_path_handlers(GOLD)

    def off_menu(inputs):  # proceeds to step 2 naming a relation Nolan's menu does not hold
        reply = handlers["ThinkEvaluate"](inputs)
        return {**reply, "next_relations": ["Christopher Nolan: people.person.no_such_relation"]} \
            if reply["next_relations"] else reply

    fused, engine = ask(demo_kg, dict(handlers, ThinkEvaluate=off_menu), mode="fused")
    assert names(engine) == ["DecomposePredict", "ThinkEvaluate", "SelectRelationPairs", "ThinkEvaluate"]
    (rejected,) = stages(fused, "relations.carried_rejected")
    assert rejected["outputs"]["invalid"] == ["Christopher Nolan: people.person.no_such_relation"]
    assert fused.status == "ok" and fused.answers == ["London"]


def _fused_run(kg):
    from ppoga_dspy.method.memory import Memory, StrategicMemory
    from ppoga_dspy.method.question_run import QuestionRun
    from ppoga_dspy.method.tools import KGTools

    memory = Memory(StrategicMemory(question=QUESTION))
    run = QuestionRun(memory=memory, thresholds=Thresholds(), tools=None, stages="fused")
    run.tools = KGTools(kg, run.costs, memory)
    return run


def test_a_carried_choice_holds_only_on_the_menus_the_step_would_show_and_its_call_saw(demo_kg):
    from ppoga_dspy.method.memory import CarriedRelations
    from ppoga_dspy.method.relation_pairs import carried_indices, menu_lines

    run = _fused_run(demo_kg)
    inception = demo_kg.find_entities("Inception")[0]
    menus = PPoGA(demo_kg, stages="fused").executor.menus_ahead(
        run, question=QUESTION, objective="find the director", frontier=[inception], chains={}, step=0)
    lines = menu_lines(menus)
    assert "Inception: film.film.directed_by" in lines and len(menus) == 1
    seen = [inception.id]

    def held(*pairs: str, entities=seen):
        return carried_indices(run, CarriedRelations(pairs=list(pairs), entities=entities), menus, lines)

    assert held("Inception: film.film.directed_by") == [lines.index("Inception: film.film.directed_by")]
    assert held("Inception: film.film.directed_by", "Inception: no.such.relation") is None, "one pair off the menu"
    assert held() is None, "nothing chosen"
    assert held("Inception: film.film.directed_by", entities=[]) is None, "its call was not shown Inception's menu"
    assert carried_indices(run, None, menus, lines) is None
    notes = [e.stage for e in run.memory.trace if e.stage.startswith("relations.")]
    assert notes == ["relations.ahead", "relations.carried"] + ["relations.carried_rejected"] * 3
    rejected = [e.outputs for e in run.memory.trace if e.stage == "relations.carried_rejected"]
    assert rejected[0]["invalid"] == ["Inception: no.such.relation"] and rejected[2]["unseen"] == [inception.id]


def test_a_retry_after_path_correction_asks_the_call(demo_kg):
    handlers = gold_path_handlers(GOLD)
    tries = {"last step": 0}

    def fails_the_last_step_once(inputs):
        reply = handlers["ThinkEvaluate"](inputs)
        if inputs["next_step"] == "none" and not tries["last step"]:
            tries["last step"] += 1
            return {**reply, "decision": "correct_path", "answers": []}
        return reply

    # the scripted failure bans the right path, so the retry's relation is a mismatch a careful planner would retry
    # again: off, to count the calls of the carried choice alone
    fused, engine = ask(demo_kg, dict(handlers, ThinkEvaluate=fails_the_last_step_once), mode="fused",
                        correct_named_mismatch=False)
    # step 2's first try uses the choice carried from step 1's evaluation; its retry asks SelectRelationPairs
    assert names(engine) == ["DecomposePredict", "ThinkEvaluate", "ThinkEvaluate", "PredictOutcome",
                             "SelectRelationPairs", "ThinkEvaluate"]
    assert [(c["index"], c["attempt"], c["decision"]) for c in fused.memory["step_cycles"]] == [
        (0, 0, "proceed"), (1, 0, "correct_path"), (1, 1, "finish")]
    assert len(stages(fused, "relations.carried")) == 2
    trace = [e["stage"] for e in fused.trace]
    assert trace.index("path_correction") < trace.index("select_relation_pairs")


def test_paper_mode_makes_the_same_calls_with_the_same_inputs(demo_kg):
    paper, engine = ask(demo_kg, gold_path_handlers(GOLD), mode="paper")
    assert names(engine) == ["Decompose", "PredictOutcome", "SelectRelations", "Think", "Evaluate", "PredictOutcome",
                             "SelectRelations", "Think", "Evaluate", "Answer"]
    assert all("candidates" not in inputs for name, inputs in engine.requests if name != "SelectRelations")
    assert not [e for e in paper.trace if e["stage"].startswith("relations.") and e["stage"] != "relations.menu"]
    assert paper.answers == ["London"]
