"""One error tree for everything ppoga-dspy raises on purpose, and the exit code of each kind.

    PPoGAError                 1  anything else the library refuses to do
    ├── ConfigError            2  a flag, setting, spec or input the user must change (bad id, unknown name)
    ├── DataError              3  a dataset, run file or KG file that cannot be read
    ├── KGError                4  the knowledge graph failed (unreachable, timed out, rejected a query)
    ├── LMError                5  the language model failed (unreachable, timed out, refused)
    │   └── LMConfigError      2  (also a ConfigError) a bad LM spec or setting, or a model that cannot be provided
    └── ArtifactError          6  a compiled artifact that cannot be loaded or applied

The CLI prints `ppoga CMD: error: <message>` (one line; a traceback only with --debug) and exits
with the class's `exit_code`, so scripts can tell "fix your flags" from "the endpoint is down".
`ppoga eval` exits with `QUESTIONS_FAILED` when the run completed but some questions failed.

This module imports nothing, so every layer (`kg` and `signatures` included) may use it.
"""

from __future__ import annotations

#: `ppoga eval` finished and wrote every row, but at least one question failed (see the run file).
QUESTIONS_FAILED = 7
#: The user interrupted the command (Ctrl-C); what was finished is saved.
INTERRUPTED = 130


class PPoGAError(Exception):
    """Base of the errors ppoga-dspy raises for bad configuration or input; the message says what to do."""

    exit_code = 1


class ConfigError(PPoGAError, ValueError):
    """A setting, spec, option or input value is invalid; the message names it and the accepted forms."""

    exit_code = 2


class DataError(PPoGAError):
    """A dataset, run file or KG file cannot be read as what it claims to be; the message names the file."""

    exit_code = 3


class KGError(PPoGAError):
    """Base of every error the KG layer raises; catch this to treat any KG failure as one kind."""

    exit_code = 4


class LMError(PPoGAError):
    """The language model could not be called (server down, timeout, bad key, quota); check the LM settings."""

    exit_code = 5


class ArtifactError(PPoGAError):
    """A compiled artifact is missing, unreadable, or does not fit the program; the message says which."""

    exit_code = 6


class LMConfigError(ConfigError, LMError):
    """An LM spec, option or setting is invalid, or its model cannot be provided; the message says what to do.

    Defined here, not in `lm/`, because two rooms raise it: `lm/` (specs, settings) and `inference/` (the
    in-process engine: an unknown model name, a bad dtype, a missing model package), and the user must catch
    one type whichever raised it. Exit code 2: ConfigError comes first in its bases.
    """


def exit_code_of(exc: BaseException) -> int:
    """The process exit code for an error that reached the CLI."""
    return int(getattr(exc, "exit_code", 1)) if isinstance(exc, PPoGAError) else 1
