"""`ppoga eval` (run a benchmark, resumable, in parallel) and `ppoga report` (summaries, side by side)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ppoga_dspy.cli.common import (
    add_dataset_options,
    add_program_options,
    load_examples,
    offline_environment,
    print_json,
    program_settings,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser(
        "eval",
        help="evaluate PPoGA on a benchmark: Hits@1, F1 and cost; resumable JSONL",
        description="Evaluate on a dataset. Questions already in --out are skipped, so an interrupted run resumes.",
    )
    add_dataset_options(run, split=None, split_help="a deterministic split (default: every question)")
    run.add_argument("--threads", type=int, default=1, help="questions in parallel (default 1)")
    run.add_argument("--out", required=True, type=Path, metavar="RUN.jsonl", help="run file (appended; resumable)")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object on the last line")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_program_options(run)
    run.set_defaults(handler=_eval)

    report = subparsers.add_parser("report", help="print the summary of a run file, or of two runs side by side",
                                   description="Summaries of run files: ours, or PoG's result files (JSONL/JSON "
                                               "with `question` and `results`), scored with PoG's rule too.")
    report.add_argument("runs", nargs="+", type=Path, metavar="RUN.jsonl")
    report.add_argument("--dataset", metavar="SPEC", default=None,
                        help="the dataset a PoG result file answered (its gold answers), e.g. "
                             "cwq:../shared/data/freebase-questions/cwq.json")
    report.add_argument("--json", action="store_true", help="print the summaries as JSON")
    report.set_defaults(handler=_report)


def _eval(args: argparse.Namespace) -> int:
    offline_environment()
    from ppoga_dspy.app import open_program
    from ppoga_dspy.experiments.evaluate import example_id, run_evaluation, summarize

    settings = program_settings(args)
    examples = load_examples(args)
    with open_program(settings, examples=examples) as opened:
        print(f"ppoga eval: {len(examples)} questions from {args.dataset}"
              f"{f' ({args.split})' if args.split else ''} on {opened.kg.name} with {opened.lm_description}",
              file=sys.stderr)
        result = run_evaluation(opened.program, examples, out=args.out, threads=args.threads,
                                progress=not args.no_progress)
    wanted = {example_id(ex) for ex in examples}
    rows = [row for row in result.rows if row.get("id") in wanted]
    summary = summarize(rows)
    summary.update(run=str(args.out), dataset=args.dataset, split=args.split, skipped=result.skipped,
                   ran=result.ran, interrupted=result.interrupted)
    _print_summaries({str(args.out): summary}, as_json=args.json)
    return 130 if result.interrupted else 0


def _report(args: argparse.Namespace) -> int:
    from ppoga_dspy.experiments.evaluate import EvaluationError, summarize
    from ppoga_dspy.experiments.pog_runs import read_scored_run

    summaries = {}
    for path in args.runs:
        if not path.exists():
            raise EvaluationError(f"no run file at {path}; `ppoga eval ... --out {path}` writes one")
        rows, notes = read_scored_run(path, dataset=args.dataset)
        summaries[str(path)] = {**summarize(rows), **notes}
    _print_summaries(summaries, as_json=args.json)
    return 0


def _print_summaries(summaries: dict, *, as_json: bool) -> None:
    from rich.console import Console

    from ppoga_dspy.experiments.evaluate import summary_table

    if as_json:
        Console(stderr=True).print(summary_table(summaries))
        print_json(next(iter(summaries.values())) if len(summaries) == 1 else summaries)
    else:
        Console().print(summary_table(summaries))
