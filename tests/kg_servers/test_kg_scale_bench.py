"""benchmarks/kg_scale_bench.py writes the graph it promises: Freebase mids, unnamed CVTs, hubs, labels in several
languages, the CWQ sample's relations, the same file for the same seed; and the project's loader and the Executor's
calls work on it. Small sizes only, no timings."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import Counter, defaultdict

import numpy as np
import pytest

from tests.conftest import REPO, shared_data

NS = "http://rdf.freebase.com/ns/"
_LINE = re.compile(r'<([^>]+)> <([^>]+)> (?:<([^>]+)>|"([^"]*)"@([a-z]+)) \.')
NAME, TYPE = NS + "type.object.name", NS + "type.object.type"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "benchmarks"))  # the script imports its sibling _data.py
    try:
        spec = importlib.util.spec_from_file_location("kg_scale_bench", REPO / "benchmarks" / "kg_scale_bench.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return module


@pytest.fixture(scope="module")
def sample_relations():
    return set(shared_data("cwq-subgraph-sample", "relations.txt").read_text(encoding="utf-8").split())


@pytest.fixture(scope="module")
def graph(bench, sample_relations, tmp_path_factory):
    mix = bench.RelationMix.from_data(shared_data("cwq-subgraph-sample").parent)
    path = tmp_path_factory.mktemp("scale") / "freebase-20k.nt"
    workload = bench.write_graph(path, 20_000, mix, seed=3, queries=25)
    return path, workload


def _parse(path):
    """(subject, predicate, object IRI or None, literal, language) per line, all lines well-formed."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _LINE.fullmatch(line)
        assert match, line
        rows.append(match.groups())
    return rows


def test_the_file_has_freebase_shapes(bench, graph, sample_relations):
    path, workload = graph
    sample_iris = {bench.relation_iri(r) for r in sample_relations}
    rows = _parse(path)
    assert len(rows) == workload["triples"] == len(set(rows))  # about the size asked, no duplicate triple
    assert 19_000 <= len(rows) <= 20_000
    assert all(re.fullmatch(NS + r"m\.0[0-9b-df-hj-np-tv-z_]+", s) for s, *_ in rows)
    names = defaultdict(Counter)
    facts = []
    for subject, predicate, obj, text, language in rows:
        if predicate == NAME:
            names[subject][language] += 1
            assert text
        elif predicate != TYPE:
            assert predicate in sample_iris  # every fact's relation is one of the CWQ sample's
            facts.append((subject, predicate.removeprefix(NS), obj))
    assert all(count["en"] == 1 for count in names.values())  # one English name per named entity
    languages = Counter(language for count in names.values() for language in count)
    assert {"en", "fr", "de", "es"} <= set(languages) and languages["en"] > languages["fr"] > languages["es"]
    assert any(not text.isascii() for _, _, _, text, lang in rows if lang == "fr")
    # CVTs: unnamed subjects, reached from a named entity, leading back to it and on to at least one more node
    unnamed = {s for s, _, _ in facts} - set(names)
    assert len(unnamed) == workload["mediators"] > 0
    into = defaultdict(set)
    out = defaultdict(set)
    for subject, _, obj in facts:
        out[subject].add(obj)
        into[obj].add(subject)
    for cvt in unnamed:
        assert len(into[cvt]) == 1 and next(iter(into[cvt])) in names
        assert next(iter(into[cvt])) in out[cvt] and len(out[cvt]) >= 2
    # hubs: each has exactly its links of one relation, far above any ordinary entity's
    by_pair = Counter((s, r) for s, r, _ in facts) + Counter((o, r) for _, r, o in facts)
    ordinary = sorted(by_pair.values())[len(by_pair) // 2]
    for hub in workload["hubs"]:
        assert by_pair[(NS + hub["entity"], hub["relation"])] >= hub["links"] > 20 * ordinary


def test_hubs_have_thousands_of_links_from_1m_triples(bench):
    for size in (1_000_000, 20_000_000):
        links = bench.hub_links(size, np.random.default_rng(0))
        assert links.min() >= 2_000 and links.max() <= 20_000 and len(links) >= 8
    assert bench.parse_size("200k") == 200_000 and bench.parse_size("1.5M") == 1_500_000


def test_the_same_seed_writes_the_same_file(bench, graph, tmp_path):
    path, _ = graph
    mix = bench.RelationMix.from_data(shared_data("cwq-subgraph-sample").parent)
    again = tmp_path / "again.nt"
    bench.write_graph(again, 20_000, mix, seed=3, queries=25)
    assert again.read_bytes() == path.read_bytes()


def test_the_loaded_store_answers_the_executor_calls(bench, graph, tmp_path):
    from ppoga_dspy.kg import open_kg
    from ppoga_dspy.kg.bulk_load import load_store_dir

    path, workload = graph
    meta = load_store_dir([path], tmp_path / "store", dialect="freebase", progress=False)
    assert meta["triples"] == workload["triples"]
    kg = open_kg(tmp_path / "store", cache_size=0)
    try:
        calls = bench.timed_calls(kg, workload["samples"], neighbor_limit=5000)
        samples = workload["samples"]
        entity, relation = samples["mediator read-through"][0]
        reached = calls["mediator read-through"]([entity, relation])  # raises when no mediator is read through
        cvt = next(e for e in reached if e.is_mediator)
        assert cvt.label == cvt.id and all(other.id != entity for _, other in cvt.facts)  # unnamed; way back dropped
        hub = workload["hubs"][0]
        assert len(calls["hub neighbours"]([hub["entity"], hub["relation"], hub["direction"]])) >= hub["links"]
        assert any(r.id == relation for r in calls["relations"](entity))
        text = samples["find by name"][0]
        assert [e.label for e in calls["find by name"](text)] == [text]
        assert all(label != mid for mid, label in calls["labels"](samples["labels"][0]).items())
    finally:
        kg.close()
