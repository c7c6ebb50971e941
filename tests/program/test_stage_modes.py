"""`--stages fused` and gated choices on the demo KG: same answers as paper mode, fewer calls, counted per stage."""

from __future__ import annotations

import dspy
import pytest

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.evaluation.metrics import score_prediction
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.method.vocabulary import StageMode
from ppoga_dspy.scripted.engine import ScriptedEngine, scripted_lm
from ppoga_dspy.scripted.gold_path import gold_path_handlers, golds_from_examples

from .test_program import GOLD, QUESTION, mid, stages

TWO_FILMS = "Who directed Inception and Batman Begins?"


def ask(kg, handlers, *, mode: str, question=QUESTION, topics=None, **thresholds):
    thresholds.setdefault("follow_named_relations", False)  # the Executor's own relation choice, as the paper asks
    engine = ScriptedEngine(handlers)
    program = PPoGA(kg, thresholds=Thresholds(**thresholds), stages=mode)
    topics = topics or {mid(kg, "Inception"): "Inception"}
    with dspy.context(lm=scripted_lm(engine)):
        prediction = program(question=question, topic_entities=topics)
    return prediction, engine


def test_fused_two_hop_question_costs_a_third_of_the_calls_counted_per_stage(demo_kg):
    paper, paper_engine = ask(demo_kg, gold_path_handlers(GOLD), mode="paper")
    fused, engine = ask(demo_kg, gold_path_handlers(GOLD), mode="fused")
    assert fused.answers == paper.answers == ["London"]
    assert fused.answer_ids == paper.answer_ids
    assert [t["relation"] for t in fused.reasoning_chains[0]] == ["film.film.directed_by",
                                                                 "people.person.place_of_birth"]
    assert sum(paper_engine.calls.values()) == paper.costs["lm_calls"] == 10
    # Decompose + first prediction + first relations; per step one Think+Evaluate (which predicts the second step
    # and chooses its relations, then writes the answer): no Predict, Think, Evaluate, SelectRelations or Answer
    # call of their own
    assert engine.calls == {"DecomposePredict": 1, "ThinkEvaluate": 2}
    assert fused.costs["lm_calls"] == 3
    assert fused.costs["lm_calls_by_stage"] == {"decompose_predict": 1, "think_evaluate": 2}
    assert fused.costs["lm_calls_by_role"] == {"planner": 3}
    assert [e["outputs"]["pairs"] for e in stages(fused, "relations.carried")] == [
        ["Inception: film.film.directed_by"], ["Christopher Nolan: people.person.place_of_birth"]]
    assert [c["paths"] for c in fused.memory["step_cycles"]] == [c["paths"] for c in paper.memory["step_cycles"]]
    cycles = fused.memory["step_cycles"]
    assert [c["decision"] for c in cycles] == ["proceed", "finish"]
    assert [c["prediction"] for c in cycles] == [c["prediction"] for c in paper.memory["step_cycles"]]
    assert all(c["prediction"].startswith("Following ") for c in cycles)
    assert len(stages(fused, "predict.carried")) == 2
    assert stages(fused, "answer.written_by_evaluate")[0]["outputs"]["answers"] == ["London"]


def test_fused_mode_answers_every_demo_question_as_paper_mode_does_with_fewer_calls(demo_kg):
    examples = load_dataset("demo")
    golds = golds_from_examples(examples)
    for example in examples:
        paper, _ = ask(demo_kg, gold_path_handlers(golds), mode="paper", question=example.question,
                       topics=example.topic_entities)
        fused, _ = ask(demo_kg, gold_path_handlers(golds), mode="fused", question=example.question,
                       topics=example.topic_entities)
        assert fused.status == paper.status == "ok", example.question
        # fused ThinkEvaluate reads the observation and memory (which no longer repeats it), paper's Answer
        # its evidence budget: the fused answer may name more of a set-valued answer, never fewer
        assert set(paper.answers) <= set(fused.answers), example.question
        assert score_prediction(example, fused)["hits@1"] >= score_prediction(example, paper)["hits@1"]
        assert fused.costs["lm_calls"] < paper.costs["lm_calls"], example.question


def carrying_nothing(handlers):
    """The handlers with the fused calls' relation choices made ahead left empty: every step asks
    SelectRelationPairs (what a model that does not choose ahead costs)."""
    def blank(name, field):
        return lambda inputs: {**handlers[name](inputs), field: []}

    return dict(handlers, DecomposePredict=blank("DecomposePredict", "first_relations"),
                ThinkEvaluate=blank("ThinkEvaluate", "next_relations"))


def test_one_relation_choice_for_the_whole_frontier(demo_kg):
    golds = {TWO_FILMS: {"relations": ["film.film.directed_by"], "entities": ["Christopher Nolan"],
                         "answers": ["Christopher Nolan"]}}
    topics = {mid(demo_kg, "Inception"): "Inception", mid(demo_kg, "Batman Begins"): "Batman Begins"}
    paper, paper_engine = ask(demo_kg, gold_path_handlers(golds), mode="paper", question=TWO_FILMS, topics=topics)
    fused, engine = ask(demo_kg, carrying_nothing(gold_path_handlers(golds)), mode="fused", question=TWO_FILMS,
                        topics=topics)
    assert paper_engine.calls["SelectRelations"] == 2, "paper mode asks once per frontier entity"
    assert engine.calls["SelectRelationPairs"] == 1 and engine.calls["SelectRelations"] == 0
    (pairs,) = [inputs for name, inputs in engine.requests if name == "SelectRelationPairs"]
    assert {line.rpartition(": ")[0] for line in pairs["candidates"]} == {"Inception", "Batman Begins"}
    assert "Inception: film.film.directed_by" in pairs["candidates"]
    followed = {(p[0], p[1]) for p in fused.memory["step_cycles"][0]["paths"]}
    assert followed == {(entity, "film.film.directed_by") for entity in topics}
    assert fused.answers == paper.answers == ["Christopher Nolan"]


def test_a_pair_naming_no_candidate_falls_back_to_that_entitys_best_relation(demo_kg):
    golds = {TWO_FILMS: {"relations": ["film.film.directed_by"], "entities": ["Christopher Nolan"],
                         "answers": ["Christopher Nolan"]}}
    handlers = carrying_nothing(gold_path_handlers(golds))
    only_inception = dict(handlers, SelectRelationPairs=lambda i: {"pairs": ["Inception: film.film.directed_by",
                                                                             "Batman Begins: no.such.relation"]})
    topics = {mid(demo_kg, "Inception"): "Inception", mid(demo_kg, "Batman Begins"): "Batman Begins"}
    fused, _ = ask(demo_kg, only_inception, mode="fused", question=TWO_FILMS, topics=topics)
    (fallback,) = stages(fused, "select_relation_pairs.fallback")
    assert fallback["outputs"]["entity"] == mid(demo_kg, "Batman Begins")
    assert fallback["outputs"]["invalid"] == ["Batman Begins: no.such.relation"]
    assert fused.status == "ok" and fused.answers == ["Christopher Nolan"]


def test_a_malformed_fused_reply_degrades_only_its_step(demo_kg):
    handlers = gold_path_handlers(GOLD)

    def garbled_once(inputs):  # step 1's reply is prose (the JSON retry too), step 2's is fine
        return "I think it went fine." if inputs["next_step"] != "none" else handlers["ThinkEvaluate"](inputs)

    fused, engine = ask(demo_kg, dict(handlers, ThinkEvaluate=garbled_once), mode="fused")
    assert fused.status == "ok" and fused.answers == ["London"]
    first = stages(fused, "think_evaluate")[0]
    assert first["error"], "the unusable reply is recorded"
    assert stages(fused, "think_evaluate.fallback")[0]["outputs"]["decision"] == "proceed"
    # the reply that should have predicted step 2 and chosen its relations was lost: step 2 asks Predict and
    # SelectRelationPairs itself (step 1's relations came with the plan), nothing else changes
    assert engine.calls["PredictOutcome"] == 1 and engine.calls["SelectRelationPairs"] == 1
    assert fused.costs["lm_calls_by_stage"]["think_evaluate"] == engine.calls["ThinkEvaluate"] == 3  # + JSON retry


def test_a_fused_reply_missing_its_optional_outputs_is_salvaged(demo_kg):
    handlers = gold_path_handlers(GOLD)

    def terse(inputs):  # no next_prediction / answers sections, decision with a trailing full stop
        reply = handlers["ThinkEvaluate"](inputs)
        return (f"[[ ## thought ## ]]\n{reply['thought']}\n\n[[ ## missing ## ]]\nnothing\n\n"
                f"[[ ## decision ## ]]\n{reply['decision']}.\n\n[[ ## reason ## ]]\nok")

    fused, engine = ask(demo_kg, dict(handlers, ThinkEvaluate=terse), mode="fused")
    assert fused.answers == ["London"]
    assert all(e["outputs"].get("_salvaged") for e in stages(fused, "think_evaluate"))
    assert [c["decision"] for c in fused.memory["step_cycles"]] == ["proceed", "finish"]
    assert engine.calls["PredictOutcome"] == 1 and engine.calls["Answer"] == 1, "what was not written is asked"


def test_an_ungrounded_written_answer_asks_answer_instead(demo_kg):
    handlers = gold_path_handlers(GOLD)

    def invents(inputs):
        reply = handlers["ThinkEvaluate"](inputs)
        return {**reply, "answers": ["Atlantis"]} if reply["answers"] else reply

    fused, engine = ask(demo_kg, dict(handlers, ThinkEvaluate=invents), mode="fused")
    assert stages(fused, "answer.written_rejected")[0]["outputs"]["answers"] == ["Atlantis"]
    assert engine.calls["Answer"] == 1 and fused.answers == ["London"]


def test_a_written_value_the_facts_do_not_hold_asks_answer_instead(demo_kg):
    """A value (a year, a count) passes Answer's grounding as something no entity names; written early by a fused
    evaluation it must be found in the facts, as a small model copying a demo's years ("1963", "1954") was not."""
    handlers = gold_path_handlers(GOLD)

    def copies_a_demo(inputs):
        reply = handlers["ThinkEvaluate"](inputs)
        return {**reply, "answers": ["1963", "1954"]} if reply["answers"] else reply

    fused, engine = ask(demo_kg, dict(handlers, ThinkEvaluate=copies_a_demo), mode="fused")
    assert stages(fused, "answer.written_rejected")[0]["outputs"]["answers"] == ["1963", "1954"]
    assert engine.calls["Answer"] == 1 and fused.answers == ["London"]


@pytest.mark.parametrize("mode", ["paper", "fused"])
def test_gated_choices_skip_the_call_and_are_recorded(demo_kg, mode):
    # fused: no relation choice made ahead, so every relation choice the gate does not settle is a call
    handlers = gold_path_handlers(GOLD) if mode == "paper" else carrying_nothing(gold_path_handlers(GOLD))
    off, off_engine = ask(demo_kg, handlers, mode=mode)
    on, engine = ask(demo_kg, handlers, mode=mode, gate_margin=0.0)  # any lead settles it
    stage = "select_relations" if mode == "paper" else "select_relation_pairs"
    gated = stages(on, f"{stage}.gated")
    assert gated and all(e["outputs"]["reason"] in ("margin", "one candidate") for e in gated)
    assert any(e["outputs"]["reason"] == "margin" and e["outputs"]["margin"] > 0 for e in gated)
    assert on.costs["gated_choices"] == sum(on.costs["gated_by_stage"].values()) == len(gated)
    assert on.costs["lm_calls"] == off.costs["lm_calls"] - len(gated) + off.costs["gated_choices"]
    assert stage not in on.costs["lm_calls_by_stage"]
    never, _ = ask(demo_kg, handlers, mode=mode, gate_margin=2.0)  # cosine gaps never exceed 2
    assert never.costs["lm_calls_by_stage"] == off.costs["lm_calls_by_stage"]


@pytest.mark.parametrize("mode", ["paper", "fused"])
def test_a_relation_the_step_names_is_followed_without_the_call_in_both_modes(demo_kg, mode):
    # the gold-path plan writes "follow relation r": with the named gate on, no relation choice is asked in either
    # mode, and fused mode shows no menu ahead for a step whose menus the names settle (no tokens spent on them)
    handlers = carrying_nothing(gold_path_handlers(GOLD)) if mode == "fused" else gold_path_handlers(GOLD)
    on, engine = ask(demo_kg, handlers, mode=mode, follow_named_relations=True)
    stage = "select_relations" if mode == "paper" else "select_relation_pairs"
    gated = stages(on, f"{stage}.gated")
    assert [e["outputs"]["chosen"] for e in gated if e["outputs"]["reason"] == "named by the step"] == [
        ["film.film.directed_by"], ["people.person.place_of_birth"]]
    assert stage not in on.costs["lm_calls_by_stage"] and on.costs["gated_by_stage"][stage] == len(gated)
    assert on.answers == ["London"]
    if mode == "fused":
        ahead = [inputs["candidates"] for name, inputs in engine.requests if name == "ThinkEvaluate"]
        assert ahead[0] == [], "step 2's menu is settled by its name: the call before it is shown none"


def test_stage_mode_is_a_program_option_with_paper_as_default(demo_kg):
    assert PPoGA(demo_kg).stages is StageMode.PAPER
    assert PPoGA(demo_kg, stages="fused").stages is StageMode.FUSED
    with pytest.raises(ValueError):
        PPoGA(demo_kg, stages="quick")


def test_the_artifact_records_and_restores_the_stage_mode(demo_kg, tmp_path):
    from ppoga_dspy.data import DEMO_KG

    from ppoga_dspy.app import open_program
    from ppoga_dspy.app.session import ProgramSettings
    from ppoga_dspy.lm.settings import LMSettings
    from ppoga_dspy.optimizers.artifact import Artifact, load_artifact

    compiled = PPoGA(demo_kg, stages="fused", thresholds=Thresholds(gate_margin=0.2))
    compiled.planner.think_evaluate.signature = compiled.planner.think_evaluate.signature.with_instructions("Judge.")
    path = Artifact.from_program(compiled, lm="none").save(tmp_path / "fused.json")
    assert load_artifact(path).to_dict()["stages"] == "fused"
    fresh = PPoGA(demo_kg)
    load_artifact(path).apply(fresh)
    assert fresh.stages is StageMode.FUSED and fresh.thresholds.gate_margin == 0.2
    assert fresh.planner.think_evaluate.signature.instructions == "Judge."
    settings = dict(kg=str(DEMO_KG), lm=LMSettings(lm="none"), program=str(path))
    with open_program(ProgramSettings(**settings)) as opened:
        assert opened.program.stages is StageMode.FUSED, "loading an artifact uses its mode"
    with open_program(ProgramSettings(**settings, stages="paper")) as opened:
        assert opened.program.stages is StageMode.PAPER, "--stages overrides it"
        assert opened.program.thresholds.gate_margin == 0.2


def test_an_artifact_older_than_the_fused_predictors_loads_in_paper_mode(demo_kg, tmp_path):
    import json

    from ppoga_dspy.optimizers.artifact import FUSED_PREDICTORS, Artifact, load_artifact

    program = PPoGA(demo_kg)
    program.planner.think.signature = program.planner.think.signature.with_instructions("Think hard.")
    data = Artifact.from_program(program, lm="none").to_dict()
    del data["stages"]
    for name in FUSED_PREDICTORS:
        del data["program"][name]
    (tmp_path / "old.json").write_text(json.dumps(data))
    fresh = PPoGA(demo_kg, stages="fused")
    load_artifact(tmp_path / "old.json").apply(fresh)
    assert fresh.stages is StageMode.PAPER
    assert fresh.planner.think.signature.instructions == "Think hard."


def test_a_state_saved_before_the_relations_chosen_ahead_loads_each_field_by_name(demo_kg):
    """DSPy loads a signature's fields by position, inputs first: the fused calls' `candidates` input, added since,
    would have shifted every output onto its neighbour's description. The program matches them by name."""
    from ppoga_dspy.signatures import DecomposePredict, ThinkEvaluate

    state = PPoGA(demo_kg, stages="fused").dump_state()
    for name, added in (("planner.think_evaluate", ("Candidates:", "Next Relations:")),
                        ("planner.decompose_predict", ("Candidates:", "First Relations:"))):
        fields = [f for f in state[name]["signature"]["fields"] if f["prefix"] not in added]
        for field in fields:
            field["description"] = f"compiled {field['prefix']}"
        state[name]["signature"]["fields"] = fields
    fresh = PPoGA(demo_kg, stages="fused")
    fresh.load_state(state)
    for predictor, signature, added in ((fresh.planner.think_evaluate, ThinkEvaluate, ("candidates", "next_relations")),
                                        (fresh.planner.decompose_predict, DecomposePredict,
                                         ("candidates", "first_relations"))):
        for name, info in predictor.signature.fields.items():
            extra, own = info.json_schema_extra, signature.fields[name].json_schema_extra
            assert extra["prefix"] == own["prefix"], name
            assert extra["desc"] == (own["desc"] if name in added else f"compiled {own['prefix']}"), name


def test_cli_stages_flag_reaches_the_settings():
    import argparse

    from ppoga_dspy.cli.common import add_program_options, program_settings

    parser = argparse.ArgumentParser()
    add_program_options(parser)
    assert program_settings(parser.parse_args(["--lm", "none"])).stages is None
    settings = program_settings(parser.parse_args(["--lm", "none", "--stages", "fused", "--set", "gate_margin=0.1"]))
    assert settings.stages == "fused" and settings.overrides == {"gate_margin": "0.1"}
    with pytest.raises(SystemExit):
        parser.parse_args(["--stages", "quick"])


def test_gate_margin_is_a_threshold_set_like_any_other():
    from ppoga_dspy.app.session import thresholds_with
    from ppoga_dspy.errors import ConfigError

    assert Thresholds().gate_margin is None, "gating on the margin is off by default"
    assert thresholds_with({"gate_margin": "0.1"}).gate_margin == 0.1
    assert thresholds_with({"gate_margin": "none"}, Thresholds(gate_margin=0.3)).gate_margin is None
    with pytest.raises(ConfigError, match="gate_margin"):
        thresholds_with({"gate_margin": "-1"})


def test_a_fused_retry_looks_for_what_the_thought_says_was_not_reached(demo_kg):
    """The fused ThinkEvaluate writes no `missing` (nothing but a retry read it, and the thought says the same): a
    path correction's retry is told what to look for by the thought."""
    from ppoga_dspy.method.gating import RETRY_NOTE
    from ppoga_dspy.signatures.planner import ThinkEvaluate

    assert "missing" not in ThinkEvaluate.output_fields
    handlers = gold_path_handlers(GOLD)
    first = [True]
    doubt = "The facts name no 'place of birth' entity of the director"

    def doubts_once(inputs):
        reply = handlers["ThinkEvaluate"](inputs)
        if first and first.pop():
            return {**reply, "thought": doubt, "decision": "correct_path", "answers": [], "next_relations": []}
        return reply

    program = PPoGA(demo_kg, thresholds=Thresholds(follow_named_relations=False), stages="fused")
    objectives: list[str] = []
    explore = program.executor.explore

    def recorded(run, **kwargs):
        objectives.append(kwargs["objective"])
        return explore(run, **kwargs)

    program.executor.explore = recorded
    with dspy.context(lm=scripted_lm(ScriptedEngine(dict(handlers, ThinkEvaluate=doubts_once)))):
        fused = program(question=QUESTION, topic_entities={mid(demo_kg, "Inception"): "Inception"})
    assert stages(fused, "think_evaluate")[0]["outputs"]["decision"] == "correct_path"
    assert objectives[1].endswith(f"{RETRY_NOTE}{doubt}") and RETRY_NOTE not in objectives[0]
    assert fused.answers == ["London"]
