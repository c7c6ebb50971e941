"""Where a missed question was lost: the plan, the relation choice, the entity choice or the answer.

A target missed on a benchmark says little until the trace says which stage lost the questions. For a
question with a gold path (MetaQA's `metadata["path"]`, in menu form: `directed_by (reverse)`), read from
what a run file holds, in the order the method meets them:
- plan: the first plan's step objectives do not name the gold relations in order;
- relation choice: the plan named them, but the relations chosen step after step (by SelectRelations or a
  gate) do not follow the gold path (paper stages: the embedded and noisy rows);
- entity choice: the gold relations were followed, yet no gold answer reached the evidence Answer read;
- answer: a gold answer was in the evidence, and the answer named something else.
Questions without a gold path are counted as `no gold path`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ppoga_dspy.evaluation.instruments import evidence_text, mentions, trace_events
from ppoga_dspy.method.gating import names_relation

STAGES = ("plan", "relation choice", "entity choice", "answer")
#: The trace events that record a relation choice: the model's, and the gated ones (one candidate, a margin, a
#: relation the step named).
CHOICE_EVENTS = ("select_relations", "select_relations.gated")


def _chosen(event: dict[str, Any]) -> list[str]:
    outputs = event.get("outputs") or {}
    chosen = outputs.get("relations", outputs.get("chosen")) or []
    return [chosen] if isinstance(chosen, str) else list(chosen)


def _in_order(path: list[str], items: list, match) -> bool:
    """Whether the path's keys are matched by the items in order (an item may be skipped: a retry, an extra step)."""
    found = 0
    for item in items:
        if found < len(path) and match(path[found], item):
            found += 1
    return found == len(path)


def lost_at(row: dict[str, Any]) -> str | None:
    """The stage that lost a missed question (see the module doc); None for a question answered right."""
    if (row.get("metrics") or {}).get("hits@1"):
        return None
    path = list((row.get("metadata") or {}).get("path") or [])
    if not path:
        return "no gold path"
    plans = trace_events(row, "decompose") or trace_events(row, "decompose_predict")
    objectives = [str(step.get("objective", "")) for step in ((plans[0].get("outputs") or {}).get("steps") or [])
                  ] if plans else []
    if not _in_order(path, objectives, names_relation):
        return "plan"
    chosen = [_chosen(e) for e in row.get("trace") or [] if e.get("stage") in CHOICE_EVENTS]
    if not _in_order(path, chosen, lambda key, choice: key in choice):
        return "relation choice"
    if not mentions(evidence_text(row), list(row.get("gold") or [])):
        return "entity choice"
    return "answer"


def loss_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Missed questions per stage, in the method's order (stages with none included as 0)."""
    counts = Counter(stage for stage in map(lost_at, rows) if stage)
    return {stage: counts[stage] for stage in STAGES} | {k: n for k, n in counts.items() if k not in STAGES}


def markdown(cells: dict[str, list[dict[str, Any]]]) -> str:
    """One line per (row, hops) label: questions, misses, and the misses by the stage that lost them."""
    lines = ["| rows | n | missed | " + " | ".join(STAGES) + " |", "|" + "---|" * (len(STAGES) + 3)]
    for label, rows in cells.items():
        counts = loss_counts(rows)
        missed = sum(counts.values())
        lines.append(f"| {label} | {len(rows)} | {missed} | " + " | ".join(str(counts[s]) for s in STAGES) + " |")
    return "\n".join(lines)
