"""The KG contract suite (ppoga_dspy.testing.contract) on every engine: memory, store dir, oxigraph, Virtuoso."""

from __future__ import annotations

from ppoga_dspy.kg import Entity
from ppoga_dspy.testing.contract import KnowledgeGraphContract


class TestKnowledgeGraphContract(KnowledgeGraphContract):
    """Runs once per engine of `engine_spec` (tests/kg/conftest.py) and per dialect."""


def test_entity_objects_are_hashable_values():
    assert Entity("a", "A") == Entity("a", "A")
    assert len({Entity("a", "A"), Entity("a", "A")}) == 1
