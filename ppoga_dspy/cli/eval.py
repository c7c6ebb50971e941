"""`ppoga eval` (run a benchmark, resumable, in parallel, or one shard of it) and `ppoga report` (summaries side by
side, or the merge of a sharded run's files)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ppoga_dspy.cli import common


def register(subparsers: argparse._SubParsersAction) -> None:
    run = common.dataset_command(
        subparsers, "eval", split=None, split_help="a deterministic split (default: every question)",
        help="evaluate PPoGA on a benchmark: Hits@1, F1 and cost; resumable JSONL",
        description="Evaluate on a dataset. Questions already in --out are skipped, so an interrupted run resumes.",
    )
    run.add_argument("--threads", type=common.THREADS, default=1, help="questions in parallel (default 1)")
    run.add_argument("--out", required=True, type=Path, metavar="RUN.jsonl", help="run file (appended; resumable)")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object on the last line")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--retry-failed", action="store_true",
                     help="also rerun the questions whose row in --out failed (the new row replaces the old one)")
    run.add_argument("--keep-prompts", action="store_true",
                     help="keep each LM call's inputs (the prompt's fields) in the rows' trace; rows grow several-fold")
    run.add_argument("--shard", default=None, metavar="I/N",
                     help="run only shard I of N (a stable hash of each question id; same --split/--seed/--limit "
                          "on every shard); `ppoga report` merges the N run files")
    common.add_program_options(run)
    run.set_defaults(handler=_eval)

    report = subparsers.add_parser("report", help="print the summary of a run file, or of two runs side by side",
                                   description="Summaries of run files: ours, or PoG's result files (JSONL/JSON "
                                               "with `question` and `results`), scored with PoG's rule too.")
    report.add_argument("runs", nargs="+", type=Path, metavar="RUN.jsonl")
    report.add_argument("--dataset", metavar="SPEC", default=None,
                        help="the dataset a PoG result file answered (its gold answers), e.g. "
                             "cwq:../shared/data/freebase-questions/cwq.json")
    report.add_argument("--json", action="store_true", help="print the summaries as JSON")
    report.add_argument("--merge", action="store_true",
                        help="summarize the files as one run (automatic when they are the shards of one run)")
    report.add_argument("--html", type=Path, metavar="FILE", default=None,
                        help="also write an HTML report (plots, the runs compared, every question) that opens "
                             "offline; each question's reasoning goes to FILE.parts/ beside it, loaded on demand")
    report.add_argument("--resamples", type=common.at_least(100), default=10_000, metavar="N",
                        help="bootstrap resamples for the intervals of a comparison (default 10000, seed 0)")
    report.set_defaults(handler=_report)


def _eval(args: argparse.Namespace) -> int:
    common.offline_environment()
    from ppoga_dspy.app import open_program
    from ppoga_dspy.datasets.loaders import parse_spec
    from ppoga_dspy.evaluation.evaluate import example_id, program_fingerprint, run_evaluation, summarize
    from ppoga_dspy.evaluation.runs import check_output_path, run_lock

    args.out = check_output_path(args.out, inputs=(parse_spec(args.dataset)[1],), lock=True)  # before any work
    settings = common.program_settings(args)
    examples = common.load_examples(args)
    provenance_extra: dict = {}
    if args.shard:
        from ppoga_dspy.evaluation.shards import Shard

        shard = Shard.parse(args.shard)
        provenance_extra = shard.record(total=len(examples))
        print(f"ppoga eval: shard {shard}: {len(examples)} questions selected, this shard runs its part",
              file=sys.stderr)
        examples = shard.select(examples)
    with run_lock(args.out), open_program(settings, examples=examples) as opened:
        from ppoga_dspy.app.naming import display_lm

        split = f" ({args.split})" if args.split else ""
        print(f"ppoga eval: {len(examples)} questions from {args.dataset}{split} on {opened.kg.name} with "
              f"{display_lm(opened.lm_description)}",
              file=sys.stderr)
        startup = opened.warm_up()
        print(f"ppoga eval: start-up (models loaded) {startup:.1f} s, not counted in the time per question",
              file=sys.stderr)
        provenance = {"lm": opened.lm_description, "program": program_fingerprint(opened.program),
                      # the kg is what `ppoga report` shows beside a comparison; the rest is also checked on resume
                      "dataset": args.dataset, "split": args.split, "seed": args.seed, "kg": opened.kg.name}
        result = run_evaluation(opened.program, examples, out=args.out, threads=args.threads,
                                progress=not args.no_progress, provenance={**provenance, **provenance_extra},
                                retry_failed=args.retry_failed, keep_prompts=args.keep_prompts)
    wanted = {example_id(ex) for ex in examples}
    rows = [row for row in result.rows if row.get("id") in wanted]
    summary = summarize(rows)
    summary.update(run=str(args.out), dataset=args.dataset, split=args.split, skipped=result.skipped,
                   ran=result.ran, interrupted=result.interrupted, startup_seconds=round(startup, 2))
    _print_summaries({str(args.out): summary}, as_json=args.json)
    from ppoga_dspy.errors import INTERRUPTED, QUESTIONS_FAILED

    if result.interrupted:
        print(f"ppoga eval: stopped; {len(rows)} finished questions are saved in {args.out} (the ones in flight "
              "included); rerun the same command to resume", file=sys.stderr)
        return INTERRUPTED
    if summary["failed"]:
        print(f"ppoga eval: {summary['failed']} of {summary['n']} questions failed (see status and error in "
              f"{args.out}); rerun them with --retry-failed", file=sys.stderr)
        return QUESTIONS_FAILED
    return 0


def _report(args: argparse.Namespace) -> int:
    from ppoga_dspy.evaluation.evaluate import EvaluationError, summarize
    from ppoga_dspy.evaluation.pog_runs import read_scored_run
    from ppoga_dspy.evaluation.shards import are_shards_of_one_run, merge_runs
    from ppoga_dspy.report.data import trace_counts

    runs: dict = {}
    run_notes: dict = {}
    for path in args.runs:
        if not path.exists():
            raise EvaluationError(f"no run file at {path}; `ppoga eval ... --out {path}` writes one")
        rows, notes = read_scored_run(path, dataset=args.dataset, derive=(trace_counts,))  # digests, not rows
        if notes.get("damaged_rows"):  # skipped, counted, the first named: never a traceback
            if not rows:
                raise EvaluationError(f"{notes['first_damaged']}; no row of {path} can be reported (fix or remove "
                                      "the damaged lines)")
            print(f"ppoga report: warning: skipped {notes['damaged_rows']} damaged row(s) of {path}; first: "
                  f"{notes['first_damaged']}", file=sys.stderr)
        if not rows:
            raise EvaluationError(f"{path} is empty: it holds no finished question; `ppoga eval ... --out {path}` "
                                  "fills it")
        runs[str(path)] = rows
        run_notes[str(path)] = notes
    if args.merge or are_shards_of_one_run(runs):
        merged = merge_runs(runs)
        if merged.missing_shards:
            print(f"ppoga report: warning: missing shards: {', '.join(map(str, merged.missing_shards))}; "
                  "the summary covers only the files given", file=sys.stderr)
        elif not merged.complete:
            print("ppoga report: warning: some shards are unfinished (resume them with the same `ppoga eval`); "
                  "the summary covers the questions finished so far", file=sys.stderr)
        summaries = {merged.name: {**summarize(merged.rows), **next(iter(run_notes.values()))}}
        runs = {merged.name: merged.rows}
    else:
        summaries = {path: {**summarize(rows), **run_notes[path]} for path, rows in runs.items()}
    comparison = None
    if len(runs) > 1:
        from ppoga_dspy.report.compare import compare_runs

        comparison = compare_runs(runs, resamples=args.resamples)
        if comparison.coverage.warning:
            print(f"ppoga report: warning: {comparison.coverage.warning}", file=sys.stderr)
    _print_summaries(summaries, as_json=args.json)
    if comparison is not None and not args.json:
        from rich.console import Console

        from ppoga_dspy.report.compare import comparison_tables

        console = Console()
        for table in comparison_tables(comparison):
            console.print(table)
    if args.html:
        from ppoga_dspy.report.html import parts_folder, write_report

        written = write_report(args.html, runs, summaries=summaries, comparison=comparison)
        parts = list(parts_folder(args.html).iterdir())
        print(f"ppoga report: wrote {args.html} ({written / 1e6:.1f} MB) and each question's reasoning in "
              f"{parts_folder(args.html)} ({len(parts)} files, {sum(p.stat().st_size for p in parts) / 1e6:.1f} MB; "
              "keep it beside the page)", file=sys.stderr)
    return 0


def _print_summaries(summaries: dict, *, as_json: bool) -> None:
    from rich.console import Console

    from ppoga_dspy.evaluation.evaluate import summary_table

    if as_json:  # stdout carries the JSON and nothing else
        common.print_json(next(iter(summaries.values())) if len(summaries) == 1 else summaries)
    else:
        Console().print(summary_table(summaries))
