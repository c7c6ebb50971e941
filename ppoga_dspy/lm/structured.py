"""The backend's own constrained decoding for a served or hosted model: choices that name real candidates.

The embedded engine constrains its choices at decode time (`inference/constraints.py`). A remote model
answered free text that the program salvaged (`method/replies.py`); a backend that can constrain
its own decoding is now asked to. For each call the program's reply is described as one JSON schema
(`reply_schema`): every output field of the signature, a choice field (an output that chooses among the
call's `candidates` input, by the embedded engine's own rule `is_choice_field`) as an array whose items are
an `enum` of this call's candidates, a `Literal` (Evaluate's decision) as an `enum`, objects strict (every
property required, no others).
The schema travels in the backend's wire form (`WIRE_FORMS`):

| form | request field | backends |
|---|---|---|
| `openai` | `response_format` (`json_schema`, strict) | OpenAI, SGLang, OpenAI-compatible servers (`openai/NAME@URL`) |
| `vllm` | `guided_json: schema` | vLLM (`hosted_vllm/NAME`) |
| `ollama` | `format: schema` | Ollama (`ollama_chat/NAME`, `ollama/NAME`) |
| `llamacpp` | `json_schema: schema` | llama.cpp server |

The setting (`structured` in `[lm]`, `PPOGA_LM_STRUCTURED`, `--structured`) picks the form:
`auto` (the default): the form of the spec's provider, and salvage for a provider without one
(Anthropic, Gemini, ...); `provider`: the same, but a provider without a form is refused (one line)
instead of salvaged; a form's name forces it (`llamacpp` for a llama.cpp server named `openai/...@URL`);
`off`: free text, salvaged. The embedded model (`local/...`) keeps its own decode-time constraints.

A constrained call is formatted and parsed as JSON (DSPy's JSONAdapter, `StructuredAdapter`): the reply
is the schema's object. The schema is part of the request, so the response cache keys on it.
"""

from __future__ import annotations

import functools
import typing
from typing import Any

from ppoga_dspy.lm.errors import LMConfigError

#: Wire forms and the request field each puts the schema in.
WIRE_FORMS = ("openai", "vllm", "ollama", "llamacpp")
#: Setting values besides a form's name.
MODES = ("auto", "provider", "off")
#: Provider prefix of an LM spec -> its wire form.
PROVIDER_FORMS = {"openai": "openai", "hosted_vllm": "vllm", "ollama_chat": "ollama", "ollama": "ollama",
                  "sglang": "openai", "llamacpp": "llamacpp"}
#: The input field that holds a choice's candidates (SelectRelations, SelectEntities, SelectRelationPairs).
CANDIDATES_INPUT = "candidates"


def check_mode(value: str | None) -> str:
    """The setting's value, checked: `auto`, `provider`, `off` or a wire form's name."""
    mode = (value or "auto").strip().lower()
    if mode not in MODES + WIRE_FORMS:
        raise LMConfigError(f"structured={value!r}: use one of {', '.join(MODES + WIRE_FORMS)}")
    return mode


def wire_form(model: str, mode: str = "auto") -> str | None:
    """The wire form an LM named `model` (`provider/name`) gets under `mode`; None: free text, salvaged."""
    mode = check_mode(mode)
    provider = model.split("/", 1)[0]
    if mode == "off" or provider == "local":
        return None
    if mode in WIRE_FORMS:
        return mode
    form = PROVIDER_FORMS.get(provider)
    if form is None and mode == "provider":
        raise LMConfigError(f"structured=provider: {model} names provider {provider!r}, which has no constrained "
                            f"decoding known here (known: {', '.join(sorted(PROVIDER_FORMS))}); use auto to salvage "
                            "its free-text replies, or name a wire form")
    return form


# -- the schema of one call's reply ---------------------------------------------------------------


def _strict(schema: Any) -> Any:
    """A JSON schema as strict structured outputs take it: every object closed, every property required."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict(value) for key, value in schema.items() if key not in ("title", "default")}
    if out.get("type") == "object" and "properties" in out:
        out["additionalProperties"] = False
        out["required"] = list(out["properties"])
    return out


@functools.lru_cache(maxsize=256)
def _field_schema(annotation: Any) -> str:
    import json

    import pydantic

    from ppoga_dspy.lm.adapter import _inlined

    schema = pydantic.TypeAdapter(annotation).json_schema()
    return json.dumps(_strict(_inlined(schema)))


def _is_string_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is list and typing.get_args(annotation) == (str,)


def _is_choice(name: str, info: Any) -> bool:
    """A choice among the call's candidates, by the embedded engine's own rule (`is_choice_field`)."""
    from ppoga_dspy.inference import is_choice_field

    description = str((info.json_schema_extra or {}).get("desc") or "")
    return _is_string_list(info.annotation) and is_choice_field(name, "list[str]", description)


def reply_schema(signature: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of this call's reply: each output field, a choice's items an `enum` of its candidates."""
    import json

    candidates = inputs.get(CANDIDATES_INPUT) if CANDIDATES_INPUT in signature.input_fields else None
    options = list(dict.fromkeys(str(c) for c in candidates)) if isinstance(candidates, list) else None
    properties: dict[str, Any] = {}
    for name, info in signature.output_fields.items():
        if options is not None and _is_choice(name, info):
            items: dict[str, Any] = {"type": "string", "enum": options} if options else {"type": "string"}
            properties[name] = {"type": "array", "items": items, **({} if options else {"maxItems": 0})}
        else:
            try:
                properties[name] = json.loads(_field_schema(info.annotation))
            except Exception:  # a type pydantic cannot describe: a plain string, still parsed by the adapter
                properties[name] = {"type": "string"}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def choice_fields(schema: dict[str, Any]) -> dict[str, list[str]]:
    """Field -> its allowed values, for the schema's enum'd fields (arrays of enums, and enums)."""
    found = {}
    for name, prop in (schema.get("properties") or {}).items():
        enum = (prop.get("items") or {}).get("enum") if prop.get("type") == "array" else prop.get("enum")
        if isinstance(enum, list):
            found[name] = [str(v) for v in enum]
    return found


def wire_kwargs(form: str, signature: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """The request fields that carry `schema` in `form` (merged into the LM call's keyword arguments)."""
    if form == "openai":
        name = getattr(signature, "__name__", "reply") or "reply"
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": name[:64], "strict": True, "schema": schema}}}
    if form == "vllm":
        return {"guided_json": schema}
    if form == "ollama":
        return {"format": schema}
    if form == "llamacpp":
        return {"json_schema": schema}
    raise LMConfigError(f"unknown wire form {form!r}; use one of {', '.join(WIRE_FORMS)}")


# -- the adapter ----------------------------------------------------------------------------------


@functools.cache
def structured_adapter(form: str) -> Any:
    """The adapter that sends each call's schema in `form` and reads the JSON reply (one instance per form)."""
    return _adapter_class()(form)


@functools.cache
def _adapter_class() -> type:
    from dspy.adapters.json_adapter import JSONAdapter

    class StructuredAdapter(JSONAdapter):
        """JSONAdapter whose response format is this call's schema, in the backend's wire form."""

        def __init__(self, form: str) -> None:
            super().__init__()
            self.form = form

        def _prepare_response_format(self, lm, lm_kwargs, signature) -> None:
            return None  # the schema depends on the call's inputs: set in __call__

        def _with_schema(self, lm_kwargs: dict[str, Any], signature: Any, inputs: dict[str, Any]) -> dict[str, Any]:
            return {**lm_kwargs, **wire_kwargs(self.form, signature, reply_schema(signature, inputs))}

        def __call__(self, lm, lm_kwargs, signature, demos, inputs):
            return super().__call__(lm, self._with_schema(lm_kwargs, signature, inputs), signature, demos, inputs)

        async def acall(self, lm, lm_kwargs, signature, demos, inputs):
            return await super().acall(lm, self._with_schema(lm_kwargs, signature, inputs), signature, demos, inputs)

    return StructuredAdapter
