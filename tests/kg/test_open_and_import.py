"""open_kg's accepted specs, format/dialect detection, store directories and N-Triples export."""

from __future__ import annotations

import pytest

from ppoga_dspy.kg import KGLoadError, KGSpecError, KnowledgeGraph, open_kg
from ppoga_dspy.kg.importers import detect_dialect, detect_format, export_ntriples
from ppoga_dspy.kg.store import META_FILE, create_store_dir

from .conftest import HERE_DATA


def test_an_existing_kg_is_returned_as_is(wc_kb):
    kg = open_kg(wc_kb)
    assert open_kg(kg) is kg
    assert isinstance(kg, KnowledgeGraph)


@pytest.mark.parametrize("spec", [42, "ftp://example.org/sparql", "/no/such/file.nt", []])
def test_unknown_specs_say_what_is_accepted(spec):
    with pytest.raises((KGSpecError, KGLoadError)) as info:
        open_kg(spec)
    assert "store directory" in str(info.value) and "http(s)://" in str(info.value)


def test_a_plain_directory_is_not_a_store(tmp_path):
    with pytest.raises(KGSpecError, match="ppoga kg load"):
        open_kg(tmp_path)


def test_format_and_dialect_detection(wc_kb, demo_kg):
    assert detect_format("a.nt") == "nt" and detect_format("a.TTL") == "ttl" and detect_format("a.nq") == "nq"
    assert detect_format("kb.txt") == "irn" and detect_format("x.data", "irn") == "irn"
    with pytest.raises(KGLoadError, match="--format"):
        detect_format("a.json")
    assert detect_dialect([wc_kb]) == "irn"
    assert detect_dialect([demo_kg]) == "freebase"
    assert detect_dialect([HERE_DATA / "wikidata-mini.ttl"]) == "wikidata"
    assert detect_dialect([HERE_DATA / "rdf-mini.ttl"]) == "rdf"
    with pytest.raises(KGLoadError, match="mix"):
        detect_dialect([wc_kb, demo_kg])


def test_bad_irn_line_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("a\tr\tb\nonly two\tfields\n", encoding="utf-8")
    with pytest.raises(KGLoadError, match=r"bad.txt:2"):
        open_kg(bad)


def test_bad_rdf_is_a_load_error(tmp_path):
    bad = tmp_path / "bad.nt"
    bad.write_text("<http://a> <http://b> .\n", encoding="utf-8")
    with pytest.raises(KGLoadError, match="not valid nt"):
        open_kg(bad)


def test_store_directory_remembers_its_dialect(tmp_path, wc_kb):
    store = tmp_path / "wc"
    meta = create_store_dir([wc_kb], store, dialect="irn")
    assert (store / META_FILE).is_file() and meta["triples"] > 6000
    kg = open_kg(store)
    assert kg.dialect.name == "irn" and kg.count_triples() == meta["triples"]
    assert [e.id for e in kg.neighbors("Alan_PULIDO", "plays_in_club")] == ["Tigres_UANL"]
    kg.close()
    with pytest.raises(KGLoadError, match="cannot add"):
        create_store_dir([HERE_DATA / "rdf-mini.ttl"], store, dialect="rdf")


def test_export_answers_like_the_original(tmp_path, wc_kb):
    out = tmp_path / "wc.nt"
    count = export_ntriples([wc_kb, HERE_DATA / "graphs-mini.nq"], out)
    direct = open_kg(wc_kb)
    exported = open_kg(out, dialect="irn")
    assert count == exported.count_triples() == direct.count_triples() + 3
    for entity in ("Alan_PULIDO", "Mexico", "Tigres_UANL"):
        for rel in direct.relations(entity):
            assert exported.neighbors(entity, rel.id) == direct.neighbors(entity, rel.id)


def test_importing_the_kg_package_stays_light():
    import subprocess
    import sys

    code = (
        "import sys, ppoga_dspy.kg, ppoga_dspy.cli.kg; "
        "heavy = [m for m in ('pyoxigraph', 'SPARQLWrapper', 'rich') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
