"""The attention KV caches of recent token sequences, so a reply only prefills what is new.

Within a guided reply the next field's prompt is the previous one plus what was generated, and every call
of one predictor starts with the same system prompt and demos: both are prefixes of what comes next. The
prompt heads on disk (`inference/prompt_heads.py`) extend the same look-up across processes.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppoga_dspy.inference.prompt_heads import HeadStore, common_prefix


@dataclass
class _CachedPrefix:
    ids: list[int]
    kv: Any  # a transformers DynamicCache holding exactly `len(ids)` positions


class PrefixCache:
    """Attention KV caches of recent token sequences, keyed by their token ids (LRU).

    `take(ids)` hands out the entry sharing the longest token prefix with `ids`, cropped to that
    prefix, so the caller only runs the model on the rest; `put` stores the extended cache back.
    Within a guided reply the next field's prompt is the previous one plus what was generated, and
    every call of one predictor starts with the same system prompt and demos: both are prefixes.
    Entries are exact (keyed by the very token ids they encode), so a hit changes no output beyond
    float rounding. `max_tokens` bounds the memory: about 18 KB per token for Gemma 3 270M in bf16, so
    12000 tokens (every predictor's prompt head and the reply in progress) is about 220 MB; 24000 pushed
    `ppoga ask` past the old peak RSS.
    """

    def __init__(self, max_entries: int = 16, max_tokens: int = 12_000, min_reuse: int = 8,
                 continuation_slack: int = 32, heads: HeadStore | None = None) -> None:
        self.max_entries, self.max_tokens, self.min_reuse = max_entries, max_tokens, min_reuse
        self.continuation_slack = continuation_slack
        self._entries: OrderedDict[int, _CachedPrefix] = OrderedDict()
        self._next_key = 0
        self.hits = self.misses = self.reused_tokens = 0
        #: Prompt heads kept on disk (`inference/prompt_heads.py`), and the coming call's head, kept at its first `put`.
        self.heads = heads
        self._offered: list[int] = []
        #: What the current call's first look-up (its prompt) took from the cache; None before it (`begin_call`).
        self.call_reused: int | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def begin_call(self) -> None:
        """Start one call's count: its prompt tokens taken from the cache are what a run reports as reused.

        A call looks the cache up once per reply field; only the first look-up is its prompt, the later ones are
        its own fields continuing, which no server would count as cached prompt.
        """
        self.call_reused = None

    def take(self, ids: Sequence[int]) -> tuple[Any | None, int]:
        """`_take`, noting the first look-up of a call (`begin_call`)."""
        kv, n = self._take(ids)
        if self.call_reused is None:
            self.call_reused = n
        return kv, n

    def _take(self, ids: Sequence[int]) -> tuple[Any | None, int]:
        """(cache, n) for the entry with the longest common prefix n < len(ids), or (None, 0).

        At least one token of `ids` is always left uncached: its forward pass gives the next-token logits.
        An entry used whole, or all but its last `continuation_slack` tokens (the next field of a reply),
        is handed out and leaves the store: the caller extends it and puts it back. An entry that shares
        only a prefix (another call of the same predictor: its system prompt and instructions) stays for
        the calls that share more, and the caller gets a cropped copy; taking it out let the next
        predictor's call, which shares only the first few tokens, steal every other predictor's cached
        system prompt.
        """
        best_key, best_len = None, 0
        for key, entry in self._entries.items():
            n = common_prefix(entry.ids, ids)
            if n > best_len:
                best_key, best_len = key, n
        best_len = min(best_len, len(ids) - 1)
        if self.heads is not None:  # a head on disk: when it covers more than memory does (a predictor's first call)
            head, n = self.heads.longest(ids, beyond=best_len)
            n = min(n, len(ids) - 1)
            kv = self.heads.load(head, n) if head is not None and n > best_len and n >= self.min_reuse else None
            if kv is not None:
                self.hits += 1
                self.reused_tokens += n
                return kv, n
        if best_key is None or best_len < self.min_reuse:
            self.misses += 1
            return None, 0
        entry = self._entries[best_key]
        surplus = len(entry.ids) - best_len
        if surplus <= self.continuation_slack:  # a continuation (re-tokenising a reply's end may differ a little)
            kv = self._entries.pop(best_key).kv
        else:
            kv = copy.deepcopy(entry.kv)
            self._entries.move_to_end(best_key)  # still in use: the last to be evicted
        drop_last(kv, surplus)
        self.hits += 1
        self.reused_tokens += best_len
        return kv, best_len

    def offer_head(self, head: Sequence[int]) -> None:
        """The coming call's prompt head (`prompt_heads.system_head`), kept on disk at the first `put` covering it."""
        self._offered = list(head) if self.heads is not None else []  # `save` skips a head it already has

    def put(self, ids: Sequence[int], kv: Any) -> None:
        """Store `kv` (holding exactly the positions of `ids`) as the most recent entry; evict the oldest."""
        if self._offered and self.heads is not None and list(ids[: len(self._offered)]) == self._offered:
            self.heads.save(self._offered, kv)
            self._offered = []
        self._entries[self._next_key] = _CachedPrefix(list(ids), kv)
        self._next_key += 1
        while self._entries and (
            len(self._entries) > self.max_entries or sum(len(e.ids) for e in self._entries.values()) > self.max_tokens
        ):
            self._entries.popitem(last=False)


def drop_last(kv: Any, positions: int) -> None:
    """Drop the last `positions` positions of the KV cache `kv` (nothing for 0 or fewer)."""
    if positions > 0:
        kv.crop(-positions)  # this DynamicCache.crop takes the (negative) number of positions to drop

