"""Real loopback SPARQL servers (oxigraph serve, Virtuoso 7) answer like the embedded pyoxigraph store.

Each server is started over small files written here, queried through SPARQLWrapper (what the
remote engine uses), and compared with pyoxigraph over the same files. The Virtuoso quirks listed
in `ppoga_dspy.kg.servers` are pinned here, so a Virtuoso that changes them fails loudly instead of
silently changing what the KG layer has to normalise.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ppoga_dspy.kg.base import KGError
from ppoga_dspy.kg.servers import ServerError, ServerHandle, start_oxigraph, start_virtuoso, virtuoso_home

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
EX = "http://ex.org/"

# A language-tagged literal (mixed-case tag), a unicode label with an astral character, a
# percent-encoded IRI, a raw non-ASCII IRI, an explicit xsd:string, escapes, a typed date, a blank node.
TRIPLES = textwrap.dedent(
    """\
    <http://ex.org/Zurich> <http://ex.org/label> "Zurich"@en .
    <http://ex.org/Zurich> <http://ex.org/label> "Zürich — 東京 😀" .
    <http://ex.org/Zurich> <http://ex.org/label> "Zueri"@de-CH .
    <http://ex.org/Zurich> <http://ex.org/twin> <http://ex.org/S%C3%A3o_Paulo%2C_Brazil> .
    <http://ex.org/Zurich> <http://ex.org/near> <http://ex.org/Bäch> .
    <http://ex.org/Zurich> <http://ex.org/motto> "say \\"grüezi\\"\\nthen\\ttab"^^<XSD#string> .
    <http://ex.org/Zurich> <http://ex.org/founded> "0015-01-01"^^<http://www.w3.org/2001/XMLSchema#date> .
    <http://ex.org/Zurich> <http://ex.org/population> "421878"^^<http://www.w3.org/2001/XMLSchema#integer> .
    <http://ex.org/Zurich> <http://ex.org/mayor> _:m .
    _:m <http://ex.org/label> "Corine Mauch" .
    <http://ex.org/S%C3%A3o_Paulo%2C_Brazil> <http://ex.org/label> "São Paulo"@pt .
    """
).replace("<XSD#", "<http://www.w3.org/2001/XMLSchema#")
QUADS = textwrap.dedent(
    """\
    <http://ex.org/Bern> <http://ex.org/label> "Bern" <http://ex.org/graphs/one> .
    <http://ex.org/Bern> <http://ex.org/capitalOf> <http://ex.org/Switzerland> .
    <http://ex.org/Zurich> <http://ex.org/canton> <http://ex.org/ZH> <http://ex.org/graphs/two> .
    """
)
QUERIES = {
    "one subject": "SELECT ?p ?o WHERE { <http://ex.org/Zurich> ?p ?o }",
    "all triples": "SELECT ?s ?p ?o WHERE { ?s ?p ?o }",
    "percent-encoded IRI as object": "SELECT ?s ?p WHERE { ?s ?p <http://ex.org/S%C3%A3o_Paulo%2C_Brazil> }",
    "percent-encoded IRI as subject": "SELECT ?o WHERE { <http://ex.org/S%C3%A3o_Paulo%2C_Brazil> ?p ?o }",
    "raw unicode IRI": "SELECT ?s WHERE { ?s ?p <http://ex.org/Bäch> }",
    "language literal": 'SELECT ?s WHERE { ?s ?p "Zueri"@de-CH }',
    "unicode literal": 'SELECT ?s WHERE { ?s ?p "Zürich — 東京 😀" }',
    "lang filter": 'SELECT ?o WHERE { ?s ?p ?o FILTER(langMatches(lang(?o), "en")) }',
    "quad graphs": "SELECT ?s ?o WHERE { ?s <http://ex.org/label> ?o }",
}

Row = tuple[tuple[str, tuple], ...]


@pytest.fixture(scope="module")
def rdf_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("rdf")
    (folder / "city.nt").write_text(TRIPLES, encoding="utf-8")
    (folder / "more.nq").write_text(QUADS, encoding="utf-8")
    return [folder / "city.nt", folder / "more.nq"]


def _term_from_json(term: dict) -> tuple:
    kind = "literal" if term["type"] in ("literal", "typed-literal") else term["type"]
    if kind == "bnode":
        return ("bnode", "_")  # blank node labels differ between stores
    if kind == "uri":
        return ("uri", term["value"])
    return ("literal", term["value"], term.get("datatype"), (term.get("xml:lang") or "").lower() or None)


def _term_from_oxigraph(term: object) -> tuple:
    import pyoxigraph

    if isinstance(term, pyoxigraph.BlankNode):
        return ("bnode", "_")
    if isinstance(term, pyoxigraph.NamedNode):
        return ("uri", term.value)
    datatype = None if term.language or term.datatype.value == XSD_STRING else term.datatype.value
    return ("literal", term.value, datatype, term.language.lower() if term.language else None)


def _rows_oxigraph(files: list[Path], query: str) -> list[Row]:
    import pyoxigraph

    store = pyoxigraph.Store()
    for f in files:
        store.load(path=str(f), format=pyoxigraph.RdfFormat.from_extension(f.suffix[1:]))
    results = store.query(query, use_default_graph_as_union=True)
    names = sorted(v.value for v in results.variables)
    return sorted(tuple((n, _term_from_oxigraph(s[n])) for n in names if s[n] is not None) for s in results)


def _query_endpoint(url: str, query: str) -> dict:
    from SPARQLWrapper import JSON, POST, SPARQLWrapper

    client = SPARQLWrapper(url)
    client.setMethod(POST)
    client.setReturnFormat(JSON)
    client.setQuery(query)
    return client.queryAndConvert()


def _rows_endpoint(url: str, query: str) -> list[Row]:
    bindings = _query_endpoint(url, query)["results"]["bindings"]
    return sorted(tuple((n, _term_from_json(b[n])) for n in sorted(b)) for b in bindings)


def _drop_xsd_string(rows: list[Row]) -> list[Row]:
    """Virtuoso keeps "x"^^xsd:string distinct from "x"; RDF 1.1 (and oxigraph) says they are the same."""
    fixed = [
        tuple((n, t[:2] + (None,) + t[3:] if t[0] == "literal" and t[2] == XSD_STRING else t) for n, t in row)
        for row in rows
    ]
    return sorted(fixed)


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie still answers kill(0); treat it as gone only if its state says so.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z"


def _assert_stopped(handle: ServerHandle) -> None:
    assert not handle.running
    assert _process_gone(handle.pid)
    for port in handle.ports:
        assert _port_is_free(port), f"port {port} still bound after stop()"


# --------------------------------------------------------------------------- oxigraph serve


@pytest.fixture(scope="module")
def oxigraph_server(rdf_files: list[Path], tmp_path_factory: pytest.TempPathFactory):
    with start_oxigraph(rdf_files, tmp_path_factory.mktemp("oxigraph")) as handle:
        yield handle
    _assert_stopped(handle)


def test_oxigraph_handle_shape(oxigraph_server: ServerHandle) -> None:
    assert oxigraph_server.kind == "oxigraph"
    assert oxigraph_server.url == f"http://127.0.0.1:{oxigraph_server.port}/query"
    assert oxigraph_server.running
    assert oxigraph_server.log_path.is_file()


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_oxigraph_serve_answers_like_pyoxigraph(
    oxigraph_server: ServerHandle, rdf_files: list[Path], name: str
) -> None:
    expected = _rows_oxigraph(rdf_files, QUERIES[name])
    assert expected, f"query {name!r} should find something in the test data"
    assert _rows_endpoint(oxigraph_server.url, QUERIES[name]) == expected


def test_oxigraph_sees_triples_of_every_graph(oxigraph_server: ServerHandle) -> None:
    rows = _rows_endpoint(oxigraph_server.url, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert rows == [(("n", ("literal", "14", "http://www.w3.org/2001/XMLSchema#integer", None)),)]
    assert _query_endpoint(oxigraph_server.url, "ASK { <http://ex.org/Zurich> <http://ex.org/canton> ?c }") == {
        "head": {},
        "boolean": True,
    }


def test_oxigraph_stop_frees_port_and_is_idempotent(rdf_files: list[Path], tmp_path: Path) -> None:
    handle = start_oxigraph(rdf_files[:1], tmp_path)
    assert not _port_is_free(handle.port)
    handle.stop()
    _assert_stopped(handle)
    handle.stop()  # a second stop is a no-op
    assert "stopped" in repr(handle)


def test_oxigraph_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="RDF file not found: .*nope.nt"):
        start_oxigraph([tmp_path / "nope.nt"], tmp_path)


def test_oxigraph_unknown_suffix(tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("a,b,c\n")
    with pytest.raises(ServerError, match=r"unknown RDF suffix '\.csv'"):
        start_oxigraph([data], tmp_path)


def test_oxigraph_bad_file_names_file_and_log(tmp_path: Path) -> None:
    bad = tmp_path / "bad.nt"
    bad.write_text('<http://ex.org/a> <http://ex.org/b> "unterminated .\n', encoding="utf-8")
    with pytest.raises(ServerError) as caught:
        start_oxigraph([bad], tmp_path / "work")
    message = str(caught.value)
    assert str(bad) in message and "load.log" in message and "line 1" in message
    assert isinstance(caught.value, KGError)


def test_oxigraph_retries_a_port_lost_to_another_process(
    rdf_files: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The free port is picked before the server binds it; a port taken meanwhile means another try."""
    from ppoga_dspy.kg import servers

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy_port = taken.getsockname()[1]
        picks = iter([busy_port])
        real_free_port = servers._free_port
        monkeypatch.setattr(servers, "_free_port", lambda: next(picks, None) or real_free_port())
        with start_oxigraph(rdf_files[:1], tmp_path) as handle:
            assert handle.port != busy_port
            assert _rows_endpoint(handle.url, QUERIES["one subject"]) == _rows_oxigraph(
                rdf_files[:1], QUERIES["one subject"]
            )
        assert "already in use" in handle.log_path.read_text().lower()


def test_atexit_stops_a_server_left_running(rdf_files: list[Path], tmp_path: Path) -> None:
    """A script that forgets stop() must not leave oxigraph behind when it exits."""
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from ppoga_dspy.kg.servers import start_oxigraph
        handle = start_oxigraph([Path({str(rdf_files[0])!r})], Path({str(tmp_path)!r}))
        print(handle.pid, handle.port, flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    pid, port = map(int, done.stdout.split())
    assert _process_gone(pid)
    assert _port_is_free(port)


# --------------------------------------------------------------------------- Virtuoso

needs_virtuoso = pytest.mark.skipif(
    virtuoso_home() is None,
    reason="Virtuoso binaries absent: run scripts/setup_virtuoso.sh (or set PPOGA_VIRTUOSO_HOME)",
)


@pytest.fixture(scope="module")
def virtuoso_server(rdf_files: list[Path], tmp_path_factory: pytest.TempPathFactory):
    if virtuoso_home() is None:
        pytest.skip("Virtuoso binaries absent: run scripts/setup_virtuoso.sh (or set PPOGA_VIRTUOSO_HOME)")
    with start_virtuoso(rdf_files, tmp_path_factory.mktemp("virtuoso")) as handle:
        yield handle
    _assert_stopped(handle)


@needs_virtuoso
@pytest.mark.virtuoso
def test_virtuoso_handle_shape(virtuoso_server: ServerHandle) -> None:
    assert virtuoso_server.kind == "virtuoso"
    assert virtuoso_server.url == f"http://127.0.0.1:{virtuoso_server.port}/sparql"
    assert len(virtuoso_server.ports) == 2 and virtuoso_server.running


@needs_virtuoso
@pytest.mark.virtuoso
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_virtuoso_answers_like_pyoxigraph(virtuoso_server: ServerHandle, rdf_files: list[Path], name: str) -> None:
    expected = _rows_oxigraph(rdf_files, QUERIES[name])
    assert _drop_xsd_string(_rows_endpoint(virtuoso_server.url, QUERIES[name])) == expected


@needs_virtuoso
@pytest.mark.virtuoso
def test_virtuoso_sees_all_graphs_but_not_its_own(virtuoso_server: ServerHandle) -> None:
    """Queries without FROM range over every loaded graph, and Virtuoso's system graphs stay hidden."""
    graphs = _query_endpoint(
        virtuoso_server.url, "SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g"
    )
    assert {b["g"]["value"]: b["n"]["value"] for b in graphs["results"]["bindings"]} == {
        "http://ex.org/graphs/one": "1",
        "http://ex.org/graphs/two": "1",
        "urn:ppoga:kg": "12",
    }
    count = _rows_endpoint(virtuoso_server.url, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert count[0][0][1][1] == "14"


@needs_virtuoso
@pytest.mark.virtuoso
def test_virtuoso_quirks_are_the_documented_ones(virtuoso_server: ServerHandle, rdf_files: list[Path]) -> None:
    url = virtuoso_server.url
    # xsd:string comes back typed, and a plain pattern does not match it (oxigraph matches both).
    motto = _query_endpoint(url, "SELECT ?o WHERE { <http://ex.org/Zurich> <http://ex.org/motto> ?o }")
    assert motto["results"]["bindings"][0]["o"]["datatype"] == XSD_STRING
    assert motto["results"]["bindings"][0]["o"]["value"] == 'say "grüezi"\nthen\ttab'
    plain = 'SELECT ?s WHERE { ?s ?p "say \\"grüezi\\"\\nthen\\ttab" }'
    assert _rows_oxigraph(rdf_files, plain) == [(("s", ("uri", EX + "Zurich")),)]
    assert _rows_endpoint(url, plain) == []
    by_str = 'SELECT ?s WHERE { ?s ?p ?o FILTER(STR(?o) = "say \\"grüezi\\"\\nthen\\ttab") }'
    assert _rows_endpoint(url, by_str) == [(("s", ("uri", EX + "Zurich")),)]
    # Language tags come back lower-cased (oxigraph does the same).
    tags = _query_endpoint(url, 'SELECT (LANG(?o) AS ?t) WHERE { ?s ?p ?o FILTER(STR(?o) = "Zueri") }')
    assert tags["results"]["bindings"][0]["t"]["value"] == "de-ch"
    # ASK is answered as a SELECT of __ASK_RETVAL, not as {"boolean": ...}.
    ask_true = _query_endpoint(url, "ASK { <http://ex.org/Zurich> ?p ?o }")
    ask_false = _query_endpoint(url, "ASK { <http://ex.org/Nowhere> ?p ?o }")
    assert "boolean" not in ask_true
    assert (
        ask_true["head"]["vars"] == ["__ASK_RETVAL"]
        and ask_true["results"]["bindings"][0]["__ASK_RETVAL"]["value"] == "1"
    )
    assert ask_false["results"]["bindings"] == []


@needs_virtuoso
@pytest.mark.virtuoso
def test_virtuoso_stop_frees_ports_and_killed_run_does_not_block_next(rdf_files: list[Path], tmp_path: Path) -> None:
    first = start_virtuoso(rdf_files[:1], tmp_path)
    # Simulate a crashed run: SIGKILL leaves virtuoso.lck and the database behind in its folder.
    os.killpg(first.pid, signal.SIGKILL)
    first.process.wait(timeout=30)
    assert list(tmp_path.glob("virtuoso-*/db1/virtuoso.lck"))
    first.stop()
    with start_virtuoso(rdf_files[:1], tmp_path) as second:
        rows = _rows_endpoint(second.url, QUERIES["one subject"])
        assert _drop_xsd_string(rows) == _rows_oxigraph(rdf_files[:1], QUERIES["one subject"])
    _assert_stopped(second)
    second.stop()


@needs_virtuoso
@pytest.mark.virtuoso
def test_virtuoso_bad_file_reports_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.nt"
    bad.write_text('<http://ex.org/a> <http://ex.org/b> "ok" .\n<http://ex.org/a> <http://ex.org/b> "broken .\n')
    with pytest.raises(ServerError, match=r"Virtuoso could not load: .*bad\.nt: .*line \d+") as caught:
        start_virtuoso([bad], tmp_path / "work")
    assert "server log" in str(caught.value)
    leftover = [p for p in (tmp_path / "work").glob("virtuoso-*/db*") if p.is_dir()]
    assert leftover == [], "a failed start must stop the server and remove its database"


@needs_virtuoso
@pytest.mark.virtuoso
def test_virtuoso_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="RDF file not found"):
        start_virtuoso([tmp_path / "absent.nq"], tmp_path)


def test_virtuoso_without_binaries_says_how_to_get_them(rdf_files: list[Path], tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="setup_virtuoso.sh"):
        start_virtuoso(rdf_files, tmp_path, home=tmp_path / "no-virtuoso-here")


def test_virtuoso_home_follows_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PPOGA_VIRTUOSO_HOME", str(tmp_path))
    assert virtuoso_home() is None
    binary = tmp_path / "usr" / "bin" / "virtuoso-t"
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"")
    assert virtuoso_home() == tmp_path
