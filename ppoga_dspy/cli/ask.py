"""`ppoga ask`: answer one question and show how: plan, predictions, observations, corrections, cost."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ppoga_dspy.cli.common import add_program_options, offline_environment, print_json, program_settings

DEFAULT_QUESTION = "Where was the director of Inception born?"


def register(subparsers: argparse._SubParsersAction) -> None:
    ask = subparsers.add_parser(
        "ask",
        help="answer a question over a KG (default: the demo KG with the embedded offline model)",
        description="Answer one question. Without --kg the demo KG is used; without --lm the embedded demo model.",
    )
    ask.add_argument("question", nargs="?", default=DEFAULT_QUESTION,
                     help=f"the question (default: {DEFAULT_QUESTION!r})")
    ask.add_argument("--topic", action="append", default=[], metavar="ENTITY",
                     help="a topic entity (name or id); repeatable; default: linked from the question")
    ask.add_argument("--trace", type=Path, metavar="FILE", help="write the full trace and memory as JSON")
    ask.add_argument("--json", action="store_true", help="print the answer, trace and costs as JSON")
    add_program_options(ask)
    ask.set_defaults(handler=_ask)


def _ask(args: argparse.Namespace) -> int:
    offline_environment()
    from ppoga_dspy.app import open_program
    from ppoga_dspy.errors import ConfigError
    from ppoga_dspy.evaluation.runs import check_output_path
    from ppoga_dspy.text import from_data

    args.question = from_data(args.question)  # argv is outside text (bad bytes arrive as lone surrogates)
    args.topic = [from_data(t) for t in args.topic]
    if not args.question.strip():
        raise ConfigError("the question is empty; ask one, e.g. ppoga ask \"Who directed Inception?\"")
    from ppoga_dspy.datasets.examples import MAX_QUESTION_CHARS

    if len(args.question) > MAX_QUESTION_CHARS:  # it would be sent whole in every prompt
        raise ConfigError(f"the question is {len(args.question)} characters long, over the {MAX_QUESTION_CHARS} a "
                          "question may be; ask a shorter one")
    if any(not topic.strip() for topic in args.topic):  # links to nothing: every call would be paid for a fallback
        raise ConfigError("a --topic is blank; name the entity, or leave --topic out to link it from the question")
    if args.trace:
        args.trace = check_output_path(args.trace, flag="--trace")  # before any LM call is paid
    with open_program(program_settings(args)) as opened:
        prediction = opened.program(question=args.question, topic_entities=args.topic or None)
        kg_name, lm_description = opened.kg.name, opened.lm_description
        from ppoga_dspy.lm import cache_report

        replies = cache_report(getattr(opened.program, "role_lms", None))
    if replies["cache_hits"]:
        import sys

        print(f"ppoga ask: {replies['cache_hits']} of {replies['calls']} LM replies came from the cache "
              "(--no-cache asks the model again)", file=sys.stderr)
    result = {
        "question": args.question,
        "kg": kg_name,
        "lm": lm_description,
        "answer": prediction.answer,
        "answers": prediction.answers,
        "answer_ids": prediction.answer_ids,
        "ungrounded": list(getattr(prediction, "ungrounded", []) or []),  # as eval rows: answers naming no graph entity
        "reasoning": prediction.reasoning,
        "reasoning_chains": prediction.reasoning_chains,
        "status": prediction.status,
        "error_kind": prediction.error_kind,
        "error": prediction.error,
        "costs": prediction.costs,
        "lm_replies": replies,
        "memory": prediction.memory,
        "trace": prediction.trace,
    }
    if args.trace:
        from ppoga_dspy.text import clean_tree

        args.trace.write_text(json.dumps(clean_tree(result), indent=2, ensure_ascii=False, default=str),
                              encoding="utf-8")
    if args.json:
        print_json(result)
    else:
        from rich.console import Console

        from ppoga_dspy.cli.render import render_prediction

        render_prediction(Console(emoji=False), result)
    if prediction.status == "ok":
        return 0
    from ppoga_dspy.errors import KGError, LMError

    return {"kg": KGError.exit_code, "lm": LMError.exit_code}.get(prediction.error_kind or "", 1)
