"""MetaQA's `head|relation|tail` KB: the names dialect, the importer, and the persisted store under the KG cache."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppoga_dspy.kg import KGLoadError, open_kg
from ppoga_dspy.kg.base import InvalidIdentifier
from ppoga_dspy.kg.dialects import NamesDialect
from ppoga_dspy.kg.importers import detect_dialect, detect_format
from ppoga_dspy.kg.persistent import cache_root, cached_store_dir

KB = (
    "Monsters, Inc.|directed_by|Pete Docter\n"
    "Monsters, Inc.|starred_actors|John Goodman\n"
    'The "Quoted" Film|starred_actors|John Goodman\n'
    "Up|directed_by|Pete Docter\n"
    "Up|release_year|2009\n"
)


@pytest.fixture
def kb(tmp_path, monkeypatch):
    monkeypatch.setenv("PPOGA_KG_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "kb.txt"
    path.write_text(KB, encoding="utf-8")
    return path


def test_names_with_spaces_commas_and_quotes_are_ids_and_reach_queries_escaped(kb):
    assert detect_format(kb) == "pipe" and detect_dialect([kb]) == "names"
    with open_kg(kb) as kg:
        assert kg.dialect.name == "names"
        assert [e.id for e in kg.neighbors("Pete Docter", "directed_by", "in")] == ["Monsters, Inc.", "Up"]
        assert [e.id for e in kg.neighbors("John Goodman", "starred_actors", "in")] == ["Monsters, Inc.",
                                                                                       'The "Quoted" Film']
        assert {(r.id, r.direction.value) for r in kg.relations("Up")} == {("directed_by", "out"),
                                                                         ("release_year", "out")}
        assert [e.id for e in kg.find_entities("monsters, inc.")] == ["Monsters, Inc."]
        with pytest.raises(InvalidIdentifier):
            kg.neighbors("Up> ?x } #", "directed_by; DROP", "out")


def test_the_dialect_refuses_control_characters_and_odd_relations():
    dialect = NamesDialect()
    assert dialect.entity_id(dialect.entity_iri("Amélie <2001> {x}")) == "Amélie <2001> {x}"
    for bad in ("line\nbreak", " padded", "", "x" * 1001):
        with pytest.raises(InvalidIdentifier):
            dialect.entity_iri(bad)
    with pytest.raises(InvalidIdentifier):
        dialect.relation_iri("directed by")


def test_a_bad_line_names_the_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PPOGA_KG_CACHE", "off")
    path = tmp_path / "kb.txt"
    path.write_text("a|r|b\n" * 3 + "a|r\n", encoding="utf-8")
    with pytest.raises(KGLoadError, match=r"kb.txt:4"):
        open_kg(path, dialect="names")


def test_the_second_open_reuses_the_store_without_importing(kb, monkeypatch):
    import ppoga_dspy.kg.store as store

    calls = []
    real = store.create_store_dir
    monkeypatch.setattr(store, "create_store_dir", lambda *a, **k: calls.append(a) or real(*a, **k))
    with open_kg(kb) as kg:
        first = kg.engine.path
        assert kg.count_triples() > 5  # facts and labels
    with open_kg(kb) as kg:
        assert kg.engine.path == first and first.parent == cache_root()
        assert [e.id for e in kg.neighbors("Up", "directed_by")] == ["Pete Docter"]
    assert len(calls) == 1
    kb.write_text(KB + "Up|has_genre|Animation\n", encoding="utf-8")  # a changed file is a new store
    with open_kg(kb) as kg:
        assert kg.engine.path != first and [e.id for e in kg.neighbors("Up", "has_genre")] == ["Animation"]
    assert len(calls) == 2


def test_concurrent_first_loads_leave_one_whole_store(kb):
    results, errors = [], []

    def load():
        try:
            results.append(cached_store_dir(kb, dialect="names", fmt="pipe"))
        except Exception as exc:  # noqa: BLE001 - the test reports any failure
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1
    assert [p.name for p in cache_root().iterdir()] == [results[0].name]  # no temporary folder left
    with open_kg(kb) as kg:
        assert [e.id for e in kg.neighbors("Up", "release_year")] == ["2009"]


def test_the_cache_can_be_turned_off(kb, monkeypatch):
    monkeypatch.setenv("PPOGA_KG_CACHE", "off")
    with open_kg(kb) as kg:
        assert kg.engine.path is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.text(max_size=40) | st.lists(st.sampled_from(['"', ">", "<", "{", "}", "\\", "%", " ", "é", "\n", "#",
                                                            "?", "Monsters, Inc."]), max_size=8).map("".join))
def test_an_accepted_name_binds_exactly_its_iri_and_maps_back(name):
    """Any name the dialect accepts is one IRI in a query (run by a real SPARQL engine), never query text."""
    import pyoxigraph

    from ppoga_dspy.kg.terms import iri_ref

    dialect = NamesDialect()
    try:
        iri = dialect.entity_iri(name)
    except InvalidIdentifier:
        assert not name or name != name.strip() or any(ord(c) < 32 or ord(c) == 127 for c in name) or len(name) > 1000
        return
    rows = list(pyoxigraph.Store().query(f"SELECT ?t WHERE {{ BIND({iri_ref(iri)} AS ?t) }}"))
    assert len(rows) == 1 and rows[0]["t"].value == iri and dialect.entity_id(iri) == name
