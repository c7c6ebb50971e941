"""What benchmarks/cut_sizes_bench.py measures is the program's own cut: the relation menu both stage modes show
(`Executor.relation_menu`) and the facts the evidence keeps within a budget (`KnowledgeMemory.held`)."""

from __future__ import annotations

import dspy
import pytest

from ppoga_dspy.kg.base import Entity, Triple
from ppoga_dspy.method.memory import KnowledgeMemory, Memory, StrategicMemory, grouped_facts, relation_key
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.method.question_run import QuestionRun
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.method.tools import KGTools
from ppoga_dspy.scripted.engine import ScriptedEngine, scripted_lm
from ppoga_dspy.scripted.gold_path import gold_path_handlers
from tests.program.test_program import GOLD, QUESTION, mid, stages


@pytest.mark.parametrize("mode", ["paper", "fused"])
def test_both_stage_modes_show_the_menu_relation_menu_builds(demo_kg, mode):
    program = PPoGA(demo_kg, thresholds=Thresholds(relation_candidates=3), stages=mode)
    topic = Entity(mid(demo_kg, "Inception"), "Inception")
    with dspy.context(lm=scripted_lm(ScriptedEngine(gold_path_handlers(GOLD)))):
        prediction = program(question=QUESTION, topic_entities={topic.id: topic.label})
    assert prediction.answers == ["London"]
    shown = next(e["outputs"] for e in stages(prediction, "relations.menu") if e["outputs"]["entity"] == topic.id)
    assert shown["of"] > 3 and len(shown["shown"]) == 3  # Inception has more relations than the menu shows
    query = f"{QUESTION} {prediction.memory['strategic']['plan'][0]['objective']}"

    def menu(width: int) -> list[str]:
        memory = Memory(StrategicMemory(question=QUESTION))
        run = QuestionRun(memory=memory, thresholds=Thresholds(relation_candidates=width), tools=None)
        run.tools = KGTools(demo_kg, run.costs, memory)
        return [relation_key(r) for r in program.executor.relation_menu(run, topic, query).shown]

    assert menu(3) == shown["shown"]  # the menu the program showed, built by the function the benchmark calls
    assert menu(500)[:3] == shown["shown"] and len(menu(500)) == shown["of"]  # the best 3 of the whole ranking


def test_held_is_the_evidence_within_the_budget():
    film, nolan, london = Entity("m.f", "Inception"), Entity("m.n", "Christopher Nolan"), Entity("m.l", "London")
    chain = [Triple(film, "film.film.directed_by", nolan), Triple(nolan, "people.person.place_of_birth", london)]
    knowledge = KnowledgeMemory()
    knowledge.add_triples([Triple(london, "location.location.contains", Entity(f"m.{i}", f"Borough {i}"))
                           for i in range(30)] + chain)
    knowledge.reasoning_chains.append(chain)
    whole = knowledge.held(100_000)
    assert whole[:2] == chain and len(whole) == 32  # the chain first, then the other facts
    for budget in (5, 20, 60, 200, 100_000):
        held = knowledge.held(budget)
        assert grouped_facts(held) == knowledge.evidence(budget)  # what evidence writes, fact by fact
        assert held == whole[: len(held)]  # a smaller budget keeps a prefix of the same order
    assert knowledge.held(5) == [] and knowledge.held(20) == chain[:1]
