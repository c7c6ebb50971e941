"""Recovery as method (the fidelity issue, points 2 and 3): with the defaults, for every model, in both stage modes.

Each test runs a small real store with the gold-path planner's handlers (or a careless variant of them) and no
threshold set: the way back to candidates that lead on, the mismatch a walk may not end on, and Answer reading the
end of the walk are what any model gets.
"""

from __future__ import annotations

import pytest

from ppoga_dspy.scripted.gold_path import gold_path_handlers
from tests.program.test_program import run, stages

MODES = ("paper", "fused")


def run_in(mode: str, kg, handlers, *, question: str, topics: dict[str, str], **thresholds):
    """`tests.program.test_program.run` in a stage mode (fused merges the calls that read the same inputs)."""
    import dspy

    from ppoga_dspy.method.program import PPoGA
    from ppoga_dspy.method.thresholds import Thresholds
    from ppoga_dspy.scripted.engine import ScriptedEngine, scripted_lm

    engine = ScriptedEngine(handlers)
    program = PPoGA(kg, thresholds=Thresholds(**thresholds), stages=mode)
    with dspy.context(lm=scripted_lm(engine)):
        return program(question=question, topic_entities=topics), engine


#: MetaQA's 3-hop shape: the middle step keeps one of the actor's films, and only another film has a language.
ACTOR_FILMS = ["Film_A starred_actors Ann", "Film_B starred_actors Ann", "Film_C starred_actors Ann",
               "Film_B directed_by Dora", "Film_C in_language French"]
LANGUAGES = "The films that share actors with Film_A were in which languages?"
LANGUAGES_GOLD = {LANGUAGES: {"relations": ["starred_actors", "starred_actors (reverse)", "in_language"],
                              "entities": ["Ann", "Film_B", "French"], "answers": ["French"]}}


@pytest.mark.parametrize("mode", MODES)
def test_a_set_valued_middle_step_goes_back_to_the_candidates_that_lead_on(graph, mode):
    """The middle step keeps Film_B (no language); the last step names in_language: by default the frontier goes
    back to the step's other candidate that has it (Film_C), with KG queries only, and the walk answers French.
    Off, the step follows what Film_B offers and ends on a director."""
    kg = graph(ACTOR_FILMS)
    handlers = gold_path_handlers(LANGUAGES_GOLD)
    common = {"question": LANGUAGES, "topics": {"Film_A": "Film_A"}, "entities_per_step": 1}
    off = {"back_to_named_relation": False, "correct_named_mismatch": False, "answer_at_walk_end": False}
    astray, _ = run_in(mode, kg, handlers, **common, **off)
    recovered, engine = run_in(mode, kg, handlers, **common)
    assert astray.answers != ["French"]
    assert recovered.answers == ["French"]
    (note,) = stages(recovered, "named_relation.back")
    assert [e["id"] for e in note["outputs"]["frontier"]] == ["Film_C"]
    assert "Replan" not in engine.calls and not stages(recovered, "path_correction")


def test_the_walk_does_not_end_on_a_relation_the_step_did_not_name(graph):
    """A careless model follows directed_by for a step that names in_language (the film has both) and would finish:
    the observation tells Think and Evaluate of the mismatch, the rules turn the finish into a path correction, and
    the retry follows the relation the step names."""
    kg = graph(["Film_A in_language French", "Film_A directed_by Dora"])
    question = "What language is Film_A in?"
    handlers = gold_path_handlers({question: {"relations": ["in_language"], "entities": ["French"],
                                              "answers": ["French"]}})
    chosen: list[str] = []

    def careless_choice(inputs):
        pick = "directed_by" if not chosen else handlers["SelectRelations"](inputs)["relations"][0]
        chosen.append(pick)
        return {"relations": [pick]}

    seen: list[str] = []

    def careless_evaluate(inputs):
        seen.append(str(inputs.get("observation", "")))
        return {"decision": "finish", "reason": "done"}

    prediction, _ = run(kg, dict(handlers, SelectRelations=careless_choice, Evaluate=careless_evaluate),
                        question=question, topics={"Film_A": "Film_A"})
    assert "Mismatch: the step names in_language, but it followed directed_by" in seen[0]
    (changed, *_) = stages(prediction, "decision_changed")
    assert changed["outputs"]["model"] == "finish" and changed["outputs"]["applied"] == "correct_path"
    assert chosen[0] == "directed_by" and stages(prediction, "path_correction")  # the retry's menu: in_language
    assert prediction.answers == ["French"]


def test_a_careful_planner_corrects_a_step_that_followed_another_relation(graph):
    """The gold-path planner models a careful planner: told of a mismatch it asks for a path correction itself."""
    kg = graph(["Film_A in_language French", "Film_A directed_by Dora"])
    question = "What language is Film_A in?"
    handlers = gold_path_handlers({question: {"relations": ["in_language"], "entities": ["French"],
                                              "answers": ["French"]}})
    first = {"pick": True}

    def stray_once(inputs):
        if first.pop("pick", False):
            return {"relations": ["directed_by"]}
        return handlers["SelectRelations"](inputs)

    prediction, engine = run(kg, dict(handlers, SelectRelations=stray_once), question=question,
                             topics={"Film_A": "Film_A"})
    first_cycle = prediction.memory["step_cycles"][0]
    assert first_cycle["decision"] == "correct_path" and "not the 'in language' entity" in first_cycle["thought"]
    assert prediction.answers == ["French"]
    assert not [n for n in stages(prediction, "decision_changed") if n["outputs"]["applied"] == "correct_path"]


def test_a_relation_no_entity_has_is_said_and_not_retried(graph):
    """When nothing the walk reached has the named relation, the observation says so and no retry is forced (it
    could only fail again): the cost of an unreachable question stays that of its plan."""
    kg = graph(["Film_A directed_by Dora", "Film_A release_year 2001"])
    question = "What language is Film_A in?"
    handlers = gold_path_handlers({question: {"relations": ["in_language"], "entities": ["French"],
                                              "answers": ["French"]}})
    prediction, engine = run(kg, handlers, question=question, topics={"Film_A": "Film_A"})
    (note,) = stages(prediction, "named_relation.mismatch")
    assert note["outputs"]["correctable"] is False
    assert "which no entity the walk reached has" in prediction.memory["step_cycles"][0]["observation"]
    assert not stages(prediction, "path_correction") and "Replan" not in engine.calls


CO_ACTORS = "Who starred with Xavier?"
CO_ACTORS_GOLD = {CO_ACTORS: {"relations": ["starred_actors", "starred_actors"],
                              "entities": ["Film_one", "Bella"], "answers": ["Bella"]}}


def test_answer_reads_the_end_of_the_walk_by_default(graph):
    """An answer naming the question's topic (where the walk started) is not the answer when the last step reached
    entities of the asked kind: by default the last step's entities answer instead."""
    kg = graph(["Film_one starred_actors Xavier", "Film_one starred_actors Bella"])
    handlers = gold_path_handlers(CO_ACTORS_GOLD)
    topic = dict(handlers, Answer=lambda inputs: {"answers": ["Xavier"], "reasoning": "read from the facts"})
    prediction, _ = run(kg, topic, question=CO_ACTORS, topics={"Xavier": "Xavier"})
    assert prediction.answers == ["Bella"] and stages(prediction, "answer.walk_end")


def test_a_comparison_still_answers_a_topic_entity(graph):
    """"Which of A and B is older": the plan's last step reads memory and picks a topic entity; that is the answer,
    not a stop on the way."""
    kg = graph(["Ann date_of_birth 1950", "Bob date_of_birth 1960"])
    question = "Which of Ann and Bob is older?"
    plan = [{"objective": "follow relation date_of_birth", "expected_outcome": "their birth dates",
             "action": "explore"},
            {"objective": "compare the birth dates and pick the older", "expected_outcome": "the older one",
             "action": "memory"}]
    handlers = gold_path_handlers({question: {"relations": ["date_of_birth"], "entities": ["1950", "1960"],
                                              "answers": ["Ann"]}})
    comparing = dict(handlers, Decompose=lambda inputs: {"steps": plan},
                     Answer=lambda inputs: {"answers": ["Ann"], "reasoning": "1950 is before 1960"})
    prediction, _ = run(kg, comparing, question=question, topics={"Ann": "Ann", "Bob": "Bob"})
    assert prediction.answers == ["Ann"] and not stages(prediction, "answer.walk_end")


def test_an_answer_the_last_step_reached_again_is_where_the_walk_ended(graph):
    """WC-P2's shape: the first step reaches the player's club and country; the second walks on from both, the
    country to its other players and the club back to the country. The country, reached by the last step from the
    club, is not a stop the walk moved on from: Answer naming it stands (the rule redirected it to the players)."""
    kg = graph(["Pat plays_in_club Club_X", "Club_X is_in_country Land_A", "Pat plays_for_country Land_A",
                "Quinn plays_for_country Land_A", "Rhea plays_for_country Land_A"])
    question = "Which country does Pat play professional in?"
    plan = [{"objective": "find the club and the country Pat plays for", "expected_outcome": "a club, a country",
             "action": "explore"},
            {"objective": "find where they lead", "expected_outcome": "the country", "action": "explore"}]
    chosen = {"Pat": ["plays_in_club", "plays_for_country"], "Land_A": ["plays_for_country (reverse)"],
              "Club_X": ["is_in_country"]}
    handlers = {
        "Decompose": lambda inputs: {"steps": plan},
        "PredictOutcome": lambda inputs: {"prediction": "a club and a country"},
        "SelectRelations": lambda inputs: {"relations": chosen[inputs["entity"]]},
        "SelectEntities": lambda inputs: {"entities": ["Quinn", "Rhea"], "rationale": "the players reached"},
        "Think": lambda inputs: {"thought": "the step reached what it names", "missing": "nothing"},
        "Evaluate": lambda inputs: {"decision": "finish" if inputs["step"] == plan[1]["objective"] else "proceed",
                                    "reason": "the facts answer it"},
        "Answer": lambda inputs: {"answers": ["Land_A"], "reasoning": "Club_X is in Land_A"},
    }
    prediction, _ = run(kg, handlers, question=question, topics={"Pat": "Pat"}, entities_per_step=2)
    walked = prediction.memory["step_cycles"]
    assert [c["decision"] for c in walked] == ["proceed", "finish"]
    assert {e["label"] for e in walked[-1]["frontier"]} == {"Quinn", "Rhea"}, "the last step kept the players"
    assert prediction.answers == ["Land_A"] and not stages(prediction, "answer.walk_end")


def _walk_past_the_country(plan: list[dict], answer: list[str]):
    """WC-P2's other shape: step 1 reaches the player's country, a copied second step walks on to its other players."""
    question = "Which country does Pat play professional in?"
    chosen = {"Pat": ["plays_for_country"], "Land_A": ["plays_for_country (reverse)"]}
    return question, {
        "Decompose": lambda inputs: {"steps": plan},
        "PredictOutcome": lambda inputs: {"prediction": "a country"},
        "SelectRelations": lambda inputs: {"relations": chosen[inputs["entity"]]},
        "SelectEntities": lambda inputs: {"entities": ["Quinn", "Rhea"], "rationale": "the players reached"},
        "Think": lambda inputs: {"thought": "the step reached what it names", "missing": "nothing"},
        "Evaluate": lambda inputs: {"decision": "finish" if inputs["step"] == plan[-1]["objective"] else "proceed",
                                    "reason": "the facts answer it"},
        "Answer": lambda inputs: {"answers": answer, "reasoning": "Pat plays for Land_A"},
    }


PAST_THE_COUNTRY = ["Pat plays_for_country Land_A", "Quinn plays_for_country Land_A", "Rhea plays_for_country Land_A"]


def test_a_plan_naming_another_graphs_relations_does_not_say_where_the_walk_ends(graph):
    """A plan copied from another graph's demos names relations this graph lacks ("film.film.directed_by" for a
    footballer): its length is a film question's, so an answer the walk passed (the country step 1 reached) stands,
    traced as `answer.walk_end.unnamed`. The topic is still no answer. The same walk with a plan that names this
    graph's relation is redirected to where it ended (before this rule, the copied plan was too)."""
    kg = graph(PAST_THE_COUNTRY)
    copied = [{"objective": "follow relation film.film.directed_by", "expected_outcome": "the director",
               "action": "explore"},
              {"objective": "follow relation people.person.nationality", "expected_outcome": "the nationality",
               "action": "explore"}]
    question, handlers = _walk_past_the_country(copied, ["Pat", "Land_A", "Quinn"])
    prediction, _ = run(kg, handlers, question=question, topics={"Pat": "Pat"}, entities_per_step=2)
    assert [c["decision"] for c in prediction.memory["step_cycles"]] == ["proceed", "finish"]
    assert prediction.answers == ["Land_A", "Quinn"], "the topic dropped, the country the walk passed kept"
    assert stages(prediction, "answer.walk_end.unnamed")

    named = [dict(copied[0], objective="follow relation plays_for_country"),
             dict(copied[1], objective="follow relation plays_for_country back to the players")]
    question, handlers = _walk_past_the_country(named, ["Land_A"])
    prediction, _ = run(kg, handlers, question=question, topics={"Pat": "Pat"}, entities_per_step=2)
    assert sorted(prediction.answers) == ["Quinn", "Rhea"] and stages(prediction, "answer.walk_end")


def test_a_relation_walked_twice_is_two_hops(graph):
    """PathQuestion's "the spouse of A's spouse": the second step names the relation the walk arrived by, walked as a
    hop of its own (no mediator), so it is done again from where the first ended, not skipped as read through."""
    kg = graph(["Ann spouse Bob", "Bob spouse Cat", "Bob location Paris", "Cat location Rome"])
    question = "Where is the spouse of Ann's spouse located?"
    handlers = gold_path_handlers({question: {"relations": ["spouse", "spouse", "location"],
                                              "entities": ["Bob", "Cat", "Rome"], "answers": ["Rome"]}})
    prediction, _ = run(kg, handlers, question=question, topics={"Ann": "Ann"})
    assert not stages(prediction, "named_relation.crossed")
    assert prediction.answers == ["Rome"]
