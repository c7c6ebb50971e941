"""The compiled small model's cost: the paper-stage knn artifact and the fused one, side by side, same questions.

Both artifacts come from the documented recipe on a hop's MetaQA dev file, with no `--set` (made once, by
`metaqa_bench.artifact_for`, when absent):

    ppoga compile --dataset metaqa:NHOP_qa_dev.txt --split all --sample 300 --optimizer knn \\
        --teacher-lm oracle/gold-path --program none --dev-limit 0 [--stages fused]

Each hop's questions are a seeded draw of the dev questions neither artifact was built on (`--split test`: of
the test file, with the table's fixed test seed). The two artifacts answer the same questions interleaved, a
block of `--block` questions each in turn, so a change in the machine's load falls on both alike; DSPy's
response cache is off (every call runs the model). Each (artifact, hop, split) is a resumable run file under
`--runs`.

Printed per hop and artifact: Hits@1 (lenient and strict), LM calls, prompt tokens (all, computed, reused from
the engine's KV prefix cache), completion tokens and seconds per question; then the fused/paper ratios (calls,
prompt tokens, computed prompt tokens, seconds: the issue's "at least 3x faster" is the seconds ratio); then
prompt and completion tokens per question by stage, which show where each mode spends its prompt and its decoding.

    python benchmarks/embedded_cost_bench.py [--n 50] [--hops 1 2 3] [--split dev|test] [--seed 0]
                                             [--modes paper fused] [--block 5] [--threads 1] [--runs runs/cost]
                                             [--report-only]

Run it alone: a second model job on the same 2 cores makes its seconds mean nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import add_data_option, data_dir  # noqa: E402
from metaqa_bench import TEST_SEED, artifact_for, questions_of  # noqa: E402

MODES = ("paper", "fused")
#: Dev questions each artifact's demo pool is built on (the review's `--limit 300`, drawn at random here).
COMPILE_LIMIT = 300


def run_file(runs: Path, mode: str, hop: int, split: str) -> Path:
    return runs / f"embedded-knn-{mode}-{hop}hop-{split}.jsonl"


def run_interleaved(hop: int, split: str, examples: list, data: Path, args: argparse.Namespace) -> None:
    """Both artifacts over `examples`, a block at a time each, into their resumable run files."""
    from ppoga_dspy.app.session import ProgramSettings, open_program
    from ppoga_dspy.evaluation.evaluate import program_fingerprint, run_evaluation
    from ppoga_dspy.lm.settings import LMSettings

    spec = f"metaqa:{data / 'metaqa' / f'{hop}hop_qa_{split}.txt'}"
    with contextlib.ExitStack() as stack:
        opened = {}
        for mode in args.modes:
            artifact = artifact_for(hop, data, args.runs, compile_limit=COMPILE_LIMIT, threads=1, stages=mode)
            settings = ProgramSettings(dataset=spec, lm=LMSettings(cache=False), program=str(artifact),
                                       seed=args.seed)  # no --stages: each artifact runs in the mode it was made for
            opened[mode] = stack.enter_context(open_program(settings, examples=examples))
            assert opened[mode].program.stages.value == mode, (mode, opened[mode].program.stages)
        for start in range(0, len(examples), args.block):
            block = examples[start:start + args.block]
            for mode in args.modes:
                program = opened[mode].program
                provenance = {"lm": opened[mode].lm_description, "program": program_fingerprint(program)}
                run_evaluation(program, block, out=run_file(args.runs, mode, hop, split), threads=args.threads,
                               progress=False, provenance=provenance)
            print(f"  {hop}-hop {split}: {min(start + args.block, len(examples))}/{len(examples)}", flush=True)


def cell(rows: list[dict]) -> dict:
    from ppoga_dspy.evaluation.evaluate import summarize

    s = summarize(rows, by=())
    stages: Counter[str] = Counter()
    written: Counter[str] = Counter()
    for row in rows:
        stages.update((row.get("costs") or {}).get("prompt_tokens_by_stage") or {})
        written.update((row.get("costs") or {}).get("completion_tokens_by_stage") or {})
    return {"n": s["n"], "hits": s["hits@1"], "hits_strict": s["hits@1_strict"], "calls": s["lm_calls_mean"],
            "prompt": s["input_tokens_mean"], "computed": s["input_tokens_computed_mean"],
            "reused": s["input_tokens_reused_mean"], "completion": s["output_tokens_mean"],
            "seconds": s["seconds_mean"], "failed": s["failed"],
            "by_stage": {stage: tokens / max(1, len(rows)) for stage, tokens in stages.items()},
            "written_by_stage": {stage: tokens / max(1, len(rows)) for stage, tokens in written.items()}}


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def markdown(table: dict[tuple[int, str], dict]) -> str:
    lines = ["| hops | artifact | n | Hits@1 | Hits@1 strict | LM calls/q | prompt tok/q | computed/q | reused/q | "
             "completion tok/q | s/q | failed |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (hop, mode), c in sorted(table.items()):
        lines.append(f"| {hop} | {mode} | {c['n']} | {c['hits']:.3f} | {c['hits_strict']:.3f} | {c['calls']:.2f} | "
                     f"{c['prompt']:.0f} | {c['computed']:.0f} | {c['reused']:.0f} | {c['completion']:.0f} | "
                     f"{c['seconds']:.2f} | {c['failed']} |")
    lines += ["", "| hops | Hits@1 fused - paper | calls paper/fused | prompt tok paper/fused | "
              "computed paper/fused | seconds paper/fused |", "|---|---|---|---|---|---|"]
    for hop in sorted({h for h, _ in table}):
        paper, fused = table.get((hop, "paper")), table.get((hop, "fused"))
        if paper and fused:
            lines.append(f"| {hop} | {fused['hits'] - paper['hits']:+.3f} | {_ratio(paper['calls'], fused['calls'])} | "
                         f"{_ratio(paper['prompt'], fused['prompt'])} | {_ratio(paper['computed'], fused['computed'])} "
                         f"| {_ratio(paper['seconds'], fused['seconds'])} |")
    for key, what in (("by_stage", "prompt"), ("written_by_stage", "completion")):
        stages = sorted({stage for c in table.values() for stage in c[key]})
        lines += ["", f"{what} tokens per question by stage:", "",
                  "| hops | artifact | " + " | ".join(stages) + " |", "|---|---|" + "---|" * len(stages)]
        for (hop, mode), c in sorted(table.items()):
            lines.append(f"| {hop} | {mode} | " + " | ".join(f"{c[key].get(s, 0):.0f}" for s in stages) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="questions per hop (default 50)")
    parser.add_argument("--hops", nargs="+", type=int, choices=(1, 2, 3), default=[1, 2, 3])
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--seed", type=int, default=0, help="the dev draw's seed")
    parser.add_argument("--test-seed", type=int, default=TEST_SEED, help="the test draw's seed (fixed in advance)")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES),
                        help="the artifacts to run (default both; the table reads every run file present)")
    parser.add_argument("--block", type=int, default=5, help="questions each artifact answers before the other")
    parser.add_argument("--threads", type=int, default=1, help="questions in flight per artifact")
    parser.add_argument("--runs", type=Path, default=Path("runs/cost"), help="folder of artifacts and run files")
    parser.add_argument("--json", type=Path, default=None, help="also write the table as JSON here")
    parser.add_argument("--report-only", action="store_true", help="run nothing: the table of the run files")
    add_data_option(parser)
    args = parser.parse_args()
    data = data_dir(args.data, needs="metaqa/kb.txt", script="embedded_cost_bench.py")
    args.runs.mkdir(parents=True, exist_ok=True)

    from ppoga_dspy.datasets.loaders import sample_examples
    from ppoga_dspy.evaluation.runs import read_run

    table: dict[tuple[int, str], dict] = {}
    for hop in args.hops:
        seed = args.seed if args.split == "dev" else args.test_seed
        chosen = sample_examples(questions_of(data, hop, args.split, COMPILE_LIMIT), args.n, seed=seed)
        if not args.report_only:
            run_interleaved(hop, args.split, chosen, data, args)
        wanted = {e.id for e in chosen}
        for mode in MODES:
            path = run_file(args.runs, mode, hop, args.split)
            rows = [r for r in read_run(path) if r.get("id") in wanted] if path.exists() else []
            if rows:
                table[hop, mode] = cell(rows)
    print()
    print(f"MetaQA {args.split}, embedded model, knn artifacts compiled on dev (no --set), DSPy cache off:")
    print(markdown(table))
    if args.json:
        args.json.write_text(json.dumps({f"{h}-{m}": c for (h, m), c in table.items()}, indent=2) + "\n",
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
