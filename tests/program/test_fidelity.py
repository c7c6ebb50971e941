"""Issue 11: each point where the program must do what the PPoGA paper says, shown on the demo KG."""

from __future__ import annotations

import dspy

from ppoga_dspy.kg.base import Entity, Triple
from ppoga_dspy.method.costs import Costs
from ppoga_dspy.method.memory import Memory, StrategicMemory
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.method.question_run import QuestionRun
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.scripted.engine import ScriptedEngine, scripted_lm
from ppoga_dspy.scripted.gold_path import gold_path_handlers
from tests.program.test_program import GOLD, QUESTION, mid, run, stages


def test_every_chain_triple_reaches_answer_after_a_wide_exploration(demo_kg):
    """Point 1: 60 unselected candidates observed after the chain do not push the chain out of the evidence."""
    film, nolan, london = Entity("m.f", "Inception"), Entity("m.n", "Christopher Nolan"), Entity("m.l", "London")
    chain = [Triple(film, "film.film.directed_by", nolan), Triple(nolan, "people.person.place_of_birth", london)]
    memory = Memory(StrategicMemory(question=QUESTION, topic_entities=[film]))
    memory.knowledge.add_triples(chain)
    memory.knowledge.reasoning_chains.append(chain)
    noise = [Triple(london, "location.location.contains", Entity(f"m.x{i}", f"Borough number {i}")) for i in range(60)]
    memory.knowledge.add_triples(noise)
    seen: list[list[str]] = []
    handlers = gold_path_handlers(GOLD)

    def answer(inputs):
        seen.append([str(e) for e in inputs["evidence"]])
        return handlers["Answer"](inputs)

    program = PPoGA(demo_kg)
    qrun = QuestionRun(memory=memory, thresholds=Thresholds(), tools=None, costs=Costs())
    with dspy.context(lm=scripted_lm(ScriptedEngine(dict(handlers, Answer=answer)))):
        answers, _, _ = program._answer(qrun, QUESTION, [london])
    assert seen, "the Answer stage was called"
    for triple in chain:
        assert triple.text() in seen[0]
    assert answers == ["London"]


def test_evidence_is_bounded_by_a_token_budget():
    """Point 1: the budget, not a triple count, bounds what the Planner reads."""
    memory = Memory(StrategicMemory(question="q"))
    hub = Entity("m.h", "Hub")
    memory.knowledge.add_triples([Triple(hub, "r", Entity(f"m.{i}", f"Entity {i}")) for i in range(500)])
    small, large = memory.knowledge.evidence(100), memory.knowledge.evidence(1000)
    facts = [line.count(";") + 1 for line in (*small, *large)]  # one line holds the hub's facts, grouped
    assert 0 < facts[0] < facts[1]
    assert len("\n".join(small)) // 4 <= 100


def test_two_hop_question_still_answered(demo_kg):
    prediction, _ = run(demo_kg, gold_path_handlers(GOLD))
    assert prediction.answers == ["London"] and prediction.answer_ids == [mid(demo_kg, "London")]


def test_a_relation_failed_in_one_plan_is_available_to_the_next(demo_kg):
    """Point 2: r fails at step 1 of plan A; plan B needs r at its step 2 and gets it."""
    birth = "people.person.place_of_birth"
    handlers = gold_path_handlers(GOLD)
    state = {"replanned": False, "evaluations": 0}
    offered_after_replan: list[tuple[str, list[str]]] = []

    def decompose(inputs):  # plan A: a wrong one-step plan that follows r straight away
        return {"steps": [{"objective": f"follow relation {birth}", "expected_outcome": "a place"}]}

    def replan(inputs):
        state["replanned"] = True
        assert f"-{birth} was tried and failed" in inputs["knowledge"], "Replan reads what was tried and why"
        return handlers["Replan"](inputs)

    def evaluate(inputs):
        state["evaluations"] += 1
        if state["evaluations"] == 1:
            return {"decision": "replan", "reason": "the plan skips the director"}
        return handlers["Evaluate"](inputs)

    def select_relations(inputs):
        if state["replanned"]:
            offered_after_replan.append((inputs["entity"], list(inputs["candidates"])))
        return handlers["SelectRelations"](inputs)

    topics = {mid(demo_kg, "Inception"): "Inception", mid(demo_kg, "Christopher Nolan"): "Christopher Nolan"}
    prediction, _ = run(demo_kg, dict(handlers, Decompose=decompose, Replan=replan, Evaluate=evaluate,
                                      SelectRelations=select_relations), topics=topics)
    assert state["replanned"]
    nolan_offers = [c for entity, c in offered_after_replan if entity == "Christopher Nolan"]
    assert nolan_offers and all(birth in c for c in nolan_offers), "plan B starts with a clean exclusion set"
    assert prediction.answers == ["London"]
    assert prediction.memory["knowledge"]["failed_paths"] == []


def test_a_retry_avoids_its_failures_and_says_so(demo_kg):
    """Point 2: on a retry of the step, the failed paths are avoided and the model is told."""
    handlers = gold_path_handlers(GOLD)
    steps_seen: list[str] = []

    def select_relations(inputs):
        steps_seen.append(inputs["step"])
        if inputs["entity"] == "Inception" and "film.film.music" in inputs["candidates"]:
            return {"relations": ["film.film.music"]}
        return handlers["SelectRelations"](inputs)

    def evaluate(inputs):
        if "film.film.music" in inputs["observation"]:
            return {"decision": "correct_path", "reason": "the composer is not the director"}
        return handlers["Evaluate"](inputs)

    prediction, _ = run(demo_kg, dict(handlers, SelectRelations=select_relations, Evaluate=evaluate))
    assert prediction.answers == ["London"]
    assert "avoid: Inception -film.film.music" in steps_seen[1]
    assert "avoid" not in steps_seen[2], "the next step is a first try"
    by_step = prediction.memory["knowledge"]["failed_by_step"]
    assert list(by_step) == ["0"]


def test_entity_selection_keeps_its_rationale(demo_kg):
    """Point 9: the Executor's reason for its selection is in memory (and in the trace)."""
    handlers = gold_path_handlers(GOLD)

    def select_entities(inputs):
        reply = handlers["SelectEntities"](inputs)
        return dict(reply, rationale="Christopher Nolan is the director named in the facts")

    prediction, _ = run(demo_kg, dict(handlers, SelectEntities=select_entities), entities_per_step=1)
    cycles = prediction.memory["step_cycles"]
    assert all(c["rationale"] for c in cycles)
    assert any("at most 1" in c["rationale"] or "director named" in c["rationale"] for c in cycles)


def test_a_value_answer_is_kept_and_marked_ungrounded(demo_kg):
    """Point 11: an answer that is no KG entity (a count, a date, yes/no) is kept and marked, not dropped."""
    handlers = gold_path_handlers(GOLD)
    handlers["Answer"] = lambda i: {"answers": ["1970"], "reasoning": "Nolan was born in 1970"}
    prediction, _ = run(demo_kg, handlers)
    assert prediction.answers == ["1970"]
    assert prediction.answer_ids == [None] and prediction.ungrounded == ["1970"]
    assert not [e for e in prediction.trace if e["stage"] == "answer.fallback"]


def test_a_graph_answer_is_not_marked_ungrounded(demo_kg):
    prediction, _ = run(demo_kg, gold_path_handlers(GOLD))
    assert prediction.answers == ["London"] and prediction.ungrounded == []


def test_the_way_back_leads_on_not_home(demo_kg):
    """Point 5 (as issue 29 corrects it): from Nolan (reached by Inception -directed_by-> Nolan) the reverse of
    directed_by is offered, since it reaches his other films, but Inception itself is never a candidate."""
    handlers = gold_path_handlers(GOLD)
    offered: dict[str, list[str]] = {}

    def select_relations(inputs):
        offered.setdefault(inputs["entity"], list(inputs["candidates"]))
        return {"relations": ["film.film.directed_by (reverse)"]} if inputs["entity"] == "Christopher Nolan" else (
            handlers["SelectRelations"](inputs))

    prediction, engine = run(demo_kg, dict(handlers, SelectRelations=select_relations))
    assert "film.film.directed_by (reverse)" in offered["Christopher Nolan"]
    later = [inputs["candidates"] for name, inputs in engine.requests if name == "SelectEntities"]
    assert not [line for lines in later for line in lines if line.startswith("Inception ")], later
    (home, *_) = stages(prediction, "way_back.home")
    assert home["outputs"]["home"] == [mid(demo_kg, "Inception")]


ZIMMER = "Who directed the films that Hans Zimmer composed music for?"
ZIMMER_GOLD = {ZIMMER: {"relations": ["film.music_contributor.film", "film.film.directed_by"],
                        "entities": ["Inception", "Christopher Nolan"], "answers": ["Christopher Nolan"],
                        "paths": [["film.music_contributor.film", "film.film.directed_by"]]}}


def test_the_paired_reverse_way_back_is_not_offered(demo_kg):
    """Freebase stores Zimmer -film.music_contributor.film-> Inception again as Inception -film.film.music->
    Zimmer: from a film reached from Zimmer, that predicate leads only back to him, so it is not offered
    (the embedded model chose it and answered "Hans Zimmer"); relations that also go elsewhere stay."""
    handlers = gold_path_handlers(ZIMMER_GOLD)
    offered: dict[str, list[str]] = {}

    def select_relations(inputs):
        offered.setdefault(inputs["entity"], list(inputs["candidates"]))
        return handlers["SelectRelations"](inputs)

    prediction, _ = run(demo_kg, dict(handlers, SelectRelations=select_relations), question=ZIMMER,
                        topics={mid(demo_kg, "Hans Zimmer"): "Hans Zimmer"})
    assert prediction.answers == ["Christopher Nolan"]
    films = [name for name in offered if name != "Hans Zimmer"]
    assert films, offered
    for film in films:
        assert "film.film.music" not in offered[film], (film, offered[film])
        assert "film.film.directed_by" in offered[film] and "film.film.starring" in offered[film]
    (note, *_) = [e for e in prediction.trace if e["stage"] == "way_back.excluded"]
    assert note["outputs"]["origin"] == mid(demo_kg, "Hans Zimmer")


class _ByName:
    """A real ranker on names: scores a text by whether it mentions "keep" (no embedding model needed)."""

    def scores(self, query: str, texts: list[str]) -> list[float]:
        return [1.0 if "keep" in t else 0.0 for t in texts]


def test_pruning_is_per_entity_relation_group():
    """Point 6: a group over the threshold is pruned alone; a small group of another relation is untouched."""
    from ppoga_dspy.method.executor import Candidate, Executor

    hub = Entity("m.h", "Hub")
    big = [Candidate(e, Triple(hub, "r.big", e), hub) for e in (Entity(f"m.b{i}", f"keep {i}") for i in range(80))]
    small = [Candidate(e, Triple(hub, "r.small", e), hub) for e in (Entity(f"m.s{i}", f"other {i}") for i in range(5))]
    executor = Executor(ranker=_ByName())
    kept_big = executor._prune(big, "q", 70)
    kept_small = executor._prune(small, "q", 70)
    assert len(kept_big) == 70 and kept_small == small


def test_a_large_group_does_not_crowd_out_a_small_one(tmp_path):
    """Point 6, end to end: 80 players of one club and 2 of another; pruning keeps both of the small club."""
    from ppoga_dspy.kg import open_kg

    lines = [f"Hub\tbig_club\tPlayer_{i}" for i in range(80)] + [f"Hub\tsmall_club\tStar_{i}" for i in range(2)]
    path = tmp_path / "kg.txt"
    path.write_text("\n".join(lines) + "\n")
    kg = open_kg(path, dialect="irn")
    seen: list[list[str]] = []

    def select_relations(inputs):
        return {"relations": [c for c in inputs["candidates"] if "club" in c]}

    def select_entities(inputs):
        seen.append(list(inputs["candidates"]))
        return {"entities": [inputs["candidates"][0].split("  <- ")[0]], "rationale": "first"}

    handlers = dict(gold_path_handlers({}), SelectRelations=select_relations, SelectEntities=select_entities)
    try:
        run(kg, handlers, question="Which players play for Hub?", topics={"Hub": "Hub"}, prune_threshold=70)
    finally:
        kg.close()
    assert seen and sum("Star_" in line or "Star " in line for line in seen[0]) == 2
    assert len(seen[0]) == 72


def test_think_and_evaluate_read_memory_and_the_thought_shapes_the_retry(demo_kg):
    """Point 4: Think and Evaluate see the plan (status, outcome), chains and failures; the thought steers the retry
    (in both stage modes: the fused call writes no `missing`)."""
    handlers = gold_path_handlers(GOLD)
    thinks, evaluations, steps = [], [], []

    def think(inputs):
        thinks.append(inputs["memory"])
        return {"thought": "the music, not the person who directed the film", "missing": "a director"}

    def evaluate(inputs):
        evaluations.append(inputs["memory"])
        if len(evaluations) == 1:
            return {"decision": "correct_path", "reason": "wrong relation"}
        return handlers["Evaluate"](inputs)

    def select_relations(inputs):
        steps.append(inputs["step"])
        if len(steps) == 1:
            return {"relations": ["film.film.music"]}
        return handlers["SelectRelations"](inputs)

    prediction, _ = run(demo_kg, dict(handlers, Think=think, Evaluate=evaluate, SelectRelations=select_relations))
    assert prediction.answers == ["London"]
    assert "Plan:" in thinks[0] and "[in progress]" in thinks[0]
    assert "Tried and failed" in thinks[1] and "wrong relation" in thinks[1]
    assert "film.film.directed_by" in evaluations[-1], "Evaluate reads the chain found so far"
    assert "still missing: the music, not the person who directed the film" in steps[1]
