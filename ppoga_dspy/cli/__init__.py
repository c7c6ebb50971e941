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


def _one_line_warnings(command: str) -> None:
    """Our own warnings (an artifact compiled for another LM or KG) reach the user as one line, as our errors do;
    a library's keep Python's format."""
    import warnings

    default = warnings.formatwarning

    def formatted(message, category, filename, lineno, line=None) -> str:
        if category.__module__.startswith("ppoga_dspy"):
            return f"ppoga {command}: warning: {message}\n"
        return default(message, category, filename, lineno, line)

    warnings.formatwarning = formatted


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]  # as typed: `tune --workers` hands it on
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    _one_line_warnings(getattr(args, "command", None) or "")
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 1
    from ppoga_dspy.errors import INTERRUPTED, PPoGAError, exit_code_of

    terminated, restore = _stop_on_sigterm()
    try:
        code = int(handler(args) or 0)
        return TERMINATED if terminated and code == INTERRUPTED else code
    except PPoGAError as exc:
        if args.debug:
            raise
        print(f"ppoga {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return exit_code_of(exc)
    except KeyboardInterrupt:
        print(f"ppoga {args.command}: interrupted", file=sys.stderr)
        return TERMINATED if terminated else INTERRUPTED
    finally:
        restore()


#: The exit code after SIGTERM (128 + 15), once the questions in flight are written.
TERMINATED = 143


def _stop_on_sigterm():
    """SIGTERM acts like Ctrl-C: `ppoga eval` stops starting questions, writes those in flight (their LM calls are
    paid), says how to resume and exits 143. A second SIGTERM while they finish is ignored (SIGKILL still stops it).
    Returns a list that holds the signal once it came, and the function that puts the old handler back."""
    import signal
    import threading

    came: list[int] = []
    if threading.current_thread() is not threading.main_thread():  # only the main thread can install handlers
        return came, lambda: None
    previous = signal.getsignal(signal.SIGTERM)

    def stop(signum: int, frame: object) -> None:
        came.append(signum)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    return came, lambda: signal.signal(signal.SIGTERM, previous)


def one_line(exc: BaseException) -> str:
    """An error's message as one line with single spaces (messages from libraries can span lines), through
    the outgoing-text rule (`ppoga_dspy.text.for_terminal`: no escapes, no bad Unicode, secrets redacted)."""
    from ppoga_dspy.text import for_terminal

    text = " ".join(for_terminal(str(exc)).split())
    return text or type(exc).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
