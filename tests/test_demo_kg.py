"""The shipped demo KG and its questions are consistent: every gold path reaches exactly its answers.

The KG is read with pyoxigraph directly, not through ppoga_dspy.kg, so this test checks the data
itself and stays valid whatever the KG layer does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pyoxigraph = pytest.importorskip("pyoxigraph")

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"
ONTOLOGY = REPO.parent / "shared" / "data" / "grailqa-ontology"
NS = "http://rdf.freebase.com/ns/"
NAME = f"<{NS}type.object.name>"
TYPE = f"<{NS}type.object.type>"
ALIAS = f"<{NS}common.topic.alias>"
MEDIATOR_TYPES = {"film.performance", "people.marriage", "sports.sports_team_roster"}
MID = "m.0demo"


@pytest.fixture(scope="module")
def store():
    st = pyoxigraph.Store()
    st.bulk_load(path=str(DEMO / "demo-kg.nt"), format=pyoxigraph.RdfFormat.N_TRIPLES)
    return st


def _read_questions(name: str = "questions.jsonl") -> list[dict]:
    with (DEMO / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


QUESTIONS = _read_questions()
# Training questions for the default artifact (scripts/make_demo_train.py): same proofs, and disjoint.
TRAIN = _read_questions("train-questions.jsonl")


@pytest.fixture(scope="module")
def questions() -> list[dict]:
    return QUESTIONS


def _values(store, sparql: str) -> list[str]:
    return [row[0].value for row in store.query(sparql)]


def _names(store, mid: str) -> set[str]:
    """The name and aliases of one entity."""
    return set(_values(store, f"SELECT ?n WHERE {{ <{NS}{mid}> ({NAME}|{ALIAS}) ?n }}"))


def _walk(store, start: str, path: list[str]) -> set[str]:
    """End nodes of `path` from `start` over simple paths (no node twice), as ids or literal values."""
    nodes = [f"?x{i}" for i in range(len(path) + 1)]
    patterns = " ".join(f"{nodes[i]} <{NS}{rel}> {nodes[i + 1]} ." for i, rel in enumerate(path))
    distinct = " ".join(f"FILTER({a} != {b})" for j, b in enumerate(nodes) for a in nodes[:j])
    sparql = f"SELECT DISTINCT {nodes[-1]} WHERE {{ VALUES ?x0 {{ <{NS}{start}> }} {patterns} {distinct} }}"
    found = set()
    for row in store.query(sparql):
        term = row[0]
        found.add(term.value.removeprefix(NS) if isinstance(term, pyoxigraph.NamedNode) else term.value)
    return found


def test_counts_and_mediators(store):
    assert 300 <= len(store) <= 600
    named = _values(store, f"SELECT DISTINCT ?s WHERE {{ ?s {NAME} ?n }}")
    assert len(named) >= 60
    # every named entity carries at least one type
    untyped = _values(store, f"SELECT ?s WHERE {{ ?s {NAME} ?n FILTER NOT EXISTS {{ ?s {TYPE} ?t }} }}")
    assert untyped == []
    mediators = list(
        store.query(f"SELECT ?s ?t WHERE {{ ?s {TYPE} ?t FILTER NOT EXISTS {{ ?s {NAME} ?n }} }}")
    )
    assert len(mediators) >= 3
    assert {row[1].value.removeprefix(NS) for row in mediators} == MEDIATOR_TYPES


def test_entity_ids_follow_the_mid_syntax(store):
    subjects = _values(store, "SELECT DISTINCT ?s WHERE { ?s ?p ?o }")
    for iri in subjects:
        mid = iri.removeprefix(NS)
        assert mid.startswith(MID) and mid[len(MID):].isdigit(), iri


def test_literals_are_tagged_or_typed(store):
    names = list(store.query(f"SELECT ?n WHERE {{ ?s {NAME} ?n }}"))
    assert all(row[0].language == "en" for row in names)
    dates = {row[0].datatype.value for row in store.query(
        f"SELECT ?d WHERE {{ ?s <{NS}film.film.initial_release_date>|<{NS}people.person.date_of_birth> ?d }}")}
    assert dates == {"http://www.w3.org/2001/XMLSchema#gYear", "http://www.w3.org/2001/XMLSchema#date"}


def test_holds_triples_a_relation_filter_must_hide(store):
    predicates = set(_values(store, "SELECT DISTINCT ?p WHERE { ?s ?p ?o }"))
    assert f"{NS}common.topic.description" in predicates
    assert any(p.startswith(f"{NS}freebase.valuenotation.") for p in predicates)
    assert "http://www.w3.org/2002/07/owl#sameAs" in predicates


def test_relations_are_real_freebase_ids_with_their_reverses(store):
    if not ONTOLOGY.is_dir():
        pytest.skip(f"GrailQA ontology not found at {ONTOLOGY}")
    roles = set()
    with (ONTOLOGY / "fb_roles").open(encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                roles.add(parts[1])
    reverse = {}
    with (ONTOLOGY / "reverse_properties").open(encoding="utf-8") as f:
        for line in f:
            parts = line.split("\t")
            if len(parts) == 2:
                reverse[parts[0].strip()] = parts[1].strip()
    hidden = ("common.topic.description", "freebase.valuenotation.", "kg.", "type.object.key")
    rels = {p.removeprefix(NS) for p in _values(store, "SELECT DISTINCT ?p WHERE { ?s ?p ?o }") if p.startswith(NS)}
    assert {r for r in rels if r not in roles and not r.startswith(hidden)} == set()
    # a relation whose Freebase reverse exists is stored both ways, triple for triple
    for rel in sorted(r for r in rels & reverse.keys() if not r.startswith((*hidden, "type."))):
        rev = reverse[rel]
        missing = _values(store, f"SELECT ?s WHERE {{ ?s <{NS}{rel}> ?o FILTER NOT EXISTS {{ ?o <{NS}{rev}> ?s }} }}")
        assert missing == [], f"{rel} lacks its reverse {rev} for {missing}"


def test_question_file_shape(questions, store):
    assert len(questions) >= 20
    assert len({q["id"] for q in questions}) == len(questions)
    assert sum(q["type"] == "cvt" for q in questions) >= 5
    for q in questions:
        assert set(q) == {"id", "question", "topic_entities", "answers", "answer_ids", "answer_groups", "hops", "path",
                          "type"}
        assert [name for group in q["answer_groups"] for name in group[:1]] == q["answers"][: len(q["answer_groups"])]
        assert sorted(a for group in q["answer_groups"] for a in group) == sorted(q["answers"])
        assert 1 <= q["hops"] <= 3 and q["hops"] == len(q["path"])
        assert q["answers"] and q["topic_entities"]
        for mid, name in q["topic_entities"].items():
            assert name in _names(store, mid), (q["id"], mid)


@pytest.mark.parametrize("q", QUESTIONS + TRAIN, ids=[q["id"] for q in QUESTIONS + TRAIN])
def test_gold_path_reaches_exactly_the_answers(q, store):
    start = next(iter(q["topic_entities"]))
    reached = _walk(store, start, q["path"])
    if q["answer_ids"]:
        assert reached == set(q["answer_ids"]), q["id"]
        accepted = set(q["answers"])
        for mid, group in zip(q["answer_ids"], q["answer_groups"], strict=True):
            assert _names(store, mid) == set(group), (q["id"], mid)
            assert set(group) <= accepted, (q["id"], mid)
    else:
        assert reached == set(q["answers"]), q["id"]


def test_training_questions_never_repeat_a_demo_question():
    demo_texts = {q["question"] for q in QUESTIONS}
    demo_walks = {(next(iter(q["topic_entities"])), tuple(q["path"])) for q in QUESTIONS}
    assert len(TRAIN) >= 60 and len({q["id"] for q in TRAIN}) == len(TRAIN)
    for q in TRAIN:
        assert q["question"] not in demo_texts, q["id"]
        assert (next(iter(q["topic_entities"])), tuple(q["path"])) not in demo_walks, q["id"]
    shown = {"Where was the director of Inception born?", "Who is the spouse of Christopher Nolan?"}
    assert not shown & {q["question"] for q in TRAIN}  # the questions the README shows are held out
