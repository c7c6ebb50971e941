"""Whose names a run's plans use: on a KG an artifact was not compiled on, how many questions' plans name a relation
of the artifact's own graphs that this KG lacks (a small model copying its demos' names), read from `ppoga eval
--out` run files.

The artifact's vocabulary is the relations its knn demos show (their relation menus); the run's is every relation
its menus showed. A plan step (the first plan, a replan) names a relation when the name appears in its objective as a
whole name, as the named-relation rules read it (`method/named_relations.py`).

    python benchmarks/plan_names_bench.py --artifact data/embedded-demo.json RUN.jsonl [RUN.jsonl ...]

Prints, per run file: questions, questions whose plan names a foreign relation, plan steps, steps naming one,
Hits@1 of each group.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PLAN_STAGES = ("decompose", "decompose_predict", "replan")


def artifact_relations(path: Path) -> set[str]:
    """The relations the artifact's knn demos show in their menus and choices."""
    from ppoga_dspy.method.demo_transfer import pool_relations

    knn = json.loads(path.read_text(encoding="utf-8")).get("knn") or {}
    return pool_relations(knn.get("records") or {})


def run_relations(rows: list[dict]) -> set[str]:
    """Every relation the run's menus showed (relations.menu, relations.ahead notes of its traces)."""
    from ppoga_dspy.method.demo_transfer import menu_relation

    return {menu_relation(str(r)) for row in rows for event in row.get("trace") or []
            if event.get("stage") == "relations.menu" for r in (event.get("outputs") or {}).get("shown") or []}


def plan_steps(row: dict) -> list[str]:
    steps: list[str] = []
    for event in row.get("trace") or []:
        if event.get("stage") in PLAN_STAGES:
            outputs = event.get("outputs") or {}
            steps += [str(s.get("objective", "")) for s in outputs.get("steps") or outputs.get("new_steps") or []
                      if isinstance(s, dict)]
    return steps


def _share(hits: list[int]) -> str:
    return f"{sum(hits) / len(hits):.3f}" if hits else "-"


def main() -> None:
    from ppoga_dspy.method.gating import names_verbatim

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", type=Path, required=True)
    parser.add_argument("runs", type=Path, nargs="+")
    args = parser.parse_args()
    own = artifact_relations(args.artifact)
    print(f"{args.artifact}: its demos show {len(own)} relations")
    print("| run | questions | plans naming a foreign relation | plan steps | steps naming one "
          "| Hits@1 (those / others) |")
    print("|---|---|---|---|---|---|")
    for path in args.runs:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        foreign = own - run_relations(rows)
        flagged, steps, named, hits = 0, 0, 0, {True: [], False: []}
        for row in rows:
            objectives = plan_steps(row)
            marks = [any(names_verbatim(name, objective) for name in foreign) for objective in objectives]
            steps, named = steps + len(objectives), named + sum(marks)
            flagged += any(marks)
            hits[any(marks)].append((row.get("metrics") or {}).get("hits@1", 0))
        print(f"| {path.name} | {len(rows)} | {flagged} | {steps} | {named} | {_share(hits[True])} / "
              f"{_share(hits[False])} |")


if __name__ == "__main__":
    main()
