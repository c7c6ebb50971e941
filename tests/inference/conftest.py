"""Fixtures of the inference tests: the LM tests' clean environment and their session-wide embedded model.

Many of these tests drive the engine through `EmbeddedEngine` (lm/), as users do, so they share the LM
tests' fixtures rather than define them twice.
"""

from __future__ import annotations

from tests.lm.conftest import _clean_lm_environment, embedded_engine

__all__ = ["_clean_lm_environment", "embedded_engine"]
