"""Cost counters of one question: LM calls and tokens per stage and role, KG queries, seconds.

PoG's output files report `call_num`, `input_token`, `output_token`, `total_token` and `time` per
question; these counters produce exactly those numbers, plus the per-stage breakdown that shows
what PPoGA's extra predict/think calls cost.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ppoga_dspy.lm.usage import token_count
from ppoga_dspy.method.vocabulary import Role, Stage


@dataclass
class Costs:
    lm_calls: Counter[str] = field(default_factory=Counter)  # stage -> LM requests (cache hits count once)
    prompt_tokens: Counter[str] = field(default_factory=Counter)  # stage -> tokens
    completion_tokens: Counter[str] = field(default_factory=Counter)
    #: stage -> prompt tokens the engine took from its cache (OpenAI's `prompt_tokens_details.cached_tokens`: the
    #: embedded engine's KV prefix cache, vLLM's prefix caching), so a run tells computed from reused prompt
    reused_tokens: Counter[str] = field(default_factory=Counter)
    role_calls: Counter[str] = field(default_factory=Counter)  # planner / executor -> LM requests
    role_tokens: Counter[str] = field(default_factory=Counter)
    gated: Counter[str] = field(default_factory=Counter)  # stage -> choices made without an LM call (gating)
    cost_usd: float = 0.0
    kg_queries: int = 0
    kg_seconds: float = 0.0
    seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_lm(self, stage: Stage, role: Role, usage_entries: list[dict[str, Any]]) -> None:
        """Record one predictor call; `usage_entries` are DSPy's per-request usage dicts (empty on a cache hit)."""
        calls = max(1, len(usage_entries))
        prompt = sum(int(u.get("prompt_tokens") or 0) for u in usage_entries)
        completion = sum(int(u.get("completion_tokens") or 0) for u in usage_entries)
        reused = sum(_cached_tokens(u) for u in usage_entries)
        with self._lock:
            stage, role = Stage(stage).value, Role(role).value  # plain str keys: JSON and counters agree
            self.lm_calls[stage] += calls
            self.prompt_tokens[stage] += prompt
            self.completion_tokens[stage] += completion
            if reused:
                self.reused_tokens[stage] += reused
            self.role_calls[role] += calls
            self.role_tokens[role] += prompt + completion
            self.cost_usd += sum(float(u.get("cost") or 0.0) for u in usage_entries)

    def add_gated(self, stage: Stage) -> None:
        """Record a choice made without asking the model (one candidate, or a decisive embedding margin)."""
        with self._lock:
            self.gated[Stage(stage).value] += 1

    def add_kg(self, seconds: float) -> None:
        with self._lock:
            self.kg_queries += 1
            self.kg_seconds += seconds

    @property
    def total_calls(self) -> int:
        return sum(self.lm_calls.values())

    @property
    def total_prompt_tokens(self) -> int:
        return sum(self.prompt_tokens.values())

    @property
    def total_completion_tokens(self) -> int:
        return sum(self.completion_tokens.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "lm_calls": self.total_calls,
            "prompt_tokens": self.total_prompt_tokens,
            "completion_tokens": self.total_completion_tokens,
            "prompt_tokens_reused": sum(self.reused_tokens.values()),
            "total_tokens": self.total_prompt_tokens + self.total_completion_tokens,
            "lm_calls_by_stage": dict(self.lm_calls),
            "prompt_tokens_by_stage": dict(self.prompt_tokens),
            "completion_tokens_by_stage": dict(self.completion_tokens),
            "prompt_tokens_reused_by_stage": dict(self.reused_tokens),
            "lm_calls_by_role": dict(self.role_calls),
            "tokens_by_role": dict(self.role_tokens),
            "gated_choices": sum(self.gated.values()),
            "gated_by_stage": dict(self.gated),
            "cost_usd": round(self.cost_usd, 6),
            "kg_queries": self.kg_queries,
            "kg_seconds": round(self.kg_seconds, 4),
            "seconds": round(self.seconds, 4),
        }


def _cached_tokens(usage: dict[str, Any]) -> int:
    """The prompt tokens a reply's usage says came from a cache (0 when it does not say, or says nonsense)."""
    details = usage.get("prompt_tokens_details")
    return (token_count(details.get("cached_tokens")) or 0) if isinstance(details, dict) else 0
