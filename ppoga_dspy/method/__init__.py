"""The PPoGA method as the paper describes it, and nothing else (see ARCHITECTURE.md for the map).

Importing this package is light: `PPoGA` and `Thresholds` are loaded on first access.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PPoGA", "Thresholds"]


def __getattr__(name: str) -> Any:
    if name == "PPoGA":
        from ppoga_dspy.method.program import PPoGA

        return PPoGA
    if name == "Thresholds":
        from ppoga_dspy.method.thresholds import Thresholds

        return Thresholds
    raise AttributeError(name)
