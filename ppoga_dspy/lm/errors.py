"""Errors of the LM layer: bad specs and settings, and an embedded model that cannot be loaded.

`LMConfigError` lives in the root tree (`ppoga_dspy/errors.py`) because the inference engine raises it too;
it is re-exported here, where LM code and users have always imported it.
"""

from __future__ import annotations

from ppoga_dspy.errors import LMConfigError, LMError

__all__ = ["LMConfigError", "LMUnavailableError"]


class LMUnavailableError(LMError):
    """A remote LM kept timing out or failing after the configured retries; the message names the server."""
