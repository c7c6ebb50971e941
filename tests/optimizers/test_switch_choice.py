"""`ppoga compile` chooses the student's on/off rules on dev questions (optimizers/switches.py): measured, kept only
when they pay, none when there are no dev questions."""

from __future__ import annotations

import json

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.method.thresholds import CHOSEN_ON_DEV, Thresholds
from ppoga_dspy.optimizers.switches import choose_switches
from ppoga_dspy.scripted.engine import ScriptedEngine, scripted_lm
from ppoga_dspy.scripted.gold_path import gold_path_handlers, golds_from_examples


def _topic_namer(examples):
    """A student that walks like the careful planner but answers with the question's topic entity (what a small
    model copying the plan lines does)."""
    handlers = gold_path_handlers(golds_from_examples(examples))

    def answer(inputs):
        evidence = [str(e) for e in inputs.get("evidence") or []]
        first = evidence[0].strip("()").split(", ")[0] if evidence else ""
        return {"answers": [first], "reasoning": "copied the first name read"}

    return scripted_lm(ScriptedEngine(dict(handlers, Answer=answer)), "topic-namer")


def test_a_rule_that_pays_on_dev_is_kept(demo_kg):
    """Answer reading the end of the walk turns the topic-namer's answers right: measured, it is kept."""
    dev = load_dataset("demo", split="dev")
    lm = _topic_namer(dev)
    program = PPoGA(demo_kg, thresholds=Thresholds(answer_at_walk_end=False, answer_reads_plan=False),
                    role_lms={"planner": lm, "executor": lm})
    choice = choose_switches(program, dev, budget=2, names=("answer_at_walk_end",))
    before, after = choice.trials
    assert after["hits@1"] > before["hits@1"] and choice.changed == {"answer_at_walk_end": True}
    assert program.thresholds.answer_at_walk_end is False  # the program given is left as it was


def test_one_pass_keeps_only_what_beats_the_best_so_far(demo_kg):
    """Each flip is scored against the best so far; the rules chosen are those of the best trial on the greedy
    path (more right, or as many at fewer LM calls)."""
    dev = load_dataset("demo", split="dev")
    lm = _topic_namer(dev)
    program = PPoGA(demo_kg, thresholds=Thresholds(answer_at_walk_end=False), role_lms={"planner": lm, "executor": lm})
    choice = choose_switches(program, dev, budget=len(CHOSEN_ON_DEV) + 1)
    assert len(choice.trials) == len(CHOSEN_ON_DEV) + 1
    best = max(choice.trials, key=lambda t: (t["hits@1"], -t["lm_calls_mean"]))
    assert {n: getattr(choice.thresholds, n) for n in CHOSEN_ON_DEV} == best["switches"]


def test_without_dev_questions_the_defaults_stand(demo_kg):
    program = PPoGA(demo_kg)
    assert choose_switches(program, [], budget=5).thresholds == Thresholds()
    assert choose_switches(program, load_dataset("demo", split="dev"), budget=0).trials == []


def test_compile_records_the_rules_it_chose_in_the_artifact(tmp_path):
    from ppoga_dspy.cli import main

    out = tmp_path / "a.json"
    code = main(["compile", "--dataset", "demo", "--optimizer", "knn", "--teacher-lm", "oracle/gold-path",
                 "--lm", "oracle/gold-path", "--program", "none", "--dev-limit", "4", "--switch-trials", "3",
                 "--out", str(out)])
    assert code == 0
    tuning = json.loads(out.read_text())["tuning"]["switches"]
    assert tuning["chosen_on"] == "dev" and len(tuning["trials"]) == 3
    assert json.loads(out.read_text())["kg"] == "freebase@demo-kg.nt"
