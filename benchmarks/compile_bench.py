"""What compiling adds to the embedded model: no-model baseline, zero-shot, bootstrap, knn, constraints, finetune.

Each row is evaluated on the test split of WC-P2 and PQ-2H; every compiled row is compiled on the
train split only, with the scripted perfect planner (`oracle/gold-path`) as teacher. Rows without
`+constraints` decode freely (`constrain=False`); `+constraints` rows decode choices, decisions and
plans under the embedded engine's constraints (inference/constraints.py, on by default outside this bench).
Each row's answers go to a resumable run file (`--out-dir`), so an interrupted bench continues where
it stopped and `--report` prints the table of whatever has finished. Columns: Hits@1 (PoG-style
lenient, and strict), F1, LM calls and seconds per question, and the Executor's choices over the
whole run: calls, names that were no candidate, fallbacks to the best-ranked candidate.

The finetune row trains a LoRA adapter of the embedded model on the teacher's stage traces of the same
train split (`--finetune-steps`, bf16 where the CPU has it; once per dataset, kept beside the run file as
`NAME.finetune.artifact.json` + `.adapter/`) and answers zero-shot with the adapter merged, decoding freely.

    python benchmarks/compile_bench.py [--n 50] [--train 200] [--k 3] [--data ../shared/data]
    python benchmarks/compile_bench.py --report          # the table from the run files so far
    python benchmarks/compile_bench.py --set answer_reads_plan=false   # a threshold for every row
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DATASETS = {
    "WC-P2": ("wc2014", "wc2014/WC-P2.txt"),
    "PQ-2H": ("pathquestion", "pathquestion/PQ-2H.txt"),
}
ROWS = ("none", "zero-shot", "zero-shot+constraints", "bootstrap", "knn", "knn+constraints", "finetune")
STUDENT = "local/embedded"


def data_folder(given: Path | None) -> Path:
    folder = given or (Path(os.environ["PPOGA_DATA"]) if os.environ.get("PPOGA_DATA") else None)
    folder = folder or Path(__file__).resolve().parents[2] / "shared" / "data"
    if not folder.is_dir():
        sys.exit(f"compile_bench: data folder {folder} not found; pass --data or set PPOGA_DATA")
    return folder


def finetuned_artifact(name: str, spec: str, opened, train: list, out: Path, steps: int) -> Path:
    """The finetune row's artifact: LoRA on the teacher's traces of `train`, trained once (a rerun reuses it)."""
    from ppoga_dspy.inference.options import native_bf16_supported
    from ppoga_dspy.lm.embedded import DEFAULT_EMBEDDED_MODEL
    from ppoga_dspy.optimizers.finetune import finetune_artifact
    from ppoga_dspy.scripted.gold_path import oracle_lm

    artifact = out.with_name(f"{name}.finetune.artifact.json")
    if artifact.exists():
        return artifact
    _, result = finetune_artifact(opened.program, train, teacher_lm=oracle_lm(train), out=artifact,
                                  lm=opened.lm_description, provenance={"dataset": spec, "split": "train"},
                                  model_name=DEFAULT_EMBEDDED_MODEL, steps=steps, bf16=native_bf16_supported())
    print(f"compile_bench: {name} finetune: LoRA on {result.pairs} stage pairs, {result.steps} steps in "
          f"{result.seconds:.0f} s, loss {result.first_loss:.3f} -> {result.last_loss:.3f}",
          file=sys.stderr, flush=True)
    return artifact


def build(row: str, opened, train: list, k: int):
    """The program of one row: the opened (zero-shot) program, compiled on `train` where the row compiles."""
    from ppoga_dspy.optimizers.compile import compile_program
    from ppoga_dspy.scripted.gold_path import oracle_lm

    if row in ("none", "zero-shot", "zero-shot+constraints", "finetune"):  # finetune: its artifact is applied
        return opened.program
    optimizer = {"bootstrap": "bootstrap", "knn": "knn", "knn+constraints": "knn"}[row]
    result = compile_program(opened.program, trainset=train, devset=[], optimizer=optimizer,
                             teacher_lm=oracle_lm(train), max_demos=k, k=k)
    return result.program


def run_row(row: str, name: str, spec: str, *, n: int, train_n: int, k: int, out: Path, threads: int,
            finetune_steps: int = 200, overrides: dict[str, str] | None = None) -> None:
    from ppoga_dspy.app import open_program
    from ppoga_dspy.app.session import ProgramSettings
    from ppoga_dspy.datasets.loaders import load_dataset
    from ppoga_dspy.evaluation.evaluate import run_evaluation
    from ppoga_dspy.lm.settings import LMSettings

    test = load_dataset(spec, split="test", limit=n)
    train = load_dataset(spec, split="train", limit=train_n)
    lm = LMSettings(lm="none" if row == "none" else STUDENT, constrain=row.endswith("+constraints"))
    # program="none": zero-shot means no artifact, not the one shipped for the embedded model.
    settings = ProgramSettings(dataset=spec, lm=lm, program="none", overrides=overrides or {})
    started = time.perf_counter()
    if row == "finetune":  # the adapter is merged when the artifact is opened, as `--program` does
        with open_program(settings, examples=train) as opened:
            artifact = finetuned_artifact(name, spec, opened, train, out, finetune_steps)
        settings = ProgramSettings(dataset=spec, lm=lm, program=str(artifact), overrides=overrides or {})
    with open_program(settings, examples=train + test) as opened:
        program = build(row, opened, train, k)
        result = run_evaluation(program, test, out=out, threads=threads, progress=False)
    print(f"compile_bench: {name} {row}: {len(result.rows)} questions ({result.ran} new) in "
          f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)


def table(out_dir: Path, rows: list[str]) -> str:
    from ppoga_dspy.evaluation.evaluate import read_run, summarize

    lines = ["| row | dataset | n | Hits@1 | Hits@1 strict | F1 | LM calls/q | s/q | choice calls | "
             "non-candidate choices | choice fallbacks |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for name in DATASETS:
            path = out_dir / f"{name}.{row}.jsonl"
            records = read_run(path) if path.exists() else []
            if not records:
                lines.append(f"| {row} | {name} | 0 | not run | | | | | | | |")
                continue
            s = summarize(records)
            lines.append(f"| {row} | {name} | {s['n']} | {s['hits@1']:.3f} | {s['hits@1_strict']:.3f} | "
                         f"{s['f1']:.3f} | {s['lm_calls_mean']:.1f} | {s['seconds_mean']:.1f} | "
                         f"{s['choice_calls']} | {s['non_candidate_choices']} | {s['choice_fallbacks']} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--n", type=int, default=50, help="test questions per dataset (the issue asks >= 50)")
    parser.add_argument("--train", type=int, default=200, help="training questions to compile on")
    parser.add_argument("--k", type=int, default=3, help="demos per call (knn) / per predictor (bootstrap)")
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--finetune-steps", type=int, default=200, help="LoRA training steps of the finetune row")
    parser.add_argument("--out-dir", type=Path, default=Path("runs/compile-bench"))
    parser.add_argument("--report", action="store_true", help="only print the table of the run files so far")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                        help="a threshold for every row, as `ppoga eval --set` (e.g. answer_reads_plan=false)")
    args = parser.parse_args()
    from ppoga_dspy.app.session import parse_overrides

    overrides = parse_overrides(args.overrides)
    data = data_folder(args.data)
    if not args.report:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        for row in args.rows:  # row by row, so the cheap rows finish first and a cut-short bench still says much
            for name in args.datasets:
                fmt, rel = DATASETS[name]
                run_row(row, name, f"{fmt}:{data / rel}", n=args.n, train_n=args.train, k=args.k,
                        out=args.out_dir / f"{name}.{row}.jsonl", threads=args.threads,
                        finetune_steps=args.finetune_steps, overrides=overrides)
    settings = "".join(f", {name}={value}" for name, value in overrides.items())
    print(f"embedded model {STUDENT}, test split, compiled on train (teacher oracle/gold-path, k={args.k}{settings})")
    print(table(args.out_dir, args.rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
