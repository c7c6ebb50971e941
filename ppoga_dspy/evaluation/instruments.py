"""Instruments of the cuts: where, question by question, the gold path is lost on the way to the answer.

They read only what a run file holds (each row's metadata and the program's trace), so any run can be
measured after the fact. The program's trace records, per step, the relation menu each entity showed
(`relations.menu`: the relations shown and how many there were), each (entity, relation) group of
candidates before and after embedding pruning with what was kept (`entities.pruned`), mediators read
through (`mediators.read_through`), and the LM calls with their inputs (Answer's evidence).

For a question with a gold path (MetaQA: `metadata["path"]` in menu form and the on-path entities of each
hop in the IRN path text of `metadata["group"]`), per gold hop i:
- relation reached: the gold relation was on the menu of an on-path entity of hop i-1 (the topic for
  hop 0), counted over the hops where such an entity had a menu at all (the program got there);
- entity reached: an on-path entity of hop i was among the candidates SelectEntities saw (after
  pruning), counted over the hops where the gold relation was followed from an on-path entity;
- and per question, whether a gold answer's name was in the evidence the answer was read from.
`hub`: the question's gold path touches an entity with more than `HUB` neighbours on a gold relation (a
source with that many on the relation it follows, or a reached entity, an answer included, with that many
on the relation that reached it: genre Drama has 4,030 movies).
Without gold paths (the CWQ sample), menu sizes, mediator read-throughs and whether an answer entity
was reached at all.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ppoga_dspy.kg.names import normalize_name

HUB = 500


def gold_layers(metadata: dict[str, Any]) -> tuple[list[str], list[set[str]]]:
    """(gold relation keys, on-path entity ids per hop with the topic first) from a MetaQA-style metadata."""
    keys = list(metadata.get("path") or [])
    group = str(metadata.get("group") or "")
    layers: list[set[str]] = [set() for _ in range(len(keys) + 1)]
    if "#" not in group:
        return keys, []
    for branch in group.split("*"):
        parts = branch.split("#")
        if len(parts) != 2 * len(keys) + 1:
            continue
        for hop in range(len(keys) + 1):
            layers[hop].add(parts[2 * hop])
    return keys, layers


def trace_events(row: dict[str, Any], stage: str) -> list[dict[str, Any]]:
    return [e for e in row.get("trace") or [] if e.get("stage") == stage]


def evidence_text(row: dict[str, Any]) -> str:
    """The text the answer was read from: Answer's evidence, else the last fused judgement's facts; a row that
    keeps no prompts (the default, `ppoga eval` without --keep-prompts) gives the reasoning chains it kept."""
    for event in reversed(row.get("trace") or []):
        inputs = event.get("inputs") or {}
        if inputs and (event.get("stage") == "answer" or "evidence" in inputs):
            return "\n".join(map(str, inputs.get("evidence") or []))
        if inputs and event.get("stage") == "think_evaluate":
            return f"{inputs.get('observation', '')}\n{inputs.get('memory', '')}"
    return "\n".join(f"({fact['head']['label']}, {fact['relation']}, {fact['tail']['label']})"
                     for chain in row.get("reasoning_chains") or [] for fact in chain
                     if isinstance(fact, dict) and "head" in fact and "tail" in fact)


def mentions(text: str, names: list[str]) -> bool:
    folded = f" {normalize_name(text)} "
    return any(f" {normalize_name(n)} " in folded for n in names if normalize_name(n))


def measure_row(row: dict[str, Any], hub_of: Any = None) -> dict[str, Any]:
    """One question's instruments (see the module doc). `hub_of(entity, relation_key)` -> neighbour count, optional."""
    meta = row.get("metadata") or {}
    menus = [e.get("outputs") or {} for e in trace_events(row, "relations.menu")]
    groups = [e.get("outputs") or {} for e in trace_events(row, "entities.pruned")]
    through = [e.get("outputs") or {} for e in trace_events(row, "mediators.read_through")]
    gold = list(row.get("gold") or [])
    out: dict[str, Any] = {
        "hops": meta.get("hops"), "dataset": meta.get("dataset"), "type": meta.get("type"),
        "reachable": meta.get("reachable"), "hits": float((row.get("metrics") or {}).get("hits@1", 0.0)),
        "menus": len(menus), "menu_of": [m.get("of", 0) for m in menus], "menu_shown": [len(m.get("shown") or [])
                                                                                       for m in menus],
        "groups": len(groups), "before": [g.get("before", 0) for g in groups], "after": [g.get("after", 0)
                                                                                     for g in groups],
        "mediators": sum(int(t.get("mediators") or 0) for t in through),
        "answer_in_evidence": mentions(evidence_text(row), gold) if gold else None,
        "answer_reached": bool(set(meta.get("gold_ids") or [])
                               & {k for g in groups for k in g.get("kept") or []})
        or any(normalize_name(k) in {normalize_name(a) for a in gold} for g in groups for k in g.get("kept") or []),
    }
    keys, layers = gold_layers(meta)
    rel_hits: list[bool | None] = []  # per gold hop; None where the program never stood on that hop's sources
    ent_hits: list[bool | None] = []
    hub = False
    for hop, key in enumerate(keys if layers else []):
        sources = layers[hop]
        if hub_of is not None and (any(hub_of(s, key) > HUB for s in list(sources)[:200])
                                   or any(hub_of(t, _flip(key)) > HUB for t in list(layers[hop + 1])[:200])):
            hub = True
        seen = [m for m in menus if m.get("entity") in sources]
        rel_hits.append(any(key in (m.get("shown") or []) for m in seen) if seen else None)
        followed = [g for g in groups if g.get("entity") in sources and g.get("relation") == key]
        ent_hits.append(any(set(g.get("kept") or []) & layers[hop + 1] for g in followed) if followed else None)
    out.update(relation_hits=rel_hits, entity_hits=ent_hits, hub=hub)
    return out


def _flip(key: str) -> str:
    """The same relation followed the other way: `r` <-> `r (reverse)`."""
    return key.removesuffix(" (reverse)") if key.endswith(" (reverse)") else f"{key} (reverse)"


def _rate(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(measures: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates over questions (relation and entity recall over the gold hops the program reached)."""
    rel = [h for m in measures for h in m["relation_hits"] if h is not None]
    ent = [h for m in measures for h in m["entity_hits"] if h is not None]
    evidence = [m["answer_in_evidence"] for m in measures if m["answer_in_evidence"] is not None]
    return {
        "n": len(measures),
        "hits@1": _mean([m["hits"] for m in measures]),
        "reachable": _rate([bool(m["reachable"]) for m in measures if m["reachable"] is not None]),
        "relation_recall": _rate(rel), "relation_hops": len(rel),
        "entity_recall": _rate(ent), "entity_hops": len(ent),
        "answer_in_evidence": _rate(evidence),
        "answer_reached": _rate([m["answer_reached"] for m in measures]),
        "menu_of_mean": _mean([v for m in measures for v in m["menu_of"]]),
        "menu_of_max": max((v for m in measures for v in m["menu_of"]), default=None),
        "menu_shown_mean": _mean([v for m in measures for v in m["menu_shown"]]),
        "before_mean": _mean([v for m in measures for v in m["before"]]),
        "before_max": max((v for m in measures for v in m["before"]), default=None),
        "after_mean": _mean([v for m in measures for v in m["after"]]),
        "pruned_groups": sum(b > a for m in measures for b, a in zip(m["before"], m["after"], strict=True)),
        "mediators_mean": _mean([m["mediators"] for m in measures]),
    }


def instrument_table(rows: list[dict[str, Any]], hub_of: Any = None, *, by_type: bool = False
                     ) -> dict[str, dict[str, Any]]:
    """Summaries per `dataset hops`, plus a `... hub` row for the questions whose gold path passes a hub
    (and, with `by_type`, one row per template)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        measure = measure_row(row, hub_of)
        label = f"{measure['dataset']} {measure['hops']}-hop" if measure["hops"] else str(measure["dataset"])
        groups[label].append(measure)
        if measure["hub"]:
            groups[f"{label} hub"].append(measure)
        if by_type and measure["type"]:
            groups[f"{label} {measure['type']}"].append(measure)
    return {label: summarize(ms) for label, ms in sorted(groups.items())}


def kb_hub_counter(index: Any):
    """`hub_of(entity, relation_key)` from a MetaQA `KBIndex`: the entity's neighbours on that relation."""

    def hub_of(entity: str, key: str) -> int:
        relation = key.removesuffix(" (reverse)")
        direction = "in" if key.endswith(" (reverse)") else "out"
        return len(index.edges.get((entity, relation, direction), ()))

    return hub_of


_COLUMNS = (
    ("n", "n", "{:d}"), ("Hits@1", "hits@1", "{:.3f}"), ("reachable", "reachable", "{:.3f}"),
    ("gold rel. in menu", "relation_recall", "{:.3f}"), ("gold ent. to SelectEntities", "entity_recall", "{:.3f}"),
    ("answer in evidence", "answer_in_evidence", "{:.3f}"), ("answer entity reached", "answer_reached", "{:.3f}"),
    ("menu size (mean/max)", ("menu_of_mean", "menu_of_max"), "{:.1f} / {}"),
    ("candidates before -> after pruning (mean)", ("before_mean", "after_mean"), "{:.1f} -> {:.1f}"),
    ("max group", "before_max", "{}"), ("mediators read through / q", "mediators_mean", "{:.1f}"),
)


def markdown(table: dict[str, dict[str, Any]]) -> str:
    """The instruments as a Markdown table, one row per dataset and hop (and hub)."""
    head = "| rows | " + " | ".join(name for name, _, _ in _COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(_COLUMNS) + 1)]
    for label, summary in table.items():
        cells = []
        for _, key, fmt in _COLUMNS:
            values = [summary.get(k) for k in key] if isinstance(key, tuple) else [summary.get(key)]
            cells.append("-" if any(v is None for v in values) else fmt.format(*values))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
