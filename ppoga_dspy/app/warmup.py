"""Load what the first question would otherwise load (the embedded LM, the pruning embedder), before any timer.

The first question of a run used to pay 14-22 s of model and embedder loading, which inflated
seconds per question in every summary. `warm_up` pays it once, up front, and says how long it took,
so per-question times measure answering only and start-up is reported on its own.
"""

from __future__ import annotations

import time
from typing import Any


def warm_up(program: Any, role_lms: dict[str, Any] | None = None) -> float:
    """Load the program's embedding model and any embedded role LM; return the seconds it took."""
    started = time.perf_counter()
    ranker = getattr(getattr(program, "executor", None), "ranker", None)
    load_ranker = getattr(type(ranker), "model", None)
    if callable(load_ranker):  # EmbeddingRanker: the MiniLM sentence encoder, one per process
        load_ranker()
    for lm in (role_lms or {}).values():
        engine = (getattr(lm, "kwargs", None) or {}).get("engine")
        if engine is not None and hasattr(engine, "info") and hasattr(engine, "name"):
            from ppoga_dspy.lm.embedded import load_embedded

            load_embedded(engine.name)
    return time.perf_counter() - started
