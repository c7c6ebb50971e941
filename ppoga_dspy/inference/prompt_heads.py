"""Each predictor's prompt head, prefilled once per machine instead of once per process.

Why: every call of one predictor starts with the same system message (its instructions and field
descriptions: 150-300 tokens), and the in-process prefix cache (`embedded.PrefixCache`) only reuses it
from that predictor's second call on. A `ppoga ask` calls six predictors, four of them twice, so a
fresh process prefilled about 1,400 tokens of system messages that the previous process had already
encoded: about a second of a warm ask on two cores.

A `HeadStore` keeps the attention KV cache of exactly that head (the rendered prompt up to the end of
its system message, nothing of the demos, the question or the step) as one safetensors file per head,
under the model conversion cache, in a folder named after the converted weights, the dtype, the torch
version and any LoRA adapter, so a head is only ever reused by the model that computed it. What a head
holds is what the same model computes for the same tokens; reusing it changes a reply by float
rounding at most, as the in-process cache does. `PPOGA_PROMPT_HEADS=off` (or a model cache that is
off) turns it off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppoga_dspy.inference.cache_files import write_atomically

logger = logging.getLogger(__name__)

#: `off` (or 0/false/no) keeps every head in memory only.
HEADS_ENV = "PPOGA_PROMPT_HEADS"
#: A shorter head (a chat template's first tokens) is not worth a file.
MIN_HEAD_TOKENS = 32
#: The store forgets its least recently used heads beyond this many files or bytes.
MAX_HEAD_FILES = 64
MAX_HEAD_BYTES = 256 * 1024 * 1024
_FORMAT = "ppoga-prompt-head/1"


def heads_enabled() -> bool:
    """Whether prompt heads may be kept on disk (`PPOGA_PROMPT_HEADS`, default on)."""
    return os.environ.get(HEADS_ENV, "").strip().lower() not in ("off", "0", "false", "no", "none")


def system_head(prompt: str, ids: Sequence[int], system: str | None, tokenizer: Any) -> list[int]:
    """The ids of `prompt` (tokenised as `ids`) up to the end of its system message `system`; [] if it has none.

    The head is tokenised on its own and cut to what it shares with `ids`, so a token that merges
    across the boundary is left out rather than guessed.
    """
    if not system:
        return []
    end = prompt.find(system)
    if end < 0:
        return []
    head = tokenizer(prompt[: end + len(system)], add_special_tokens=False)["input_ids"]
    n = common_prefix(head, ids)
    return list(ids[:n]) if n >= MIN_HEAD_TOKENS else []


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class _Head:
    path: Path
    ids: list[int]


class HeadStore:
    """The prompt heads of one model (one folder): found by longest common token prefix, loaded on demand.

    Used under the model's generation lock, like the prefix cache that owns it. Any file it cannot
    read is skipped (and logged), never fatal: a head only saves time.
    """

    def __init__(self, folder: Path, *, max_files: int = MAX_HEAD_FILES, max_bytes: int = MAX_HEAD_BYTES) -> None:
        self.folder = folder
        self.max_files, self.max_bytes = max_files, max_bytes
        self._heads: list[_Head] | None = None
        self._writable = True  # until a write fails (a read-only cache): then heads are only read
        self.loads = self.saves = 0

    def _index(self) -> list[_Head]:
        if self._heads is None:
            from safetensors import safe_open

            heads = []
            for path in sorted(self.folder.glob("*.safetensors")) if self.folder.is_dir() else []:
                try:
                    with safe_open(str(path), framework="pt") as handle:
                        meta = handle.metadata() or {}
                    if meta.get("format") == _FORMAT:
                        heads.append(_Head(path, [int(i) for i in json.loads(meta["ids"])]))
                except Exception as exc:  # a damaged or foreign file: skip it
                    logger.debug("prompt head %s unreadable (%s); skipped", path, exc)
            self._heads = heads
        return self._heads

    def __len__(self) -> int:
        return len(self._index())

    def longest(self, ids: Sequence[int], beyond: int = 0) -> tuple[_Head | None, int]:
        """The stored head sharing the longest token prefix with `ids`, and that length, if longer than `beyond`.

        `beyond` is what the caller already has in memory: a reply's next field (nearly every call)
        skips the comparison altogether.
        """
        best, best_len = None, beyond
        for head in self._index():
            if len(head.ids) <= best_len:
                continue
            n = common_prefix(head.ids, ids)
            if n > best_len:
                best, best_len = head, n
        return (best, best_len) if best is not None else (None, 0)

    def knows(self, ids: Sequence[int]) -> bool:
        return any(head.ids == list(ids) for head in self._index())

    def load(self, head: _Head, positions: int) -> Any | None:
        """A transformers `DynamicCache` of the head's first `positions` positions, or None if unreadable."""
        from safetensors.torch import load_file
        from transformers import DynamicCache

        try:
            tensors = load_file(str(head.path))
            layers = len(tensors) // 2
            data = [(tensors[f"k{i}"][:, :, :positions], tensors[f"v{i}"][:, :, :positions]) for i in range(layers)]
            os.utime(head.path)  # recently used: the last to be forgotten
        except Exception as exc:  # removed by another process's store meanwhile, or damaged
            log = logger.debug if isinstance(exc, FileNotFoundError) else logger.warning
            log("prompt head %s unreadable (%s); it is prefilled again", head.path, exc)
            self._index().remove(head)
            return None
        self.loads += 1
        return DynamicCache(ddp_cache_data=data)

    def save(self, ids: Sequence[int], kv: Any) -> None:
        """Keep the first `len(ids)` positions of `kv` (a `DynamicCache` holding at least those) as the head `ids`."""
        from safetensors.torch import save_file

        n = len(ids)
        if not self._writable or n < MIN_HEAD_TOKENS or self.knows(ids) or kv.get_seq_length() < n:
            return
        tensors: dict[str, Any] = {}
        for i, layer in enumerate(kv.layers):
            tensors[f"k{i}"] = layer.keys[:, :, :n].contiguous()
            tensors[f"v{i}"] = layer.values[:, :, :n].contiguous()
        name = hashlib.sha1(json.dumps(list(ids)).encode()).hexdigest()[:20] + ".safetensors"
        target = self.folder / name
        metadata = {"format": _FORMAT, "ids": json.dumps(list(ids))}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_atomically(target, lambda tmp: save_file(tensors, tmp, metadata=metadata))
        except OSError as exc:
            logger.warning("could not keep a prompt head under %s (%s); this process keeps none, and the next "
                           "prefills them again (PPOGA_MODEL_CACHE moves the cache)", self.folder, exc)
            self._writable = False
            return
        self._index().append(_Head(target, list(ids)))
        self.saves += 1
        self._forget_oldest()

    def _forget_oldest(self) -> None:
        """Drop the least recently used heads beyond the file and byte limits."""
        try:
            files = sorted(self.folder.glob("*.safetensors"), key=lambda p: p.stat().st_mtime)
            sizes = [p.stat().st_size for p in files]
        except OSError:
            return
        while files and (len(files) > self.max_files or sum(sizes) > self.max_bytes):
            oldest = files.pop(0)
            sizes.pop(0)
            oldest.unlink(missing_ok=True)
            self._heads = [h for h in self._index() if h.path != oldest]
