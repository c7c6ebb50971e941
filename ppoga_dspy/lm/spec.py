"""Parse an LM spec string into its parts, without importing DSPy.

One spec syntax serves the CLI (`--lm`), the environment (`PPOGA_LM`), the TOML file and `make_lm`:

    PROVIDER/MODEL                   any DSPy model string: openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest,
                                     hosted_vllm/Qwen/Qwen2.5-7B-Instruct, ollama_chat/llama3.1, ...
    PROVIDER/MODEL@http(s)://HOST    the same, served at that OpenAI-compatible base URL (the `api_base`),
                                     e.g. openai/qwen@http://127.0.0.1:8000/v1
    local/embedded                   the embedded offline demo model (the default model of the catalogue)
    local/NAME                       one embedded model by name: local/smollm2-135m, local/gemma3-270m

Only an `@` followed by `http://` or `https://` starts a base URL, so model ids that contain `@`
themselves (Vertex AI's `claude-3-5-sonnet@20240620`) still parse. Everything else (temperature,
max_tokens, api_key, ...) is a keyword of `make_lm` or a setting, never part of the string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ppoga_dspy.lm.errors import LMConfigError

LOCAL_PROVIDER = "local"
EMBEDDED_ALIAS = "embedded"

ACCEPTED_FORMS = (
    "PROVIDER/MODEL (any DSPy model string, e.g. openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest, "
    "hosted_vllm/NAME, ollama_chat/NAME); "
    "PROVIDER/MODEL@BASE_URL for an OpenAI-compatible server (e.g. openai/qwen@http://127.0.0.1:8000/v1); "
    "local/embedded or local/NAME for the embedded offline model (local/smollm2-135m, local/gemma3-270m)"
)

_PROVIDER = re.compile(r"[a-z][a-z0-9_\-]*")
_BASE_URL_MARK = re.compile(r"@(?=https?://)")


@dataclass(frozen=True)
class LMSpec:
    """A parsed spec: `provider/model`, and the base URL when the string carried one."""

    provider: str
    model: str
    api_base: str | None = None

    @property
    def model_string(self) -> str:
        """The DSPy model string (`provider/model`), without the base URL."""
        return f"{self.provider}/{self.model}"

    @property
    def is_local(self) -> bool:
        return self.provider == LOCAL_PROVIDER

    def __str__(self) -> str:
        return self.model_string + (f"@{self.api_base}" if self.api_base else "")


def _invalid(spec: object, why: str) -> LMConfigError:
    return LMConfigError(f"invalid LM spec {spec!r}: {why}. Accepted forms: {ACCEPTED_FORMS}")


#: Query parameters that carry a credential: refused in a base URL (it would be stored and printed everywhere).
_SECRET_PARAMS = re.compile(r"(?i)^(api[-_]?key|apikey|key|access[-_]?token|token|auth|secret|password|sig)$")


def check_base_url(url: str, *, spec: object = None) -> str:
    """Return `url` without a trailing slash if it is an absolute http(s) URL without credentials, else raise
    LMConfigError (the message never repeats the credential)."""
    from urllib.parse import parse_qsl

    from ppoga_dspy.text import redact

    parts = urlsplit(url)
    secret = "@" in parts.netloc or any(_SECRET_PARAMS.match(k) for k, _ in parse_qsl(parts.query, True))
    if secret:
        raise LMConfigError(
            f"the LM URL {redact(url)!r} carries a credential; URLs are stored in artifacts, run files and traces, "
            "so keys are not taken from them: put the key in the provider's variable (e.g. OPENAI_API_KEY) or "
            "name a variable with api_key_env in ppoga.toml"
        )
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in url):
        why = f"base URL {url!r} is not an absolute http(s) URL"
        if spec is None:
            raise LMConfigError(f"invalid api_base: {why}; write it like http://127.0.0.1:8000/v1")
        raise _invalid(spec, why)
    return url.rstrip("/")


def parse_spec(spec: str) -> LMSpec:
    """Split `spec` into provider, model and optional base URL; raise LMConfigError listing the accepted forms."""
    if not isinstance(spec, str):
        raise _invalid(spec, f"expected a string, got {type(spec).__name__}")
    text = spec.strip()
    if not text:
        raise _invalid(spec, "it is empty")
    head, mark, base = text, None, None
    found = _BASE_URL_MARK.search(text)
    if found:
        head, mark = text[: found.start()], found
        base = text[found.end() :]
    if any(c.isspace() for c in head):
        raise _invalid(spec, "it contains whitespace")
    provider, slash, model = head.partition("/")
    if not slash:
        raise _invalid(spec, "it has no provider prefix (write PROVIDER/MODEL, e.g. openai/" + head + ")")
    if not _PROVIDER.fullmatch(provider):
        raise _invalid(spec, f"provider {provider!r} is not a lower-case name like openai or hosted_vllm")
    if not model or model.startswith("/") or model.endswith("/"):
        raise _invalid(spec, "the model id after the provider is missing or malformed")
    if mark is not None:
        base = check_base_url(base, spec=spec)
        if provider == LOCAL_PROVIDER:
            raise _invalid(spec, "an embedded local/ model runs in this process and takes no base URL")
    return LMSpec(provider=provider, model=model, api_base=base)
