"""LM settings: which model each role uses, and how it is called. Cheap to import (no DSPy, no torch).

Sources, highest precedence first:

1. command-line flags (`add_lm_options`: `--lm`, `--executor-lm`, `--temperature`, `--max-tokens`,
   `--lm-timeout`, `--lm-retries`, `--no-cache`), or keyword arguments of `load_lm_settings`;
2. environment variables (`ENV_VARS`: `PPOGA_LM`, `PPOGA_EXECUTOR_LM`, `PPOGA_LM_TEMPERATURE`, ...,
   `PPOGA_LM_TIMEOUT`; `PPOGA_NO_CACHE=1` is the same as `PPOGA_LM_CACHE=false`);
3. the `[lm]` table of a TOML file: `--config FILE`, else `$PPOGA_CONFIG`, else `ppoga.toml` in the
   working directory when it exists;
4. the defaults below (no `lm`: the embedded offline demo model).

Example `ppoga.toml`:

    [lm]
    lm = "openai/gpt-4o-mini"                          # the planner (and executor unless set)
    executor_lm = "openai/qwen@http://127.0.0.1:8000/v1"
    temperature = 0.0
    max_tokens = 1024
    timeout = 120          # seconds per attempt of a remote call
    num_retries = 3        # retries of a transient failure (with backoff), then the question fails
    cache = true           # false: always ask the model (same as --no-cache)
    api_key_env = "MY_OPENAI_KEY"                     # read the key from this variable
    structured = "auto"    # remote models: the backend's constrained decoding for choices (lm/structured.py)

API keys never live in these settings or files: `api_key_env` names the environment variable that
holds the key; by default each provider's own variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) is used.
"""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ppoga_dspy.lm.errors import LMConfigError
from ppoga_dspy.lm.spec import check_base_url, parse_spec

ROLES = ("planner", "executor")

#: Environment variable of each setting.
ENV_VARS: dict[str, str] = {
    "lm": "PPOGA_LM",
    "executor_lm": "PPOGA_EXECUTOR_LM",
    "temperature": "PPOGA_LM_TEMPERATURE",
    "max_tokens": "PPOGA_LM_MAX_TOKENS",
    "api_base": "PPOGA_LM_API_BASE",
    "api_key_env": "PPOGA_LM_API_KEY_ENV",
    "cache": "PPOGA_LM_CACHE",
    "num_retries": "PPOGA_LM_NUM_RETRIES",
    "timeout": "PPOGA_LM_TIMEOUT",
    "constrain": "PPOGA_EMBEDDED_CONSTRAIN",  # read by the engine too (inference/options.py CONSTRAIN_ENV)
    "structured": "PPOGA_LM_STRUCTURED",
}
#: `PPOGA_NO_CACHE=1` (or true/yes/on) turns the response cache off, like `--no-cache`.
NO_CACHE_ENV = "PPOGA_NO_CACHE"
_TRUE = {"1", "true", "yes", "on"}
CONFIG_ENV = "PPOGA_CONFIG"
DEFAULT_CONFIG_FILE = "ppoga.toml"
TOML_TABLE = "lm"

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The TOML file the settings being built read; set by `load_lm_settings` for one construction.
_config_file: ContextVar[Path | None] = ContextVar("ppoga_lm_config_file", default=None)


class LMSettings(BaseSettings):
    """Which LM each role uses and how it is called; `build_role_lms` turns these into `dspy.LM`s."""

    model_config = SettingsConfigDict(extra="forbid", validate_default=True, frozen=True)

    lm: str | None = Field(None, description="LM spec of the planner (and executor); None: embedded demo model")
    executor_lm: str | None = Field(None, description="LM spec of the executor; None: the planner's LM")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="sampling temperature (0: greedy)")
    max_tokens: int | None = Field(None, gt=0, description="reply budget; None: 256 embedded, 1024 remote")
    api_base: str | None = Field(None, description="base URL of an OpenAI-compatible server, for both roles")
    api_key_env: str | None = Field(None, description="environment variable holding the API key")
    cache: bool = Field(True, description="reuse cached replies (keyed by endpoint and engine)")
    num_retries: int = Field(3, ge=0, description="retries of a transient failure (timeout, 5xx), with backoff")
    timeout: float = Field(120.0, gt=0, allow_inf_nan=False, description="seconds per attempt of a remote LM call")
    constrain: bool = Field(True, description="embedded model: decode choices and plans under constraints, so a "
                            "relation/entity choice names only candidates and a decision is one of the four "
                            "(inference/constraints.py); no effect on remote models")

    structured: str = Field("auto", description="remote models: the backend's own constrained decoding for choices "
                            "(auto: where the provider has it, else salvage; provider: require it; off: salvage; or a "
                            "wire form: openai, vllm, ollama, llamacpp; lm/structured.py)")

    @field_validator("structured")
    @classmethod
    def _check_structured(cls, value: str) -> str:
        from ppoga_dspy.lm.structured import check_mode

        return check_mode(value)

    @field_validator("lm", "executor_lm")
    @classmethod
    def _check_spec(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if value.strip() == "none":  # the no-model baseline (lm/no_model.py), built by app.session.role_lms_for
            return "none"
        parse_spec(value)  # raises LMConfigError with the accepted forms
        return value.strip()

    @field_validator("api_base")
    @classmethod
    def _check_base(cls, value: str | None) -> str | None:
        return check_base_url(value) if value else None

    @field_validator("api_key_env")
    @classmethod
    def _check_env_name(cls, value: str | None) -> str | None:
        if value and not _ENV_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not an environment variable name (write the variable's name, not the key)")
        return value or None

    @property
    def planner_spec(self) -> str | None:
        return self.lm

    @property
    def executor_spec(self) -> str | None:
        return self.executor_lm or self.lm

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Earlier sources win: CLI/keywords, then our environment variables, then the TOML table.
        return init_settings, _EnvSource(settings_cls), _TomlSource(settings_cls, _config_file.get())


class _EnvSource(PydanticBaseSettingsSource):
    """Reads `ENV_VARS`; an empty variable counts as unset."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        value = os.environ.get(ENV_VARS[field_name], "").strip()
        return (value or None), field_name, False

    def __call__(self) -> dict[str, Any]:
        found = {}
        for name in ENV_VARS:
            value, _, _ = self.get_field_value(self.settings_cls.model_fields[name], name)
            if value is not None:
                found[name] = value
        if os.environ.get(NO_CACHE_ENV, "").strip().lower() in _TRUE:
            found["cache"] = False
        return found


def default_config_file() -> Path | None:
    """`$PPOGA_CONFIG` if set, else `./ppoga.toml` when it exists, else None."""
    named = os.environ.get(CONFIG_ENV, "").strip()
    if named:
        return Path(named)
    local = Path.cwd() / DEFAULT_CONFIG_FILE
    return local if local.is_file() else None


def read_lm_table(path: Path) -> dict[str, Any]:
    """The `[lm]` table of TOML file `path` ({} when the file has none)."""
    from ppoga_dspy.text import clean_tree

    if path.exists() and not path.is_file():  # a directory, device or FIFO: never read
        raise LMConfigError(f"config file {path} is not a regular file; fix --config / ${CONFIG_ENV}")
    try:
        with path.open("rb") as handle:
            document = clean_tree(tomllib.loads(handle.read(1_000_000).decode("utf-8-sig")))  # BOM dropped
    except FileNotFoundError as exc:
        raise LMConfigError(f"config file {path} does not exist; fix --config / ${CONFIG_ENV} or create it") from exc
    except UnicodeDecodeError as exc:
        raise LMConfigError(f"cannot read config file {path}: byte {exc.start} is not UTF-8 (TOML is UTF-8)") from None
    except (OSError, tomllib.TOMLDecodeError, RecursionError, ValueError) as exc:
        raise LMConfigError(f"cannot read config file {path}: {exc}") from exc
    table = document.get(TOML_TABLE, {})
    if not isinstance(table, dict):
        raise LMConfigError(f"{path}: '{TOML_TABLE}' must be a table ([{TOML_TABLE}]), not a {type(table).__name__}")
    return table


class _TomlSource(PydanticBaseSettingsSource):
    """The `[lm]` table of the config file (explicit, or the default one when present)."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self.path = path if path is not None else default_config_file()
        self.table = read_lm_table(self.path) if self.path is not None else {}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.table.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.table)  # unknown keys reach the model and fail there (extra="forbid")


def _describe(error: ValidationError, config: Path | None) -> str:
    problems = []
    for item in error.errors():
        name = ".".join(str(p) for p in item["loc"]) or "settings"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = f"unknown setting; known: {', '.join(LMSettings.model_fields)}"
        problems.append(f"{name}: {message}")
    where = "command line, PPOGA_* environment variables" + (f" or [{TOML_TABLE}] of {config}" if config else "")
    return f"invalid LM settings ({where}): " + "; ".join(problems)


def load_lm_settings(*, config: str | Path | None = None, **cli: Any) -> LMSettings:
    """Settings from `cli` values (None = not given) over the environment over the TOML file over defaults.

    `config` is the TOML file (`--config`); without it `$PPOGA_CONFIG` or `./ppoga.toml` is read if present.
    """
    given = {name: value for name, value in cli.items() if value is not None}
    path = Path(config) if config else None
    token = _config_file.set(path)
    try:
        return LMSettings(**given)
    except ValidationError as exc:
        cause = next((e.get("ctx", {}).get("error") for e in exc.errors() if e.get("ctx", {}).get("error")), None)
        if isinstance(cause, LMConfigError):
            raise cause from None
        raise LMConfigError(_describe(exc, path or default_config_file())) from None
    finally:
        _config_file.reset(token)


def add_lm_options(parser: argparse.ArgumentParser) -> None:
    """Add `--lm`, `--executor-lm`, `--config`, `--temperature`, `--max-tokens`, `--lm-timeout`, `--lm-retries`,
    `--no-cache` (all default to "not given")."""
    group = parser.add_argument_group(
        "language model",
        "The LM of each role. Without --lm (or PPOGA_LM, or [lm] lm in ppoga.toml) a small embedded demo "
        "model runs offline; its answers are weak. SPEC: PROVIDER/MODEL (openai/gpt-4o-mini, "
        "anthropic/claude-3-5-haiku-latest, ollama_chat/llama3.1, ...), PROVIDER/MODEL@BASE_URL for an "
        "OpenAI-compatible server, or local/embedded. Keys come from the provider's usual variable.",
    )
    group.add_argument("--lm", metavar="SPEC", default=None, help="LM of the planner (and executor) [PPOGA_LM]")
    group.add_argument(
        "--executor-lm", metavar="SPEC", default=None, help="LM of the executor, if different [PPOGA_EXECUTOR_LM]"
    )
    if "--config" not in parser._option_string_actions:  # another option group may already offer it
        group.add_argument(
            "--config",
            metavar="FILE",
            default=None,
            help=f"TOML settings file [{CONFIG_ENV}; default ./{DEFAULT_CONFIG_FILE} if present]",
        )
    group.add_argument("--temperature", type=float, default=None, help="sampling temperature [default 0.0]")
    group.add_argument(
        "--max-tokens", type=int, default=None, help="reply budget in tokens [default 256 embedded, 1024 remote]"
    )
    group.add_argument(
        "--lm-timeout", type=float, default=None, metavar="SECONDS",
        help="seconds each attempt of a remote LM call may wait [PPOGA_LM_TIMEOUT; default 120]",
    )
    group.add_argument(
        "--lm-retries", type=int, default=None, metavar="N",
        help="retries of a timed-out or failing LM call, with backoff; then the question fails "
        "[PPOGA_LM_NUM_RETRIES; default 3]",
    )
    group.add_argument(
        "--no-constrain", dest="no_constrain", action="store_true", default=None,
        help="embedded model: decode freely instead of constraining choices to the candidates "
        "[PPOGA_EMBEDDED_CONSTRAIN=0]",
    )
    group.add_argument(
        "--structured", default=None, metavar="MODE",
        help="hosted/served models: constrain choices with the backend's own structured outputs: auto (default), "
        "provider, off, or a wire form (openai, vllm, ollama, llamacpp) [PPOGA_LM_STRUCTURED]",
    )
    group.add_argument(
        "--no-cache", dest="no_cache", action="store_true", default=None,
        help="always ask the model; never reply from the response cache [PPOGA_NO_CACHE=1]",
    )


def lm_settings_from_args(args: argparse.Namespace, **extra: Any) -> LMSettings:
    """LMSettings from a namespace parsed with `add_lm_options` (plus `extra` keyword settings)."""
    cli: dict[str, Any] = {
        "lm": getattr(args, "lm", None),
        "executor_lm": getattr(args, "executor_lm", None),
        "temperature": getattr(args, "temperature", None),
        "max_tokens": getattr(args, "max_tokens", None),
        "timeout": getattr(args, "lm_timeout", None),
        "num_retries": getattr(args, "lm_retries", None),
        "cache": False if getattr(args, "no_cache", None) else None,
        "constrain": False if getattr(args, "no_constrain", None) else None,
        "structured": getattr(args, "structured", None),
    }
    cli.update(extra)
    return load_lm_settings(config=getattr(args, "config", None), **cli)


def settings_summary(settings: LMSettings) -> Mapping[str, Any]:
    """The settings as a plain dict, for logs and artifacts (holds no secret: keys are never settings)."""
    return settings.model_dump()
