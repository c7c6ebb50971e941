"""The inference engine's own error: a model it cannot provide or a setting of it that is invalid.

It is an `LMConfigError` of the root tree (exit code 2), so a user who catches `ppoga_dspy.lm.LMConfigError`
around `make_lm("local/...")` catches it whichever room raised it, as before the engine had a room of its own.
"""

from __future__ import annotations

from ppoga_dspy.errors import LMConfigError


class InferenceConfigError(LMConfigError):
    """An embedded model is unknown or not installed, or an engine setting (dtype, threads, adapter) is invalid."""
