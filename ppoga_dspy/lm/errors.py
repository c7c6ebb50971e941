"""Errors of the LM layer: bad specs and settings, and an embedded model that cannot be loaded."""

from __future__ import annotations

from ppoga_dspy.errors import ConfigError, LMError


class LMConfigError(ConfigError, LMError):
    """An LM spec, option or setting is invalid, or its model cannot be provided; the message says what to do."""


class LMUnavailableError(LMError):
    """A remote LM kept timing out or failing after the configured retries; the message names the server."""
