"""Issue 11, point 3: a step reads through mediator (CVT) nodes, so one semantic hop is one step.

The demo KG holds Freebase-style performance and roster nodes (film -> performance -> actor). A planner
that writes one step per *semantic* hop ("find who played the Joker") must reach the actor in that one
step: the entity beyond the mediator is the frontier, the chain keeps both facts, and a mediator is
never offered as an answer.
"""

from __future__ import annotations

import dspy

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.evaluation.evaluate import score_program
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.scripted.gold_path import golds_from_examples, oracle_lm, semantic_steps


def _cvt_questions():
    return [ex for ex in load_dataset("demo") if (ex.metadata or {}).get("type") == "cvt"]


def test_the_planner_writes_one_step_per_semantic_hop(demo_kg):
    joker = next(ex for ex in _cvt_questions() if "Joker in The Dark Knight" in ex.question)
    gold = golds_from_examples([joker], kg=demo_kg)[joker.question.strip()]
    assert gold["relations"] == ["film.film_character.portrayed_in_films", "film.performance.actor"]
    assert gold["steps"] == [[0, 1]] == semantic_steps(demo_kg, gold)
    assert golds_from_examples([joker])[joker.question.strip()]["steps"] == [[0], [1]]  # no graph: per relation


def test_cvt_questions_are_answered_with_one_step_per_semantic_hop(demo_kg):
    examples = _cvt_questions()
    assert len(examples) >= 10
    program = PPoGA(demo_kg)
    with dspy.context(lm=oracle_lm(examples, kg=demo_kg)):
        scores = score_program(program, examples)
    assert scores["hits@1"] == 1.0, scores


def test_the_mediator_is_read_through_and_never_the_frontier_or_an_answer(demo_kg):
    joker = next(ex for ex in _cvt_questions() if "Joker in The Dark Knight" in ex.question)
    program = PPoGA(demo_kg)
    with dspy.context(lm=oracle_lm([joker], kg=demo_kg)):
        prediction = program(question=joker.question, topic_entities=joker.topic_entities)
    assert prediction.answers == ["Heath Ledger"]
    steps = prediction.memory["step_cycles"]
    assert len(steps) == 1, "one semantic hop, one step"
    frontier = steps[0]["frontier"]
    assert frontier and not any(e.get("facts") for e in frontier), "a mediator never becomes the frontier"
    assert "Heath Ledger" in [e["label"] for e in frontier]
    chain = next(c for c in prediction.memory["knowledge"]["reasoning_chains"] if c[-1]["tail"]["label"] ==
                 "Heath Ledger")
    assert [t["relation"] for t in chain[-2:]] == ["film.film_character.portrayed_in_films", "film.performance.actor"]
    assert chain[-2]["tail"].get("facts") and chain[-1]["head"].get("facts"), "both facts meet at the mediator"
    mediators = {t["tail"]["id"] for t in chain if t["tail"].get("facts")}
    assert mediators and not mediators & set(prediction.answer_ids)
