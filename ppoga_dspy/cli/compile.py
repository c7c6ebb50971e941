"""`ppoga compile`: compile the prompts on a training split and write one artifact for this LM."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ppoga_dspy.cli import common
from ppoga_dspy.scripted.specs import is_scripted_spec

#: knn demos per call by stage mode. A fused call's demo carries both stages' fields (about 260 tokens against 150);
#: on MetaQA 3-hop dev two fused demos answered as many questions as three at 16 % fewer prompt tokens
#: (docs/engine.md), so fused compiles default to two.
KNN_K = {"paper": 3, "fused": 2}


def register(subparsers: argparse._SubParsersAction) -> None:
    from ppoga_dspy.method.demo_trim import DEMO_CHARS, DEMO_ITEMS
    from ppoga_dspy.optimizers.names import OPTIMIZERS

    cmd = common.dataset_command(
        subparsers, "compile", split="train", split_help="split to compile on (default train)",
        help="compile prompts and demos with a DSPy optimizer on a training split; write an artifact",
        description="Compile every planner and executor predictor (metric: Hits@1), scoring dev before and after.",
    )
    cmd.add_argument("--dev-split", choices=("train", "dev", "test"), default="dev",
                     help="split scored before/after (reported; never the one an optimizer selects on)")
    cmd.add_argument("--select-split", choices=("train", "dev", "test"), default=None,
                     help="random-search/mipro/gepa: split they select candidates on (default: the last third of "
                          "the training split, held out of it); must differ from --dev-split")
    cmd.add_argument("--select-limit", type=common.at_least(1), default=None, help="at most N selection questions")
    cmd.add_argument("--dev-limit", type=common.at_least(0), default=None,
                     help="at most N dev questions; 0: no dev scoring (a slow local model, scored later by eval)")
    cmd.add_argument("--switch-trials", type=common.at_least(0), default=None, metavar="N",
                     help="dev scorings spent choosing the student's on/off rules (answer_reads_plan, "
                          "follow_named_relations, ...; optimizers/switches.py); default: one per rule plus one when "
                          "there are dev questions; 0 (or --dev-limit 0): the defaults stand")
    cmd.add_argument("--optimizer", choices=OPTIMIZERS, default="bootstrap")
    cmd.add_argument("--teacher-lm", metavar="SPEC", default=None,
                     help=f"LM that runs the teacher / proposes prompts; {common.ORACLE_LM} (or oracle/noisy:P) "
                          "writes demos from the training split's gold paths")
    cmd.add_argument("--max-demos", type=common.at_least(0), default=3, help="demos per predictor (default 3)")
    cmd.add_argument("--k", type=common.at_least(1), default=None,
                     help="knn: demos per call, one from each of the K training questions nearest to the question "
                          f"(default {KNN_K['paper']}; {KNN_K['fused']} with --stages fused, whose demos are longer)")
    cmd.add_argument("--demo-chars", type=common.at_least(0), default=DEMO_CHARS,
                     help=f"knn: a demo's input texts are cut to N characters (default {DEMO_CHARS}; 0: shown whole)")
    cmd.add_argument("--demo-items", type=common.at_least(0), default=DEMO_ITEMS,
                     help=f"knn: a demo's input lists are cut to N items, the ones its reply names first (default "
                          f"{DEMO_ITEMS}; 0: shown whole)")
    cmd.add_argument("--steps", type=common.at_least(1), default=200,
                     help="finetune: LoRA training steps (default 200)")
    cmd.add_argument("--bf16", action="store_true", help="finetune: train in bf16 (where the CPU supports it)")
    cmd.add_argument("--candidates", type=common.at_least(1), default=4,
                     help="candidate programs for random search (default 4)")
    cmd.add_argument("--auto", "--budget", dest="auto", choices=("light", "medium", "heavy"), default="light",
                     help="MIPROv2/GEPA budget preset (default light); --trials or --max-metric-calls override it")
    cmd.add_argument("--trials", type=common.at_least(1), default=None,
                     help="mipro: trials (with --candidates instruction/demo candidates) instead of --auto")
    cmd.add_argument("--max-metric-calls", type=common.at_least(1), default=None,
                     help="gepa: metric calls in all (each is one question answered) instead of --auto")
    cmd.add_argument("--prompt-lm", metavar="SPEC", default=None,
                     help="mipro: the LM that writes instructions (default: --teacher-lm, else --lm); "
                          "oracle/proposer is a scripted, offline one")
    cmd.add_argument("--reflection-lm", metavar="SPEC", default=None,
                     help="gepa: the LM that reflects on feedback and rewrites instructions (default: --teacher-lm, "
                          "else --lm); oracle/proposer is a scripted, offline one")
    cmd.add_argument("--log-dir", type=Path, default=None, metavar="DIR",
                     help="gepa/mipro: the run folder; rerunning the same command resumes from it, a mipro rerun "
                          "skipping the finished trials (default ARTIFACT.gepa/ or ARTIFACT.mipro/)")
    cmd.add_argument("--threads", type=common.THREADS, default=1, help="questions in parallel (default 1)")
    cmd.add_argument("--extend", type=Path, default=None, metavar="ARTIFACT",
                     help="knn: keep this artifact's demos (compiled on another KG) beside the new ones; each KG is "
                          "shown its own questions' demos")
    cmd.add_argument("--out", required=True, type=Path, metavar="ARTIFACT")
    cmd.add_argument("--json", action="store_true", help="print the scores as JSON")
    common.add_program_options(cmd)
    cmd.set_defaults(handler=_compile)


def _teacher(args: argparse.Namespace, trainset: list, kg):
    """The LM that writes the demos: a scripted gold-path planner (it reads `kg` to plan per semantic hop)."""
    if is_scripted_spec(args.teacher_lm):
        from ppoga_dspy.scripted.specs import scripted_lm_for_spec

        return scripted_lm_for_spec(args.teacher_lm, trainset, seed=args.seed, kg=kg)
    if args.teacher_lm:
        from ppoga_dspy.lm import make_lm

        return make_lm(args.teacher_lm)
    return None


def _writer(args: argparse.Namespace, trainset: list, kg):
    """MIPROv2's prompt LM / GEPA's reflection LM: its own flag, else the teacher's or the student's LM when that
    LM can write prompts (a scripted planner cannot: it answers the program's signatures only)."""
    from ppoga_dspy.errors import ConfigError
    from ppoga_dspy.scripted.proposer import PROPOSER_LM, proposer_lm

    flag = "--prompt-lm" if args.optimizer == "mipro" else "--reflection-lm"
    spec = args.prompt_lm if args.optimizer == "mipro" else args.reflection_lm
    if spec == PROPOSER_LM:
        return proposer_lm()
    if spec:
        return _teacher(argparse.Namespace(teacher_lm=spec, seed=args.seed), trainset, kg)
    fallback = args.teacher_lm or args.lm
    if fallback is None or fallback == "none" or is_scripted_spec(fallback) or fallback == PROPOSER_LM:
        raise ConfigError(f"--optimizer {args.optimizer} needs an LM that writes instructions, and "
                          f"{fallback or 'the embedded demo model'} cannot: pass {flag} SPEC "
                          f"(offline: {flag} {PROPOSER_LM}, a scripted prompt writer)")
    return None  # the teacher (or the student) writes them


def _check_budget_flags(args: argparse.Namespace) -> None:
    """Flags that mean nothing for the chosen optimizer are refused, not silently ignored."""
    from ppoga_dspy.errors import ConfigError

    misplaced = [(args.trials, "--trials", "mipro"), (args.max_metric_calls, "--max-metric-calls", "gepa"),
                 (args.prompt_lm, "--prompt-lm", "mipro"), (args.reflection_lm, "--reflection-lm", "gepa")]
    for value, flag, owner in misplaced:
        if value is not None and args.optimizer != owner:
            raise ConfigError(f"{flag} applies to --optimizer {owner}, not {args.optimizer}")
    if args.select_split is not None and args.optimizer not in ("random-search", "mipro", "gepa"):
        raise ConfigError(f"--select-split applies to random-search, mipro and gepa, not {args.optimizer}")
    if args.select_split is not None and args.select_split == args.dev_split and args.dev_limit != 0:
        raise ConfigError(f"--select-split {args.select_split} is also --dev-split: the dev score would be measured "
                          "on the questions the optimizer selected on; pick another split for one of them")
    if args.select_split is not None and args.select_split == args.split:
        raise ConfigError(f"--select-split {args.select_split} is the training split; omit it to hold out part of "
                          "the training split instead")


def _compile(args: argparse.Namespace) -> int:
    common.offline_environment()
    from ppoga_dspy.app.checks import check_lm_spec
    from ppoga_dspy.optimizers.artifact import Artifact, kg_label
    from ppoga_dspy.optimizers.compile import compile_program
    from ppoga_dspy.scripted.proposer import PROPOSER_LM

    check_lm_spec(args.teacher_lm, flag="--teacher-lm")
    for flag, spec in (("--prompt-lm", args.prompt_lm), ("--reflection-lm", args.reflection_lm)):
        if spec != PROPOSER_LM:
            check_lm_spec(spec, flag=flag)
    _check_budget_flags(args)
    from ppoga_dspy.optimizers.artifact import load_artifact

    earlier = load_artifact(args.extend) if args.extend else None  # a wrong file is refused before any work
    if earlier is not None:
        earlier.check_extendable(knn=args.optimizer == "knn", stages=args.stages or "paper")
    trainset = common.load_examples(args)
    devset = [] if args.dev_limit == 0 else common.load_examples(args, split=args.dev_split, limit=args.dev_limit)
    selectset = None if args.select_split is None else common.load_examples(args, split=args.select_split,
                                                                             limit=args.select_limit)
    log_dir = args.log_dir or (args.out.with_name(f"{args.out.name}.{args.optimizer}")
                               if args.optimizer in ("gepa", "mipro") else None)
    from ppoga_dspy.app import open_program

    with open_program(common.program_settings(args), examples=trainset + devset + (selectset or [])) as opened:
        program, lm_description = opened.program, opened.lm_description
        teacher = _teacher(args, trainset + (selectset or []), opened.kg)
        writer = _writer(args, trainset + (selectset or []), opened.kg) if args.optimizer in ("mipro", "gepa") else None
        print(f"ppoga compile: {args.optimizer} on {len(trainset)} {args.split} questions, dev {len(devset)}, "
              f"{lm_description}" + (f"; run folder {log_dir} (rerun to resume)" if log_dir else ""), file=sys.stderr)
        if args.optimizer == "finetune":
            return _finetune(args, program, trainset, teacher, lm_description)
        result = compile_program(program, trainset=trainset, devset=devset, selectset=selectset,
                                 optimizer=args.optimizer, teacher_lm=teacher, prompt_lm=writer, reflection_lm=writer,
                                 max_demos=args.max_demos, num_candidates=args.candidates, threads=args.threads,
                                 seed=args.seed, auto=args.auto, trials=args.trials,
                                 max_metric_calls=args.max_metric_calls,
                                 log_dir=str(log_dir) if log_dir else None,
                                 k=args.k or KNN_K[args.stages or "paper"],
                                 demo_trim=_demo_trim(args),
                                 teacher_name=args.teacher_lm or "",
                                 provenance=_provenance(args, program, lm_description, trainset + (selectset or [])))
        scores = {**result.scores, "reported_on": args.dev_split if devset else None,
                  "selected_on": _selected_on(args) if result.selected_on else None}
        switches = _choose_switches(args, result.program, devset)
        artifact = Artifact.from_program(result.program, lm=lm_description, kg=kg_label(opened.kg.name),
                                         dataset=args.dataset, split=args.split, optimizer=args.optimizer,
                                         scores=scores, tuning={"switches": switches} if switches else {})
        if earlier is not None:
            artifact.extend(earlier)
        artifact.save(args.out)
        report = {"artifact": str(args.out), "optimizer": args.optimizer, **scores,
                  "changed_predictors": result.changed_predictors}
        if result.resumed is not None:
            report["resumed"] = result.resumed
            print(f"ppoga compile: {result.resumed['evaluations_resumed']} trial evaluations read from {log_dir}, "
                  f"{result.resumed['evaluations_run']} run", file=sys.stderr)
        if args.json:
            common.print_json(report)
        else:
            before, after = result.scores["dev_before"], result.scores["dev_after"]
            if not devset:
                print("dev: not scored (--dev-limit 0)")
            else:
                chosen = (f" (selected on {scores['selected_on']}, {result.selected_on} questions)"
                          if scores["selected_on"] else "")
                print(f"{args.dev_split} Hits@1 {before.get('hits@1') or 0:.3f} -> "
                      f"{after.get('hits@1') or 0:.3f}{chosen} "
                      f"(n={after.get('n')}); LM calls/q {before.get('lm_calls_mean') or 0:.2f} -> "
                      f"{after.get('lm_calls_mean') or 0:.2f}; "
                      f"changed: {', '.join(result.changed_predictors) or 'nothing'}")
            print(f"wrote {args.out}")
    return 0


def _choose_switches(args: argparse.Namespace, program, devset: list) -> dict | None:
    """The student's on/off rules measured on the dev questions (`optimizers/switches.py`), set on `program`; what
    was tried, for the artifact. None when nothing was measured (no dev questions, or --switch-trials 0)."""
    from ppoga_dspy.method.thresholds import CHOSEN_ON_DEV
    from ppoga_dspy.optimizers.switches import choose_switches

    budget = len(CHOSEN_ON_DEV) + 1 if args.switch_trials is None else args.switch_trials
    if not devset or budget == 0:
        return None
    choice = choose_switches(program, devset, budget=budget, threads=args.threads)
    program.thresholds = choice.thresholds
    changed = ", ".join(f"{name}={value}" for name, value in choice.changed.items()) or "none (the defaults stand)"
    print(f"ppoga compile: rules chosen on {len(devset)} {args.dev_split} questions in {len(choice.trials)} "
          f"scorings: {changed}", file=sys.stderr)
    return {"chosen_on": args.dev_split, **choice.to_dict()}


def _provenance(args: argparse.Namespace, program, lm_description: str, examples: list) -> dict:
    """What a resumable compile is for (checked against its run folder): the LMs, the questions, the starting
    program, and the flags that shape the search. The budget (--trials, --auto with --trials) is left out,
    so a rerun with a larger budget extends the finished trials."""
    from ppoga_dspy.evaluation.evaluate import program_fingerprint
    from ppoga_dspy.optimizers.tune import tune_provenance

    return {**tune_provenance(lm=lm_description, dataset=args.dataset, split=args.split, seed=args.seed,
                              examples=examples),
            "optimizer": args.optimizer, "program": program_fingerprint(program),
            "prompt_lm": args.prompt_lm or args.teacher_lm or args.lm, "teacher_lm": args.teacher_lm,
            "select_split": args.select_split, "max_demos": args.max_demos,
            "candidates": args.candidates if args.trials is not None else None,
            "auto": args.auto if args.trials is None else None}


def _selected_on(args: argparse.Namespace) -> str:
    return args.select_split or f"{args.split} (the last third, held out of training)"


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


def _demo_trim(args: argparse.Namespace):
    """`--demo-chars` / `--demo-items` as the pool's trim (0: that part of a demo shown whole)."""
    from ppoga_dspy.method.demo_trim import DemoTrim

    return DemoTrim(args.demo_chars or None, args.demo_items or None)
