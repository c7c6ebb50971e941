"""`ppoga compile`: compile the prompts on a training split and write one artifact for this LM."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ppoga_dspy.cli import common
from ppoga_dspy.experiments.planner_specs import is_scripted_spec


def register(subparsers: argparse._SubParsersAction) -> None:
    from ppoga_dspy.optimizers.names import OPTIMIZERS

    cmd = common.dataset_command(
        subparsers, "compile", split="train", split_help="split to compile on (default train)",
        help="compile prompts and demos with a DSPy optimizer on a training split; write an artifact",
        description="Compile every planner and executor predictor (metric: Hits@1), scoring dev before and after.",
    )
    cmd.add_argument("--dev-split", choices=("train", "dev", "test"), default="dev", help="split scored before/after")
    cmd.add_argument("--dev-limit", type=common.at_least(0), default=None,
                     help="at most N dev questions; 0: no dev scoring (a slow local model, scored later by eval)")
    cmd.add_argument("--optimizer", choices=OPTIMIZERS, default="bootstrap")
    cmd.add_argument("--teacher-lm", metavar="SPEC", default=None,
                     help=f"LM that runs the teacher / proposes prompts; {common.ORACLE_LM} (or oracle/noisy:P) "
                          "writes demos from the training split's gold paths")
    cmd.add_argument("--max-demos", type=common.at_least(0), default=3, help="demos per predictor (default 3)")
    cmd.add_argument("--k", type=common.at_least(1), default=3,
                     help="knn: demos per call, one from each of the K training questions nearest to the question "
                          "(default 3)")
    cmd.add_argument("--steps", type=common.at_least(1), default=200,
                     help="finetune: LoRA training steps (default 200)")
    cmd.add_argument("--bf16", action="store_true", help="finetune: train in bf16 (where the CPU supports it)")
    cmd.add_argument("--candidates", type=common.at_least(1), default=4,
                     help="candidate programs for random search (default 4)")
    cmd.add_argument("--budget", choices=("light", "medium", "heavy"), default="light", help="MIPROv2/GEPA budget")
    cmd.add_argument("--threads", type=common.THREADS, default=1, help="questions in parallel (default 1)")
    cmd.add_argument("--out", required=True, type=Path, metavar="ARTIFACT")
    cmd.add_argument("--json", action="store_true", help="print the scores as JSON")
    common.add_program_options(cmd)
    cmd.set_defaults(handler=_compile)


def _teacher(args: argparse.Namespace, trainset: list, kg):
    """The LM that writes the demos: a scripted gold-path planner (it reads `kg` to plan per semantic hop)."""
    if is_scripted_spec(args.teacher_lm):
        from ppoga_dspy.experiments.planner_specs import scripted_lm_for_spec

        return scripted_lm_for_spec(args.teacher_lm, trainset, seed=args.seed, kg=kg)
    if args.teacher_lm:
        from ppoga_dspy.lm import make_lm

        return make_lm(args.teacher_lm)
    return None


def _compile(args: argparse.Namespace) -> int:
    common.offline_environment()
    from ppoga_dspy.app.checks import check_lm_spec
    from ppoga_dspy.optimizers.artifact import Artifact
    from ppoga_dspy.optimizers.compile import compile_program

    check_lm_spec(args.teacher_lm, flag="--teacher-lm")
    trainset = common.load_examples(args)
    devset = [] if args.dev_limit == 0 else common.load_examples(args, split=args.dev_split, limit=args.dev_limit)
    from ppoga_dspy.app import open_program

    with open_program(common.program_settings(args), examples=trainset + devset) as opened:
        program, lm_description = opened.program, opened.lm_description
        teacher = _teacher(args, trainset, opened.kg)
        print(f"ppoga compile: {args.optimizer} on {len(trainset)} {args.split} questions, dev {len(devset)}, "
              f"{lm_description}", file=sys.stderr)
        if args.optimizer == "finetune":
            return _finetune(args, program, trainset, teacher, lm_description)
        result = compile_program(program, trainset=trainset, devset=devset, optimizer=args.optimizer,
                                 teacher_lm=teacher, max_demos=args.max_demos, num_candidates=args.candidates,
                                 threads=args.threads, seed=args.seed, budget=args.budget, k=args.k,
                                 teacher_name=args.teacher_lm or "")
        artifact = Artifact.from_program(result.program, lm=lm_description, dataset=args.dataset, split=args.split,
                                         optimizer=args.optimizer, scores=result.scores)
        artifact.save(args.out)
        report = {"artifact": str(args.out), "optimizer": args.optimizer, **result.scores,
                  "changed_predictors": result.changed_predictors}
        if args.json:
            common.print_json(report)
        else:
            before, after = result.scores["dev_before"], result.scores["dev_after"]
            if not devset:
                print("dev: not scored (--dev-limit 0)")
            else:
                print(f"dev Hits@1 {before.get('hits@1') or 0:.3f} -> {after.get('hits@1') or 0:.3f} "
                      f"(n={after.get('n')}); LM calls/q {before.get('lm_calls_mean') or 0:.2f} -> "
                      f"{after.get('lm_calls_mean') or 0:.2f}; "
                      f"changed: {', '.join(result.changed_predictors) or 'nothing'}")
            print(f"wrote {args.out}")
    return 0


def _finetune(args: argparse.Namespace, program, trainset: list, teacher, lm_description: str) -> int:
    """LoRA on the teacher's traces; the adapter folder goes beside the artifact and is named in it."""
    from ppoga_dspy.errors import ConfigError
    from ppoga_dspy.optimizers.finetune import finetune_artifact

    if not lm_description.startswith("local/"):
        raise ConfigError(f"--optimizer finetune trains a local model's weights; {lm_description} is not one "
                          "(use --lm local/embedded, or knn for a hosted model)")
    artifact, result = finetune_artifact(
        program, trainset, teacher_lm=teacher, out=args.out, lm=lm_description, threads=args.threads,
        provenance={"dataset": args.dataset, "split": args.split},
        model_name=lm_description.removeprefix("local/"), steps=args.steps, bf16=args.bf16, seed=args.seed)
    scores = artifact.scores
    if args.json:
        common.print_json({"artifact": str(args.out), "adapter": str(result.adapter), **scores})
    else:
        print(f"LoRA on {result.pairs} stage pairs, {result.steps} steps in {result.seconds:.0f} s; loss "
              f"{result.first_loss:.3f} -> {result.last_loss:.3f}")
        print(f"wrote {args.out} and {result.adapter}/")
    return 0
