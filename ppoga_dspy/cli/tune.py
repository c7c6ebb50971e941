"""`ppoga tune`: Optuna over the thresholds (Hits@1 up, LM calls down); writes a new artifact and plots."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from ppoga_dspy.cli import common
from ppoga_dspy.optimizers.study import DEFAULT_HEARTBEAT, GRACE_FACTOR


def register(subparsers: argparse._SubParsersAction) -> None:
    cmd = common.dataset_command(
        subparsers, "tune", split="dev", split_help="split to tune on (default dev)",
        help="tune thresholds with Optuna (accuracy vs LM calls); resumable study; writes an artifact",
        description="Multi-objective Optuna study over Thresholds with the artifact's prompts frozen.",
    )
    cmd.add_argument("--trials", type=common.at_least(1), default=20,
                     help="finished trials the study should hold (default 20)")
    cmd.add_argument("--storage", default=None, metavar="URL",
                     help="Optuna storage: sqlite:///PATH (default sqlite:///<out>.optuna.db), "
                          "postgresql://USER@HOST:PORT/DB (workers on many machines), journal:PATH or PATH.journal "
                          "(workers on one machine, no database)")
    cmd.add_argument("--study", default="ppoga-thresholds", help="study name in the storage")
    cmd.add_argument("--threads", type=common.THREADS, default=1,
                     help="questions in parallel within a trial (default 1)")
    cmd.add_argument("--workers", type=common.at_least(1), default=1, metavar="N",
                     help="worker processes on the one study, each running its share of the trials (default 1)")
    cmd.add_argument("--heartbeat", type=int, default=DEFAULT_HEARTBEAT, metavar="SECONDS",
                     help=f"heartbeat of running trials (SQL storages; default {DEFAULT_HEARTBEAT}): a trial silent "
                          f"for {GRACE_FACTOR}x this long (its worker died) is failed and retried")
    cmd.add_argument("--worker-share", type=int, default=None, help=argparse.SUPPRESS)  # set for spawned workers
    cmd.add_argument("--worker-index", type=int, default=0, help=argparse.SUPPRESS)
    cmd.add_argument("--search-switches", action="store_true",
                     help="also let trials switch prediction / path correction / plan correction off (ablations, "
                          "labelled so); by default the method's stages are frozen on")
    cmd.add_argument("--out", required=True, type=Path, metavar="ARTIFACT")
    cmd.add_argument("--json", action="store_true")
    common.add_program_options(cmd)
    cmd.set_defaults(handler=_tune)


def _tune(args: argparse.Namespace) -> int:
    common.offline_environment()
    from ppoga_dspy.optimizers.artifact import Artifact
    from ppoga_dspy.optimizers.tune import (
        default_storage,
        save_plots,
        savings_at_equal_accuracy,
        tune_provenance,
        tune_thresholds,
    )

    examples = common.load_examples(args)
    from ppoga_dspy.app import open_program

    with open_program(common.program_settings(args), examples=examples) as opened:
        program, lm_description = opened.program, opened.lm_description
        storage = args.storage or default_storage(args.out)
        args.provenance = tune_provenance(lm=lm_description, dataset=args.dataset, split=args.split, seed=args.seed,
                                          examples=examples)  # a study of other work is refused, not resumed
        if args.worker_share is not None:
            return _work(args, program, examples, storage)
        print(f"ppoga tune: {args.trials} trials on {len(examples)} {args.split} questions; study {args.study!r} "
              f"in {storage}" + (f"; {args.workers} workers" if args.workers > 1 else ""), file=sys.stderr)
        workers = _run_workers(args, program, storage) if args.workers > 1 else []
        result = tune_thresholds(program, examples, trials=args.trials, storage=storage, study_name=args.study,
                                 seed=args.seed, threads=args.threads, heartbeat=args.heartbeat,
                                 search_switches=args.search_switches, provenance=args.provenance)
        program.thresholds = result.best
        images = save_plots(result.study, args.out)
        states = Counter(t.state.name for t in result.study.trials)
        tuning = {"storage": storage, "study": args.study, "trials": len(result.study.trials),
                  "trial_states": dict(states),
                  "search_switches": args.search_switches,
                  "chosen": {"hits@1": result.best_values[0], "lm_calls_mean": result.best_values[1],
                             "ablation": result.pareto[0]["ablation"] if result.pareto else []},
                  "pareto_front": result.pareto, "images": [str(p) for p in images],
                  "savings": savings_at_equal_accuracy(result.study)}
        previous = opened.artifact.scores if opened.artifact is not None else {}  # `--program none`: no scores
        artifact = Artifact.from_program(program, lm=lm_description, dataset=args.dataset, split=args.split,
                                         optimizer="optuna-thresholds", scores=previous, tuning=tuning)
        artifact.save(args.out)
        report = {"artifact": str(args.out), "thresholds": result.best.to_dict(), **tuning,
                  "trials_run_now": result.trials_run, "workers": workers}
        if args.json:
            common.print_json(report)
        else:
            print(f"Pareto front ({len(result.pareto)} trials): " + "; ".join(
                f"#{p['trial']} hits@1 {p['hits@1']:.3f} calls {p['lm_calls_mean']:.2f}"
                + (f" [ablation: {', '.join(p['ablation'])}]" if p["ablation"] else "") for p in result.pareto[:8]))
            if (savings := tuning["savings"]) is not None:
                start, cheap = savings["start"], savings["cheapest_equal"]
                print(f"calls saved at equal Hits@1 (within {savings['tolerance'] * 100:.0f} point): "
                      f"{savings['calls_saved'] * 100:.1f}% (trial #{cheap['trial']}: {cheap['lm_calls_mean']:.2f} "
                      f"calls/q, hits@1 {cheap['hits@1']:.3f}, against the starting thresholds' "
                      f"{start['lm_calls_mean']:.2f} calls/q, hits@1 {start['hits@1']:.3f})")
            chosen_off = tuning["chosen"]["ablation"]
            print(f"chosen: hits@1 {result.best_values[0]:.3f}, LM calls/q {result.best_values[1]:.2f}"
                  + (f" (an ablation: {', '.join(chosen_off)}, not PPoGA)" if chosen_off else "") + "; "
                  f"wrote {args.out}"
                  + (f" and {', '.join(str(p) for p in images)}" if images else ""))
    return 0


def _work(args: argparse.Namespace, program, examples: list, storage: str) -> int:
    """One spawned worker: run at most its share of trials on the shared study, report, write nothing else."""
    import os

    from ppoga_dspy.optimizers.tune import tune_thresholds

    result = tune_thresholds(program, examples, trials=args.trials, storage=storage, study_name=args.study,
                             seed=args.seed, threads=args.threads, heartbeat=args.heartbeat,
                             share=args.worker_share, worker=args.worker_index, provenance=args.provenance)
    common.print_json({"worker": os.getpid(), "trials_run": result.trials_run})
    return 0


def _run_workers(args: argparse.Namespace, program, storage: str) -> list[dict]:
    """Prepare the study once, start `--workers` processes of `ppoga tune` on it, and wait for them.

    A worker that dies (killed, out of memory) leaves its running trial to the heartbeat; the
    caller then runs whatever is still missing itself, so the study finishes either way.
    """
    from ppoga_dspy.optimizers.study import worker_shares
    from ppoga_dspy.optimizers.tune import open_study, remaining_trials

    study = open_study(storage, study_name=args.study, seed=args.seed, trials=args.trials, base=program.thresholds,
                       heartbeat=args.heartbeat, provenance=args.provenance)
    shares = worker_shares(remaining_trials(study, args.trials), args.workers)
    argv = _worker_argv(getattr(args, "argv", None) or sys.argv[1:])
    processes = []
    for index, share in enumerate(shares):
        command = [sys.executable, "-m", "ppoga_dspy", *argv, "--worker-share", str(share),
                   "--worker-index", str(index + 1)]  # its own sampler seed: the workers try different points
        processes.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))
    print(f"ppoga tune: started {len(processes)} workers (pids {', '.join(str(p.pid) for p in processes)}) "
          f"with shares {shares}", file=sys.stderr)
    outcomes = []
    try:
        for process, share in zip(processes, shares, strict=True):
            stdout, _ = process.communicate()
            lines = stdout.strip().splitlines()
            done = json.loads(lines[-1])["trials_run"] if process.returncode == 0 and lines else None
            outcomes.append({"pid": process.pid, "share": share, "exit_code": process.returncode, "trials_run": done})
            if done is None:
                print(f"ppoga tune: worker {process.pid} ended with exit code {process.returncode} before its {share} "
                      "trials; the rest of the study runs here", file=sys.stderr)
    except KeyboardInterrupt:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait()
        raise
    return outcomes


#: Flags of the parent that a worker must not get again (it gets its own --worker-share / --worker-index).
_PARENT_ONLY = {"--workers": True, "--json": False}


def _worker_argv(argv: list[str]) -> list[str]:
    """The command line as typed (`args.argv`, from `sys.argv` or `main(argv)`), without the parent-only flags.

    A worker must run the very command the user gave, settings files and environment included, so its
    line is the user's own; only `--workers N` and `--json` are taken out (an abbreviation of them too,
    since argparse accepts one).
    """
    out: list[str] = []
    skip = False
    for token in argv:
        if skip:
            skip = False
            continue
        name, has_value, _ = token.partition("=")
        owner = next((flag for flag in _PARENT_ONLY if token.startswith("--") and len(name) > 3
                      and flag.startswith(name)), None)
        if owner is None:
            out.append(token)
            continue
        skip = _PARENT_ONLY[owner] and not has_value
    return out
