"""The embedded offline model as a DSPy engine: `EmbeddedEngine`, over the in-process engine of `inference/`.

`EmbeddedEngine` is a DSPy engine (`complete(Request) -> Response`), used as
`dspy.LM("local/NAME", engine=EmbeddedEngine(NAME), ...)`, so DSPy's cache, retries, history and usage
tracking apply. Everything that runs the model (catalogue, loading and conversion, prefix cache, decode
loop, guided and constrained replies) is `ppoga_dspy.inference`, used here only through its face; this
module adds what DSPy needs: the request/response wiring (`lm/wire.py`), the saved state that names the
engine in artifacts and keys the response cache, deep copies that never copy weights, and LoRA swaps.
To run another engine (llama.cpp, vLLM) see the face's docstring: this class stays as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ppoga_dspy.inference import (
    CATALOGUE,
    CONSTRAINT_RULES_VERSION,
    DECODER_VERSION,
    DEFAULT_EMBEDDED_MAX_TOKENS,
    DEFAULT_EMBEDDED_MODEL,
    EmbeddedGenerator,
    is_loaded,
    load_embedded,
)

# Re-exported: `ppoga_dspy.lm` is the door the rooms above use for the embedded model.
__all__ = ["CATALOGUE", "DEFAULT_EMBEDDED_MAX_TOKENS", "DEFAULT_EMBEDDED_MODEL", "EmbeddedEngine", "is_loaded",
           "load_embedded"]


class EmbeddedEngine(EmbeddedGenerator):
    """DSPy engine over an embedded model. Cheap to construct; the weights load on the first call.

    Greedy decoding unless the request's temperature is above 0. Honours `max_tokens` (default
    `DEFAULT_EMBEDDED_MAX_TOKENS`) and stop sequences, reports token usage, and is safe to share
    between threads and deep copies. The settings and the generation itself are `EmbeddedGenerator`'s
    (`ppoga_dspy.inference`): field-guided replies, decode-time constraints, the legacy path, the dtype.
    """

    supports_response_schema = False
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset({"temperature", "max_tokens", "stop", "seed", "top_p"})

    @property
    def model_string(self) -> str:
        """The DSPy model string for this engine, e.g. `local/smollm2-135m`."""
        return f"local/{self.name}"

    def __repr__(self) -> str:
        mode = "legacy" if self.legacy else f"dtype={self.dtype or 'auto'}"
        extra = f", adapter={self.adapter_digest}" if self.adapter else ""
        return (f"EmbeddedEngine({self.name!r}, prompt_style={self.prompt_style!r}, {mode}, "
                f"constrain={self.constrain}, free_text_tokens={self.free_text_tokens}{extra})")

    def with_adapter(self, adapter: str | Path | None) -> EmbeddedEngine:
        """This engine's settings on the model with the LoRA adapter `adapter` merged in (None: the base model)."""
        state = self.dump_state()
        state["adapter"] = str(adapter) if adapter is not None else None
        return type(self).load_state(state)

    # Optimizers deep-copy programs (and their LMs) constantly; the weights must never be copied.
    def __deepcopy__(self, memo: dict) -> EmbeddedEngine:
        return self

    # DSPy saves a custom engine as its class path plus this state (no weights, no secrets).
    def dump_state(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "prompt_style": self.prompt_style,
            "default_max_tokens": self.default_max_tokens,
            "guide_adapter_fields": self.guide_adapter_fields,
            "legacy": self.legacy,
            "dtype": self.dtype,
            "constrain": self.constrain,
            "constraint_rules": CONSTRAINT_RULES_VERSION if self.constrain else None,  # identity only
            "free_text_tokens": self.free_text_tokens if self.constrain else None,
            "decoder": None if self.legacy else DECODER_VERSION,  # identity only
            # The adapter's path and the hash of its files: a cache key, so replies of the base model are
            # never served for the adapted one (nor for a retrained adapter at the same path).
            "adapter": self.adapter,
            "adapter_digest": self.adapter_digest,
        }

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> EmbeddedEngine:
        return cls(
            state.get("name"),
            prompt_style=state.get("prompt_style"),
            default_max_tokens=int(state.get("default_max_tokens", DEFAULT_EMBEDDED_MAX_TOKENS)),
            guide_adapter_fields=bool(state.get("guide_adapter_fields", True)),
            legacy=state.get("legacy"),
            dtype=state.get("dtype"),
            constrain=state.get("constrain"),
            free_text_tokens=state.get("free_text_tokens"),
            adapter=state.get("adapter"),
        )

    def complete(self, request: Any) -> Any:
        """DSPy's engine entry point: one lm15 Request in, one Response out (with usage)."""
        from dspy.clients.engines.base import validate_request

        from ppoga_dspy.lm.wire import request_to_chat

        validate_request(request)
        config = request.config
        reply = self.generate(
            request_to_chat(request),
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            stop=config.stop,
            seed=config.seed,
        )
        return self._response(reply)

    def _response(self, reply: Any) -> Any:
        """A Generation as DSPy's lm15 Response, with usage."""
        from dspy.lm15 import Message, Response, Usage

        return Response(
            id=None,
            model=self.model_string,
            message=Message.assistant(reply.text),
            finish_reason=reply.finish_reason,
            usage=Usage(input_tokens=reply.prompt_tokens, output_tokens=reply.completion_tokens,
                        cache_read_tokens=reply.cached_tokens),
        )

    def complete_structured(self, request: Any, schema: dict[str, Any]) -> Any | None:
        """A Response whose text is `schema`'s JSON by construction (the loopback server's structured outputs), or
        None when the schema has a shape the engine cannot constrain (the server then conforms a free reply)."""
        from dspy.clients.engines.base import validate_request

        from ppoga_dspy.lm.wire import request_to_chat

        validate_request(request)
        config = request.config
        reply = self.generate_json(request_to_chat(request), schema, max_tokens=config.max_tokens,
                                   temperature=config.temperature, top_p=config.top_p, stop=config.stop,
                                   seed=config.seed)
        return None if reply is None else self._response(reply)

    def stream(self, request: Any) -> Any:
        """No token streaming: the finished reply is replayed as stream events."""
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        """Nothing to release per engine: the weights stay in the process registry for the next caller."""
