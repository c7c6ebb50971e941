"""The on/off rules of a student, chosen by measuring them on dev questions, not set by hand.

A rule that helps a small model (Answer without the plan lines, say) may cost a capable one, and a rule tuned by
reading test misses does not hold on unseen questions. So `ppoga compile` chooses the rules of `CHOSEN_ON_DEV` for
the student it compiles: each starts at its default (the defaults are the ones that serve every model); one pass
flips each in turn, scores the student on the dev questions, and keeps a flip that answers more of them right, or
as many at fewer LM calls. The budget is the number of dev scorings (`--switch-trials`); without dev questions
(`--dev-limit 0`) nothing is measured and the defaults stand. What was tried is kept in the artifact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ppoga_dspy.evaluation.evaluate import score_program
from ppoga_dspy.method.thresholds import CHOSEN_ON_DEV, Thresholds

#: Hits@1 closer than this counts as equal (then fewer LM calls win).
EQUAL = 1e-9


@dataclass
class SwitchChoice:
    """The thresholds chosen, each scoring tried (switches, Hits@1, LM calls), and the rules changed."""

    thresholds: Thresholds
    trials: list[dict[str, Any]] = field(default_factory=list)
    changed: dict[str, bool] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"trials": self.trials, "changed": self.changed}


def _better(candidate: tuple[float, float], best: tuple[float, float]) -> bool:
    hits, calls = candidate
    return hits > best[0] + EQUAL or (abs(hits - best[0]) <= EQUAL and calls < best[1])


def choose_switches(program: Any, devset: list, *, budget: int, threads: int = 1,
                    names: tuple[str, ...] = CHOSEN_ON_DEV) -> SwitchChoice:
    """The student's rules after one greedy pass over `names` within `budget` dev scorings (the first scores the
    rules as they are); `program` is left as it was."""
    base: Thresholds = program.thresholds

    def score(thresholds: Thresholds) -> tuple[float, float]:
        candidate = program.deepcopy()
        candidate.thresholds = thresholds
        summary = score_program(candidate, devset, threads=threads)
        return float(summary.get("hits@1") or 0.0), float(summary.get("lm_calls_mean") or 0.0)

    def record(thresholds: Thresholds, result: tuple[float, float]) -> None:
        trials.append({"switches": {n: getattr(thresholds, n) for n in names}, "hits@1": round(result[0], 4),
                       "lm_calls_mean": round(result[1], 3)})

    trials: list[dict[str, Any]] = []
    if budget <= 0 or not devset:
        return SwitchChoice(base)
    chosen, best = base, score(base)
    record(chosen, best)
    for name in names[: budget - 1]:
        flipped = chosen.model_copy(update={name: not getattr(chosen, name)})
        result = score(flipped)
        record(flipped, result)
        if _better(result, best):
            chosen, best = flipped, result
    changed = {n: getattr(chosen, n) for n in names if getattr(chosen, n) != getattr(base, n)}
    return SwitchChoice(chosen, trials, changed)
