"""Spec in, `dspy.LM` out, in one place: `make_lm` for one model, `build_role_lms` for the program's roles.

Every LM built here has `temperature` and `max_tokens` set (DSPy leaves both to the server when
None, which makes runs depend on server defaults), and reads its API key from the environment only.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from ppoga_dspy.lm.errors import LMConfigError
from ppoga_dspy.lm.settings import ROLES, LMSettings, load_lm_settings
from ppoga_dspy.lm.spec import ACCEPTED_FORMS, EMBEDDED_ALIAS, LOCAL_PROVIDER, LMSpec, check_base_url, parse_spec

if TYPE_CHECKING:
    import dspy

DEFAULT_TEMPERATURE = 0.0
#: Seconds one remote LM attempt may wait for the server (the read timeout); retries come on top.
DEFAULT_LM_TIMEOUT = 120.0
#: Retries of a transient remote failure (timeout, connection error, 429, 5xx), with backoff.
DEFAULT_LM_RETRIES = 3
#: Reply budget of remote models when none is set; the embedded model uses DEFAULT_EMBEDDED_MAX_TOKENS.
DEFAULT_REMOTE_MAX_TOKENS = 1024
# OpenAI reasoning models (o1/o3/o4, gpt-5) accept only temperature 1.0 and a budget of at least 16000.
REASONING_TEMPERATURE = 1.0
REASONING_MIN_MAX_TOKENS = 16000

# A loopback OpenAI-compatible server (vLLM, llama.cpp, ours) usually wants no key, but the client
# still needs one to send. This placeholder is used only when an api_base is given and no key is found.
PLACEHOLDER_API_KEY = "not-needed"

# The variable each common provider reads its key from (what DSPy / the provider SDKs read).
PROVIDER_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "hosted_vllm": "HOSTED_VLLM_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "fireworks_ai": "FIREWORKS_API_KEY",
}

_notice_shown = False


def default_lm_notice() -> str:
    """The one-line notice printed when no LM is configured and the embedded demo model is used."""
    return (
        "ppoga: no LM configured, using the embedded demo model Gemma 3 270M (local/embedded), tiny and offline; "
        "answers will be weak. Set a real one with --lm openai/gpt-4o-mini or PPOGA_LM=openai/gpt-4o-mini."
    )


def _show_default_notice() -> None:
    global _notice_shown
    if not _notice_shown:
        _notice_shown = True
        print(default_lm_notice(), file=sys.stderr)


def _is_reasoning_model(model_string: str) -> bool:
    from dspy.clients.lm import _is_openai_reasoning_model

    return _is_openai_reasoning_model(model_string)


def _resolve_key(spec: LMSpec, api_base: str | None, api_key: str | None, api_key_env: str | None) -> str | None:
    if api_key:
        return api_key
    if api_key_env:
        value = os.environ.get(api_key_env, "").strip()
        if not value:
            raise LMConfigError(
                f"api_key_env names ${api_key_env}, which is not set or empty; export it with the API key "
                f"for {spec.model_string}, or drop api_key_env to use the provider's usual variable"
            )
        return value
    usual = PROVIDER_KEY_ENV.get(spec.provider)
    if api_base and not (usual and os.environ.get(usual)):
        return PLACEHOLDER_API_KEY
    return None  # DSPy reads the provider's own variable (and says which one is missing)


def make_lm(
    spec: str | dspy.BaseLM | None = None,
    *,
    api_base: str | None = None,
    api_key: str | None = None,
    api_key_env: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    cache: bool | None = None,
    num_retries: int | None = None,
    timeout: float | None = None,
    constrain: bool | None = None,
    adapter: str | None = None,
    structured: str | None = None,
    **kwargs: Any,
) -> dspy.LM:
    """Build a `dspy.LM` from a spec (see `ppoga_dspy.lm.spec` for the syntax) or pass an LM through.

    - `spec` None: the embedded demo model, with a one-line notice on stderr (once per process).
    - `spec` a DSPy LM: returned as is, or as `lm.copy(...)` when overrides are given.
    - `api_base` (or `@URL` in the spec): an OpenAI-compatible server; a placeholder key is sent when
      no key is found, as loopback servers usually need none.
    - `api_key` / `api_key_env`: the key itself, or the environment variable holding it; by default
      the provider's usual variable (OPENAI_API_KEY, ...) is read by DSPy.
    - `temperature` (default 0.0) and `max_tokens` (default 256 embedded, 1024 remote; 1.0 and 16000
      for OpenAI reasoning models) are always set. Other keywords go to `dspy.LM` (e.g. `engine="litellm"`).
    - `timeout` (default 120 s) bounds each attempt of a remote call; `num_retries` (default 3 remote, 0
      embedded) transient failures are retried with backoff, then the error propagates (see `GuardedLM`).
    - `cache` (default True): replies are cached by endpoint, engine and request; bad replies never are.
    - `constrain` (embedded model only; default $PPOGA_EMBEDDED_CONSTRAIN, on): decode-time constraints on
      choices, decisions and plans (`inference/constraints.py`). Ignored for remote models, which are validated
      and salvaged after the reply instead.
    - `adapter` (embedded model only): a LoRA adapter folder merged into the weights (`inference/lora.py`).
    - `structured` (remote models; default "auto"): the backend's own constrained decoding for the program's
      choices (`lm/structured.py`); the chosen wire form is kept as `lm.structured_form` (None: salvaged).

    Raises LMConfigError for an invalid spec or option.
    """
    import dspy

    overrides = {
        k: v
        for k, v in dict(
            temperature=temperature, max_tokens=max_tokens, cache=cache, num_retries=num_retries, timeout=timeout
        ).items()
        if v is not None
    }
    if isinstance(spec, dspy.BaseLM):
        if api_base or api_key or api_key_env:
            raise LMConfigError("api_base/api_key apply to a spec string; build a new LM instead of overriding them")
        if "timeout" in overrides and not isinstance(getattr(spec, "engine", "auto"), str):
            overrides.pop("timeout")  # a custom (in-process) engine owns its connection and takes no timeout
        return spec.copy(**overrides, **kwargs) if overrides or kwargs else spec
    if spec is None:
        _show_default_notice()
        spec = f"{LOCAL_PROVIDER}/{EMBEDDED_ALIAS}"
    parsed = parse_spec(spec)
    if parsed.is_local:
        if api_base or api_key or api_key_env:
            raise LMConfigError(
                f"{spec!r} is the embedded in-process model; it takes no api_base/api_key. "
                "For a model behind an OpenAI-compatible server write openai/NAME@http://HOST:PORT/v1"
            )
        return _make_embedded(parsed, overrides, kwargs, constrain=constrain, adapter=adapter)
    if adapter is not None:
        raise LMConfigError(f"a LoRA adapter applies to the embedded model only, not to {spec!r}")
    if api_base:
        api_base = check_base_url(api_base, spec=spec)
        if parsed.api_base and parsed.api_base != api_base:
            raise LMConfigError(f"{spec!r} names base URL {parsed.api_base} but api_base={api_base} was also given")
    base = parsed.api_base or api_base
    reasoning = _is_reasoning_model(parsed.model_string)
    settings: dict[str, Any] = {
        "temperature": overrides.get("temperature", REASONING_TEMPERATURE if reasoning else DEFAULT_TEMPERATURE),
        "max_tokens": overrides.get("max_tokens", REASONING_MIN_MAX_TOKENS if reasoning else DEFAULT_REMOTE_MAX_TOKENS),
        "cache": overrides.get("cache", True),
        "num_retries": overrides.get("num_retries", DEFAULT_LM_RETRIES),
        "timeout": _check_timeout(overrides.get("timeout", DEFAULT_LM_TIMEOUT)),
    }
    key = _resolve_key(parsed, base, api_key, api_key_env)
    if base:
        settings["api_base"] = base
    if key:
        settings["api_key"] = key
    from ppoga_dspy.lm.structured import wire_form

    form = wire_form(parsed.model_string, structured or "auto")  # checked before the LM is built
    lm = _construct(parsed.model_string, {**settings, **kwargs})
    lm.structured_form = form
    return lm


def as_lm(value: Any, *, what: str = "lm") -> Any:
    """An LM from whatever a caller passed where an LM is taken: None stays None, a model string is built by
    `make_lm` (with this package's defaults), an LM object is returned as it is.

    So `PPoGA(kg, role_lms={"planner": "openai/gpt-4o-mini"})` or `compile_program(..., teacher_lm="openai/...")`
    work as they read. Scripted specs (`oracle/...`) need the examples they follow and are built elsewhere.
    """
    if value is None or not isinstance(value, str):
        return value
    if value.startswith("oracle/"):
        raise LMConfigError(f"{what} {value!r} is a scripted planner that follows a dataset's gold paths; build it "
                            "with ppoga_dspy.scripted.specs.scripted_lm_for_spec(spec, examples)")
    return make_lm(value)


def _make_embedded(
    parsed: LMSpec, overrides: dict[str, Any], kwargs: dict[str, Any], *, constrain: bool | None = None,
    adapter: str | None = None,
) -> dspy.LM:
    from ppoga_dspy.lm.embedded import DEFAULT_EMBEDDED_MAX_TOKENS, EmbeddedEngine

    engine = kwargs.pop("engine", None) or EmbeddedEngine(parsed.model, constrain=constrain, adapter=adapter)
    settings = {
        "temperature": overrides.get("temperature", DEFAULT_TEMPERATURE),
        "max_tokens": overrides.get("max_tokens", DEFAULT_EMBEDDED_MAX_TOKENS),
        "cache": overrides.get("cache", True),
        # Local failures (a prompt over the context window) are not transient; retrying repeats them.
        "num_retries": overrides.get("num_retries", 0),
    }
    # The resolved name (local/smollm2-135m, not local/embedded) keys DSPy's cache: two models never share entries.
    return _construct(engine.model_string, {**settings, **kwargs, "engine": engine})


def _check_timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise LMConfigError(f"LM timeout must be a positive number of seconds, got {value!r} (e.g. --lm-timeout 60)")
    return float(value)


def _construct(model: str, settings: dict[str, Any]) -> dspy.LM:
    from dspy.utils.exceptions import LMConfigurationError

    from ppoga_dspy.lm.guard import GuardedLM

    try:
        return GuardedLM(model, **settings)
    except (LMConfigurationError, ValueError, TypeError) as exc:
        raise LMConfigError(f"cannot build an LM for {model!r}: {exc}. Accepted spec forms: {ACCEPTED_FORMS}") from exc


def build_role_lms(settings: LMSettings | None = None) -> dict[str, dspy.LM]:
    """One LM per role ("planner", "executor"); the same object when both roles name the same spec.

    `settings` None reads them from the environment and the config file (`load_lm_settings()`).
    """
    settings = settings if settings is not None else load_lm_settings()
    common = {
        "api_base": settings.api_base,
        "api_key_env": settings.api_key_env,
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "cache": settings.cache,
        "num_retries": settings.num_retries,
        "timeout": settings.timeout,
        "structured": settings.structured,
    }
    built: dict[str | None, dspy.LM] = {}

    def lm_for(spec: str | None) -> dspy.LM:
        if spec not in built:
            parsed = parse_spec(spec) if spec is not None else None
            options = dict(common)
            if parsed is None or parsed.is_local:  # the embedded model takes no connection settings
                options.pop("api_base")
                options.pop("api_key_env")
                options.pop("timeout")
                options.pop("structured")
                options["constrain"] = settings.constrain
            elif parsed.api_base:  # a spec's own @URL wins over the shared api_base setting
                options.pop("api_base")
            built[spec] = make_lm(spec, **options)
        return built[spec]

    planner = lm_for(settings.planner_spec)
    executor = lm_for(settings.executor_spec)
    return dict(zip(ROLES, (planner, executor), strict=True))


def with_adapter(lm: Any, adapter: str | None) -> Any:
    """`lm` on the embedded model with the LoRA adapter `adapter` merged in; any other LM is returned as it is.

    For an artifact made by `--optimizer finetune`: its adapter belongs to the embedded model it was
    trained on. The new engine's identity carries the adapter's digest, so cached replies of the base
    model are never reused for the adapted one.
    """
    from ppoga_dspy.lm.embedded import EmbeddedEngine

    engine = getattr(lm, "engine", None)
    if adapter is None or not isinstance(engine, EmbeddedEngine):
        return lm
    return lm.copy(engine=engine.with_adapter(adapter))


def lm_spec_of(lm: dspy.BaseLM) -> str:
    """The spec string an LM was built from (`provider/model[@api_base]`), for artifacts and logs; never the key."""
    base = getattr(lm, "kwargs", {}).get("api_base")
    return f"{lm.model}@{base}" if base else lm.model


def cache_report(lms: dict[str, Any] | None) -> dict[str, int]:
    """LM calls made and replies served from the response cache, over the distinct role LMs (GuardedLM stats)."""
    seen: dict[int, Any] = {}
    for lm in (lms or {}).values():
        stats = getattr(lm, "stats", None)
        if stats is not None and hasattr(stats, "snapshot"):
            seen[id(stats)] = stats
    totals = {"calls": 0, "cache_hits": 0, "truncated": 0}
    for stats in seen.values():
        snap = stats.snapshot()
        for name in totals:
            totals[name] += snap.get(name, 0)
    return totals
