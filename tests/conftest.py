"""Shared fixtures: where the benchmark data lives, the demo KG, and a clean DSPy state per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
DEMO_KG = REPO / "data" / "demo" / "demo-kg.nt"
DEMO_QUESTIONS = REPO / "data" / "demo" / "questions.jsonl"


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, skipping the test (with the reason) when the data is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"benchmark data not found at {path} (CI provides ../shared/data beside the checkout)")
    return path


@pytest.fixture(scope="session")
def demo_kg():
    from ppoga_dspy.kg import open_kg

    kg = open_kg(DEMO_KG)
    yield kg
    kg.close()


@pytest.fixture(autouse=True)
def _clean_dspy_settings():
    """Each test configures its own LM; nothing leaks between tests."""
    import dspy

    with dspy.context(lm=None):
        yield
