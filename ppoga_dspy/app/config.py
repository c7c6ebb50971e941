"""Program settings from one place: flags, then `PPOGA_*` environment variables, then `ppoga.toml`.

The `[lm]` table is read by `lm/settings.py`; this module reads everything else a flag sets, so a
study or an evaluation can be described in the file the team shares instead of in long command lines:

    [kg]
    kg = "stores/wc2014"            # --kg             PPOGA_KG
    dialect = "irn"                 # --dialect        PPOGA_DIALECT
    ontology = "../grailqa-ontology"  # --ontology     PPOGA_ONTOLOGY
    timeout = 30                    # --timeout        PPOGA_KG_TIMEOUT
    retries = 3                     # --retries        PPOGA_KG_RETRIES
    breaker = 3                     # --breaker        PPOGA_KG_BREAKER

    [program]
    program = "artifacts/gpt-4o-mini.json"  # --program  PPOGA_PROGRAM
    stages = "fused"                        # --stages   PPOGA_STAGES
    tracing = "mlflow:file:./mlruns"        # --tracing  PPOGA_TRACING (app/tracing.py)
    foreign_demos = "unnamed"               # --foreign-demos  PPOGA_FOREIGN_DEMOS

    [thresholds]                    # --set NAME=VALUE  PPOGA_SET="max_replans=0,use_prediction=false"
    max_replans = 0

Thresholds merge: the file's, then the environment's, then each `--set` (the last word wins per name).
The file is the one `--config` names, else `$PPOGA_CONFIG`, else `./ppoga.toml` when present (the same
file the `[lm]` table comes from).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from ppoga_dspy.errors import ConfigError

#: Setting -> (TOML table, environment variable).
SOURCES: dict[str, tuple[str, str]] = {
    "kg": ("kg", "PPOGA_KG"),
    "dialect": ("kg", "PPOGA_DIALECT"),
    "ontology": ("kg", "PPOGA_ONTOLOGY"),
    "timeout": ("kg", "PPOGA_KG_TIMEOUT"),
    "retries": ("kg", "PPOGA_KG_RETRIES"),
    "breaker": ("kg", "PPOGA_KG_BREAKER"),
    "program": ("program", "PPOGA_PROGRAM"),
    "stages": ("program", "PPOGA_STAGES"),
    "tracing": ("program", "PPOGA_TRACING"),
    "foreign_demos": ("program", "PPOGA_FOREIGN_DEMOS"),
}
THRESHOLDS_TABLE = "thresholds"
THRESHOLDS_ENV = "PPOGA_SET"
#: Tables of ppoga.toml this module owns (`lm` belongs to lm/settings.py).
TABLES = ("kg", "program", THRESHOLDS_TABLE)


def config_file(config: str | Path | None) -> Path | None:
    """The TOML file: `config` if given, else `$PPOGA_CONFIG`, else `./ppoga.toml` when it exists."""
    from ppoga_dspy.lm.settings import default_config_file

    return Path(config) if config else default_config_file()


#: Every table a config file may hold: `[lm]` (lm/settings.py) and this module's.
ALL_TABLES = ("lm", *TABLES)


def read_tables(path: Path | None) -> dict[str, dict[str, Any]]:
    """The `[kg]`, `[program]` and `[thresholds]` tables of the file (each {} when absent).

    Unknown tables, top-level keys and keys are refused, naming the known ones: a misspelt `[threshold]` was
    silently ignored and the run used the defaults. The file's thresholds are checked here, so a bad one is
    reported as the file's (not as a `--set`)."""
    if path is None:
        return {name: {} for name in TABLES}
    try:
        with path.open("rb") as handle:
            document = tomllib.loads(handle.read(1_000_000).decode("utf-8-sig"))  # a BOM is not a TOML statement
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; fix --config / $PPOGA_CONFIG or create it") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read config file {path}: byte {exc.start} is not UTF-8 (TOML is UTF-8)") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    for name, value in document.items():
        if name not in ALL_TABLES:
            what = f"unknown table [{name}]" if isinstance(value, dict) else f"unknown top-level key '{name}'"
            raise ConfigError(f"{path}: {what}; a config file holds the tables "
                              f"{', '.join(f'[{t}]' for t in ALL_TABLES)} (settings go inside them)")
    tables = {}
    for name in TABLES:
        table = document.get(name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: '{name}' must be a table ([{name}]), not a {type(table).__name__}")
        if name != THRESHOLDS_TABLE:
            unknown = sorted(set(table) - {key for key, (owner, _) in SOURCES.items() if owner == name})
            if unknown:
                known = ", ".join(key for key, (owner, _) in SOURCES.items() if owner == name)
                raise ConfigError(f"{path}: [{name}] {unknown[0]}: unknown setting; known: {known}")
        tables[name] = table
    _check_thresholds(_as_text(tables[THRESHOLDS_TABLE]), f"{path}: [{THRESHOLDS_TABLE}]")
    return tables


def _as_text(table: dict[str, Any]) -> dict[str, str]:
    return {name: str(value).lower() if isinstance(value, bool) else str(value) for name, value in table.items()}


def _check_thresholds(values: dict[str, str], where: str) -> None:
    """Each threshold name and value, checked alone, with `where` (the file's table, or PPOGA_SET) in the error."""
    from ppoga_dspy.app.session import thresholds_with

    for name, value in values.items():
        try:
            thresholds_with({name: value})
        except ConfigError as exc:
            reason = str(exc).split(": ", 1)[-1] if ": " in str(exc) else str(exc)
            raise ConfigError(f"{where} {name} = {value!r}: {reason}") from None


def _env_overrides(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"{THRESHOLDS_ENV}={text!r}: write NAME=VALUE[,NAME=VALUE...], e.g. max_replans=0")
        out[name.strip()] = value.strip()
    return out


def resolve(given: dict[str, Any], overrides: dict[str, str], *, config: str | Path | None = None) -> dict[str, Any]:
    """ProgramSettings keywords: each setting from `given` (None: not given), else the environment, else the file.

    `overrides` (the `--set` items) are merged over the file's and the environment's thresholds.
    """
    tables = read_tables(config_file(config))
    out: dict[str, Any] = {}
    for name, (table, variable) in SOURCES.items():
        value = given.get(name)
        if value is None:
            value = os.environ.get(variable, "").strip() or None
        if value is None:
            value = tables[table].get(name)
        if value is not None:
            out[name] = value
    merged = _as_text(tables[THRESHOLDS_TABLE])
    from_env = _env_overrides(os.environ.get(THRESHOLDS_ENV, ""))
    _check_thresholds(from_env, THRESHOLDS_ENV)
    merged.update(from_env)
    merged.update(overrides)
    out["overrides"] = merged
    return out
