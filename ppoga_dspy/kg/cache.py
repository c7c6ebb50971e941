"""The query-result cache every engine shares: `cachetools`' LRU eviction, made thread-safe and counted.

Parallel evaluations call one KnowledgeGraph from many threads and repeat the same look-ups
(the same topic entity's relations, the same labels); answering those from memory is the single
biggest saving on a remote endpoint. `cachetools.LRUCache` does the eviction but is not thread-safe
and cannot hold a size of 0 (our "no cache"), so this wraps it with a lock, a no-op size 0 and
hit/miss counts. Values must be immutable (tuples), since every caller gets the same object back.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

import cachetools

V = TypeVar("V")

_MISSING = object()


class LRUCache(Generic[V]):
    """Least-recently-used cache with a fixed number of entries; size 0 disables it."""

    def __init__(self, size: int = 4096) -> None:
        if size < 0:
            raise ValueError(f"cache size must be >= 0, got {size}")
        self.size = size
        self._data: cachetools.LRUCache[Hashable, V] = cachetools.LRUCache(maxsize=size)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, default: object = _MISSING) -> V | object:
        """The cached value (marking it recently used), or `default` (a private sentinel if omitted)."""
        with self._lock:
            try:
                value = self._data[key]  # a look-up marks the entry recently used
            except KeyError:
                self.misses += 1
                return default
            self.hits += 1
            return value

    def put(self, key: Hashable, value: V) -> None:
        if self.size == 0:  # cachetools refuses any entry at maxsize 0
            return
        with self._lock:
            self._data[key] = value  # evicts the least recently used entry when full

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    @staticmethod
    def missing(value: object) -> bool:
        """True when `get` found nothing (the default sentinel came back)."""
        return value is _MISSING
