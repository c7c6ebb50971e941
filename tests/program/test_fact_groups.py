"""Compact evidence: facts sharing a subject and relation (or a relation and object) are one line, in observations,
memory and the Answer's evidence, with token budgets counting the grouped text; SelectEntities reads each candidate
without its name written twice."""

from __future__ import annotations

from ppoga_dspy.kg.base import Entity, Triple
from ppoga_dspy.method.executor import Candidate, Observation
from ppoga_dspy.method.memory import FactGroups, KnowledgeMemory, estimate_tokens, grouped_facts

GERMANY = Entity("Germany", "Germany")
PLAYERS = [Entity(name, name) for name in ("Sejad_SALIHOVIC", "Admir_MEHMEDI", "Arjen_ROBBEN")]
CLUB = Entity("Hoffenheim", "TSG_1899_Hoffenheim")


def squad(players=PLAYERS) -> list[Triple]:
    return [Triple(GERMANY, "plays_for_country_inverse", p) for p in players]


def test_facts_with_one_subject_and_relation_are_one_line_in_their_order():
    facts = squad() + [Triple(PLAYERS[0], "plays_in_club", CLUB)]
    assert grouped_facts(facts) == [
        "(Germany, plays_for_country_inverse, Sejad_SALIHOVIC; Admir_MEHMEDI; Arjen_ROBBEN)",
        "(Sejad_SALIHOVIC, plays_in_club, TSG_1899_Hoffenheim)",
    ]
    assert grouped_facts(facts + facts[:1]) == grouped_facts(facts)  # a repeated fact is written once


def test_facts_with_one_relation_and_object_group_their_subjects():
    facts = [Triple(p, "plays_in_club", CLUB) for p in PLAYERS[:2]]
    assert grouped_facts(facts) == ["(Sejad_SALIHOVIC; Admir_MEHMEDI, plays_in_club, TSG_1899_Hoffenheim)"]


def test_mediator_facts_stay_readable():
    performance = Entity("m.1", "m.1", facts=(("film.performance.actor", Entity("a", "Actor A")),
                                              ("film.performance.character", Entity("c", "Role C"))))
    film = Entity("f", "Film F")
    line = grouped_facts([Triple(film, "film.film.starring", performance)])
    assert line == ["(Film F, film.film.starring, "
                    "[film.performance.actor: Actor A; film.performance.character: Role C])"]


def test_the_cost_of_a_fact_is_what_it_adds_to_the_grouped_text():
    groups, used = FactGroups(), 0
    for triple in squad():
        used += groups.cost(triple)
        groups.add(triple)
    text = "\n".join(groups.lines())
    assert used == len(text) // 4  # the costs add up to the grouped text's estimate
    assert used < sum(estimate_tokens(t.text()) for t in squad()) * 0.7


def test_evidence_groups_facts_and_its_budget_counts_the_grouped_text():
    knowledge = KnowledgeMemory()
    many = [Entity(f"P{i}", f"Player_{i:02d}") for i in range(40)]
    knowledge.add_triples(squad(many))
    lines = knowledge.evidence(800)
    assert len(lines) == 1 and all(p.label in lines[0] for p in many)  # forty facts, one line, within budget
    small = knowledge.evidence(40)
    assert estimate_tokens("\n".join(small)) <= 40 and 0 < small[0].count(";") < 39
    shown = squad(many[:5])
    assert not any(p.label in "\n".join(knowledge.evidence(800, shown=shown)) for p in many[:5])


def test_an_observation_shows_its_facts_grouped_then_the_selection():
    observation = Observation(triples=squad(), frontier=[PLAYERS[0]])
    assert observation.text() == ("(Germany, plays_for_country_inverse, Sejad_SALIHOVIC; Admir_MEHMEDI; Arjen_ROBBEN)\n"
                                  "Selected: Sejad_SALIHOVIC")
    assert observation.text(limit=2).splitlines()[1] == "... and 1 more facts"


def test_an_entity_candidate_names_the_entity_once():
    forward = Candidate(PLAYERS[1], squad()[1], GERMANY)
    assert forward.prompt_line() == "Admir_MEHMEDI  <- (Germany, plays_for_country_inverse)"
    assert forward.line() == "Admir_MEHMEDI  <- (Germany, plays_for_country_inverse, Admir_MEHMEDI)"  # what is ranked
    backward = Candidate(GERMANY, squad()[1], PLAYERS[1])
    assert backward.prompt_line() == "Germany  <- (Admir_MEHMEDI, plays_for_country_inverse (reverse))"
    mediator = Entity("m.1", "m.1", facts=(("film.performance.actor", Entity("a", "Actor A")),))
    through = Candidate(Entity("a", "Actor A"), Triple(GERMANY, "r", mediator), GERMANY,
                        Triple(mediator, "film.performance.actor", Entity("a", "Actor A")))
    assert through.prompt_line() == through.line()  # the mediator's own facts tell it apart
