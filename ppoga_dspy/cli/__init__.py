"""`ppoga` command line: parses arguments and dispatches to one module per command group.

Each command module exposes `register(subparsers)`, adding its sub-parser(s) with
`set_defaults(handler=...)`; a handler takes the parsed namespace and returns an exit code.
Handlers import heavy libraries themselves, so `ppoga --help` loads none of them.
Results go to stdout, logs and errors to stderr; tracebacks only with `--debug`.
Exit codes: 0 success, 1 usage (no command), the error kind's code from `ppoga_dspy.errors`
(2 config/input, 3 data, 4 KG, 5 LM, 6 artifact), 7 an evaluation with failed questions, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from ppoga_dspy import __version__

# Command groups, in the order `ppoga --help` lists them. A module that is missing is skipped so a
# partial install still offers the rest.
_COMMAND_MODULES = ("ask", "eval", "show", "compile", "tune", "kg")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `ppoga eval: error: argument --threads: ... (see ppoga eval --help)`.

    The usage block argparse prints by default buries the one line that says what is wrong.
    Sub-parsers inherit the class, so every command behaves the same.
    """

    def error(self, message: str) -> None:  # type: ignore[override]
        text = " ".join(message.split())
        self.exit(2, f"{self.prog}: error: {text} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ppoga",
        description="Answer questions over knowledge graphs with PPoGA, a compiled DSPy program.",
    )
    parser.add_argument("--version", action="version", version=f"ppoga-dspy {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(f"ppoga_dspy.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"ppoga_dspy.cli.{name}":
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 1
    from ppoga_dspy.errors import INTERRUPTED, PPoGAError, exit_code_of

    try:
        return int(handler(args) or 0)
    except PPoGAError as exc:
        if args.debug:
            raise
        print(f"ppoga {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return exit_code_of(exc)
    except KeyboardInterrupt:
        print(f"ppoga {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED


def one_line(exc: BaseException) -> str:
    """An error's message as one line with single spaces (messages from libraries can span lines)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
