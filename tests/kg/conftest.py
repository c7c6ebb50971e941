"""Fixtures for the KG tests: data locations, and one KG per engine holding the same data.

The contract data is the demo KG (Freebase dialect) plus WC2014 (IRN dialect), exported once to a
single N-Triples file. Each engine serves that data once per session: an in-memory store, a store
directory made by `ppoga kg load`, an `oxigraph serve-read-only` endpoint and a Virtuoso endpoint.
Servers start lazily, so selecting tests with -k starts only what they need.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import DEMO_KG, shared_data

HERE_DATA = Path(__file__).resolve().parent / "data"
MINI_ONTOLOGY = HERE_DATA / "ontology"

ENGINES = [
    "memory",
    "store_dir",
    pytest.param("oxigraph", marks=pytest.mark.slow),
    pytest.param("virtuoso", marks=[pytest.mark.slow, pytest.mark.virtuoso]),
]


shared = shared_data  # a file under ../shared/data, or skip the test with the reason when it is absent


@pytest.fixture(scope="session")
def wc_kb() -> Path:
    return shared("wc2014", "WC2014.txt")


@pytest.fixture(scope="session")
def demo_kg() -> Path:
    if not DEMO_KG.is_file():
        pytest.skip(f"the demo KG {DEMO_KG} is missing")
    return DEMO_KG


@pytest.fixture(scope="session")
def contract_files(demo_kg: Path, wc_kb: Path) -> list[Path]:
    return [demo_kg, wc_kb]


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


def _start_server(kind: str, files: list[Path], workdir: Path):
    try:
        from ppoga_dspy.kg import servers
    except ImportError as exc:  # pragma: no cover - only while kg/servers.py is being written
        pytest.skip(f"ppoga_dspy.kg.servers is not available ({exc})")
    if kind == "virtuoso" and servers.virtuoso_home() is None:
        pytest.skip("Virtuoso binaries are absent: run scripts/setup_virtuoso.sh (CI does) to run these tests")
    start = servers.start_oxigraph if kind == "oxigraph" else servers.start_virtuoso
    return start(files, workdir)


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
        handle = _start_server(kind, [contract_nt], server_dir)
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
