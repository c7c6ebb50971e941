"""One display name for each embedded model, used by the README, the notices and the cost tables.

Specs (`local/gemma3-270m`, `local/embedded`) are for machines; people read "Gemma 3 270M
(local/embedded)". Run files keep the spec (it is what a resume compares); what is printed uses this.
"""

from __future__ import annotations

import re

#: Embedded model name (inference/catalogue.py CATALOGUE) -> the name people read.
EMBEDDED_DISPLAY_NAMES = {"gemma3-270m": "Gemma 3 270M", "smollm2-135m": "SmolLM2 135M"}
#: The default embedded model, as printed everywhere (README, `ppoga: no LM configured` notice, cost tables).
DEFAULT_EMBEDDED_DISPLAY = "Gemma 3 270M (local/embedded)"

_LOCAL = re.compile(r"\blocal/([A-Za-z0-9_.\-]+)")


def display_lm(description: str) -> str:
    """An LM description with each embedded spec replaced by its display name ("local/gemma3-270m" -> Gemma ...)."""
    from ppoga_dspy.lm.embedded import DEFAULT_EMBEDDED_MODEL

    def name(match: re.Match) -> str:
        model = match.group(1)
        if model in ("embedded", DEFAULT_EMBEDDED_MODEL):
            return DEFAULT_EMBEDDED_DISPLAY
        shown = EMBEDDED_DISPLAY_NAMES.get(model)
        return f"{shown} (local/{model})" if shown else match.group(0)

    return _LOCAL.sub(name, description or "")
