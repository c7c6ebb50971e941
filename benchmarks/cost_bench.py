"""Cost of PPoGA per question: LM calls and tokens by stage, paper vs fused stage modes, gating off vs on.

The scripted planners play a model whose decisions are known: `oracle/gold-path` follows each
question's gold path (and still walks the real graph to find the answer), so its figures are what the
method itself costs, no wrong turn, no retry; `oracle/noisy:P` follows it with seeded mistakes at
rate P and judges honestly, so path and plan corrections cost what they cost. Each row is one
(planner, dataset, stage mode, gating) on the dataset's test split:

- `paper`: one LM call per paper stage (Decompose, Predict, SelectRelations per entity,
  SelectEntities, Think, Evaluate, Answer), the reproduction mode;
- `fused`: calls that read the same inputs merged (Decompose + first prediction, Think + Evaluate +
  next prediction or the answer, one relation choice for the whole frontier);
- gating `on`: no LM call for a choice whose embedding ranking is decisive (`gate_margin`, the best
  candidate's similarity above the second's by more than the margin). `gated/q` counts the choices
  made without a call (a single candidate never needs one, in either mode).

Compare with PoG's released GPT-3.5 runs (median 5 calls on WebQSP, 9 on CWQ; mean 9.0 and 13.8),
which include PoG's own mistakes and corrections. Tokens are the scripted engine's estimate (4
characters per token) of the real prompts the program builds.

    python benchmarks/cost_bench.py [--per-file 100] [--gate-margin 0.15] [--noisy 0.2] [--data DIR]
        (DIR default: $PPOGA_DATA, else ../shared/data beside the repository)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass

from _data import add_data_option, data_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

FILES = {
    "WC-P1": ("wc2014", "wc2014/WC-P1.txt", "wc2014/WC2014.txt"),
    "WC-P2": ("wc2014", "wc2014/WC-P2.txt", "wc2014/WC2014.txt"),
    "PQ-2H": ("pathquestion", "pathquestion/PQ-2H.txt", "pathquestion/2H-kb.txt"),
    "PQ-3H": ("pathquestion", "pathquestion/PQ-3H.txt", "pathquestion/3H-kb.txt"),
    "WC-C": ("wc2014", "wc2014/WC-C.txt", "wc2014/WC2014.txt"),
}
PERFECT_FILES = ["WC-P2", "PQ-2H", "PQ-3H", "WC-C"]
NOISY_FILES = ["WC-P2", "PQ-3H"]
#: Stage column short names, in the order a question meets them.
STAGES = {"decompose": "dec", "decompose_predict": "dec+pred", "predict": "pred", "select_relations": "rel",
          "select_relation_pairs": "rel pairs", "select_entities": "ent", "think": "think", "evaluate": "eval",
          "think_evaluate": "think+eval", "replan": "replan", "answer": "answer"}
POG = {"WebQSP": (9.0, 5), "CWQ": (13.8, 9), "GrailQA": (6.5, 4)}


@dataclass(frozen=True)
class Config:
    planner: str  # an `--lm` spec of a scripted planner
    dataset: str
    stages: str  # paper | fused
    margin: float | None  # gate_margin, None: gating off


def measure(config: Config, examples: list, kg, ranker, thresholds: dict) -> dict:
    """One row: Hits@1 and per-question costs of one configuration, questions answered in order."""
    from ppoga_dspy.evaluation.metrics import score_prediction
    from ppoga_dspy.method.program import PPoGA
    from ppoga_dspy.method.thresholds import Thresholds
    from ppoga_dspy.scripted.specs import scripted_lm_for_spec

    lm = scripted_lm_for_spec(config.planner, examples, kg=kg)
    program = PPoGA(kg, role_lms={"planner": lm, "executor": lm}, ranker=ranker, stages=config.stages,
                    thresholds=Thresholds(**thresholds, gate_margin=config.margin))
    per_q: dict[str, list[float]] = defaultdict(list)
    by_stage: dict[str, list[int]] = defaultdict(list)
    started = time.perf_counter()
    for example in examples:
        prediction = program(question=example.question, topic_entities=example.topic_entities)
        costs = prediction.costs
        per_q["hits"].append(score_prediction(example, prediction)["hits@1"])
        per_q["calls"].append(costs["lm_calls"])
        per_q["tokens"].append(costs["total_tokens"])
        per_q["gated"].append(costs["gated_choices"])
        per_q["failed"].append(prediction.status != "ok")
        for stage in STAGES:
            by_stage[stage].append(costs["lm_calls_by_stage"].get(stage, 0))
    row = {key: statistics.fmean(values) for key, values in per_q.items()}
    row.update(config=config, n=len(examples), median=statistics.median(per_q["calls"]),
               seconds=(time.perf_counter() - started) / max(1, len(examples)),
               stages={s: statistics.fmean(v) for s, v in by_stage.items() if any(v)})
    return row


def markdown(rows: list[dict]) -> str:
    """The table as Markdown, one row per configuration (pasted verbatim into the README)."""
    lines = ["| planner | dataset | stages | gating | n | Hits@1 | LM calls/q | median | tokens/q | gated/q "
             "| calls/q by stage |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        c = r["config"]
        gating = "off" if c.margin is None else f"on ({c.margin:g})"
        stages = ", ".join(f"{STAGES[s]} {v:.2f}" for s, v in r["stages"].items())
        lines.append(f"| {c.planner} | {c.dataset} | {c.stages} | {gating} | {r['n']} | {r['hits']:.3f} "
                     f"| {r['calls']:.2f} | {r['median']:.0f} | {r['tokens']:,.0f} | {r['gated']:.2f} | {stages} |")
    return "\n".join(lines)


def _dataset_margin(item: str) -> tuple[str, float]:
    name, _, value = item.partition("=")
    if name not in FILES:
        raise SystemExit(f"--margin {item!r}: the dataset is one of {', '.join(FILES)}")
    try:
        return name, float(value)
    except ValueError:
        raise SystemExit(f"--margin {item!r}: use DATASET=MARGIN, e.g. WC-P2=0.1") from None


def configs(args: argparse.Namespace) -> list[Config]:
    def gatings(dataset: str) -> list[float | None]:
        margin = args.margins.get(dataset, args.gate_margin)
        return {"off": [None], "on": [margin], "both": [None, margin]}[args.gating]

    out = [Config("oracle/gold-path", d, s, m) for d in args.files for s in args.stages for m in gatings(d)]
    for rate in args.noisy:
        out += [Config(f"oracle/noisy:{rate:g}", d, s, None) for d in args.noisy_files for s in args.stages]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_option(parser)
    parser.add_argument("--per-file", type=int, default=100, help="test-split questions per dataset (default 100)")
    parser.add_argument("--files", nargs="+", choices=list(FILES), default=PERFECT_FILES,
                        help="datasets of the perfect-planner rows")
    parser.add_argument("--stages", nargs="+", choices=("paper", "fused"), default=["paper", "fused"])
    parser.add_argument("--gating", choices=("off", "on", "both"), default="both",
                        help="perfect-planner rows without gating, with it (gate_margin=--gate-margin), or both")
    parser.add_argument("--gate-margin", type=float, default=0.15,
                        help="gate_margin of the gating-on rows (default 0.15, chosen on the dev splits)")
    parser.add_argument("--margin", dest="margins", action="append", default=[], metavar="DATASET=M",
                        help="a dataset's own gate_margin (a threshold is tuned per dataset on its dev split, as "
                             "`ppoga tune` does), e.g. --margin WC-P2=0.1; others take --gate-margin")
    parser.add_argument("--noisy", type=float, nargs="*", default=[0.2], help="error rates of oracle/noisy:P rows")
    parser.add_argument("--noisy-files", nargs="+", choices=list(FILES), default=NOISY_FILES)
    parser.add_argument("--split", choices=("train", "dev", "test"), default="test",
                        help="which split's questions (default test; choose gate margins on dev)")
    parser.add_argument("--no-prediction", action="store_true", help="ablation: prediction off in every row")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                        help="a threshold of every row, as `ppoga --set` (e.g. evidence_tokens=400)")
    args = parser.parse_args()
    args.margins = dict(_dataset_margin(item) for item in args.margins)
    args.data = data_dir(args.data, needs=FILES[args.files[0]][1])

    from ppoga_dspy.datasets.loaders import load_dataset
    from ppoga_dspy.kg import open_kg
    from ppoga_dspy.method.pruning import EmbeddingRanker

    started = time.perf_counter()
    EmbeddingRanker.model()  # the embedder loads here, once, not inside the first question's time
    startup = time.perf_counter() - started
    ranker = EmbeddingRanker()  # shared: every configuration meets the same rankings
    from ppoga_dspy.app.session import parse_overrides, thresholds_with

    thresholds = thresholds_with(parse_overrides(args.overrides)).to_dict()
    thresholds["use_prediction"] = not args.no_prediction
    thresholds.pop("gate_margin")  # each row's own
    rows, kgs, questions = [], {}, {}
    try:
        for config in configs(args):
            fmt, path, kb = FILES[config.dataset]
            if config.dataset not in questions:
                questions[config.dataset] = load_dataset(f"{fmt}:{args.data / path}", split=args.split,
                                                         limit=args.per_file)
                kgs.setdefault(kb, open_kg(args.data / kb))
            rows.append(measure(config, questions[config.dataset], kgs[kb], ranker, thresholds))
            r = rows[-1]
            print(f"{config}: hits@1 {r['hits']:.3f}, calls/q {r['calls']:.2f}, tokens/q {r['tokens']:.0f}, "
                  f"{r['seconds']:.2f} s/q", file=sys.stderr, flush=True)
    finally:
        for kg in kgs.values():
            kg.close()
    print(f"PPoGA cost per question, {args.split} splits, {args.per_file} questions per dataset "
          f"(prediction {'off' if args.no_prediction else 'on'}{''.join(', ' + o for o in args.overrides)})\n")
    print(markdown(rows))
    print("\nPoG (GPT-3.5, released runs): LM calls/question mean / median: "
          + ", ".join(f"{name} {m} / {med}" for name, (m, med) in POG.items()))
    print("Tokens: the scripted engine's estimate (4 characters per token) of the real prompts and replies.")
    print(f"start-up (embedder loaded once before the first question): {startup:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
