"""Dialect behaviour on small real files: Freebase filter and CVTs, Wikidata ids/labels, plain RDF, IRN names."""

from __future__ import annotations

import pytest

from ppoga_dspy.kg import (
    Direction,
    FreebaseDialect,
    FreebaseOntology,
    InvalidIdentifier,
    IrnDialect,
    KGError,
    get_dialect,
    open_kg,
)
from ppoga_dspy.kg.dialects import normalise_label, pql_relation, spelling_variants

from .conftest import HERE_DATA, MINI_ONTOLOGY, shared

FB = HERE_DATA / "freebase-mini.ttl"


@pytest.fixture(scope="module")
def fb():
    kg = open_kg(FB, dialect=FreebaseDialect(ontology=MINI_ONTOLOGY))
    yield kg
    kg.close()


@pytest.fixture(scope="module")
def fb_no_ontology():
    kg = open_kg(FB, dialect=FreebaseDialect(ontology=False))
    yield kg
    kg.close()


class TestFreebase:
    def test_detected_from_the_namespace(self):
        kg = open_kg(FB)
        assert kg.dialect.name == "freebase"

    def test_pog_relation_filter(self, fb):
        rels = [r.id for r in fb.relations("m.0actor")]
        assert rels == [
            "base.popstra.celebrity.dated",
            "film.actor.film",
            "kg.object_profile.prominent_type",
            "people.person.date_of_birth",
            "people.person.nationality",
        ]
        dialect = fb.dialect
        for dropped in ("type.object.type", "type.object.name", "common.topic.alias", "freebase.valuenotation.x",
                        "user.someone.sameAs_link"):  # fmt: skip
            assert not dialect.keep_relation(dropped)
        assert dialect.keep_relation("kg.object_profile.prominent_type")
        assert dialect.keep_relation("base.popstra.celebrity.dated")

    def test_labels_prefer_english_and_fall_back_to_the_id(self, fb):
        assert fb.labels(["m.0usa", "m.0actor", "m.0perf1"]) == {
            "m.0usa": "United States of America",
            "m.0actor": "Tom Hanks",
            "m.0perf1": "m.0perf1",
        }

    def test_literal_neighbours(self, fb):
        [birth] = fb.neighbors("m.0actor", "people.person.date_of_birth")
        assert birth.literal and birth.id == "1956-07-09"

    def test_unnamed_cvt_is_expanded_without_the_way_back(self, fb):
        perf1 = next(e for e in fb.neighbors("m.0actor", "film.actor.film") if e.id == "m.0perf1")
        assert perf1.is_mediator
        assert [(rel, ent.id, ent.label) for rel, ent in perf1.facts] == [
            ("film.performance.character", "m.0char1", "Forrest Gump (character)"),
            ("film.performance.film", "m.0film1", "Forrest Gump"),
            ("film.performance.special_performance_type", "Voice", "Voice"),
        ]
        assert perf1.describe() == (
            "[film.performance.character: Forrest Gump (character); film.performance.film: Forrest Gump; "
            "film.performance.special_performance_type: Voice]"
        )

    def test_cvt_reached_backwards_drops_the_edge_we_came_by(self, fb):
        [perf] = fb.neighbors("m.0film1", "film.performance.film", Direction.IN)
        assert perf.id == "m.0perf1"
        assert "m.0film1" not in [ent.id for _, ent in perf.facts]
        assert ("film.performance.actor", "m.0actor") in [(r, e.id) for r, e in perf.facts]

    def test_named_node_of_a_mediator_type_is_a_mediator_with_the_ontology(self, fb, fb_no_ontology):
        perf2 = next(e for e in fb.neighbors("m.0actor", "film.actor.film") if e.id == "m.0perf2")
        assert perf2.label == "Hanks as Woody"
        assert [(r, e.label) for r, e in perf2.facts] == [("film.performance.film", "Toy Story")]
        plain = next(e for e in fb_no_ontology.neighbors("m.0actor", "film.actor.film") if e.id == "m.0perf2")
        assert not plain.is_mediator and plain.label == "Hanks as Woody"
        # without the ontology an unnamed node is still a mediator
        assert next(e for e in fb_no_ontology.neighbors("m.0actor", "film.actor.film") if e.id == "m.0perf1").facts

    def test_ids_are_validated(self, fb):
        for bad in ("m.0actor>", "ns:m.0actor", "m 0actor", "http://rdf.freebase.com/ns/m.0actor", "m", 42, None):
            with pytest.raises(InvalidIdentifier):
                fb.relations(bad)
            with pytest.raises(InvalidIdentifier):
                fb.neighbors("m.0actor", bad)

    def test_g_ids_work(self, fb):
        assert [e.label for e in fb.neighbors("g.11film2", "film.film.starring")] == ["Hanks as Woody"]

    def test_find_entities(self, fb):
        assert [e.id for e in fb.find_entities("Forrest Gump")] == ["m.0film1"]
        assert [e.id for e in fb.find_entities("forrest gump")] == ["m.0film1"]
        assert [e.id for e in fb.find_entities("Tom Hanks (fr)")] == ["m.0actor"]
        assert fb.find_entities('Forrest Gump" } DROP ALL') == []

    def test_real_grailqa_ontology(self):
        folder = shared("grailqa-ontology")
        onto = FreebaseOntology.load(folder)
        assert {"film.performance", "people.marriage", "government.government_position_held"} <= onto.mediator_types
        assert not {"people.person", "film.film", "common.topic", "type.object"} & onto.mediator_types

    def test_ontology_is_read_lazily(self):
        dialect = FreebaseDialect(ontology=MINI_ONTOLOGY)
        assert dialect._ontology_loaded is False
        assert dialect.is_mediator(named=True, types=frozenset({"film.performance"}))
        assert not dialect.is_mediator(named=True, types=frozenset({"film.film"}))

    def test_bad_ontology_folder_is_a_clear_error(self, tmp_path):
        with pytest.raises(KGError, match="fb_roles"):
            FreebaseDialect(ontology=tmp_path).is_mediator(named=True, types=frozenset())


@pytest.fixture(scope="module")
def wd():
    return open_kg(HERE_DATA / "wikidata-mini.ttl")


@pytest.fixture(scope="module")
def rdf():
    return open_kg(HERE_DATA / "rdf-mini.ttl")


class TestWikidata:
    def test_detected_and_direct_relations_only(self, wd):
        assert wd.dialect.name == "wikidata"
        assert [r.id for r in wd.relations("Q42")] == ["P27", "P31", "P569"]

    def test_labels_in_the_chosen_language(self, wd):
        assert [e.label for e in wd.neighbors("Q42", "P31")] == ["human"]
        fr = open_kg(HERE_DATA / "wikidata-mini.ttl", dialect=get_dialect("wikidata", language="fr"))
        assert [e.label for e in fr.neighbors("Q42", "P31")] == ["être humain"]
        assert fr.labels(["Q145", "Q999"]) == {"Q145": "Royaume-Uni", "Q999": "Q999"}

    def test_ids_are_validated(self, wd):
        for bad in ("Q42'", "q42", "Q", "P31 ", "wd:Q42", "Q0"):
            with pytest.raises(InvalidIdentifier):
                wd.relations(bad)
        with pytest.raises(InvalidIdentifier):
            wd.neighbors("Q42", "Q5")

    def test_find(self, wd):
        assert [e.id for e in wd.find_entities("Douglas Adams")] == ["Q42"]
        assert [e.id for e in wd.find_entities("united kingdom")] == ["Q145"]


class TestPlainRdf:
    def test_iris_as_ids_and_local_names_as_labels(self, rdf):
        assert rdf.dialect.name == "rdf"
        alice = "http://example.org/kb/Alice"
        assert [r.id for r in rdf.relations(alice)] == ["http://example.org/kb/knows", "http://example.org/kb/worksAt"]
        assert sorted(e.label for e in rdf.neighbors(alice, "http://example.org/kb/knows")) == ["Bob", "Café"]
        assert [e.label for e in rdf.neighbors(alice, "http://example.org/kb/worksAt")] == ["ACME_Corp"]
        assert rdf.labels([alice]) == {alice: "Alice Liddell"}
        [age] = rdf.neighbors("http://example.org/kb/Bob", "http://example.org/kb/age")
        assert age.literal and age.id == "42"

    def test_iri_syntax_is_enforced(self, rdf):
        for bad in ("http://example.org/kb/Alice> ?p ?o", "Alice", "http://x/a b", 'http://x/"', "http://x/{"):
            with pytest.raises(InvalidIdentifier):
                rdf.relations(bad)

    def test_find(self, rdf):
        assert [e.id for e in rdf.find_entities("Alice Liddell")] == ["http://example.org/kb/Alice"]

    def test_quads_are_read_through_all_graphs(self):
        kg = open_kg(HERE_DATA / "graphs-mini.nq")
        x, p = "http://example.org/kb/x", "http://example.org/kb/p"
        assert [(e.id, e.label) for e in kg.neighbors(x, p)] == [("http://example.org/kb/y", "Why")]
        assert [e.id for e in kg.neighbors("http://example.org/kb/y", p)] == ["http://example.org/kb/z"]


class TestIrn:
    def test_wc2014_names_and_inverse_relations(self, wc_kb):
        kg = open_kg(wc_kb)
        assert kg.dialect.name == "irn"
        assert [r.id for r in kg.relations("Alan_PULIDO", Direction.IN)] == [
            "plays_for_country_inverse",
            "plays_in_club_inverse",
            "plays_position_inverse",
        ]
        assert [e.id for e in kg.neighbors("Tigres_UANL", "plays_in_club_inverse")][:1] != []
        assert "Alan_PULIDO" in [e.id for e in kg.neighbors("Tigres_UANL", "plays_in_club_inverse")]
        assert [e.id for e in kg.neighbors("Alan_PULIDO", "is_aged")] == ["23"]

    def test_pql_relations_read_as_freebase_names(self):
        kg = open_kg(shared("pathquestion", "PQL3-KB.txt"))
        assert [r.id for r in kg.relations("Mark_Metcalf")] == ["people.person.gender"]
        by_pql = kg.neighbors("Mark_Metcalf", "__people__person__gender")
        assert by_pql == kg.neighbors("Mark_Metcalf", "people.person.gender") and by_pql[0].id == "Male"

    def test_names_with_quotes_and_backslashes_round_trip(self):
        kg = open_kg(shared("pathquestion", "PQL3-KB.txt"))
        name = 'David_\\"Buck\\"_Wheat'
        assert [e.id for e in kg.neighbors(name, "people.person.profession")] == ["Session_musician", "Songwriter"]
        assert [e.id for e in kg.find_entities(name)] == [name]

    def test_iri_mapping(self):
        d = IrnDialect()
        iri = d.entity_iri("Côte_d'Ivoire")
        assert iri == "http://ppoga-dspy.org/irn/entity/C%C3%B4te_d%27Ivoire"
        assert d.entity_id(iri) == "Côte_d'Ivoire"
        assert d.relation_iri("__a__b_c__d") == "http://ppoga-dspy.org/irn/relation/a.b_c.d"
        assert pql_relation("plays_in_club_inverse") == "plays_in_club_inverse"
        # inner spaces are names (MetaQA's, issue 30): `ppoga kg load` stores them, so the dialect queries them
        assert d.entity_iri("two words") == "http://ppoga-dspy.org/irn/entity/two%20words"
        for bad in (" leading", "trailing ", "tab\there", "line\nbreak", "esc\x1b[2J", "", "x" * 1001):
            with pytest.raises(InvalidIdentifier):
                d.entity_iri(bad)


def test_text_normalisation():
    assert normalise_label("Alan_PULIDO?") == "alan pulido"
    assert normalise_label("  Côte d'Ivoire ") == "cote divoire"  # accents folded, as everywhere (kg.names)
    variants = spelling_variants("forrest gump")
    assert "Forrest Gump" in variants and "forrest_gump" in variants and "forrest gump" not in variants
    assert len(variants) <= 24


def test_unknown_dialect_lists_the_choices():
    with pytest.raises(KGError, match="freebase, wikidata, rdf, irn"):
        get_dialect("dbpedia")
