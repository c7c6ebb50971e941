"""Fixtures for the KG tests: data locations; the engine fixtures come from ppoga_dspy.testing.fixtures.

The contract data is the demo KG (Freebase dialect) plus WC2014 (IRN dialect), exported once to a
single N-Triples file. Each engine serves that data once per session: an in-memory store, a store
directory made by `ppoga kg load`, an `oxigraph serve-read-only` endpoint and a Virtuoso endpoint.
Servers start lazily, so selecting tests with -k starts only what they need.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ppoga_dspy.testing.fixtures import (  # fixtures, re-exported for the KG tests
    ENGINES,
    contract_kgs,
    contract_nt,
    engine_spec,
    facts,
    reference_kgs,
    server_dir,
)
from tests.conftest import DEMO_KG, shared_data

HERE_DATA = Path(__file__).resolve().parent / "data"
MINI_ONTOLOGY = HERE_DATA / "ontology"

__all__ = ["ENGINES", "contract_kgs", "contract_nt", "engine_spec", "facts", "reference_kgs", "server_dir"]


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
