"""Issue 29: fidelity at scale. Each point is invisible on small graphs with a scripted planner; each test here
builds the small graph where it shows (and fails on the code before the fix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppoga_dspy.scripted.gold_path import gold_path_handlers
from tests.program.test_program import run, stages


def irn_kg(tmp_path: Path, lines: list[str]):
    """A real embedded store over an IRN tab-separated KB written from `head relation tail` lines."""
    from ppoga_dspy.kg import open_kg

    path = tmp_path / "kb.txt"
    path.write_text("\n".join("\t".join(line.split()) for line in lines) + "\n")
    return open_kg(path, dialect="irn")


@pytest.fixture
def films(tmp_path):
    """MetaQA's shape: films point at their actors; 'who starred with X' goes X -> film -> the film's other actors."""
    kg = irn_kg(tmp_path, [
        "Film_one starred_actors Xavier", "Film_one starred_actors Bella", "Film_one directed_by Dora",
        "Film_two starred_actors Xavier", "Film_two starred_actors Carl",
        "Film_three starred_actors Edgar",
    ])
    yield kg
    kg.close()


CO_ACTORS = "Who starred with Xavier?"
CO_ACTORS_GOLD = {CO_ACTORS: {"relations": ["starred_actors", "starred_actors"],
                              "entities": ["Film_one", "Film_two", "Bella", "Carl"], "answers": ["Bella", "Carl"]}}


def test_the_way_back_leads_on_to_siblings_not_home(films):
    """Point 8: the relation a step arrived by is offered again (it reaches the co-actors); the entity the step
    came from is never a candidate."""
    offered: dict[str, list[str]] = {}
    seen: list[list[str]] = []
    handlers = gold_path_handlers(CO_ACTORS_GOLD)

    def select_relations(inputs):
        offered.setdefault(inputs["entity"], list(inputs["candidates"]))
        return handlers["SelectRelations"](inputs)

    def select_entities(inputs):
        seen.append(list(inputs["candidates"]))
        return handlers["SelectEntities"](inputs)

    prediction, _ = run(films, dict(handlers, SelectRelations=select_relations, SelectEntities=select_entities),
                        question=CO_ACTORS, topics={"Xavier": "Xavier"}, entities_per_step=1)
    assert set(prediction.answers) <= {"Bella", "Carl"} and prediction.answers, prediction.answers
    assert "starred_actors" in offered.get("Film_one", []) + offered.get("Film_two", []), offered
    reached = [line.split("  <- ")[0] for lines in seen for line in lines]
    assert "Xavier" not in reached, "the entity the step came from is not a candidate"
    assert stages(prediction, "way_back.home"), "dropping home is traced"


class _Mentions:
    """A real ranker over texts: a text scores by whether it names `word` (no embedding model needed)."""

    def __init__(self, word: str) -> None:
        self.word = word

    def scores(self, query: str, texts: list[str]) -> list[float]:
        return [1.0 if self.word in t else 0.0 for t in texts]


def run_ranked(kg, handlers, question, topics, ranker, **thresholds):
    """`run` with the program's ranker given (pruning, menus and backtracking rank with it)."""
    import dspy

    from ppoga_dspy.method.program import PPoGA
    from ppoga_dspy.method.thresholds import Thresholds
    from ppoga_dspy.scripted.engine import ScriptedEngine, scripted_lm

    thresholds.setdefault("follow_named_relations", False)  # the Executor's own relation choice, as the paper asks
    engine = ScriptedEngine(handlers)
    program = PPoGA(kg, thresholds=Thresholds(**thresholds), ranker=ranker)
    with dspy.context(lm=scripted_lm(engine)):
        return program(question=question, topic_entities=topics), engine


LIVED = "Which country holds a city where Pia lived?"
LIVED_GOLD = {LIVED: {"relations": ["lived_in", "located_in"], "entities": ["Zurich"], "answers": ["Switzerland"]}}


def _lived_with_a_wrong_first_pick(tmp_path):
    """Pia lived in three cities, one leading on; the planner's first entity choice is the dead end Aarau_old,
    every later one the gold path's."""
    kg = irn_kg(tmp_path, ["Pia lived_in Aarau_old", "Pia lived_in Basel_old", "Pia lived_in Zurich",
                           "Zurich located_in Switzerland"])
    handlers = gold_path_handlers(LIVED_GOLD)
    picks = iter([{"entities": ["Aarau_old"], "rationale": "the first city"}])

    def select_entities(inputs):
        return next(picks, None) or handlers["SelectEntities"](inputs)

    return kg, handlers, select_entities


def test_backtracking_resumes_from_the_best_ranked_candidate_not_the_first_id(tmp_path):
    """Point 7: step 1 picks a dead end (Aarau_old); the retry resumes from the candidate ranked best (Zurich),
    not from the next one in id order (Basel_old, another dead end)."""
    kg, handlers, select_entities = _lived_with_a_wrong_first_pick(tmp_path)

    try:
        # the way back to the named relation would take Zurich before the empty step: off, to see backtracking
        prediction, _ = run_ranked(kg, dict(handlers, SelectEntities=select_entities), LIVED, {"Pia": "Pia"},
                                   _Mentions("Zurich"), entities_per_step=1, back_to_named_relation=False)
    finally:
        kg.close()
    notes = stages(prediction, "backtrack")
    assert notes, "the dead end backtracks"
    assert [e["label"] for e in notes[0]["outputs"]["frontier"]] == ["Zurich"]
    assert prediction.answers == ["Switzerland"]


def test_the_entity_cap_is_said_to_the_model(films):
    """Point 5: SelectEntities keeps at most `entities_per_step`, and its step says so."""
    seen: list[str] = []
    handlers = gold_path_handlers(CO_ACTORS_GOLD)

    def select_entities(inputs):
        seen.append(inputs["step"])
        return handlers["SelectEntities"](inputs)

    run(films, dict(handlers, SelectEntities=select_entities), question=CO_ACTORS, topics={"Xavier": "Xavier"},
        entities_per_step=1)
    assert seen and all("at most 1" in step for step in seen), seen


FORWARD = "Which player of Club_A plays as a Forward?"


def test_an_intersect_step_intersects_everything_the_earlier_branch_reached(tmp_path):
    """Point 5: step 1 reaches five players and keeps three (the cap); the conjunction with 'Forward' must
    still find P5, whom the cap left out of the frontier."""
    kg = irn_kg(tmp_path, [f"P{i} plays_for Club_A" for i in range(1, 6)] + ["P5 position Forward",
                                                                             "P6 position Forward"])
    handlers = gold_path_handlers({FORWARD: {"relations": [], "entities": [], "answers": ["P5"]}})

    def decompose(inputs):
        return {"steps": [{"objective": "find the players of Club_A", "expected_outcome": "players"},
                          {"objective": "keep those who play as Forward", "expected_outcome": "players",
                           "action": "intersect"}]}

    def select_entities(inputs):
        return {"entities": ["P1", "P2", "P3"], "rationale": "the first three"}

    try:
        prediction, _ = run(kg, dict(handlers, Decompose=decompose, SelectEntities=select_entities),
                            question=FORWARD, topics={"Club_A": "Club_A", "Forward": "Forward"}, frontier_limit=1)
    finally:
        kg.close()
    cycles = prediction.memory["step_cycles"]
    assert [e["label"] for e in cycles[0]["frontier"]] == ["P1", "P2", "P3"]
    assert [e["label"] for e in cycles[1]["frontier"]] == ["P5"]
    assert prediction.answers == ["P5"]
    chain = next(c for c in prediction.reasoning_chains if c[-1]["head"]["label"] == "P5")
    assert {t["relation"] for t in chain} == {"plays_for", "position"}, "both branches' facts are on the chain"


HUB = "Which film of the Hub_genre is the one the question wants?"


@pytest.fixture
def hub(tmp_path):
    """A hub: 700 films of one genre. The wanted film is one that a 500-row sample in the engine's order misses."""
    from ppoga_dspy.kg.base import Direction

    kg = irn_kg(tmp_path, [f"Film_{i:04d} has_genre Hub_genre" for i in range(700)])
    sample = {e.id for e in kg.neighbors("Hub_genre", "has_genre", Direction.IN, 500)}
    wanted = min(f"Film_{i:04d}" for i in range(700) if f"Film_{i:04d}" not in sample)
    yield kg, wanted
    kg.close()


def _genre_run(hub, **thresholds):
    kg, wanted = hub
    seen: list[list[str]] = []
    handlers = gold_path_handlers({HUB: {"relations": ["has_genre"], "entities": [wanted], "answers": [wanted]}})

    def select_entities(inputs):
        seen.append(list(inputs["candidates"]))
        return handlers["SelectEntities"](inputs)

    prediction, _ = run_ranked(kg, dict(handlers, SelectEntities=select_entities), HUB, {"Hub_genre": "Hub_genre"},
                               _Mentions(wanted), **thresholds)
    return prediction, seen, wanted


def test_a_hubs_whole_group_is_ranked_not_an_engine_order_sample(hub):
    """Point 3: pruning ranks all 700 films, so the wanted one is among the 70 the model sees."""
    prediction, seen, wanted = _genre_run(hub)
    assert seen and any(line.startswith(wanted) for line in seen[0]), len(seen[0]) if seen else seen
    assert prediction.answers == [wanted]
    assert not stages(prediction, "neighbors.cut")


def test_a_cut_that_remains_is_counted_and_traced(hub):
    """Point 3: under a smaller size budget the group is counted and the cut is in the trace and the observation."""
    prediction, _, _ = _genre_run(hub, neighbor_limit=100)
    (cut,) = stages(prediction, "neighbors.cut")
    assert cut["outputs"]["ranked"] == 100 and cut["outputs"]["of"] == 700
    assert "only 100 of 700" in prediction.memory["step_cycles"][0]["observation"]


def test_a_failed_entity_choice_bans_the_entities_not_the_relation(tmp_path):
    """Point 2: step 1 takes the right relation to the wrong city; the retry may take the same relation to the
    other cities (today's code banned the relation, and the retry found nothing)."""
    kg, handlers, select_entities = _lived_with_a_wrong_first_pick(tmp_path)

    def evaluate(inputs):
        if "Selected: Aarau_old" in inputs["observation"]:
            return {"decision": "correct_path", "reason": "Aarau_old is not in a country on the graph"}
        return handlers["Evaluate"](inputs)

    try:
        prediction, _ = run(kg, dict(handlers, SelectEntities=select_entities, Evaluate=evaluate), question=LIVED,
                            topics={"Pia": "Pia"}, entities_per_step=1)
    finally:
        kg.close()
    (correction,) = stages(prediction, "path_correction")
    assert correction["outputs"]["avoid"] == [] and correction["outputs"]["avoid_entities"] == ["Aarau_old"]
    cycles = prediction.memory["step_cycles"]
    assert [e["label"] for e in cycles[1]["frontier"]] == ["Zurich"], "the retry took lived_in to another city"
    assert prediction.answers == ["Switzerland"]
    assert prediction.memory["knowledge"]["failed_entities"] == {"0": ["Aarau_old"]}


def test_an_intersects_good_branch_is_not_banned_for_the_bad_one(tmp_path):
    """Point 2: one branch of a conjunction reaches nothing; the retry keeps the other branch's relation."""
    kg = irn_kg(tmp_path, [f"P{i} plays_for Club_A" for i in range(1, 6)]
                + ["P5 position Forward", "P6 position Forward", "Forward similar_to Forward"])
    handlers = gold_path_handlers({FORWARD: {"relations": [], "entities": [], "answers": ["P5"]}})
    tried: list[str] = []

    def decompose(inputs):
        return {"steps": [{"objective": "find the players of Club_A who play as Forward", "action": "intersect"}]}

    def select_relations(inputs):
        if inputs["entity"] == "Forward" and "similar_to" in inputs["candidates"] and not tried:
            tried.append("similar_to")
            return {"relations": ["similar_to"]}
        return {"relations": [c for c in inputs["candidates"] if c != "similar_to"][:1]}

    def evaluate(inputs):  # the branch that reached nothing is ignored by the intersection: P1 is not a forward
        if "P1" in inputs["observation"]:
            return {"decision": "correct_path", "reason": "these players are not all forwards"}
        return handlers["Evaluate"](inputs)

    try:
        prediction, _ = run(kg, dict(handlers, Decompose=decompose, SelectRelations=select_relations,
                                     Evaluate=evaluate),
                            question=FORWARD, topics={"Club_A": "Club_A", "Forward": "Forward"})
    finally:
        kg.close()
    (correction,) = stages(prediction, "path_correction")
    assert correction["outputs"]["avoid"] == [["Forward", "similar_to", "out"]]
    cycles = prediction.memory["step_cycles"]
    assert [e["label"] for e in cycles[-1]["frontier"]] == ["P5"], "the retry intersects both branches again"


def test_the_planner_reads_the_choice_rationale_the_caps_left_and_the_plan_at_the_answer(films):
    """Point 6: Think and Evaluate read why the entities were chosen; Evaluate reads the retries and replans left;
    Answer reads the plan and Think's conclusions beside the facts."""
    handlers = gold_path_handlers(CO_ACTORS_GOLD)
    seen: dict[str, list[dict]] = {"Think": [], "Evaluate": [], "Answer": []}

    def spy(name):
        def handler(inputs):
            seen[name].append(inputs)
            return {"thought": f"the step found what it asks for (step {len(seen[name])})", "missing": "nothing"} \
                if name == "Think" else handlers[name](inputs)
        return handler

    def select_entities(inputs):
        return {"entities": [inputs["candidates"][0].split("  <- ")[0]], "rationale": "the earliest film he made"}

    run(films, dict(handlers, SelectEntities=select_entities, **{n: spy(n) for n in seen}), question=CO_ACTORS,
        topics={"Xavier": "Xavier"}, entities_per_step=1, max_path_corrections=2, max_replans=1)
    assert "Why these: the earliest film he made" in seen["Think"][0]["observation"]
    assert "Why these: the earliest film he made" in seen["Evaluate"][0]["observation"]
    assert "retries of this step left: 2; replans left: 1" in seen["Evaluate"][0]["plan"]
    evidence = [str(line) for line in seen["Answer"][0]["evidence"]]
    assert evidence[0].startswith("Plan step 1: ") and "[completed]" in evidence[0]
    assert "Concluded at step 1: the step found what it asks for (step 1)" in evidence



def test_answer_reads_the_facts_alone_when_the_plan_lines_are_switched_off(films):
    """`answer_reads_plan=false` (the embedded artifact's setting): Answer's evidence is the facts alone."""
    handlers = gold_path_handlers(CO_ACTORS_GOLD)
    seen: list[dict] = []

    def answer(inputs):
        seen.append(inputs)
        return handlers["Answer"](inputs)

    prediction = run(films, dict(handlers, Answer=answer), question=CO_ACTORS, topics={"Xavier": "Xavier"},
                     answer_reads_plan=False)[0]
    evidence = [str(line) for line in seen[0]["evidence"]]
    assert evidence and not any(line.startswith(("Plan step", "Concluded at step")) for line in evidence)
    assert prediction.answers, "the facts alone still answer"


@pytest.mark.parametrize("named", [["Xavier"], ["Film_one"], ["Film_two", "Xavier"]])
def test_an_answer_naming_a_stop_on_the_way_is_redirected_to_where_the_walk_ended(films, named):
    """`answer_at_walk_end` (the embedded artifact's setting): the topic, or a film the walk moved on from, is no
    answer to "who starred with"; the last step's entities are. Off, the model's answer stands."""
    handlers = gold_path_handlers(CO_ACTORS_GOLD)
    stop = dict(handlers, Answer=lambda inputs: {"answers": named, "reasoning": "read from the facts"})
    redirected, _ = run(films, stop, question=CO_ACTORS, topics={"Xavier": "Xavier"}, answer_at_walk_end=True)
    assert sorted(redirected.answers) == ["Bella", "Carl"]
    (note,) = stages(redirected, "answer.walk_end")
    assert note["outputs"]["answers"] and set(note["outputs"]["answers"]) <= set(named)  # after grounding
    kept, _ = run(films, stop, question=CO_ACTORS, topics={"Xavier": "Xavier"}, answer_at_walk_end=False)
    assert kept.answers and set(kept.answers) <= set(named) and not stages(kept, "answer.walk_end")


def test_a_stop_named_beside_a_real_answer_is_dropped(films):
    handlers = gold_path_handlers(CO_ACTORS_GOLD)
    mixed = dict(handlers, Answer=lambda inputs: {"answers": ["Film_one", "Bella"], "reasoning": "read from the facts"})
    prediction, _ = run(films, mixed, question=CO_ACTORS, topics={"Xavier": "Xavier"}, answer_at_walk_end=True)
    assert prediction.answers == ["Bella"]
    assert stages(prediction, "answer.walk_end")[0]["outputs"]["applied"] == ["Bella"]


def test_a_candidate_the_walk_passed_over_is_a_stop_too(films):
    """Answer reads every fact a step reached, kept or not: a film the first step reached and did not keep is no
    answer to "who starred with" either."""
    handlers = gold_path_handlers(CO_ACTORS_GOLD)
    passed = dict(handlers, Answer=lambda inputs: {"answers": ["Film_two"], "reasoning": "read from the facts"})
    prediction, _ = run(films, passed, question=CO_ACTORS, topics={"Xavier": "Xavier"}, entities_per_step=1,
                        answer_at_walk_end=True)
    assert prediction.answers and "Film_two" not in prediction.answers
    assert stages(prediction, "answer.walk_end")


def test_an_answer_among_the_last_entities_is_never_redirected(films):
    handlers = gold_path_handlers(CO_ACTORS_GOLD)
    last = dict(handlers, Answer=lambda inputs: {"answers": ["Carl"], "reasoning": "read from the facts"})
    prediction, _ = run(films, last, question=CO_ACTORS, topics={"Xavier": "Xavier"}, answer_at_walk_end=True)
    assert prediction.answers == ["Carl"] and not stages(prediction, "answer.walk_end")


def test_a_relation_the_step_names_is_followed_without_select_relations_when_gated(films):
    """`follow_named_relations` (on by default): the plan's "follow relation starred_actors ..." settles the choice;
    a SelectRelations that would stray is never asked. Off, the Executor's choice is the model's."""
    handlers = gold_path_handlers(CO_ACTORS_GOLD)
    astray = dict(handlers, SelectRelations=lambda inputs: {"relations": ["directed_by (reverse)"]})
    gated, engine = run(films, astray, question=CO_ACTORS, topics={"Xavier": "Xavier"}, follow_named_relations=True)
    assert sorted(gated.answers) == ["Bella", "Carl"]
    assert engine.calls["SelectRelations"] == 0
    notes = stages(gated, "select_relations.gated")
    assert "named by the step" in {n["outputs"]["reason"] for n in notes}
    asked, engine = run(films, astray, question=CO_ACTORS, topics={"Xavier": "Xavier"})
    assert engine.calls["SelectRelations"] > 0 and sorted(asked.answers) != ["Bella", "Carl"]

BORN = "Where was the director of Inception born?"
BORN_GOLD = {BORN: {"relations": ["directed_by", "place_of_birth"], "entities": ["Christopher_Nolan"],
                    "answers": ["London"]}}


def _knows_london(handlers):
    """A capable model: the graph lacks the birthplace, the model knows it and says where it came from."""
    def answer(inputs):
        evidence = " ".join(str(e) for e in inputs.get("evidence") or [])
        if "London" in evidence:
            return handlers["Answer"](inputs)
        return {"answers": ["London"], "reasoning": "the evidence lacks it; from my own knowledge"}
    return dict(handlers, Answer=answer)


def test_the_models_own_answer_is_kept_and_marked_ungrounded_over_a_loopback_server(tmp_path):
    """Point 1, end to end: a loopback OpenAI-compatible LM server, a KG that lacks the fact; the model's answer
    is kept (not the last frontier), marked ungrounded, and the evaluation scores it apart."""
    import dspy

    from ppoga_dspy.evaluation.evaluate import record_for, summarize
    from ppoga_dspy.lm import make_lm, serve_lm
    from ppoga_dspy.method.program import PPoGA
    from ppoga_dspy.scripted.engine import ScriptedEngine

    kg = irn_kg(tmp_path, ["Inception directed_by Christopher_Nolan", "Inception release_year 2010"])
    engine = ScriptedEngine(_knows_london(gold_path_handlers(BORN_GOLD)))
    try:
        with serve_lm(engine, model_name="knows-london") as server:
            lm = make_lm(f"openai/knows-london@{server.url}", cache=False)
            prediction = PPoGA(kg, role_lms={"planner": lm, "executor": lm})(
                question=BORN, topic_entities={"Inception": "Inception"})
            assert server.stats.requests == prediction.costs["lm_calls"] > 1
    finally:
        kg.close()
    assert prediction.status == "ok"
    assert prediction.answers == ["London"] and prediction.ungrounded == ["London"]
    assert prediction.answer_ids == [None] and not stages(prediction, "answer.fallback")
    assert stages(prediction, "answer.ungrounded_kept")
    example = dspy.Example(question=BORN, answers=["London"], topic_entities={}, metadata={}).with_inputs("question")
    summary = summarize([record_for(example, prediction, 1.0)])
    assert summary["grounding"] == {"ungrounded": {"n": 1, "hits@1": 1.0}}


def test_with_no_topic_entity_the_planner_answers_from_its_knowledge_in_one_call(films):
    """Point 1: nothing of the question is on the graph; one Answer call instead of a plan that walks nowhere."""
    question = "Who wrote Hamlet?"
    handlers = gold_path_handlers({})
    handlers["Answer"] = lambda i: {"answers": ["William Shakespeare"], "reasoning": "from my own knowledge"}
    prediction, engine = run_ranked(films, handlers, question, None, _Mentions("Hamlet"))
    assert prediction.status == "ok"
    assert prediction.answers == ["William Shakespeare"] and prediction.ungrounded == ["William Shakespeare"]
    assert dict(engine.calls) == {"Answer": 1} and prediction.costs["lm_calls"] == 1


PARENT = "What is the gender of the parent of Eleanor's daughter?"


def test_another_fact_back_to_where_the_step_came_from_is_still_a_path(tmp_path):
    """Point 8: only the fact the step came by is the way home; PathQuestion walks back to Eleanor over `parents`
    (a fact of its own), and that is the question's path."""
    kg = irn_kg(tmp_path, ["Eleanor children Margaret", "Margaret parents Eleanor", "Margaret parents Edward",
                           "Eleanor gender female", "Edward gender male"])
    handlers = gold_path_handlers({PARENT: {"relations": ["children", "parents", "gender"],
                                            "entities": ["Margaret", "Eleanor", "female"], "answers": ["female"]}})
    try:
        prediction, _ = run(kg, handlers, question=PARENT, topics={"Eleanor": "Eleanor"})
    finally:
        kg.close()
    assert prediction.answers == ["female"]


SPOUSE_NATION = "What is the nationality of Frederica's spouse?"


def test_a_way_back_that_reaches_only_home_is_not_offered(tmp_path):
    """Point 8: the arriving relation stays on the menu where it leads on to siblings, and leaves it where it
    reaches nothing but the entity the step came from (a spouse's one spouse): offered, it is a choice that can
    only lead nowhere (a planner that takes it finds nothing and the step fails)."""
    kg = irn_kg(tmp_path, ["Frederica spouse Ernest", "Ernest nationality United_Kingdom",
                           "Film_one starred_actors Xavier", "Film_one starred_actors Bella",
                           "Film_two starred_actors Xavier", "Film_one directed_by Dora"])
    offered: dict[str, list[str]] = {}
    gold = {SPOUSE_NATION: {"relations": ["spouse", "nationality"], "entities": ["Ernest", "United_Kingdom"],
                            "answers": ["United_Kingdom"]}, **CO_ACTORS_GOLD}
    handlers = gold_path_handlers(gold)

    def select_relations(inputs):
        offered.setdefault(inputs["entity"], list(inputs["candidates"]))
        return handlers["SelectRelations"](inputs)

    try:
        prediction, _ = run(kg, dict(handlers, SelectRelations=select_relations), question=SPOUSE_NATION,
                            topics={"Frederica": "Frederica"})
        assert prediction.answers == ["United_Kingdom"]
        assert "Ernest" not in offered, f"one relation left at Ernest: no choice to make, no call ({offered})"
        dead = stages(prediction, "way_back.dead_end")
        assert dead and dead[0]["outputs"]["relation"] == "spouse (reverse)", dead
        siblings, _ = run(kg, dict(handlers, SelectRelations=select_relations), question=CO_ACTORS,
                          topics={"Xavier": "Xavier"}, entities_per_step=1)
        assert not stages(siblings, "way_back.dead_end"), "a way back that reaches co-actors stays offered"
    finally:
        kg.close()


def test_ask_json_carries_the_ungrounded_answers_as_eval_rows_do(tmp_path, capsys):
    """`ppoga ask --json` says which answers name no graph entity, under the same key as an eval row."""
    import json

    from ppoga_dspy.cli import main
    from ppoga_dspy.lm import serve_lm
    from ppoga_dspy.scripted.engine import ScriptedEngine

    kb = tmp_path / "kb.txt"
    kb.write_text("Inception\tdirected_by\tChristopher_Nolan\nInception\trelease_year\t2010\n")
    engine = ScriptedEngine(_knows_london(gold_path_handlers(BORN_GOLD)))
    with serve_lm(engine, model_name="knows-london") as server:
        code = main(["ask", BORN, "--kg", str(kb), "--dialect", "irn", "--topic", "Inception", "--json",
                     "--no-cache", "--lm", f"openai/knows-london@{server.url}", "--program", "none"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["answers"] == ["London"] and result["ungrounded"] == ["London"]
