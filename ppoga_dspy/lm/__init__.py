"""Language models for ppoga-dspy: specs, settings, per-role LMs, the embedded offline model, a loopback server.

Importing this package is cheap: settings and spec parsing load pydantic only. `make_lm`,
`build_role_lms`, `EmbeddedEngine` and `serve_lm` are loaded on first use (they import DSPy / torch).

    from ppoga_dspy.lm import make_lm, build_role_lms, load_lm_settings
    lm = make_lm("openai/gpt-4o-mini")                          # key from OPENAI_API_KEY
    lm = make_lm("openai/qwen@http://127.0.0.1:8000/v1")        # any OpenAI-compatible server
    lm = make_lm("local/embedded")                              # offline demo model
    lms = build_role_lms(load_lm_settings(lm="openai/gpt-4o-mini"))  # {"planner": ..., "executor": ...}
"""

from __future__ import annotations

import importlib
from typing import Any

from ppoga_dspy.lm.errors import LMConfigError
from ppoga_dspy.lm.settings import (
    ENV_VARS,
    ROLES,
    LMSettings,
    add_lm_options,
    lm_settings_from_args,
    load_lm_settings,
)
from ppoga_dspy.lm.spec import ACCEPTED_FORMS, LMSpec, parse_spec

_LAZY = {
    "make_lm": "ppoga_dspy.lm.factory",
    "as_lm": "ppoga_dspy.lm.factory",
    "build_role_lms": "ppoga_dspy.lm.factory",
    "lm_spec_of": "ppoga_dspy.lm.factory",
    "cache_report": "ppoga_dspy.lm.factory",
    "with_adapter": "ppoga_dspy.lm.factory",
    "GuardedLM": "ppoga_dspy.lm.guard",
    "default_lm_notice": "ppoga_dspy.lm.factory",
    "EmbeddedEngine": "ppoga_dspy.lm.embedded",
    "CATALOGUE": "ppoga_dspy.lm.embedded",
    "DEFAULT_EMBEDDED_MODEL": "ppoga_dspy.lm.embedded",
    "load_embedded": "ppoga_dspy.lm.embedded",
    "serve_lm": "ppoga_dspy.lm.server",
    "LMServer": "ppoga_dspy.lm.server",
}

__all__ = [
    "ACCEPTED_FORMS",
    "CATALOGUE",
    "DEFAULT_EMBEDDED_MODEL",
    "ENV_VARS",
    "ROLES",
    "EmbeddedEngine",
    "GuardedLM",
    "LMConfigError",
    "LMServer",
    "LMSettings",
    "LMSpec",
    "add_lm_options",
    "as_lm",
    "build_role_lms",
    "cache_report",
    "default_lm_notice",
    "lm_settings_from_args",
    "lm_spec_of",
    "load_embedded",
    "load_lm_settings",
    "make_lm",
    "parse_spec",
    "serve_lm",
    "with_adapter",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ppoga_dspy.lm' has no attribute {name!r}")
