"""Options and builders shared by every command that runs the program (ask, eval, compile, tune).

One definition of "which KG, which LM(s), which compiled program, which thresholds", so a
researcher's flags mean the same thing in every command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ppoga_dspy.errors import ConfigError

REPO_DATA = Path(__file__).resolve().parents[2] / "data"
DEMO_KG = REPO_DATA / "demo" / "demo-kg.nt"
ORACLE_LM = "oracle/gold-path"

# Benchmarks that ship their own KG: question file name -> KB file name in the same folder.
_OWN_KG = {
    "PQ-2H.txt": "2H-kb.txt",
    "PQ-3H.txt": "3H-kb.txt",
    "PQL-2H.txt": "PQL2-KB.txt",
    "PQL-3H.txt": "PQL3-KB.txt",
    "WC-P1.txt": "WC2014.txt",
    "WC-P2.txt": "WC2014.txt",
    "WC-C.txt": "WC2014.txt",
}


def offline_environment() -> None:
    """Keep libraries from calling out (model hubs, LiteLLM's cost map) on machines without internet."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def add_program_options(parser: argparse.ArgumentParser, *, kg_required: bool = False) -> None:
    """--kg ..., --lm/--executor-lm ..., --program ARTIFACT and threshold overrides."""
    from ppoga_dspy.cli.kg import add_kg_options
    from ppoga_dspy.lm import add_lm_options

    add_kg_options(parser, required=kg_required)
    add_lm_options(parser)
    group = parser.add_argument_group("program")
    group.add_argument("--program", metavar="ARTIFACT", default=None,
                       help="a compiled artifact from `ppoga compile`/`ppoga tune` (prompts, demos, thresholds)")
    group.add_argument("--set", dest="threshold_overrides", action="append", default=[], metavar="NAME=VALUE",
                       help="override one threshold, e.g. --set max_replans=0 --set use_prediction=false")


def add_dataset_options(parser: argparse.ArgumentParser, *, split: str | None, split_help: str) -> None:
    """--dataset SPEC, --split, --seed, --limit: which questions a command runs on."""
    parser.add_argument("--dataset", required=True, metavar="SPEC",
                        help="FORMAT:PATH (e.g. wc2014:../shared/data/wc2014/WC-P1.txt) or a short name (demo)")
    parser.add_argument("--split", choices=("train", "dev", "test"), default=split, help=split_help)
    parser.add_argument("--seed", type=int, default=0, help="split (and optimizer/sampler) seed (default 0)")
    parser.add_argument("--limit", type=int, default=None, help="at most N questions (after splitting)")


def load_examples(args: argparse.Namespace, *, split: str | None = None, limit: int | None = None) -> list:
    from ppoga_dspy.datasets import load_dataset

    return load_dataset(args.dataset, split=split or args.split, limit=limit if limit is not None else args.limit,
                        seed=args.seed)


def kg_for(args: argparse.Namespace, dataset_spec: str | None = None):
    """The KG named by --kg; without it, the dataset's own KG (IRN benchmarks, the demo) or the demo KG."""
    from ppoga_dspy.cli.kg import kg_from_args

    if getattr(args, "kg", None):
        return kg_from_args(args)
    guessed = default_kg_path(dataset_spec)
    args.kg = str(guessed)
    return kg_from_args(args)


def default_kg_path(dataset_spec: str | None) -> Path:
    if dataset_spec and ":" in dataset_spec:
        _, _, path = dataset_spec.partition(":")
        own = _OWN_KG.get(Path(path).name)
        if own:
            return Path(path).parent / own
        raise ConfigError(f"--kg is required for {dataset_spec}: it does not ship its own KG")
    return DEMO_KG


def thresholds_from(args: argparse.Namespace, base: Any = None):
    """Thresholds: the artifact's (or defaults), then each --set NAME=VALUE."""
    from ppoga_dspy.thresholds import Thresholds

    data = (base or Thresholds()).to_dict()
    for item in getattr(args, "threshold_overrides", []) or []:
        name, sep, value = item.partition("=")
        if not sep or name not in data:
            raise ConfigError(f"--set {item!r}: use NAME=VALUE with NAME one of {', '.join(data)}")
        data[name] = json.loads(value.lower()) if value.lower() in ("true", "false") else value
    try:
        return Thresholds.model_validate(data)
    except ValueError as exc:
        raise ConfigError(f"invalid threshold: {exc}") from exc


def build_program(args: argparse.Namespace, kg: Any, *, examples: list | None = None):
    """PPoGA on `kg` with the LMs, artifact and thresholds the options name; also returns the LM settings."""
    from ppoga_dspy.program import PPoGA

    artifact = None
    if getattr(args, "program", None):
        from ppoga_dspy.optimizers.artifact import load_artifact

        artifact = load_artifact(args.program)
    role_lms, description = role_lms_for(args, examples=examples, artifact=artifact)
    program = PPoGA(kg, role_lms=role_lms)
    if artifact is not None:
        artifact.apply(program, lm_description=description)
    program.thresholds = thresholds_from(args, program.thresholds)
    return program, description


def role_lms_for(args: argparse.Namespace, *, examples: list | None = None, artifact: Any = None):
    """Role -> LM from the options; `--lm oracle/gold-path` is the scripted perfect planner (needs examples)."""
    if getattr(args, "lm", None) == ORACLE_LM:
        if not examples:
            raise ConfigError(f"--lm {ORACLE_LM} follows gold paths and needs a dataset (use it with eval/tune)")
        from ppoga_dspy.scripted import ScriptedEngine, gold_path_handlers, golds_from_examples, scripted_lm

        lm = scripted_lm(ScriptedEngine(gold_path_handlers(golds_from_examples(examples))), "oracle-gold-path")
        return {"planner": lm, "executor": lm}, ORACLE_LM
    from ppoga_dspy.lm import build_role_lms, lm_settings_from_args, lm_spec_of

    role_lms = build_role_lms(lm_settings_from_args(args))
    planner, executor = lm_spec_of(role_lms["planner"]), lm_spec_of(role_lms["executor"])
    return role_lms, planner if planner == executor else f"planner={planner} executor={executor}"


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
