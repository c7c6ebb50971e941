"""LoRA adapters for the embedded model: apply one saved by `ppoga compile --optimizer finetune` to a loaded model.

The adapter is merged into the weights (`merge_and_unload`), so generation costs exactly what the base
model costs. `peft` is imported only here, and only when an adapter is used.

The embedded engine applies it: `EmbeddedEngine(adapter=PATH)` (or `with_adapter(lm, PATH)` in
lm/factory.py, which `open_program` calls for an artifact that names an adapter) loads the base weights
and merges the adapter in `_load`. `adapter_digest(path)` (a hash of the adapter's files) is in the
process registry key, so base and adapted weights live side by side, and in the engine's `dump_state`,
which keys the response cache: a reply of the base model (or of an earlier training of the same
folder) is never served for the adapted one. The model string stays `local/NAME`, so the artifact's LM
description still matches.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ppoga_dspy.inference.errors import InferenceConfigError

ADAPTER_CONFIG = "adapter_config.json"


def check_adapter(path: str | Path) -> Path:
    """The adapter folder, or an InferenceConfigError saying what is missing."""
    folder = Path(path)
    if not (folder / ADAPTER_CONFIG).is_file():
        raise InferenceConfigError(f"no LoRA adapter at {folder} (no {ADAPTER_CONFIG}); the artifact's adapter folder "
                                   "must travel with it (`ppoga compile --optimizer finetune --out X.json` writes "
                                   "X.adapter/)")
    return folder


def adapter_digest(path: str | Path) -> str:
    """A short digest of the adapter's files: names the adapted model in cache keys and logs."""
    folder = check_adapter(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in folder.iterdir() if p.is_file()):
        digest.update(file.name.encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


def apply_adapter(model: Any, path: str | Path) -> Any:
    """`model` with the LoRA adapter at `path` merged into its weights (a plain transformers model again)."""
    folder = check_adapter(path)
    try:
        from peft import PeftModel
    except ImportError as exc:  # pragma: no cover - dependency missing
        raise InferenceConfigError("LoRA adapters need `peft`: pip install ppoga-dspy again") from exc
    adapted = PeftModel.from_pretrained(model, str(folder), is_trainable=False)
    return adapted.merge_and_unload()
