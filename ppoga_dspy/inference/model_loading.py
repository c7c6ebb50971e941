"""One way to build a transformers model in this process: `building_model()`.

Why: transformers sets torch's *global* default dtype while it builds a model (`dtype=torch.bfloat16`
for the embedded model), and prints through a global progress-bar switch. A model built in another
thread meanwhile (MiniLM for pruning and demos, in one question's thread of a threaded `ppoga eval`
while another loads the embedded model) gets bfloat16 weights and fails at its first matmul ("mat1 and
mat2 must have the same dtype"): seen when the embedded model was loaded in the background of `ppoga ask`.
Builds inside `building_model()` never overlap, and transformers' own bars stay silent in them (our
loads show one progress line of their own); the switch is restored after.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Held around each transformers model construction (`AutoModel*.from_pretrained`, GGUF conversion, LoRA merge).
MODEL_LOAD_LOCK = threading.RLock()


@contextmanager
def building_model() -> Iterator[None]:
    """Hold `MODEL_LOAD_LOCK` with transformers' progress bars off (restored to how they were after)."""
    import transformers

    with MODEL_LOAD_LOCK:
        bars_were_on = transformers.utils.logging.is_progress_bar_enabled()
        transformers.utils.logging.disable_progress_bar()
        try:
            yield
        finally:
            if bars_were_on:
                transformers.utils.logging.enable_progress_bar()
