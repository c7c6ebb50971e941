"""Cost floor of PPoGA: LM calls and prompt tokens per question, by stage, with a perfect planner.

The scripted engine plays a planner that follows each question's gold path (and still has to walk
the real graph to find the answer), so the figures are what the method itself costs: no wrong
turn, no retry. Compare with PoG's released GPT-3.5 runs (median 5 calls on WebQSP, 9 on CWQ;
mean 9.0 and 13.8), which include PoG's own mistakes and corrections.

    python benchmarks/cost_bench.py [--per-file 100] [--data DIR]   (DIR default: $PPOGA_DATA, ../shared/data)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from _data import add_data_option, data_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

FILES = [
    ("pathquestion", "pathquestion/PQ-2H.txt", "pathquestion/2H-kb.txt"),
    ("pathquestion", "pathquestion/PQ-3H.txt", "pathquestion/3H-kb.txt"),
    ("wc2014", "wc2014/WC-P1.txt", "wc2014/WC2014.txt"),
    ("wc2014", "wc2014/WC-P2.txt", "wc2014/WC2014.txt"),
    ("wc2014", "wc2014/WC-C.txt", "wc2014/WC2014.txt"),
]
STAGES = ["decompose", "predict", "select_relations", "select_entities", "think", "evaluate", "replan", "answer"]
POG = {"WebQSP": (9.0, 5), "CWQ": (13.8, 9), "GrailQA": (6.5, 4)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_option(parser)
    parser.add_argument("--per-file", type=int, default=100, help="questions per file (seeded sample)")
    parser.add_argument("--no-prediction", action="store_true", help="ablation: PredictOutcome off")
    args = parser.parse_args()
    args.data = data_dir(args.data, needs=FILES[0][1])

    import dspy

    from ppoga_dspy.experiments.datasets import load_dataset
    from ppoga_dspy.experiments.metrics import score_prediction
    from ppoga_dspy.experiments.scripted import ScriptedEngine, gold_path_handlers, golds_from_examples, scripted_lm
    from ppoga_dspy.kg import open_kg
    from ppoga_dspy.method.program import PPoGA
    from ppoga_dspy.method.pruning import EmbeddingRanker
    from ppoga_dspy.method.thresholds import Thresholds

    thresholds = Thresholds(use_prediction=not args.no_prediction)
    started = time.perf_counter()
    EmbeddingRanker.model()  # the embedder loads here, once, not inside the first question's time
    startup = time.perf_counter() - started
    print(f"perfect-planner cost floor, {args.per_file} questions per file, thresholds: "
          f"prediction={'on' if thresholds.use_prediction else 'off'}\n")
    header = (f"{'file':<12}{'n':>5}{'hits@1':>8}{'calls':>7}{'med':>5}{'prompt tok':>11}{'tok/q':>8}{'s/q':>7}"
              "  calls by stage")
    print(header)
    print("-" * len(header))
    for fmt, questions, kb in FILES:
        examples = load_dataset(f"{fmt}:{args.data / questions}", limit=None)
        import random

        examples = random.Random(0).sample(examples, min(args.per_file, len(examples)))
        kg = open_kg(args.data / kb)
        engine = ScriptedEngine(gold_path_handlers(golds_from_examples(examples)))
        program = PPoGA(kg, thresholds=thresholds)
        calls, prompt, total, seconds, hits = [], [], [], [], []
        by_stage: dict[str, list[int]] = defaultdict(list)
        with dspy.context(lm=scripted_lm(engine)):
            for example in examples:
                started = time.perf_counter()
                prediction = program(question=example.question, topic_entities=example.topic_entities)
                seconds.append(time.perf_counter() - started)
                costs = prediction.costs
                calls.append(costs["lm_calls"])
                prompt.append(costs["prompt_tokens"])
                total.append(costs["total_tokens"])
                hits.append(score_prediction(example, prediction)["hits@1"])
                for stage in STAGES:
                    by_stage[stage].append(costs["lm_calls_by_stage"].get(stage, 0))
        kg.close()
        stages = " ".join(f"{s}={statistics.fmean(v):.2f}" for s, v in by_stage.items() if any(v))
        print(f"{Path(questions).stem:<12}{len(examples):>5}{statistics.fmean(hits):>8.3f}"
              f"{statistics.fmean(calls):>7.2f}{statistics.median(calls):>5.0f}{statistics.fmean(prompt):>11.0f}"
              f"{statistics.fmean(total):>8.0f}{statistics.fmean(seconds):>7.3f}  {stages}")
    print("\nPoG (GPT-3.5, released runs): LM calls/question mean / median: "
          + ", ".join(f"{name} {m} / {med}" for name, (m, med) in POG.items()))
    print("Token counts are the scripted engine's estimate (4 characters per token) of the real prompts.")
    print(f"start-up (embedder loaded once before the first question): {startup:.1f} s, not in s/q")
    return 0


if __name__ == "__main__":
    sys.exit(main())
