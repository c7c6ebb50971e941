"""The noisy planner in `--stages fused`: the same decisions at the same error rates as in paper mode.

A fused call must not give the planner fewer chances to err: each fused handler makes the separate
calls' decisions with the same seeded draws (one judge draw per observation, one relation draw per
frontier entity), so both modes meet the same mistakes and reach the same answers; only the number
of calls differs.
"""

from __future__ import annotations

import pytest

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.method.pruning import EmbeddingRanker
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.scripted.specs import scripted_lm_for_spec
from tests.conftest import shared_data


@pytest.fixture(scope="module")
def wc():
    from ppoga_dspy.kg import open_kg

    examples = load_dataset(f"wc2014:{shared_data('wc2014', 'WC-P2.txt')}", split="test", limit=25)
    kg = open_kg(shared_data("wc2014", "WC2014.txt"))
    yield examples, kg, EmbeddingRanker()
    kg.close()


def _run(wc, stages: str, p: float = 0.3):
    examples, kg, ranker = wc
    lm = scripted_lm_for_spec(f"oracle/noisy:{p}", examples, seed=0, kg=kg)
    program = PPoGA(kg, role_lms={"planner": lm, "executor": lm}, ranker=ranker, stages=stages,
                    thresholds=Thresholds(follow_named_relations=False))  # its relation mistakes are the Executor's
    return [program(question=ex.question, topic_entities=ex.topic_entities) for ex in examples], lm.engine.planner.stats


def _walk(row):
    """The step cycles' decisions and the paths they walked: what the planner's choices did."""
    return [(c["index"], c["decision"], sorted(map(tuple, c["paths"]))) for c in row.memory["step_cycles"]]


def test_fused_calls_meet_the_same_mistakes_as_paper_calls(wc):
    paper, paper_stats = _run(wc, "paper")
    fused, fused_stats = _run(wc, "fused")
    assert paper_stats["relation_wrong"] + paper_stats["entity_wrong"] + paper_stats["judge.think_wrong"] > 0
    assert fused_stats == paper_stats, "every decision drawn, and every error, as often in both modes"
    for a, b in zip(paper, fused, strict=True):
        assert _walk(a) == _walk(b), a.memory["strategic"]["question"]
        assert a.answers == b.answers, a.memory["strategic"]["question"]
    paper_calls = sum(r.costs["lm_calls"] for r in paper)
    fused_calls = sum(r.costs["lm_calls"] for r in fused)
    assert fused_calls <= 0.6 * paper_calls
