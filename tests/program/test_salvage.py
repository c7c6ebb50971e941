"""Lenient reading of replies the adapter rejected."""

from __future__ import annotations

from ppoga_dspy.method.replies import salvage
from ppoga_dspy.signatures import Answer, Decompose, Evaluate, SelectRelations


def test_bare_relation_name_becomes_a_list():
    reply = "[[ ## relations ## ]]\nfilm.film.directed_by\n\n[[ ## completed ## ]]"
    assert salvage(reply, SelectRelations) == {"relations": ["film.film.directed_by"]}


def test_numbered_lines_and_a_single_field_reply_without_headers():
    assert salvage("1. people.person.spouse_s\n2. film.film.starring", SelectRelations) == {
        "relations": ["people.person.spouse_s", "film.film.starring"]
    }


def test_decision_word_inside_prose():
    reply = "[[ ## decision ## ]]\nI think we should Finish.\n[[ ## reason ## ]]\nall found"
    assert salvage(reply, Evaluate) == {"decision": "finish", "reason": "all found"}
    reply = "[[ ## decision ## ]]\ncorrect path, then replan\n[[ ## reason ## ]]\nx"
    assert salvage(reply, Evaluate)["decision"] == "correct_path"


def test_plan_lines_become_plan_steps_and_missing_fields_give_up():
    values = salvage("[[ ## steps ## ]]\n1. find the director of Inception\n2. find where he was born", Decompose)
    assert [s.objective for s in values["steps"]] == ["find the director of Inception", "find where he was born"]
    assert salvage("[[ ## answers ## ]]\nLondon", Answer) is None  # reasoning missing
    assert salvage("[[ ## decision ## ]]\nmaybe\n[[ ## reason ## ]]\nx", Evaluate) is None
