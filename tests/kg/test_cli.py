"""`ppoga kg ...` end to end through the real dispatcher."""

from __future__ import annotations

import json

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.errors import KGError
from ppoga_dspy.kg import open_kg


@pytest.fixture(scope="module")
def store(tmp_path_factory, wc_kb):
    root = tmp_path_factory.mktemp("cli") / "wc-store"
    assert main(["kg", "load", str(wc_kb), "--store", str(root)]) == 0
    return root


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_load_relations_neighbors_find(store, capsys):
    capsys.readouterr()
    assert main(["kg", "relations", "Alan_PULIDO", "--kg", str(store), "--direction", "out", "--json"]) == 0
    assert [r["id"] for r in _json(capsys)["relations"]] == [
        "is_aged", "plays_for_country", "plays_in_club", "plays_position", "wears_number",
    ]  # fmt: skip
    assert main(["kg", "neighbors", "Alan_PULIDO", "plays_in_club", "--kg", str(store), "--json"]) == 0
    assert _json(capsys)["neighbors"] == [{"id": "Tigres_UANL", "label": "Tigres_UANL"}]
    assert main(["kg", "find", "Alan PULIDO", "--kg", str(store), "--json"]) == 0
    assert [e["id"] for e in _json(capsys)["entities"]] == ["Alan_PULIDO"]
    assert main(["kg", "relations", "Alan_PULIDO", "--kg", str(store)]) == 0
    table = capsys.readouterr().out
    assert "plays_in_club_inverse" in table and "in" in table


def test_demo_mediators_in_json(demo_kg, capsys):
    assert main(["kg", "neighbors", "m.0demo032", "people.person.spouse_s", "--kg", str(demo_kg), "--json"]) == 0
    [marriage] = _json(capsys)["neighbors"][:1]
    assert marriage["facts"] and all(f["relation"] != "type.object.type" for f in marriage["facts"])


@pytest.mark.parametrize("bad", ['x" } DROP ALL { "', "m.0demo001> ?p ?o } #", "INSERT DATA { <a> <b> <c> }"])
def test_injection_through_the_cli(bad, demo_kg, capsys):
    assert main(["kg", "relations", bad, "--kg", str(demo_kg)]) == 2
    assert "not a valid" in capsys.readouterr().err
    assert main(["kg", "neighbors", "m.0demo001", bad, "--kg", str(demo_kg)]) == 2
    assert "not a valid" in capsys.readouterr().err
    assert main(["kg", "find", bad, "--kg", str(demo_kg), "--json"]) == 0
    assert _json(capsys)["entities"] == []


def test_store_unchanged_by_cli_injection(store, capsys):
    before = open_kg(store).count_triples()
    assert main(["kg", "relations", "x\tDROP ALL", "--kg", str(store)]) == 2
    assert main(["kg", "find", 'x" } ; DROP ALL ; INSERT DATA { <a> <b> <c> }', "--kg", str(store)]) == 0
    assert open_kg(store).count_triples() == before


def test_unknown_kg_spec_exits_2_with_the_accepted_forms(tmp_path, capsys):
    assert main(["kg", "relations", "X", "--kg", str(tmp_path / "nope.nt")]) == 2
    assert "http(s)://" in capsys.readouterr().err


def test_endpoint_down_exits_with_the_kg_code_naming_the_url(capsys):
    url = "http://127.0.0.1:9/sparql"
    assert main(["kg", "relations", "m.0demo001", "--kg", url, "--retries", "0", "--timeout", "2"]) == KGError.exit_code
    assert url in capsys.readouterr().err
