"""Fixtures shared by the program tests."""

from __future__ import annotations

import pytest

from tests.program.test_fidelity_at_scale import irn_kg


@pytest.fixture
def graph(tmp_path):
    """Real embedded stores over `head relation tail` lines (IRN's format), one folder each, closed after the test."""
    opened = []

    def make(lines: list[str]):
        folder = tmp_path / f"kg{len(opened)}"
        folder.mkdir()
        opened.append(irn_kg(folder, lines))
        return opened[-1]

    yield make
    for kg in opened:
        kg.close()
