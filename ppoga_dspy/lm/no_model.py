"""`--lm none`: the program with no model at all, the baseline that says what a model adds.

Every predictor call is answered by nobody: `QuestionRun.call` sees a role LM marked `no_model`,
records the stage with the error "no model" and returns None, without calling anything or counting an
LM call. The program's own fallbacks then act, exactly as they do for an unusable reply: a one-step
plan, the embedding's best-ranked relation and entities, the decision derived from the observation
(proceed when something was found), and the last step's entities as the answer.
"""

from __future__ import annotations

from typing import Any

from ppoga_dspy.lm.errors import LMConfigError

#: The `--lm` spec of the no-model baseline.
NO_MODEL_SPEC = "none"


class NoModel:
    """A role LM that is no model. Calling it directly is a configuration error (only QuestionRun knows it)."""

    no_model = True
    model = NO_MODEL_SPEC
    kwargs: dict[str, Any] = {}

    def __deepcopy__(self, memo: dict) -> NoModel:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise LMConfigError(
            "--lm none runs the program without a model; it cannot answer requests of an optimizer's own "
            "(MIPROv2, GEPA): pick a real --lm for those"
        )

    def __repr__(self) -> str:
        return "NoModel()"


def is_no_model(lm: Any) -> bool:
    """True for the `--lm none` stand-in."""
    return getattr(lm, "no_model", False) is True
