"""Checks of LM specs that need no network and no model: run before the KG is opened or a model loaded.

`parse_spec` (in `ppoga_dspy.lm.spec`) checks a spec's shape; it cannot know whether the provider
exists, and DSPy only finds out at the first call, after the KG is open and the first question
has started. LiteLLM, which DSPy calls, lists the providers it routes (`litellm.provider_list`,
plus any registered in `litellm.custom_provider_map`); with our own `local/` and the scripted
`oracle/gold-path`, that list decides up front.
"""

from __future__ import annotations

from collections.abc import Iterable

from ppoga_dspy.errors import ConfigError
from ppoga_dspy.scripted.specs import ORACLE_LM

#: Providers ppoga handles itself, never routed through LiteLLM.
OWN_PROVIDERS = ("local",)
_EXAMPLES = ("openai", "anthropic", "hosted_vllm", "ollama_chat", "gemini", "openrouter")


def known_providers() -> set[str]:
    """Provider prefixes a DSPy model string may start with (LiteLLM's list, read offline) and ours."""
    import litellm

    names = {getattr(p, "value", p) for p in litellm.provider_list}
    names |= {str(entry.get("provider")) for entry in (getattr(litellm, "custom_provider_map", None) or [])
              if isinstance(entry, dict) and entry.get("provider")}
    return {str(n) for n in names} | set(OWN_PROVIDERS)


def check_lm_spec(spec: str | None, *, flag: str = "--lm") -> None:
    """Raise ConfigError (one line) when `spec`'s provider is neither LiteLLM's nor ours; None passes."""
    from ppoga_dspy.scripted.specs import is_scripted_spec

    if spec is None or spec == "none" or is_scripted_spec(spec):  # the no-model baseline, the scripted planners
        return
    from ppoga_dspy.lm.spec import parse_spec

    provider = parse_spec(spec).provider
    if provider in OWN_PROVIDERS:
        return
    if provider not in known_providers():
        raise ConfigError(
            f"{flag} {spec}: unknown provider {provider!r}; use a LiteLLM provider such as "
            f"{', '.join(_EXAMPLES)} (see https://docs.litellm.ai/docs/providers), local/embedded, or {ORACLE_LM}"
        )


def check_lm_settings(lm_settings: object, extra: Iterable[tuple[str, str | None]] = ()) -> None:
    """Check the planner's and executor's specs of an LMSettings (and any (flag, spec) in `extra`)."""
    check_lm_spec(getattr(lm_settings, "lm", None), flag="--lm")
    check_lm_spec(getattr(lm_settings, "executor_lm", None), flag="--executor-lm")
    for flag, spec in extra:
        check_lm_spec(spec, flag=flag)
