"""The `--lm` specs of the scripted planners (`oracle/gold-path`, `oracle/noisy:P`) and the planner each names.

eval, compile, tune and the app's checks all accept these specs in place of a model; one module reads
them so that every command builds the same planner from the same spec.
"""

from __future__ import annotations

from typing import Any

from ppoga_dspy.scripted.gold_path import oracle_lm
from ppoga_dspy.scripted.noisy_planner import noisy_lm

#: The `--lm` spec of the scripted perfect planner that follows each question's gold path.
ORACLE_LM = "oracle/gold-path"
#: `--lm oracle/noisy:P`: the gold-path planner that errs with probability P per decision.
NOISY_LM_PREFIX = "oracle/noisy:"


def noise_rate(spec: str | None) -> float | None:
    """P of an `oracle/noisy:P` spec, None for any other spec; a malformed P is a ConfigError.

    >>> noise_rate("oracle/noisy:0.2"), noise_rate("oracle/gold-path"), noise_rate("openai/gpt-4o")
    (0.2, None, None)
    """
    if not spec or not str(spec).startswith(NOISY_LM_PREFIX):
        return None
    from ppoga_dspy.errors import ConfigError

    text = str(spec)[len(NOISY_LM_PREFIX):]
    try:
        rate = float(text)
    except ValueError:
        raise ConfigError(f"--lm {spec}: P must be a number in [0, 1], e.g. oracle/noisy:0.2") from None
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(f"--lm {spec}: P must be in [0, 1], e.g. oracle/noisy:0.2")
    return rate


def is_scripted_spec(spec: str | None) -> bool:
    """True for the scripted planners that follow gold paths (`oracle/gold-path`, `oracle/noisy:P`)."""
    return spec == ORACLE_LM or noise_rate(spec) is not None


def scripted_lm_for_spec(spec: str, examples: list | None, *, seed: int = 0, kg: Any = None, **kwargs: Any):
    """The scripted planner a spec names (`oracle/gold-path`, `oracle/noisy:P`): one place for eval, compile, tune.

    Both follow the examples' gold paths, so they need the questions they will be asked.
    """
    from ppoga_dspy.errors import ConfigError

    rate = noise_rate(spec)
    if spec != ORACLE_LM and rate is None:
        raise ConfigError(f"--lm {spec} is not a scripted planner; use {ORACLE_LM} or {NOISY_LM_PREFIX}P")
    if not examples:
        raise ConfigError(f"--lm {spec} follows gold paths and needs a dataset (use it with eval, compile or tune)")
    if rate is None:
        return oracle_lm(examples, kg=kg, **kwargs)
    return noisy_lm(examples, rate, seed=seed, kg=kg, **kwargs)
