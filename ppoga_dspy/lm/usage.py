"""Token usage as a hint: a server's usage figures are coerced or dropped, never a reason to fail a reply.

Servers report usage however they like: counts as strings (`"10"`), floats, negative numbers, `1e30`. DSPy's
native engine (lm15) reads the OpenAI chat `usage` object strictly and raises `input_tokens must be an int` on
a string, which failed a question whose reply was good; an absurd count was summed into a run's means. Usage
only feeds the cost tables, so it is read leniently here: a whole number from 0 to `MAX_TOKENS` is kept (a
numeric string is read as a number), anything else is dropped.

`install()` puts `hinted` in front of lm15's one reader of chat usage (complete and streamed replies alike);
it is idempotent and `GuardedLM` calls it, so every remote call made through `make_lm` reads usage this way.
"""

from __future__ import annotations

import math
import threading
from typing import Any

#: More tokens than any one call can use (a million-token context, a hundred times over): a count above is a lie.
MAX_TOKENS = 100_000_000

_installed = False
_lock = threading.Lock()


def token_count(value: Any) -> int | None:
    """A usage figure as a whole number of tokens, or None when it is not one we can believe."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    else:
        return None
    return number if 0 <= number <= MAX_TOKENS else None


def hinted(usage: Any) -> dict[str, Any]:
    """A usage object with every count coerced (`token_count`) or dropped (a null kept); nested objects likewise."""
    if not isinstance(usage, dict):
        return {}
    out: dict[str, Any] = {}
    for key, value in usage.items():
        if isinstance(value, dict):
            out[key] = hinted(value)
        elif value is None:  # "not reported" stays what it says
            out[key] = None
        elif (count := token_count(value)) is not None:
            out[key] = count
    return out


def install() -> None:
    """Read OpenAI chat usage through `hinted` in DSPy's native engine (once per process)."""
    global _installed
    with _lock:
        if _installed:
            return
        try:
            from dspy._vendor.lm15.providers import openai_chat
        except ImportError:  # another DSPy build: its own reader stands
            _installed = True
            return
        strict = openai_chat._usage_from_chat

        def lenient(usage_data: dict[str, Any]) -> Any:
            return strict(hinted(usage_data))

        lenient.__wrapped__ = strict  # type: ignore[attr-defined]
        openai_chat._usage_from_chat = lenient
        _installed = True
