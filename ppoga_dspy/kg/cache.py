"""A small thread-safe LRU cache for query results, shared by every engine.

Parallel evaluations call one KnowledgeGraph from many threads and repeat the same look-ups
(the same topic entity's relations, the same labels); answering those from memory is the single
biggest saving on a remote endpoint. Values must be immutable (tuples), since every caller gets
the same object back.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

_MISSING = object()


class LRUCache(Generic[V]):
    """Least-recently-used cache with a fixed number of entries; size 0 disables it."""

    def __init__(self, size: int = 4096) -> None:
        if size < 0:
            raise ValueError(f"cache size must be >= 0, got {size}")
        self.size = size
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, default: object = _MISSING) -> V | object:
        """The cached value (marking it recently used), or `default` (a private sentinel if omitted)."""
        with self._lock:
            try:
                value = self._data[key]
            except KeyError:
                self.misses += 1
                return default
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Hashable, value: V) -> None:
        if self.size == 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

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
