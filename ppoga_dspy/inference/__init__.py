"""The in-process inference engine: a small GGUF model run by transformers on the CPU, behind one face.

It exists so that `ppoga ask` works with no API key and no network, and so that tests exercise the whole
program against a real model that produces real, often malformed, output. It is a demo model: its
answers are weak. This room imports nothing of ours but the error tree; `lm/embedded.py` (the DSPy engine,
`EmbeddedEngine`) is its one user of substance, and it imports only the names below.

The contract: what `lm/embedded.py` calls
-----------------------------------------
- `EmbeddedGenerator`, the base class of `EmbeddedEngine`:
  - the constructor `(name=None, *, prompt_style, default_max_tokens, guide_adapter_fields, legacy, dtype,
    prefix_cache, stop_loops, speculate, constrain, free_text_tokens, adapter)` checks the settings (raising
    `InferenceConfigError`) and keeps the attributes `EmbeddedEngine.dump_state` saves (`name`,
    `prompt_style`, `default_max_tokens`, `guide_adapter_fields`, `legacy`, `dtype`, `constrain`, `free_text_tokens`,
    `adapter`, `adapter_digest`); it loads nothing;
  - `generate(chat, *, max_tokens, temperature, top_p, stop, seed) -> Generation` answers one
    `[{"role", "content"}]` chat: `Generation(text, prompt_tokens, completion_tokens, finish_reason)`,
    where `finish_reason` is "stop" or "length". It raises DSPy's `ContextLengthError` when the prompt and
    `max_tokens` do not fit the model's window. `EmbeddedEngine.complete(request)` is this call wrapped
    in DSPy's request/response types (`lm/wire.py`);
  - `generate_json(chat, schema, *, max_tokens, temperature, top_p, stop, seed) -> Generation | None`: a reply
    that is the JSON schema's object by construction (`schema_plan.py`: the engine writes the structure, the
    model each value, a choice among its `enum`), or None for a schema shape it cannot constrain. The
    loopback server's structured outputs call it through `EmbeddedEngine.complete_structured`;
  - `render(chat)` (the exact prompt text) and `loaded()` (`LoadedModel`: `model`, `tokenizer`, `lock`),
    used by LoRA training (`optimizers/finetune.py`).
- `DECODER_VERSION` and `CONSTRAINT_RULES_VERSION`: in the engine's identity, which keys DSPy's response
  cache; bump them whenever the same prompt can get another reply.
- `CATALOGUE`, `DEFAULT_EMBEDDED_MODEL`, `resolve_embedded_name`: what `local/NAME` may name;
  `DEFAULT_EMBEDDED_MAX_TOKENS`: the reply budget when none is set.
- `load_embedded(name)`, `is_loaded(name)`: load the weights ahead of the first question (`app/warmup.py`).
- `building_model()`: the one lock every transformers model construction in the process holds
  (`inference/model_loading.py`); `method/sentence_encoder.py` uses it too, so it stays whatever the engine.

Swapping in llama.cpp or vLLM
-----------------------------
A model behind a server needs no engine at all: both serve the OpenAI API, so
`--lm openai/NAME@http://127.0.0.1:8000/v1` already works. To run one in-process instead (llama-cpp-python,
vLLM's `LLM`), write a class with `EmbeddedGenerator`'s constructor and `generate` (render the chat with
the model's template, generate with the stop sequences, count tokens), export it here under that name, and
give `CATALOGUE` its models; `EmbeddedEngine` and everything above it stay as they are. What the current
engine adds, and a replacement loses unless it ports it: field-guided replies and decode-time constraints
(`guided.py`, `constraints.py`: llama.cpp's GBNF grammars or vLLM's guided decoding are the equivalents),
the prefix cache and prompt heads on disk (`prefix_cache.py`, `prompt_heads.py`: both have prompt caching
of their own), prompt-lookup decoding (`decoding.py`), the GGUF conversion cache (`loading.py`,
`gguf_convert.py`, `fast_tokenizer.py`) and LoRA adapters (`lora.py`).

The files, by job: `catalogue.py` (the models), `options.py` (environment switches: dtype, threads,
legacy, constraints), `loading.py` (the conversion cache and the per-process registry), `prefix_cache.py`,
`decode_loop.py` (settings, rendering, the token loop), `guided.py` (headers written by the engine,
constrained values, replies that are a JSON schema's object), `schema_plan.py` (a JSON schema read as
constraints), and the helpers they use.

Importing this package is cheap: each name is loaded on first use (torch and transformers only when a
model is loaded).
"""

from __future__ import annotations

import importlib
from typing import Any

from ppoga_dspy.inference.errors import InferenceConfigError

# module -> the names the face takes from it, each loaded on first use.
_FACE: dict[str, tuple[str, ...]] = {
    "guided": ("EmbeddedGenerator",),
    "decode_loop": ("Generation", "DEFAULT_EMBEDDED_MAX_TOKENS"),
    "catalogue": ("CATALOGUE", "DEFAULT_EMBEDDED_MODEL", "resolve_embedded_name"),
    "loading": ("LoadedModel", "load_embedded", "is_loaded"),
    "decoding": ("DECODER_VERSION",),
    "model_loading": ("building_model",),
    "constraints": ("is_choice_field",),
}
#: Names the face gives under another name than their module's: name -> (module, attribute).
_RENAMED = {"CONSTRAINT_RULES_VERSION": ("constraints", "RULES_VERSION")}
_LAZY = {name: (module, name) for module, names in _FACE.items() for name in names} | _RENAMED

__all__ = ["InferenceConfigError", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
