"""Issue 29: fidelity at scale. Each point is invisible on small graphs with a scripted planner; each test here
builds the small graph where it shows (and fails on the code before the fix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppoga_dspy.experiments.scripted import gold_path_handlers
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

    from ppoga_dspy.experiments.scripted import ScriptedEngine, scripted_lm
    from ppoga_dspy.method.program import PPoGA
    from ppoga_dspy.method.thresholds import Thresholds

    engine = ScriptedEngine(handlers)
    program = PPoGA(kg, thresholds=Thresholds(**thresholds), ranker=ranker)
    with dspy.context(lm=scripted_lm(engine)):
        return program(question=question, topic_entities=topics), engine


LIVED = "Which country holds a city where Pia lived?"
LIVED_GOLD = {LIVED: {"relations": ["lived_in", "located_in"], "entities": ["Zurich"], "answers": ["Switzerland"]}}


def test_backtracking_resumes_from_the_best_ranked_candidate_not_the_first_id(tmp_path):
    """Point 7: step 1 picks a dead end (Aarau_old); the retry resumes from the candidate ranked best (Zurich),
    not from the next one in id order (Basel_old, another dead end)."""
    kg = irn_kg(tmp_path, ["Pia lived_in Aarau_old", "Pia lived_in Basel_old", "Pia lived_in Zurich",
                           "Zurich located_in Switzerland"])
    handlers = gold_path_handlers(LIVED_GOLD)
    picks = iter([{"entities": ["Aarau_old"], "rationale": "the first city"}])

    def select_entities(inputs):
        return next(picks, None) or handlers["SelectEntities"](inputs)

    try:
        prediction, _ = run_ranked(kg, dict(handlers, SelectEntities=select_entities), LIVED, {"Pia": "Pia"},
                                   _Mentions("Zurich"), entities_per_step=1)
    finally:
        kg.close()
    notes = stages(prediction, "backtrack")
    assert notes, "the dead end backtracks"
    assert [e["label"] for e in notes[0]["outputs"]["frontier"]] == ["Zurich"]
    assert prediction.answers == ["Switzerland"]
