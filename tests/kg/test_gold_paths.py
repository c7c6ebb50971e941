"""Every benchmark KB loads, and the gold paths of its questions can be walked hop by hop.

For 200 questions per file (PQ-2H, PQ-3H, PQL-2H, PQL-3H, WC-P1, WC-P2, WC-C): from the topic
entity, `neighbors(current, relation, OUT)` must contain the next entity of the gold path, up to
the answer. WC-C has two paths joined by `*`. Line formats: ../shared/data/README.md.
"""

from __future__ import annotations

import pytest

from ppoga_dspy.kg import Direction, open_kg
from ppoga_dspy.kg.dialects import pql_relation

from .conftest import shared

QUESTIONS = {
    "PQ-2H": ("pathquestion", "PQ-2H.txt", "2H-kb.txt"),
    "PQ-3H": ("pathquestion", "PQ-3H.txt", "3H-kb.txt"),
    "PQL-2H": ("pathquestion", "PQL-2H.txt", "PQL2-KB.txt"),
    "PQL-3H": ("pathquestion", "PQL-3H.txt", "PQL3-KB.txt"),
    "WC-P1": ("wc2014", "WC-P1.txt", "WC2014.txt"),
    "WC-P2": ("wc2014", "WC-P2.txt", "WC2014.txt"),
    "WC-C": ("wc2014", "WC-C.txt", "WC2014.txt"),
}
PER_FILE = 200
_KGS: dict = {}


def gold_paths(line: str) -> list[list[str]]:
    """The gold path(s) of a question line as [entity, relation, entity, ...], `<end>` tails removed."""
    field = line.rstrip("\n").split("\t")[2]
    paths = []
    for part in field.split("*"):
        hops = part.split("#")
        if "<end>" in hops:
            hops = hops[: hops.index("<end>")]
        assert len(hops) >= 3 and len(hops) % 2 == 1, f"malformed gold path {part!r}"
        paths.append(hops)
    return paths


def _kg(folder: str, kb: str):
    key = (folder, kb)
    if key not in _KGS:
        _KGS[key] = open_kg(shared(folder, kb))
    return _KGS[key]


def walk(kg, path: list[str]) -> None:
    current = path[0]
    for i in range(1, len(path), 2):
        relation, target = path[i], path[i + 1]
        assert pql_relation(relation) in [r.id for r in kg.relations(current)], (path, current)
        found = {e.id for e in kg.neighbors(current, relation, Direction.OUT, limit=10_000)}
        assert target in found, f"{current} -{relation}-> {target} not found in {sorted(found)[:10]} (path {path})"
        current = target


@pytest.mark.parametrize("name", list(QUESTIONS))
def test_gold_paths_walk_through_the_interface(name):
    folder, questions, kb = QUESTIONS[name]
    kg = _kg(folder, kb)
    lines = [line for line in shared(folder, questions).read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) >= PER_FILE
    walked = 0
    for line in lines[:PER_FILE]:
        for path in gold_paths(line):
            walk(kg, path)
            walked += 1
    assert walked >= PER_FILE
    assert kg.find_entities(gold_paths(lines[0])[0][0]), "the topic entity is found by name"


@pytest.mark.parametrize("kb", ["2H-kb.txt", "3H-kb.txt", "PQL2-KB.txt", "PQL3-KB.txt"])
def test_every_pathquestion_kb_loads_completely(kb):
    path = shared("pathquestion", kb)
    facts = {tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}
    entities = {s for s, _, _ in facts} | {o for _, _, o in facts}
    kg = _kg("pathquestion", kb)
    # one triple per distinct fact plus one rdfs:label per entity
    assert kg.count_triples() == len(facts) + len(entities)


def test_wc2014_loads_completely():
    path = shared("wc2014", "WC2014.txt")
    facts = {tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}
    entities = {s for s, _, _ in facts} | {o for _, _, o in facts}
    assert _kg("wc2014", "WC2014.txt").count_triples() == len(facts) + len(entities)


@pytest.mark.slow
def test_gold_paths_on_an_oxigraph_endpoint(tmp_path):
    """The same walk over HTTP for WC-P2 and PQL-3H (one server holding both KBs, one IRN dialect)."""
    from ppoga_dspy.kg import servers
    from ppoga_dspy.kg.importers import export_ntriples

    kbs = [shared("wc2014", "WC2014.txt"), shared("pathquestion", "PQL3-KB.txt")]
    nt = tmp_path / "kbs.nt"
    export_ntriples(kbs, nt)
    with servers.start_oxigraph([nt], tmp_path) as handle:
        kg = open_kg(handle.url, dialect="irn")
        for folder, questions in (("wc2014", "WC-P2.txt"), ("pathquestion", "PQL-3H.txt")):
            lines = shared(folder, questions).read_text(encoding="utf-8").splitlines()[:PER_FILE]
            for line in lines:
                for path in gold_paths(line):
                    walk(kg, path)
        assert kg.stats().errors == 0
