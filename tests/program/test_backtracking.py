"""Issue 11, point 10: when a step's exploration finds nothing, path correction resumes from an earlier
frontier's other candidates (PoG's backtracking), not only from the same frontier.

Step 1 picks Nolan's birth date (a value: nothing can be explored from it) instead of his birthplace;
step 2 then reaches nothing, and its retry starts from step 1's other candidate, London.
"""

from __future__ import annotations

from ppoga_dspy.scripted.gold_path import gold_path_handlers
from tests.program.test_program import mid, run, stages

QUESTION = "Which place contains the birthplace of Christopher Nolan?"
BIRTH, CONTAINED = "people.person.place_of_birth", "location.location.containedby"
GOLD = {QUESTION: {"relations": [BIRTH, CONTAINED], "entities": ["London"], "answers": ["United Kingdom"]}}


def _handlers():
    handlers = gold_path_handlers(GOLD)

    def select_relations(inputs):
        if inputs["entity"] == "Christopher Nolan":  # two relations, one of them a dead end
            return {"relations": ["people.person.date_of_birth", BIRTH]}
        return handlers["SelectRelations"](inputs)

    def select_entities(inputs):  # the wrong pick: a date, from which no relation leads anywhere
        return {"entities": ["1970-07-30"], "rationale": "the date looks like what was asked"}

    return dict(handlers, SelectRelations=select_relations, SelectEntities=select_entities)


def test_an_empty_step_resumes_from_the_earlier_steps_other_candidates(demo_kg):
    topics = {mid(demo_kg, "Christopher Nolan"): "Christopher Nolan"}
    # the way back to the named relation would refocus on London before the step acts: off, to see backtracking
    prediction, _ = run(demo_kg, _handlers(), question=QUESTION, topics=topics, entities_per_step=1,
                        back_to_named_relation=False)
    cycles = prediction.memory["step_cycles"]
    assert [e["label"] for e in cycles[0]["frontier"]] == ["1970-07-30"]
    assert cycles[1]["frontier"] == [], "nothing is reached from a date"
    (note,) = stages(prediction, "backtrack")
    assert [e["label"] for e in note["outputs"]["frontier"]] == ["London"]
    assert cycles[2]["frontier"], "the retry from London reaches what contains it"
    assert prediction.answers == ["United Kingdom"]
    chain = prediction.reasoning_chains[0]
    assert [t["relation"] for t in chain] == [BIRTH, CONTAINED], "the chain runs through the backtracked entity"


def test_without_earlier_candidates_the_retry_keeps_its_frontier(demo_kg):
    topics = {mid(demo_kg, "Christopher Nolan"): "Christopher Nolan"}
    handlers = dict(_handlers(), SelectRelations=lambda i: {"relations": ["people.person.date_of_birth"]})
    prediction, _ = run(demo_kg, handlers, question=QUESTION, topics=topics, entities_per_step=1)
    assert stages(prediction, "backtrack") == [], "step 1 had no other candidate to resume from"


def test_by_default_the_step_goes_back_to_the_candidate_with_its_relation_before_acting(demo_kg):
    """The same walk with the defaults: the date has no containedby, London (step 1's other candidate) has it, so
    step 2 starts from London and reaches nothing empty first (KG queries, no extra LM call)."""
    topics = {mid(demo_kg, "Christopher Nolan"): "Christopher Nolan"}
    prediction, _ = run(demo_kg, _handlers(), question=QUESTION, topics=topics, entities_per_step=1)
    (note,) = stages(prediction, "named_relation.back")
    assert [e["label"] for e in note["outputs"]["frontier"]] == ["London"]
    assert not stages(prediction, "backtrack") and prediction.answers == ["United Kingdom"]
