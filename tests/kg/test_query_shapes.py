"""The shape of the label and name look-ups: each predicate a constant, never a `VALUES ?p` block.

pyoxigraph answers `VALUES ?x {..} VALUES ?p {..} ?x ?p ?o` by scanning every triple of the store, so a label
look-up grew with the store (38 ms for 20 labels at 200k triples, minutes at Freebase's size); with the predicate
constant it is an index look-up (`benchmarks/kg_scale_bench.py` measures both engines). Answers are checked
against every engine by the contract tests; this test keeps the query shape from sliding back.
"""

from __future__ import annotations

import re

from ppoga_dspy.kg import open_kg
from tests.kg.conftest import HERE_DATA


def _recording(kg):
    sent: list[str] = []
    select = kg.engine.select

    def recorded(query: str):
        sent.append(query)
        return select(query)

    kg.engine.select = recorded
    return sent


def test_label_and_name_look_ups_name_each_predicate():
    with open_kg(HERE_DATA / "freebase-mini.ttl", dialect="freebase", cache_size=0) as kg:
        sent = _recording(kg)
        entities = sorted(e.id for e in kg.find_entities("Tom Hanks"))
        assert entities, "the mini Freebase graph names Tom Hanks"
        labels = kg.labels(entities)
        assert labels[entities[0]] == "Tom Hanks"
        assert sent
        for query in sent:
            where = query.split("WHERE", 1)[1]
            assert not re.search(r"VALUES\s+\?p\b", where), query
            assert "?x ?p ?o" not in where and "?e ?p ?l" not in where, query  # a triple pattern with a variable p
            for predicate in kg.dialect.label_predicates:
                assert f"<{predicate}>" in where, query
