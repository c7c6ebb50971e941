"""Decode-time constraints of the embedded engine: what they read from DSPy's prompts, the token trie on the
real tokenizer, the switch and its place in the engine's identity, and (few, slow) real-model decodes."""

from __future__ import annotations

import dspy
import pytest

from ppoga_dspy.inference.constraints import (
    FREE_TEXT_TOKENS,
    RULES_VERSION,
    Choice,
    FreeText,
    ObjectList,
    OneOf,
    TokenTrie,
    choice_options,
    constraints_for,
    evidence_names,
    read_prompt,
)
from ppoga_dspy.inference.guided import _whole_words
from ppoga_dspy.inference.options import CONSTRAIN_ENV, FREE_TEXT_TOKENS_ENV
from ppoga_dspy.lm.embedded import EmbeddedEngine
from ppoga_dspy.lm.errors import LMConfigError
from ppoga_dspy.lm.guard import engine_identity
from ppoga_dspy.signatures.executor import SelectEntities, SelectRelations
from ppoga_dspy.signatures.planner import Answer, Decompose, Evaluate, PlanStep, Replan, Think, ThinkEvaluate
from ppoga_dspy.signatures.vocabulary import Decision, StepAction

RELATIONS = ["zq.member_of_squad", "zq.member_of_squad (reverse)", "wc.player.plays_for", "wc.coach"]
ENTITY_LINES = ["Lionel Messi  <- (Argentina, squad, Lionel Messi)",
                "Sergio Aguero  <- (Argentina, squad, Sergio Aguero)"]


def chat_for(signature, **inputs):
    return dspy.ChatAdapter().format(signature, demos=[], inputs=inputs)


def choices_of(chat):
    """The constraints of a prompt that choose or shape a value (the free-text cap left out)."""
    return constraints_for(chat, free_text_tokens=0)


def relations_chat():
    return chat_for(SelectRelations, question="Which club does Messi play for?", step="find the club of the player",
                    entity="Lionel Messi", candidates=RELATIONS)


def test_choice_fields_read_their_candidates_from_the_prompt():
    assert choices_of(relations_chat()) == {"relations": Choice(tuple(RELATIONS))}
    entities = choices_of(chat_for(SelectEntities, question="q", step="s", candidates=ENTITY_LINES))
    # a candidate line's bare entity name is a valid choice too; `rationale` stays free
    assert entities == {"entities": Choice(("Lionel Messi", ENTITY_LINES[0], "Sergio Aguero", ENTITY_LINES[1]))}


def test_a_choice_with_nothing_to_choose_from_is_the_empty_list():
    inputs = dict(question="q", step="s", prediction="p", observation="o", memory="m", next_step="none")
    after_the_last_step = choices_of(chat_for(ThinkEvaluate, **inputs, candidates=[]))
    assert after_the_last_step["next_relations"] == Choice(())  # written as [] by the engine, no token decoded
    ahead = choices_of(chat_for(ThinkEvaluate, **inputs, candidates=["A: r", "B: s"]))
    assert ahead["next_relations"] == Choice(("A: r", "B: s"))
    assert "answers" not in ahead  # the evaluation's answers are no choice among the relations


def test_decisions_are_the_four_and_plans_are_lists_of_steps():
    evaluate = choices_of(chat_for(Evaluate, question="q", plan="p", step="s", observation="o", thought="t",
                                   memory="m"))
    assert evaluate == {"decision": OneOf(tuple(d.value for d in Decision))}
    # required property first, then DSPy's (sorted) schema order; a step's action is one of the StepActions
    plan = ObjectList(("objective", "action", "expected_outcome"),
                      options=(("action", tuple(a.value for a in StepAction)),))
    assert constraints_for(chat_for(Decompose, question="q", topic_entities=["A"])) == {"steps": plan}
    replan = chat_for(Replan, question="q", topic_entities=["A"], failed_plan="x", knowledge="k")
    assert constraints_for(replan) == {"new_steps": plan}  # no `str` output: nothing capped


def test_a_plan_is_written_in_the_key_order_of_its_demos():
    # Demos serialise a step as the model class declares it (objective, expected_outcome, action); a copying
    # model that meets another order mid-object leaves the pattern (it opened a fourth identical step).
    from ppoga_dspy.signatures.planner import PlanStep

    demo = dspy.Example(question="q0", topic_entities=["B"],
                        steps=[PlanStep(objective="find the director", expected_outcome="a person", action="explore")])
    chat = dspy.ChatAdapter().format(Decompose, demos=[demo], inputs=dict(question="q", topic_entities=["A"]))
    steps = constraints_for(chat)["steps"]
    assert steps.properties == ("objective", "expected_outcome", "action")
    assert steps.options_of("action") == tuple(a.value for a in StepAction)
    # a demo that lacks a property keeps the schema's place for it, after the demo's keys
    old = dspy.Example(question="q0", topic_entities=["B"], steps=[{"objective": "x", "expected_outcome": "y"}])
    chat = dspy.ChatAdapter().format(Decompose, demos=[old], inputs=dict(question="q", topic_entities=["A"]))
    assert constraints_for(chat)["steps"].properties == ("objective", "expected_outcome", "action")


def test_answers_are_chosen_among_the_evidence_names():
    # the model copied "1979-04-04" as "1989-04-04"; decoded as a choice it can only name what the facts name
    evidence = ["(Heath Ledger, people.person.date_of_birth, 1979-04-04)",
                "(The Dark Knight, film.film.starring, [film.performance.actor: Heath Ledger; "
                "film.performance.character: Joker]; [film.performance.actor: Michael Caine; "
                "film.performance.character: Alfred Pennyworth])",
                "(Batman Begins; Inception, film.film.music, Hans Zimmer)",
                "(Paris, Texas, film.film.directed_by, Wim Wenders)"]
    assert evidence_names(evidence) == ("Heath Ledger", "1979-04-04", "The Dark Knight", "Joker", "Michael Caine",
                                        "Alfred Pennyworth", "Batman Begins", "Inception", "Hans Zimmer",
                                        "Paris, Texas", "Wim Wenders")
    answer = choices_of(chat_for(Answer, question="q", evidence=evidence))
    assert answer == {"answers": Choice(evidence_names(evidence))}  # `reasoning` stays free
    assert evidence_names(["not a fact", "(only, two)"]) == ()


def test_free_text_fields_are_capped_and_only_capped():
    assert choices_of(chat_for(Answer, question="q", evidence=[])) == {}  # nothing to choose from
    think = chat_for(Think, question="q", step="s", prediction="p", observation="o", memory="m")
    assert constraints_for(think) == {"thought": FreeText(FREE_TEXT_TOKENS), "missing": FreeText(FREE_TEXT_TOKENS)}
    assert constraints_for(think, free_text_tokens=20)["thought"] == FreeText(20)
    assert choices_of(think) == {}
    # Answer's list of names is chosen among the evidence, its reasoning only capped
    answer = constraints_for(chat_for(Answer, question="q", evidence=["(A, r, B)"]))
    assert isinstance(answer["answers"], Choice) and answer["reasoning"] == FreeText(FREE_TEXT_TOKENS)
    assert constraints_for([{"role": "user", "content": "Just chat."}]) == {}


def test_a_capped_text_loses_the_word_the_cap_split():
    assert _whole_words("The facts link Jane Greer to Robert You") == "The facts link Jane Greer to Robert"
    assert _whole_words("It is Drama, Western,") == "It is Drama, Western,"  # ends on punctuation: kept
    assert _whole_words("The facts link A, B, C") == "The facts link A, B"
    assert _whole_words("Supercalifragilistic") == "Supercalifragilistic"  # one word: nothing to cut back to


def test_the_free_text_cap_is_part_of_the_engine_identity(monkeypatch):
    monkeypatch.delenv(FREE_TEXT_TOKENS_ENV, raising=False)
    capped, uncapped = EmbeddedEngine(), EmbeddedEngine(free_text_tokens=0)
    assert capped.free_text_tokens == FREE_TEXT_TOKENS and uncapped.free_text_tokens == 0
    assert engine_identity(capped) != engine_identity(uncapped)
    assert EmbeddedEngine.load_state(uncapped.dump_state()).free_text_tokens == 0
    monkeypatch.setenv(FREE_TEXT_TOKENS_ENV, "32")
    assert EmbeddedEngine().free_text_tokens == 32
    monkeypatch.setenv(FREE_TEXT_TOKENS_ENV, "-1")
    with pytest.raises(LMConfigError, match=FREE_TEXT_TOKENS_ENV):
        EmbeddedEngine()


def test_the_prompt_reader_takes_the_last_user_message_with_demos_before_it():
    demo = dspy.Example(question="q0", step="s0", entity="e0", candidates=["old.relation"], relations=["old.relation"])
    chat = dspy.ChatAdapter().format(SelectRelations, demos=[demo], inputs=dict(
        question="q", step="s", entity="e", candidates=RELATIONS))
    assert len(chat) > 2
    prompt = read_prompt(chat)
    assert prompt.outputs == ["relations"] and prompt.types["relations"] == "list[str]"
    assert constraints_for(chat)["relations"].options == tuple(RELATIONS)  # not the demo's candidates


def test_choice_options_keep_order_and_drop_duplicates():
    lines = ["a  <- (x, r, a)", "a  <- (y, r, a)", "b"]
    assert choice_options(lines) == ("a", lines[0], lines[1], "b")


def test_constrain_switch_is_part_of_the_engine_identity(monkeypatch):
    monkeypatch.delenv(CONSTRAIN_ENV, raising=False)
    on, off = EmbeddedEngine(), EmbeddedEngine(constrain=False)
    assert on.constrain is True and off.constrain is False
    assert engine_identity(on) != engine_identity(off)  # the response cache never mixes the two
    assert EmbeddedEngine.load_state(off.dump_state()).constrain is False
    assert on.dump_state()["constraint_rules"] == RULES_VERSION  # a new decoder never reuses an old one's replies
    from ppoga_dspy.inference.decoding import DECODER_VERSION

    assert on.dump_state()["decoder"] == DECODER_VERSION  # nor does a fast path whose greedy replies changed
    assert EmbeddedEngine(legacy=True).dump_state()["decoder"] is None
    monkeypatch.setenv(CONSTRAIN_ENV, "0")
    assert EmbeddedEngine().constrain is False
    monkeypatch.setenv(CONSTRAIN_ENV, "maybe")
    with pytest.raises(LMConfigError, match=CONSTRAIN_ENV):
        EmbeddedEngine()


def test_the_constrain_setting_reaches_the_embedded_engine(monkeypatch, tmp_path):
    from ppoga_dspy.lm import ENV_VARS, build_role_lms, load_lm_settings

    assert ENV_VARS["constrain"] == CONSTRAIN_ENV  # one variable, read by the settings and by a bare engine
    monkeypatch.delenv(CONSTRAIN_ENV, raising=False)
    assert build_role_lms(load_lm_settings(lm="local/embedded"))["planner"].engine.constrain is True
    monkeypatch.setenv(CONSTRAIN_ENV, "false")
    assert build_role_lms(load_lm_settings(lm="local/embedded"))["executor"].engine.constrain is False
    monkeypatch.delenv(CONSTRAIN_ENV)
    config = tmp_path / "ppoga.toml"
    config.write_text('[lm]\nlm = "local/embedded"\nconstrain = false\n')
    assert build_role_lms(load_lm_settings(config=config))["planner"].engine.constrain is False


@pytest.mark.slow
def test_the_trie_on_the_real_tokenizer_holds_exactly_the_candidates(embedded_engine):
    tokenizer = embedded_engine.loaded().tokenizer
    trie = TokenTrie.of_texts(tokenizer, RELATIONS)
    for index, name in enumerate(RELATIONS):
        ids = tokenizer(name, add_special_tokens=False)["input_ids"]
        node = trie.walk(ids)
        assert node is not None and TokenTrie.ended(node) == index
        assert TokenTrie.ended(trie.walk(ids[:-1])) is None  # a proper prefix is no candidate
    # "zq.member_of_squad" ends where the "(reverse)" one goes on: both ways stay open
    assert TokenTrie.next_tokens(trie.walk(tokenizer(RELATIONS[0], add_special_tokens=False)["input_ids"]))
    assert trie.walk(tokenizer("wc.player.nationality", add_special_tokens=False)["input_ids"]) is None


@pytest.mark.slow
def test_masked_decoding_always_lands_on_a_candidate_even_when_sampling(embedded_engine):
    import torch

    loaded = embedded_engine.loaded()
    trie = TokenTrie.of_texts(loaded.tokenizer, RELATIONS)
    text = embedded_engine.render(relations_chat()) + ' [[ ## relations ## ]]\n["'
    sampling = {"do_sample": True, "temperature": 2.0, "top_p": None, "top_k": None}
    picked = set()
    for seed in range(4):
        torch.manual_seed(seed)
        index, tokens = embedded_engine._choose(loaded, text, trie, loaded.tokens_starting_with('"'), sampling)
        assert index is not None and 0 <= index < len(RELATIONS) and tokens >= 1
        picked.add(index)
    assert picked <= set(range(len(RELATIONS)))


@pytest.mark.slow
def test_a_select_relations_call_decodes_to_candidate_names(embedded_engine):
    """The real model through DSPy: unconstrained it writes a question back; constrained, candidate names."""
    from ppoga_dspy.lm.factory import make_lm

    inputs = dict(question="Which club does Messi play for?", step="find the club of the player",
                  entity="Lionel Messi", candidates=RELATIONS)
    engine = embedded_engine if embedded_engine.constrain else EmbeddedEngine(constrain=True)
    with dspy.context(lm=make_lm(engine.model_string, engine=engine, cache=False),
                      adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)):
        relations = dspy.Predict(SelectRelations)(**inputs).relations
        evaluate = dspy.Predict(Evaluate)(question="Which club does Messi play for?", plan="1. find the club",
                                          step="find the club", observation="(Messi, plays_for, Inter Miami)",
                                          thought="the club is found", memory="")
        decompose = dspy.Predict(Decompose)
        decompose.demos = [dspy.Example(question=q, topic_entities=[t], steps=[
            {"objective": f"follow relation {a}", "expected_outcome": "an entity"},
            {"objective": f"follow relation {b}", "expected_outcome": "an entity"}]) for q, t, a, b in (
            ("what is the nationality of the spouse of anne_of_denmark ?", "anne_of_denmark", "spouse", "nationality"),
            ("which religion is the father of louis_xiv ?", "louis_xiv", "parents", "religion"))]
        steps = decompose(question="which nationality is the couple of frederica ?", topic_entities=["frederica"]).steps
    last = engine.generate(chat_for(ThinkEvaluate, question="Which club does Messi play for?", step="find the club",
                                    prediction="a club", observation="(Messi, plays_for, Inter Miami)", memory="",
                                    next_step="none", candidates=[])).text
    assert relations and set(relations) <= set(RELATIONS) and len(relations) == len(set(relations))
    assert evaluate.decision in {d.value for d in Decision}
    # two-step demos give a two-step plan: the engine's separators must not cut a plan after its first step
    assert len(steps) >= 2 and all(isinstance(s, PlanStep) and s.objective.strip() for s in steps)
    assert "[[ ## next_relations ## ]]\n[]\n" in last  # nothing to choose from: nothing made up
    tokenizer = engine.loaded().tokenizer
    assert len(tokenizer(evaluate.reason, add_special_tokens=False)["input_ids"]) <= FREE_TEXT_TOKENS
    assert all(s.action in {a.value for a in StepAction} for s in steps)  # an enum property is chosen, not written
