"""The evaluation summary counts the Executor's choices that named no candidate, read from each run's trace."""

from __future__ import annotations

import pytest

from ppoga_dspy.evaluation.evaluate import choice_counts, run_evaluation, summarize
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.scripted.engine import ScriptedEngine, scripted_lm
from ppoga_dspy.scripted.gold_path import gold_path_handlers, golds_from_examples
from tests.conftest import shared_data


@pytest.fixture(scope="module")
def wc2014():
    from ppoga_dspy.datasets.loaders import load_dataset
    from ppoga_dspy.kg import open_kg

    examples = load_dataset(f"wc2014:{shared_data('wc2014', 'WC-P2.txt')}", limit=4, split="test")
    kg = open_kg(shared_data("wc2014", "WC2014.txt"))
    yield examples, kg
    kg.close()


def _run(kg, examples, tmp_path, *, invent: bool):
    handlers = gold_path_handlers(golds_from_examples(examples))
    if invent:  # a planner that names a relation no entity has, beside the right one: the Executor drops it
        right = handlers["SelectRelations"]
        handlers["SelectRelations"] = lambda inputs: {"relations": ["made.up.relation", *right(inputs)["relations"]]}
    lm = scripted_lm(ScriptedEngine(handlers))
    # the Executor's relation choice is what is counted: asked, not settled by the named-relation gate
    program = PPoGA(kg, role_lms={"planner": lm, "executor": lm}, thresholds=Thresholds(follow_named_relations=False))
    return run_evaluation(program, examples, out=tmp_path / f"run-{invent}.jsonl", progress=False).rows


def test_non_candidate_choices_are_counted_per_run(wc2014, tmp_path):
    examples, kg = wc2014
    honest = summarize(_run(kg, examples, tmp_path, invent=False))
    inventing_rows = _run(kg, examples, tmp_path, invent=True)
    inventing = summarize(inventing_rows)
    assert honest["choice_calls"] > 0 and honest["non_candidate_choices"] == 0
    calls = sum(1 for r in inventing_rows for e in r["trace"] if e.get("stage") == "select_relations")
    assert inventing["non_candidate_choices"] == calls > 0  # one invented name per relation choice
    assert inventing["choice_fallbacks"] >= calls
    assert choice_counts({"trace": []}) == {"calls": 0, "non_candidate": 0, "fallbacks": 0}
