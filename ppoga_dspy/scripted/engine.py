"""A scripted DSPy engine: answers each request by *which signature* it is and *what inputs* it holds.

Tests and cost benchmarks need a model whose replies are known, but replies keyed by call order break
as soon as the program changes its order (a retry, an ablation). This engine parses the request the
way a model reads it: the output field names in the system message identify the signature, and the
`[[ ## field ## ]]` sections of the last user message give the inputs. A handler per signature then
returns the outputs (a dict, formatted the way the adapter expects) or a raw string (to test
malformed replies). Token counts are estimated (4 characters per token) so cost figures are real
numbers of the prompts the program builds.

The planners that drive it live apart: `gold_path` (perfect), `noisy_planner` (seeded mistakes), both
writing their free text with `planner_texts`, and `planner_specs` builds either from its `--lm` spec.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from ppoga_dspy.errors import PPoGAError

Handler = Callable[[dict[str, Any]], "dict[str, Any] | str"]

_OUTPUTS = re.compile(r"Your output fields are:\n(.*?)(?:\n[A-Z]|\Z)", re.S)
_FIELD = re.compile(r"^\d+\. `(\w+)`", re.M)
_SECTION = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with|\Z)", re.S)

# Output field sets of the program's signatures -> the signature's name.
SIGNATURE_OUTPUTS: dict[frozenset[str], str] = {
    frozenset({"steps"}): "Decompose",
    frozenset({"prediction"}): "PredictOutcome",
    frozenset({"thought", "missing"}): "Think",
    frozenset({"decision", "reason"}): "Evaluate",
    frozenset({"new_steps"}): "Replan",
    frozenset({"answers", "reasoning"}): "Answer",
    frozenset({"relations"}): "SelectRelations",
    frozenset({"entities", "rationale"}): "SelectEntities",
    # `--stages fused`
    frozenset({"steps", "first_prediction", "first_relations"}): "DecomposePredict",
    frozenset({"thought", "decision", "next_prediction", "answers", "next_relations"}):
        "ThinkEvaluate",
    frozenset({"pairs"}): "SelectRelationPairs",
}


class ScriptError(PPoGAError):
    """The scripted engine got a request it has no handler for: add one, or pass `default=`."""


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") or "" for part in content)


def parse_request(system: str, user: str) -> tuple[list[str], dict[str, Any], bool]:
    """Output field names, input values (JSON decoded when they are JSON) and whether JSON is expected."""
    match = _OUTPUTS.search(system)
    outputs = _FIELD.findall(match.group(1)) if match else []
    inputs: dict[str, Any] = {}
    for name, raw in _SECTION.findall(user):
        value = raw.strip()
        try:
            inputs[name] = json.loads(value)
        except (json.JSONDecodeError, ValueError):
            inputs[name] = value
    wants_json = "Respond with a JSON object" in user
    return outputs, inputs, wants_json


def format_reply(outputs: dict[str, Any], order: list[str], wants_json: bool) -> str:
    if wants_json:
        return json.dumps({k: outputs[k] for k in order if k in outputs})
    parts = []
    for name in order:
        if name not in outputs:
            continue
        value = outputs[name]
        text = value if isinstance(value, str) else json.dumps(value)
        parts.append(f"[[ ## {name} ## ]]\n{text}")
    parts.append("[[ ## completed ## ]]")
    return "\n\n".join(parts)


class ScriptedEngine:
    """A DSPy engine (`complete(request) -> Response`) driven by per-signature handlers.

    `handlers` maps a signature name (see `SIGNATURE_OUTPUTS`, or any name you register with
    `register_outputs`) to a function of the inputs. `default` answers anything else (optimizers
    run their own signatures). `calls` counts requests per signature; `requests` keeps them.
    """

    supports_response_schema = False

    def __init__(self, handlers: dict[str, Handler] | None = None, *, default: Handler | None = None) -> None:
        self.handlers = dict(handlers or {})
        self.default = default
        self.signature_outputs = dict(SIGNATURE_OUTPUTS)
        self.calls: Counter[str] = Counter()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict) -> ScriptedEngine:
        return self

    def register_outputs(self, name: str, outputs: set[str]) -> None:
        self.signature_outputs[frozenset(outputs)] = name

    def answer(self, system: str, user: str, demos: int = 0) -> str:
        """The reply text; handlers see the inputs plus `_outputs`, `_signature` and `_demos` (demo turns)."""
        outputs, inputs, wants_json = parse_request(system, user)
        name = self.signature_outputs.get(frozenset(outputs), "+".join(outputs) or "?")
        with self._lock:
            self.calls[name] += 1
            self.requests.append((name, inputs))
        handler = self.handlers.get(name, self.default)
        if handler is None:
            raise ScriptError(f"no scripted handler for signature {name} (outputs {outputs})")
        reply = handler(dict(inputs, _outputs=outputs, _signature=name, _demos=demos))
        if isinstance(reply, str):
            return reply
        return format_reply(reply, outputs, wants_json)

    def complete(self, request):
        from dspy.lm15 import Message, Response, TextPart, Usage

        system = _text(request.system)
        users = [m for m in request.messages if m.role == "user"]
        user = users[-1].text if users else ""
        demos = sum(1 for m in request.messages if m.role == "assistant")
        reply = self.answer(system, user or "", demos)
        prompt_chars = len(system) + sum(len(m.text or "") for m in request.messages)
        usage = Usage(input_tokens=prompt_chars // 4, output_tokens=max(1, len(reply) // 4))
        usage = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                      total_tokens=usage.input_tokens + usage.output_tokens)
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(reply)]),
                        finish_reason="stop", usage=usage)

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


def scripted_lm(engine: ScriptedEngine, name: str = "scripted", **kwargs: Any):
    """A `dspy.LM` around a scripted engine, uncached so that every call reaches the script."""
    import dspy

    kwargs.setdefault("cache", False)
    kwargs.setdefault("temperature", 0.0)
    kwargs.setdefault("max_tokens", 1000)
    return dspy.LM(f"local/{name}", engine=engine, **kwargs)
