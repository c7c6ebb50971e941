"""What the HTML report shows, computed from run rows: per-question reasoning views, evidence graphs,
Hits@1 by group with intervals, and what the corrections did.

Kept apart from the page (`html_report.py`) and the plots (`report_plots.py`) so each part can be tested
on real rows without a browser.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ppoga_dspy.evaluation.digests import digest_of
from ppoga_dspy.evaluation.metrics import breakdown
from ppoga_dspy.report.reasoning import corrections, is_routine_override, timeline
from ppoga_dspy.report.stats import wilson_interval

#: Group keys of the breakdown (row top level or metadata), in the order the report shows them.
GROUP_KEYS = ("hops", "type", "level")
_LM_EVENT_STAGES = {"decompose", "predict", "think", "evaluate", "replan", "answer", "select_relations",
                    "select_entities", "decompose_predict", "think_evaluate", "select_relation_pairs"}


def hit(row: dict[str, Any]) -> bool:
    return bool((row.get("metrics") or {}).get("hits@1"))


def group_value(row: dict[str, Any], key: str) -> str | None:
    """A row's value for a breakdown key, as text; None when unset."""
    value = row[key] if key in row else (row.get("metadata") or {}).get(key)
    return None if value in (None, "") else str(value)


def groups_with_intervals(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Hits@1 per value of each group key with its Wilson interval: {key: [{value, n, hits, hits@1, low, high}]}."""
    out: dict[str, list[dict[str, Any]]] = {}
    for key in GROUP_KEYS:
        entries = []
        for value, scores in breakdown(rows, key).items():
            if value in (None, ""):
                continue
            n = int(scores["n"])
            hits = round(scores["hits@1"] * n)
            low, high = wilson_interval(hits, n)
            entries.append({"value": str(value), "n": n, "hits": hits, "hits@1": hits / n, "low": low, "high": high})
        if entries:
            out[key] = entries
    return out


def note_text(event: dict[str, Any]) -> str:
    """One readable line for a trace note (a correction, a rule that overrode the model, a fallback)."""
    outputs = event.get("outputs") or {}
    stage = event.get("stage", "")
    if stage == "decision_changed" and {"model", "applied"} <= outputs.keys():
        if is_routine_override(event):
            return f"the plan's last step: {outputs['model']} is applied as {outputs['applied']}"
        return (f"rule: the model chose {outputs['model']}, the caps applied {outputs['applied']} "
                f"(path corrections {outputs.get('attempts', 0)}, replans {outputs.get('replans', 0)})")
    if stage == "path_correction":
        avoid = "; ".join(" ".join(str(x) for x in p) for p in outputs.get("avoid") or [])
        return f"path correction: step {int(outputs.get('step', 0)) + 1} again, avoiding {avoid or 'nothing'}"
    if stage == "plan_correction":
        plan = " | ".join(map(str, outputs.get("plan") or []))
        return f"plan correction {outputs.get('replan', '')}: new plan {plan}"
    text = ", ".join(f"{k}: {_short(v)}" for k, v in outputs.items())
    return f"{stage}: {text}" if text else stage


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def chain_graph(row: dict[str, Any]) -> dict[str, Any]:
    """The answer's evidence chains as a small layered graph: nodes with a kind and a position, edges.

    Layer = distance from a topic entity (breadth first over the chains' facts, either direction), so the
    chains read left to right from the question's entities to the answer; nodes of a layer are spread
    vertically. Kinds: topic, answer, mediator (a CVT node), other.
    """
    topics = {e.get("id") for e in ((row.get("memory") or {}).get("strategic") or {}).get("topic_entities") or []}
    topics |= set((row.get("topic_entities") or {}).keys()) if isinstance(row.get("topic_entities"), dict) else set()
    answers = {a for a in row.get("answer_ids") or [] if a}
    labels: dict[str, str] = {}
    mediators: set[str] = set()
    edges: list[dict[str, str]] = []
    seen_edges = set()
    neighbours: dict[str, set[str]] = defaultdict(set)
    for chain in row.get("reasoning_chains") or []:
        for triple in chain:
            head, tail = triple.get("head") or {}, triple.get("tail") or {}
            for node in (head, tail):
                labels.setdefault(str(node.get("id")), str(node.get("label") or node.get("id")))
                if node.get("facts"):
                    mediators.add(str(node.get("id")))
            key = (str(head.get("id")), str(triple.get("relation")), str(tail.get("id")))
            if key not in seen_edges:
                seen_edges.add(key)
                edges.append({"source": key[0], "relation": key[1], "target": key[2]})
                neighbours[key[0]].add(key[2])
                neighbours[key[2]].add(key[0])
    layer = _layers(list(labels), neighbours, [n for n in labels if n in topics])
    by_layer: dict[int, list[str]] = defaultdict(list)
    for node in labels:
        by_layer[layer[node]].append(node)
    nodes = []
    for depth, members in sorted(by_layer.items()):
        for position, node in enumerate(members):
            kind = ("answer" if node in answers else "topic" if node in topics else
                    "mediator" if node in mediators else "other")
            nodes.append({"id": node, "label": "CVT" if kind == "mediator" else labels[node], "kind": kind,
                          "x": depth, "y": position - (len(members) - 1) / 2})
    return {"nodes": nodes, "edges": edges}


def _layers(nodes: list[str], neighbours: dict[str, set[str]], starts: list[str]) -> dict[str, int]:
    layer: dict[str, int] = {}
    for root in starts + nodes:  # topics first; any part the topics do not reach starts at its first node
        if root in layer:
            continue
        layer[root] = 0 if root in starts or not layer else max(layer.values()) + 1
        frontier = [root]
        while frontier:
            following = []
            for node in frontier:
                for other in sorted(neighbours[node]):
                    if other not in layer:
                        layer[other] = layer[node] + 1
                        following.append(other)
            frontier = following
    return layer


def question_view(row: dict[str, Any]) -> dict[str, Any]:
    """One run's reasoning on one question, as the page draws it (plan, cycles with their notes, answer)."""
    strategic = (row.get("memory") or {}).get("strategic") or {}
    line = timeline(row)
    cycles = []
    for view in line.cycles:
        c = view.cycle
        cycles.append({
            "step": int(c.get("index", 0)) + 1, "attempt": int(c.get("attempt", 0)) + 1,
            "objective": c.get("objective", ""), "prediction": c.get("prediction", ""),
            "observation": c.get("observation", ""), "thought": c.get("thought", ""),
            "decision": c.get("decision", ""), "reason": c.get("reason", ""), "rationale": c.get("rationale", ""),
            "during": [note_text(n) for n in view.during], "after": [note_text(n) for n in view.after],
            "overridden": view.overridden is not None, "calls": view.calls,
        })
    return {
        "answers": row.get("answers") or [], "hit": hit(row), "f1": float((row.get("metrics") or {}).get("f1") or 0),
        "status": row.get("status", "ok"), "error": row.get("error") or "",
        "topics": [e.get("label", e.get("id")) for e in strategic.get("topic_entities") or []],
        "plan": [{"objective": s.get("objective", ""), "status": s.get("status", ""), "action": s.get("action", ""),
                  "outcome": s.get("outcome", "")} for s in strategic.get("plan") or []],
        "archived": [[s.get("objective", "") for s in plan] for plan in strategic.get("archived_plans") or []],
        "before": [note_text(n) for n in line.before], "cycles": cycles,
        "answer_notes": [note_text(n) for n in line.answer], "reasoning": row.get("reasoning") or "",
        "graph": chain_graph(row), "calls": int(row.get("call_num") or 0), "tokens": int(row.get("total_token") or 0),
        "seconds": float(row.get("time") or 0), "kept": bool(strategic),
    }


def trace_counts(row: dict[str, Any]) -> dict[str, Any]:
    """What the report reads off a whole row's trace, for its digest (`evaluation/digests.py`): the correction
    counts and the calls made from the first correction on, so the trace need not be kept."""
    return {"corrections": corrections(row), "calls_after": calls_after_first_correction(row)}


def correction_counts(row: dict[str, Any]) -> dict[str, int]:
    """`reasoning.corrections` of a whole row or of a digest (counted when it was read)."""
    found = digest_of(row)
    return dict(found.derived["corrections"]) if found and "corrections" in found.derived else corrections(row)


def calls_after_first_correction(row: dict[str, Any]) -> int:
    """LM calls made from a question's first correction (path or plan) on: what correcting cost it."""
    found = digest_of(row)
    if found and "calls_after" in found.derived:
        return int(found.derived["calls_after"])
    started, calls = False, 0
    for event in row.get("trace") or []:
        stage = event.get("stage")
        if stage in ("path_correction", "plan_correction"):
            started = True
        elif started and stage in _LM_EVENT_STAGES:
            calls += 1
    return calls


def correction_effects(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the corrections did, per kind: how many questions went through one, how many ended right
    (the correction turned them around: the step that triggered it had failed), and the cost.

    Kinds: none (no correction), path correction only, a replan (with or without path corrections),
    and a rule override (the caps changed the model's decision). Cost: mean LM calls and tokens of
    those questions, and mean LM calls made from the first correction on.
    """
    kinds: dict[str, list[dict[str, Any]]] = {"no correction": [], "path correction only": [], "replan": [],
                                              "rule override": []}
    for row in rows:
        counts = correction_counts(row)
        if counts["plan_correction"]:
            kinds["replan"].append(row)
        elif counts["path_correction"]:
            kinds["path correction only"].append(row)
        else:
            kinds["no correction"].append(row)
        if counts["decision_changed"]:
            kinds["rule override"].append(row)
    out = []
    for kind, members in kinds.items():
        n = len(members)
        right = sum(hit(r) for r in members)
        low, high = wilson_interval(right, n)
        out.append({
            "kind": kind, "n": n, "share": n / len(rows) if rows else 0.0, "right": right,
            "hits@1": right / n if n else 0.0, "low": low, "high": high,
            "calls": sum(float(r.get("call_num") or 0) for r in members) / n if n else 0.0,
            "tokens": sum(float(r.get("total_token") or 0) for r in members) / n if n else 0.0,
            "calls_after": (sum(calls_after_first_correction(r) for r in members) / n
                            if n and kind != "no correction" else 0.0),
        })
    return out
