"""What `ppoga tune` buys: LM calls per question saved at equal Hits@1 against the starting thresholds.

The perfect scripted planner never errs, so thresholds barely move its accuracy; the noisy one
(`oracle/noisy:P`: seeded wrong choices at rate P, honest judgements) makes retries and replans
cost what they cost, so the study meets a real accuracy/cost front. Each row tunes one dataset's dev
split with `tune_thresholds` (the code `ppoga tune` runs; stage switches frozen, so every trial is
PPoGA), starting from the program's default thresholds (the paper's), and reports the cheapest
trial whose Hits@1 is within one point of the start (`savings_at_equal_accuracy`). Optuna's own
Pareto-front plot of each study is written beside its SQLite study under `--out-dir`.

    python benchmarks/tune_bench.py [--n 100] [--trials 40] [--noisy 0.2] [--stages paper] [--data DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from _data import add_data_option, data_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

FILES = {
    "WC-P2": ("wc2014", "wc2014/WC-P2.txt", "wc2014/WC2014.txt"),
    "PQ-3H": ("pathquestion", "pathquestion/PQ-3H.txt", "pathquestion/3H-kb.txt"),
    "PQ-2H": ("pathquestion", "pathquestion/PQ-2H.txt", "pathquestion/2H-kb.txt"),
}


def tune_one(name: str, args: argparse.Namespace, ranker) -> dict:
    """Tune one dataset's dev split from the default thresholds; the study's savings and plot paths."""
    from ppoga_dspy.datasets.loaders import load_dataset
    from ppoga_dspy.kg import open_kg
    from ppoga_dspy.method.program import PPoGA
    from ppoga_dspy.optimizers.tune import save_plots, savings_at_equal_accuracy, tune_thresholds
    from ppoga_dspy.scripted.specs import scripted_lm_for_spec

    fmt, path, kb = FILES[name]
    examples = load_dataset(f"{fmt}:{args.data / path}", split=args.split, limit=args.n)
    planner = f"oracle/noisy:{args.noisy:g}"
    out = args.out_dir / f"{name}-{args.stages}-p{args.noisy:g}.json"
    study_file = out.with_suffix(".db")
    if study_file.exists() and not args.resume:
        study_file.unlink()  # a fresh study: the table is one run's, not a mix of code versions
    started = time.perf_counter()
    with open_kg(args.data / kb) as kg:
        lm = scripted_lm_for_spec(planner, examples, kg=kg)
        program = PPoGA(kg, role_lms={"planner": lm, "executor": lm}, ranker=ranker, stages=args.stages)
        result = tune_thresholds(program, examples, trials=args.trials, storage=f"sqlite:///{study_file}",
                                 study_name=out.stem, seed=args.seed)
    images = save_plots(result.study, out)
    savings = savings_at_equal_accuracy(result.study)
    print(f"{name}: {args.trials} trials in {time.perf_counter() - started:.0f} s; saved "
          f"{savings['calls_saved'] * 100:.1f}%", file=sys.stderr, flush=True)
    return {"dataset": name, "n": len(examples), "planner": planner, "savings": savings, "images": images,
            "front": result.pareto}


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    lines = ["| dataset | planner | stages | n | trials | start Hits@1 | start calls/q | tuned Hits@1 | tuned calls/q "
             "| calls saved | tuned thresholds (changed) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    from ppoga_dspy.method.thresholds import Thresholds

    defaults = Thresholds().to_dict()
    for r in rows:
        s = r["savings"]
        start, cheap = s["start"], s["cheapest_equal"]
        changed = ", ".join(f"{k}={v}" for k, v in sorted(cheap["params"].items()) if defaults.get(k) != v)
        lines.append(f"| {r['dataset']} | {r['planner']} | {args.stages} | {r['n']} | {args.trials} "
                     f"| {start['hits@1']:.3f} | {start['lm_calls_mean']:.2f} | {cheap['hits@1']:.3f} "
                     f"| {cheap['lm_calls_mean']:.2f} | {s['calls_saved'] * 100:.1f}% | {changed or '(none)'} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_option(parser)
    parser.add_argument("--datasets", nargs="+", choices=list(FILES), default=["WC-P2", "PQ-3H"])
    parser.add_argument("--split", choices=("train", "dev", "test"), default="dev")
    parser.add_argument("--n", type=int, default=100, help="questions per dataset (default 100)")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--noisy", type=float, default=0.2, help="error rate P of the noisy planner (default 0.2)")
    parser.add_argument("--stages", choices=("paper", "fused"), default="paper")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", type=Path, default=Path("runs/tune-bench"))
    parser.add_argument("--resume", action="store_true", help="continue the studies in --out-dir")
    args = parser.parse_args()
    args.data = data_dir(args.data, needs=FILES[args.datasets[0]][1])
    args.out_dir.mkdir(parents=True, exist_ok=True)

    from ppoga_dspy.method.pruning import EmbeddingRanker

    EmbeddingRanker.model()
    ranker = EmbeddingRanker()
    rows = [tune_one(name, args, ranker) for name in args.datasets]
    print(f"Tuning on the {args.split} splits: calls per question saved at equal Hits@1 (within 1 point) against "
          f"the default thresholds (the study's first trial); stage switches frozen\n")
    print(markdown(rows, args))
    for r in rows:
        print(f"\n{r['dataset']} Pareto front ({len(r['front'])} trials): " + "; ".join(
            f"#{p['trial']} {p['hits@1']:.3f} / {p['lm_calls_mean']:.2f}" for p in r["front"][:10]))
        print(f"plots: {', '.join(str(p) for p in r['images'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
