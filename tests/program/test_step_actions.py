"""Issue 11, points 7 and 8: a plan step may intersect two branches (a conjunction) or need no graph action.

`intersect` keeps only the entities reached from every topic entity, so "the film Christopher Nolan
directed that Heath Ledger acted in" is one step and its answer is the intersection, not the union.
A `memory` step (compare, count, pick among what was found) is answered by the Planner from memory:
no Executor call, no KG query.
"""

from __future__ import annotations

import dspy

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.evaluation.evaluate import score_program
from ppoga_dspy.method.planner import step_action
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.scripted.gold_path import gold_path_handlers, oracle_lm
from tests.conftest import shared_data
from tests.program.test_program import GOLD, QUESTION, mid, run, stages

BOTH = "Which film directed by Christopher Nolan did Heath Ledger act in?"
BOTH_GOLD = {BOTH: {"relations": ["film.director.film", "film.actor.film"], "entities": ["The Dark Knight"],
                    "answers": ["The Dark Knight"], "paths": [["film.director.film"], ["film.actor.film"]]}}


def test_unknown_actions_are_explorations():
    assert [step_action(a) for a in ("intersect", " Memory ", "explore", "jump", None)] == [
        "intersect", "memory", "explore", "explore", "explore"]


def test_an_intersect_step_keeps_what_every_branch_reaches(demo_kg):
    topics = {mid(demo_kg, "Christopher Nolan"): "Christopher Nolan", mid(demo_kg, "Heath Ledger"): "Heath Ledger"}
    prediction, engine = run(demo_kg, gold_path_handlers(BOTH_GOLD), question=BOTH, topics=topics)
    assert prediction.answers == ["The Dark Knight"]
    (cycle,) = prediction.memory["step_cycles"]
    assert [e["label"] for e in cycle["frontier"]] == ["The Dark Knight"], "the intersection, not the union"
    assert "SelectEntities" not in engine.calls, "an intersection is the selection: no model call"
    (note,) = stages(prediction, "intersect")
    assert note["outputs"]["sources"] == 2 and note["outputs"]["kept"] == 1
    chain = prediction.reasoning_chains[0]
    assert {t["relation"] for t in chain} >= {"film.director.film", "film.performance.film"}, "both branches kept"


def test_an_empty_intersection_is_an_empty_observation(demo_kg):
    gold = {BOTH: dict(BOTH_GOLD[BOTH], answers=["Inception"])}
    topics = {mid(demo_kg, "Christopher Nolan"): "Christopher Nolan", mid(demo_kg, "Paris"): "Paris"}
    prediction, _ = run(demo_kg, gold_path_handlers(gold), question=BOTH, topics=topics, max_path_corrections=0,
                        use_plan_correction=False)
    cycle = prediction.memory["step_cycles"][0]
    assert cycle["frontier"] == [] and "intersection is empty" in cycle["observation"]


def test_a_memory_step_calls_no_executor_and_no_kg(demo_kg):
    handlers = gold_path_handlers(GOLD)
    explore = handlers["Decompose"]({"question": QUESTION})["steps"]

    def decompose(inputs):
        return {"steps": explore + [{"objective": "pick the city among the places found", "action": "memory"}]}

    baseline, base_engine = run(demo_kg, handlers)
    prediction, engine = run(demo_kg, dict(handlers, Decompose=decompose))
    assert prediction.answers == baseline.answers == ["London"]
    cycles = prediction.memory["step_cycles"]
    assert len(cycles) == 3 and "No graph action" in cycles[2]["observation"]
    assert cycles[2]["frontier"] == cycles[1]["frontier"], "a memory step keeps the frontier"
    assert engine.calls["SelectRelations"] == base_engine.calls["SelectRelations"]
    assert prediction.costs["kg_queries"] == baseline.costs["kg_queries"], "no KG query in the memory step"
    assert engine.calls["Think"] == base_engine.calls["Think"] + 1, "the Planner still reads and judges the step"
    assert len(stages(prediction, "memory_step")) == 1


def test_wc_c_conjunctions_reach_every_answer():
    """Point 7's target: the perfect planner's WC-C F1 >= 0.95 (it was 0.809 when answers were the union)."""
    from ppoga_dspy.kg import open_kg

    questions = shared_data("wc2014", "WC-C.txt")
    examples = load_dataset(f"wc2014:{questions}", split="test", limit=25)
    with open_kg(str(shared_data("wc2014", "WC2014.txt"))) as kg:
        with dspy.context(lm=oracle_lm(examples, kg=kg)):
            scores = score_program(PPoGA(kg), examples)
    assert scores["hits@1"] == 1.0 and scores["f1"] >= 0.95, scores


