"""`ppoga tune`: Optuna over the thresholds (Hits@1 up, LM calls down); writes a new artifact and plots."""

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
    cmd = subparsers.add_parser(
        "tune",
        help="tune thresholds with Optuna (accuracy vs LM calls); resumable study; writes an artifact",
        description="Multi-objective Optuna study over Thresholds with the artifact's prompts frozen.",
    )
    add_dataset_options(cmd, split="dev", split_help="split to tune on (default dev)")
    cmd.add_argument("--trials", type=int, default=20, help="finished trials the study should hold (default 20)")
    cmd.add_argument("--storage", default=None, metavar="URL",
                     help="Optuna storage URL (default: sqlite:///<out>.optuna.db); an RDB URL shares the study")
    cmd.add_argument("--study", default="ppoga-thresholds", help="study name in the storage")
    cmd.add_argument("--threads", type=int, default=1)
    cmd.add_argument("--search-switches", action="store_true",
                     help="also let trials switch prediction / path correction / plan correction off (ablations, "
                          "labelled so); by default the method's stages are frozen on")
    cmd.add_argument("--out", required=True, type=Path, metavar="ARTIFACT")
    cmd.add_argument("--json", action="store_true")
    add_program_options(cmd)
    cmd.set_defaults(handler=_tune)


def _tune(args: argparse.Namespace) -> int:
    offline_environment()
    from ppoga_dspy.optimizers.artifact import Artifact
    from ppoga_dspy.optimizers.tune import default_storage, save_plots, tune_thresholds

    examples = load_examples(args)
    from ppoga_dspy.app import open_program

    with open_program(program_settings(args), examples=examples) as opened:
        program, lm_description = opened.program, opened.lm_description
        storage = args.storage or default_storage(args.out)
        print(f"ppoga tune: {args.trials} trials on {len(examples)} {args.split} questions; study {args.study!r} "
              f"in {storage}", file=sys.stderr)
        result = tune_thresholds(program, examples, trials=args.trials, storage=storage, study_name=args.study,
                                 seed=args.seed, threads=args.threads, search_switches=args.search_switches)
        program.thresholds = result.best
        images = save_plots(result.study, args.out)
        tuning = {"storage": storage, "study": args.study, "trials": len(result.study.trials),
                  "search_switches": args.search_switches,
                  "chosen": {"hits@1": result.best_values[0], "lm_calls_mean": result.best_values[1],
                             "ablation": result.pareto[0]["ablation"] if result.pareto else []},
                  "pareto_front": result.pareto, "images": [str(p) for p in images]}
        previous = {}
        if args.program:
            from ppoga_dspy.optimizers.artifact import load_artifact

            previous = load_artifact(args.program).scores
        artifact = Artifact.from_program(program, lm=lm_description, dataset=args.dataset, split=args.split,
                                         optimizer="optuna-thresholds", scores=previous, tuning=tuning)
        artifact.save(args.out)
        report = {"artifact": str(args.out), "thresholds": result.best.to_dict(), **tuning,
                  "trials_run_now": result.trials_run}
        if args.json:
            print_json(report)
        else:
            print(f"Pareto front ({len(result.pareto)} trials): " + "; ".join(
                f"#{p['trial']} hits@1 {p['hits@1']:.3f} calls {p['lm_calls_mean']:.2f}"
                + (f" [ablation: {', '.join(p['ablation'])}]" if p["ablation"] else "") for p in result.pareto[:8]))
            chosen_off = tuning["chosen"]["ablation"]
            print(f"chosen: hits@1 {result.best_values[0]:.3f}, LM calls/q {result.best_values[1]:.2f}"
                  + (f" (an ablation: {', '.join(chosen_off)}, not PPoGA)" if chosen_off else "") + "; "
                  f"wrote {args.out}"
                  + (f" and {', '.join(str(p) for p in images)}" if images else ""))
    return 0
