"""The scripted planners write their free text as a careful model would, and the shipped artifact teaches that.

Compiled artifacts are bootstrapped from these planners, and the embedded student copies its demos: a
placeholder ("compared", "scripted") in a demo is what the student learns to write, and what a person
reads in `ppoga ask`'s trace. So: no placeholder in any demo of the shipped artifact or any free-text field
of a scripted run (gold-path and noisy, paper and fused stages); the texts name the step's relation and the
entities it saw; and no text names a gold answer that its call's inputs do not hold (a step that has not
reached the answer cannot know it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.method.pruning import EmbeddingRanker
from ppoga_dspy.scripted import texts
from ppoga_dspy.scripted.specs import scripted_lm_for_spec
from tests.conftest import DEMO_KG

ARTIFACT = Path(__file__).resolve().parents[2] / "data" / "embedded-demo.json"
#: What the planners used to write in place of reasoning, and must never write again.
PLACEHOLDERS = re.compile(r"scripted|compared|gold path|read from the (evidence|chain)|the step will|"
                          r"looks like what the step|on the path the step|meets the objective", re.I)
#: Output fields that are free text (plans are checked through their expected outcomes).
FREE_TEXT = ("prediction", "first_prediction", "next_prediction", "thought", "missing", "reason", "rationale",
             "reasoning", "expected_outcome")


def free_texts(outputs: dict) -> list[tuple[str, str]]:
    """(field, text) of every free-text output, a plan's expected outcomes included."""
    found = [(k, str(v)) for k, v in outputs.items() if k in FREE_TEXT]
    for key in ("steps", "new_steps"):
        found += [("expected_outcome", str(s.get("expected_outcome", ""))) for s in outputs.get(key) or []
                  if isinstance(s, dict)]
    return found


def test_every_demo_of_the_shipped_artifact_reads_as_reasoning():
    artifact = json.loads(ARTIFACT.read_text(encoding="utf-8"))
    records = [record for rows in artifact["knn"]["records"].values() for _, record in rows]
    records += [demo for state in artifact["program"].values() for demo in state.get("demos") or []]
    assert len(records) > 500, "the knn pool holds every stage of the 109 training questions"
    checked = 0
    for record in records:
        for field, text in free_texts(record):
            assert text.strip() and text.strip().casefold() not in ("nothing", "none", "an entity"), (field, record)
            assert not PLACEHOLDERS.search(text), (field, text)
            checked += 1
        if "prediction" in record and "step" in record:  # the prediction names the step's relation
            assert texts.step_relations(record["step"])[0] in record["prediction"], record
    assert checked > 1000


@pytest.fixture(scope="module")
def demo():
    from ppoga_dspy.kg import open_kg

    examples = load_dataset("demo")[::3]  # 12 questions: one- to three-hop, through mediators
    kg = open_kg(DEMO_KG)
    yield examples, kg, EmbeddingRanker()
    kg.close()


@pytest.mark.parametrize("stages", ["paper", "fused"])
@pytest.mark.parametrize("spec", ["oracle/gold-path", "oracle/noisy:0.4"])
def test_scripted_runs_write_what_the_step_saw(demo, spec, stages):
    examples, kg, ranker = demo
    lm = scripted_lm_for_spec(spec, examples, seed=0, kg=kg)
    program = PPoGA(kg, role_lms={"planner": lm, "executor": lm}, ranker=ranker, stages=stages)
    fields, named = 0, 0
    for example in examples:
        row = program(question=example.question, topic_entities=example.topic_entities)
        for entry in row.trace:
            outputs, inputs = entry.get("outputs") or {}, entry.get("inputs") or {}
            if not isinstance(outputs, dict):
                continue
            seen = json.dumps(inputs, ensure_ascii=False)
            for field, text in free_texts(outputs):
                if field == "next_prediction" and not text:  # nothing to predict after the last step
                    continue
                fields += 1
                assert text.strip() and not PLACEHOLDERS.search(text), (spec, stages, entry["stage"], field, text)
                for answer in example.answers:  # never the gold answer before the step reached it
                    assert answer not in text or answer in seen, (entry["stage"], field, text)
            if entry["stage"] in ("predict", "decompose_predict"):
                step = inputs.get("step") or (outputs.get("steps") or [{}])[0].get("objective", "")
                said = outputs.get("prediction") or outputs.get("first_prediction")
                assert texts.step_relations(step)[0] in said, (step, said)
            if entry["stage"] in ("think", "think_evaluate") and texts.facts_of(str(inputs.get("observation"))):
                heads = {texts.plain(h) for f in texts.facts_of(str(inputs["observation"])) for h in f.heads}
                assert any(h in outputs["thought"] for h in heads), (inputs["observation"], outputs["thought"])
                named += 1
            if entry["stage"] == "select_entities" and outputs.get("entities"):
                # right or wrong, the rationale names the entity the planner chose
                assert outputs["rationale"].startswith(str(outputs["entities"][0])), outputs
            if entry["stage"] == "answer" and outputs.get("answers"):  # the reasoning cites the facts it read
                assert outputs["reasoning"].startswith("From ("), outputs
    assert fields > 50 and named > 5


def test_facts_and_chains_are_read_through_mediators():
    fact = texts.parse_fact("(Joker, film.film_character.portrayed_in_films, "
                            "[film.performance.actor: Heath Ledger; film.performance.film: The Dark Knight])")
    assert fact is not None and fact.heads == ["Joker"] and len(fact.tails) == 1
    assert texts.plain(fact.tails[0]) == "Heath Ledger, The Dark Knight"
    evidence = ["(Inception, film.film.directed_by, Christopher Nolan)",
                "(Christopher Nolan, people.person.place_of_birth, London)"]
    assert texts.answer_reasoning(evidence, ["London"], "Where was the director of Inception born?") == (
        "From (Inception, film.film.directed_by, Christopher Nolan) and "
        "(Christopher Nolan, people.person.place_of_birth, London), the answer is London.")
    assert texts.answer_reasoning([], [], "q") == "No fact in the evidence names an answer to the question."
    plan = "1. follow relation a.b.c [completed]\n2. follow relation d.e.place_of_birth [in progress]"
    assert texts.later_step({"plan": plan}) == ""
    assert texts.later_step({"next_step": "follow relation x.y.z"}) == "follow relation x.y.z"
    assert texts.prediction("follow relation people.person.place_of_birth") == (
        "Following people.person.place_of_birth should reach the entity linked as 'place of birth'.")
