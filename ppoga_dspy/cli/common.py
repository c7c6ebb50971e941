"""Options shared by every command (the KG options; for ask, eval, compile, tune the program's), turned into settings.

The CLI only parses: `program_settings(args)` maps the flags to `ppoga_dspy.app.ProgramSettings`, and
`ppoga_dspy.app.open_program` does the work. One definition of the flags, so a researcher's options
mean the same thing in every command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ppoga_dspy.errors import ConfigError
from ppoga_dspy.kg.dialects import DIALECT_NAMES
from ppoga_dspy.scripted.specs import ORACLE_LM

__all__ = ["DIALECTS", "ORACLE_LM", "add_dataset_options", "add_kg_options", "add_program_options", "at_least",
           "load_examples", "offline_environment", "positive_float", "print_json", "program_settings"]


def at_least(minimum: int, *, hint: str = "", maximum: int | None = None):
    """An argparse `type` for an integer >= minimum (and <= maximum); a bad value is one line saying what is
    accepted."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is too small; use {minimum} or more{hint}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{value} is too large; use at most {maximum}{hint}")
        return value

    parse.__name__ = "integer"
    return parse


def positive_float(text: str) -> float:
    """An argparse `type` for a number > 0 (seconds)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a number of seconds above 0")
    return value


#: `--threads`: questions in parallel, 1 to MAX_THREADS (a thousand threads abort under a memory limit, and no
#: LM server serves that many requests at once).
MAX_THREADS = 128
THREADS = at_least(1, hint=" (questions answered in parallel)", maximum=MAX_THREADS)


def offline_environment() -> None:
    """Keep libraries from calling out (model hubs, LiteLLM's cost map) on machines without internet."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


#: `--dialect` values (and `ppoga kg load --dialect`): the KG room's one list.
DIALECTS = DIALECT_NAMES


def add_kg_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """Add --kg/--dialect/--timeout/--retries/--breaker/--ontology to a sub-parser: one definition, so that
    every command (ask, eval, compile, tune and the `kg` subcommands) opens a KG the same way."""
    group = parser.add_argument_group("knowledge graph")
    group.add_argument(
        "--kg",
        required=required,
        metavar="KG",
        help="an RDF/IRN file (.nt .ttl .nq .txt), a store directory from `ppoga kg load`, or an http(s) SPARQL URL",
    )
    group.add_argument(
        "--dialect",
        choices=DIALECTS,
        default=None,
        help="KG dialect (default: detected for files, stored for store directories, freebase for URLs)",
    )
    group.add_argument("--timeout", type=positive_float, default=30.0, help="seconds per KG query (default 30)")
    group.add_argument("--retries", type=at_least(0), default=3, help="retries for a failing endpoint (default 3)")
    group.add_argument("--breaker", type=at_least(0), default=3, metavar="N",
                       help="mark an endpoint down after N failed attempts in a row; later queries fail at once "
                       "(default 3, 0: never)")
    group.add_argument(
        "--ontology", default=None, metavar="DIR", help="GrailQA ontology folder for Freebase mediator (CVT) types"
    )


def add_program_options(parser: argparse.ArgumentParser, *, kg_required: bool = False) -> None:
    """--kg ..., --lm/--executor-lm ..., --program ARTIFACT, --stages and threshold overrides."""
    from ppoga_dspy.lm import add_lm_options

    add_kg_options(parser, required=kg_required)
    add_lm_options(parser)
    group = parser.add_argument_group("program")
    group.add_argument("--program", metavar="ARTIFACT", default=None,
                       help="a compiled artifact from `ppoga compile`/`ppoga tune` (prompts, demos, thresholds); "
                            "default: the one shipped for the embedded model; `none`: zero-shot")
    group.add_argument("--stages", choices=("paper", "fused"), default=None,
                       help="paper: one LM call per paper stage (reproduction); fused: calls that read the same "
                            "inputs merged (fewer calls); default: the artifact's mode, else paper")
    group.add_argument("--foreign-demos", choices=("compiled", "unnamed"), default=None,
                       help="an artifact's knn demos on a KG it was not compiled on: compiled (as they are, the "
                            "default: measured better on WC-P2) or unnamed (the plans' shape without the other graph's "
                            "relation names) [PPOGA_FOREIGN_DEMOS]")
    group.add_argument("--tracing", default=None, metavar="TARGET",
                       help="spans per question, stage and LM call: mlflow, mlflow:TRACKING_URI, otel:ENDPOINT or off "
                            "[PPOGA_TRACING; needs pip install ppoga-dspy[mlflow]]")
    group.add_argument("--set", dest="threshold_overrides", action="append", default=[], metavar="NAME=VALUE",
                       help="override one threshold, e.g. --set max_replans=0 --set use_prediction=false")


def dataset_command(subparsers: argparse._SubParsersAction, name: str, *, help: str, description: str,
                    split: str | None, split_help: str) -> argparse.ArgumentParser:
    """A subcommand that runs on a dataset's questions (eval, compile, tune), with the dataset options."""
    cmd = subparsers.add_parser(name, help=help, description=description)
    add_dataset_options(cmd, split=split, split_help=split_help)
    return cmd


def add_dataset_options(parser: argparse.ArgumentParser, *, split: str | None, split_help: str) -> None:
    """--dataset SPEC, --split, --seed, --limit: which questions a command runs on."""
    parser.add_argument("--dataset", required=True, metavar="SPEC",
                        help="FORMAT:PATH (e.g. wc2014:../shared/data/wc2014/WC-P1.txt) or a short name (demo)")
    parser.add_argument("--split", choices=("train", "dev", "test", "all"), default=split,
                        help=split_help + "; all: every question of the file (a file that is all training data)")
    parser.add_argument("--seed", type=int, default=0,
                        help="split, optimizer/sampler and oracle/noisy:P planner seed (default 0)")
    parser.add_argument("--limit", type=at_least(1, hint="; omit --limit to run every question"), default=None,
                        help="at most N questions (after splitting; default: all): the first N in file order")
    parser.add_argument("--sample", type=at_least(1), default=None, metavar="N",
                        help="N questions drawn at random (seeded by --seed) from the split, in file order: files "
                             "grouped by template (MetaQA) give one template in their first N")


def load_examples(args: argparse.Namespace, *, split: str | None = None, limit: int | None = None) -> list:
    """The questions the flags name; `--sample` draws from the main split only (dev and selection splits are
    scored whole or up to their own limits)."""
    from ppoga_dspy.datasets.loaders import load_dataset

    main = split is None or split == args.split
    return load_dataset(args.dataset, split=split or args.split, limit=limit if limit is not None else args.limit,
                        seed=args.seed, sample=getattr(args, "sample", None) if main else None)


def program_settings(args: argparse.Namespace):
    """The `ProgramSettings` the flags describe, over `PPOGA_*` variables and ppoga.toml (`app/config.py`); checked
    here, before any KG or model is opened."""
    from ppoga_dspy.app import ProgramSettings
    from ppoga_dspy.app.checks import check_lm_settings
    from ppoga_dspy.app.config import resolve
    from ppoga_dspy.app.session import parse_overrides
    from ppoga_dspy.lm import lm_settings_from_args

    lm_settings = lm_settings_from_args(args)
    check_lm_settings(lm_settings)  # before any dataset is read, KG opened or model loaded
    defaults = ProgramSettings.model_fields
    given = {name: getattr(args, name, None)
             for name in ("kg", "dialect", "ontology", "program", "stages", "tracing", "foreign_demos")}
    for name in ("timeout", "retries", "breaker"):  # a flag left at its default yields to the env and the file
        value = getattr(args, name, None)
        given[name] = None if value == defaults[name].default else value
    found = resolve(given, parse_overrides(getattr(args, "threshold_overrides", []) or []),
                    config=getattr(args, "config", None))
    from pydantic import ValidationError

    try:
        return ProgramSettings(dataset=getattr(args, "dataset", None), lm=lm_settings,
                               seed=getattr(args, "seed", 0) or 0, **found)
    except ValidationError as exc:  # a value from PPOGA_* or ppoga.toml the flags' choices would have refused
        raise ConfigError(_settings_problem(exc)) from None


def _settings_problem(exc) -> str:
    """One line for a setting pydantic refused, naming where such a value comes from (flag, variable, file)."""
    from ppoga_dspy.app.config import SOURCES

    problems = []
    for error in exc.errors():
        name = str(error["loc"][0]) if error.get("loc") else "setting"
        table, variable = SOURCES.get(name, ("program", None))
        where = f"--{name.replace('_', '-')}" + (f", {variable} or [{table}] {name} in ppoga.toml" if variable else "")
        problems.append(f"{name} = {error.get('input')!r}: {error['msg']} (set by {where})")
    return "; ".join(problems)


def print_json(data: Any) -> None:
    """One JSON line on stdout; outside text in it (a lone surrogate, escapes) made safe first (`ppoga_dspy.text`)."""
    from ppoga_dspy.text import clean_tree

    sys.stdout.write(json.dumps(clean_tree(data), ensure_ascii=False, default=str) + "\n")
