"""`ppoga show RUN.jsonl ID`: one question of a run, printed as `ppoga ask` prints it (plan, step cycles,
corrections, answer, evidence chains, cost), read back from the row `ppoga eval` wrote."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    show = subparsers.add_parser("show", help="print one question of a run file as `ppoga ask` prints it",
                                 description="Print one question of a run: its plan, step cycles, corrections, "
                                             "answer and evidence, read from the run file.")
    show.add_argument("run", type=Path, metavar="RUN.jsonl")
    show.add_argument("id", metavar="ID", help="the question's id (as `ppoga report --html` lists them)")
    show.add_argument("--json", action="store_true", help="print the row as JSON")
    show.set_defaults(handler=_show)


def row_as_result(row: dict[str, Any]) -> dict[str, Any]:
    """A run row in the shape `render_prediction` reads (what `ppoga ask` builds from a prediction)."""
    return {
        "question": str(row.get("question", "")),
        "kg": row.get("kg") or (row.get("metadata") or {}).get("dataset") or "run file",
        "lm": row.get("lm") or "",
        "answers": row.get("answers") or [],
        "reasoning": row.get("reasoning") or "",
        "status": row.get("status", "ok"),
        "error_kind": row.get("error_kind"),
        "error": row.get("error"),
        "costs": {**(row.get("costs") or {}), "seconds": float(row.get("time") or 0)},
        "memory": row.get("memory") or {},
        "trace": row.get("trace") or [],
    }


def _show(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ppoga_dspy.cli import common
    from ppoga_dspy.cli.render import render_prediction
    from ppoga_dspy.evaluation.runs import EvaluationError, checked_rows
    from ppoga_dspy.report.reasoning import has_reasoning

    if not args.run.exists():
        raise EvaluationError(f"no run file at {args.run}; `ppoga eval ... --out {args.run}` writes one")
    row, problem, ids = None, None, {}
    for _, candidate, damaged in checked_rows(args.run):  # streamed: only the asked row is kept (the last wins)
        ids[str(candidate.get("id"))] = None
        if str(candidate.get("id")) == args.id:
            row, problem = candidate, damaged
    if problem:
        raise EvaluationError(f"{problem}; fix or remove that line to show question {args.id!r}")
    if row is None:
        near = [i for i in ids if args.id.lower() in i.lower()][:5]
        hint = f"; ids like it: {', '.join(near)}" if near else f"; it holds {len(ids)} questions"
        raise EvaluationError(f"{args.run} has no question with id {args.id!r}{hint}")
    if args.json:
        common.print_json(row)
        return 0
    console = Console()
    if not has_reasoning(row):
        print(f"ppoga show: this row of {args.run} was written before rows kept the plan and step cycles; "
              "only its trace notes, answer and cost are shown", file=sys.stderr)
    render_prediction(console, row_as_result(row))
    metrics = row.get("metrics") or {}
    gold = ", ".join(map(str, row.get("gold") or [])) or "(none)"
    verdict = "[green]right[/]" if metrics.get("hits@1") else "[red]wrong[/]"
    console.print(f"[bold]Gold:[/] {gold}  Hits@1: {verdict}  F1 {float(metrics.get('f1') or 0):.2f}")
    for number, chain in enumerate(row.get("reasoning_chains") or [], 1):
        text = " ; ".join(f"({t['head'].get('label')}, {t['relation']}, {t['tail'].get('label')})" for t in chain)
        console.print(f"[bold]Evidence chain {number}:[/] {text}", highlight=False)
    return 0
