"""pytest fixtures that serve the KG contract data on every engine (embedded, store directory, oxigraph, Virtuoso).

Import the ones you need into a conftest.py; provide a `contract_files` fixture (the demo KG and
WC2014.txt) and, to add your own engine, wrap `engine_spec` or write a `contract_kgs` of your own.
Servers start lazily, so selecting tests with -k starts only what they need.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

#: The engines `engine_spec` runs on; endpoints are marked slow, Virtuoso needs its unpacked binaries.
ENGINES = [
    "memory",
    "store_dir",
    pytest.param("oxigraph", marks=pytest.mark.slow),
    pytest.param("virtuoso", marks=[pytest.mark.slow, pytest.mark.virtuoso]),
]


def start_server(kind: str, files: list[Path], workdir: Path):
    """A running `oxigraph` or `virtuoso` server over `files`, or skip the test saying what is missing."""
    from ppoga_dspy.kg import servers

    if kind == "virtuoso" and servers.virtuoso_home() is None:
        pytest.skip("Virtuoso binaries are absent: run scripts/setup_virtuoso.sh (CI does) to run these tests")
    start = servers.start_oxigraph if kind == "oxigraph" else servers.start_virtuoso
    return start(files, workdir)


@pytest.fixture(scope="session")
def contract_nt(tmp_path_factory: pytest.TempPathFactory, contract_files: list[Path]) -> Path:
    """The contract data as one N-Triples file (what the servers load)."""
    from ppoga_dspy.kg.importers import export_ntriples

    out = tmp_path_factory.mktemp("contract") / "contract.nt"
    export_ntriples(contract_files, out)
    return out


@pytest.fixture(scope="session")
def server_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("servers")


@pytest.fixture(scope="session", params=ENGINES)
def engine_spec(
    request: pytest.FixtureRequest, contract_files, contract_nt, server_dir
) -> Iterator[tuple[str, object]]:
    """(engine name, open_kg spec) for the contract data, one engine at a time, set up once per session."""
    kind = request.param
    if kind == "memory":
        yield kind, list(contract_files)
    elif kind == "store_dir":
        from ppoga_dspy.kg.store import create_store_dir

        store = server_dir / "store"
        create_store_dir(contract_files, store, dialect="freebase")
        yield kind, store
    else:
        handle = start_server(kind, [contract_nt], server_dir)
        with handle:
            yield kind, handle.url


@pytest.fixture(scope="session")
def contract_kgs(engine_spec) -> Iterator[dict[str, object]]:
    """{"engine": name, "freebase": KG over the demo data, "irn": KG over WC2014} for one engine."""
    from ppoga_dspy.kg import open_kg

    kind, spec = engine_spec
    kgs = {"engine": kind}
    for dialect in ("freebase", "irn"):
        kgs[dialect] = open_kg(spec, dialect=dialect, timeout=60)
    yield kgs
    for dialect in ("freebase", "irn"):
        kgs[dialect].close()


@pytest.fixture(scope="session")
def reference_kgs(contract_files) -> Iterator[dict[str, object]]:
    """The in-memory KGs every other engine must agree with."""
    from ppoga_dspy.kg import open_kg

    kgs = {dialect: open_kg(list(contract_files), dialect=dialect) for dialect in ("freebase", "irn")}
    yield kgs
    for kg in kgs.values():
        kg.close()


@pytest.fixture(scope="session")
def facts(contract_nt):
    """out[s][p] and into[o][p] as sets of terms, read straight from the file."""
    import pyoxigraph as ox

    out: dict = defaultdict(lambda: defaultdict(set))
    into: dict = defaultdict(lambda: defaultdict(set))
    for triple in ox.parse(path=str(contract_nt), format=ox.RdfFormat.N_TRIPLES):
        s, p, o = triple.subject.value, triple.predicate.value, triple.object
        out[s][p].add(o)
        if isinstance(o, ox.NamedNode):
            into[o.value][p].add(triple.subject)
    return out, into

