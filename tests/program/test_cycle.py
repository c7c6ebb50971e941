"""The decision caps as named rules, and the vocabulary defined once."""

from __future__ import annotations

import itertools

import pytest

from ppoga_dspy.method.cycle import Allowance, apply_rules
from ppoga_dspy.method.vocabulary import Decision, Stage
from ppoga_dspy.signatures import Evaluate, Think


@pytest.mark.parametrize(
    ("decision", "allow", "applied"),
    [
        (Decision.CORRECT_PATH, Allowance(False, True, False, True), Decision.REPLAN),
        (Decision.CORRECT_PATH, Allowance(False, False, False, True), Decision.PROCEED),
        (Decision.CORRECT_PATH, Allowance(False, False, False, False), Decision.FINISH),
        (Decision.CORRECT_PATH, Allowance(False, False, True, True), Decision.FINISH),
        (Decision.REPLAN, Allowance(True, False, False, True), Decision.CORRECT_PATH),
        (Decision.REPLAN, Allowance(False, False, False, False), Decision.FINISH),
        (Decision.PROCEED, Allowance(True, True, True, True), Decision.FINISH),
        (Decision.CORRECT_PATH, Allowance(True, True, True, False), Decision.CORRECT_PATH),
        # a step that reached nothing is retried, not proceeded past, while it may be; without retries it carries on
        (Decision.PROCEED, Allowance(True, True, False, False), Decision.CORRECT_PATH),
        (Decision.PROCEED, Allowance(False, True, False, False), Decision.PROCEED),
        (Decision.FINISH, Allowance(True, True, False, False), Decision.FINISH),  # finishing on what is known
    ],
)
def test_caps_are_applied_as_rules(decision, allow, applied):
    assert apply_rules(decision, allow) is applied


def test_rules_never_produce_a_forbidden_correction():
    for decision, flags in itertools.product(Decision, itertools.product([False, True], repeat=4)):
        allow = Allowance(*flags)
        applied = apply_rules(decision, allow)
        assert applied is not Decision.CORRECT_PATH or allow.can_retry
        assert applied is not Decision.REPLAN or allow.can_replan
        assert applied is not Decision.PROCEED or not allow.last_step


def test_think_is_one_word_for_one_stage():
    assert "thought" in Think.output_fields and "thought" in Evaluate.input_fields
    assert "reflection" not in Think.output_fields
    assert [s.value for s in Stage] == ["decompose", "predict", "think", "evaluate", "replan", "answer",
                                        "select_relations", "select_entities",
                                        "decompose_predict", "think_evaluate", "select_relation_pairs"]
    assert set(Evaluate.output_fields["decision"].annotation.__args__) == {d.value for d in Decision}
