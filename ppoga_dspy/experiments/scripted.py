"""A scripted DSPy engine: answers each request by *which signature* it is and *what inputs* it holds.

Tests and cost benchmarks need a model whose replies are known, but replies keyed by call order break
as soon as the program changes its order (a retry, an ablation). This engine parses the request the
way a model reads it: the output field names in the system message identify the signature, and the
`[[ ## field ## ]]` sections of the last user message give the inputs. A handler per signature then
returns the outputs (a dict, formatted the way the adapter expects) or a raw string (to test
malformed replies). Token counts are estimated (4 characters per token) so cost figures are real
numbers of the prompts the program builds.
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


# -- a perfect planner that follows gold paths (cost floor of the method, control-flow tests) ------

_FOLLOW = re.compile(r"follow relation ([^\s]+)")


def _label_of(line: str) -> str:
    return line.split("  <- ", 1)[0].strip()


def gold_path_handlers(golds: dict[str, dict[str, Any]]) -> dict[str, Handler]:
    """Handlers of a planner that knows each question's gold path and still reads the graph.

    `golds` maps question text -> {"relations": [r1, r2, ...], "entities": [names on the path, answer
    included], "answers": [...]}. Every reply is a function of the request's inputs: the plan names
    one relation per step ("follow relation r"), relation choice copies the step's relation when it
    is a candidate, entity choice keeps candidates on the gold path, and the answer names the gold
    answers that the evidence really contains (else the last fact's tail): it reaches the answer only
    if the program walks the graph correctly.
    """

    def gold(inputs: dict[str, Any]) -> dict[str, Any]:
        return golds.get(str(inputs.get("question", "")).strip(), {"relations": [], "entities": [], "answers": []})

    def decompose(inputs: dict[str, Any]) -> dict[str, Any]:
        relations = gold(inputs)["relations"] or ["unknown"]
        steps = [{"objective": f"follow relation {r}", "expected_outcome": "an entity"} for r in relations]
        return {"new_steps" if "new_steps" in inputs.get("_outputs", []) else "steps": steps}

    def select_relations(inputs: dict[str, Any]) -> dict[str, Any]:
        wanted = _FOLLOW.search(str(inputs.get("step", "")))
        candidates = list(inputs.get("candidates") or [])
        if wanted and wanted.group(1) in candidates:
            return {"relations": [wanted.group(1)]}
        on_path = [c for c in candidates if c in gold(inputs)["relations"]]  # another branch of the question
        return {"relations": on_path[:1] or candidates[:1]}

    def select_entities(inputs: dict[str, Any]) -> dict[str, Any]:
        names = {n.casefold() for n in gold(inputs)["entities"]}
        lines = list(inputs.get("candidates") or [])
        chosen = [_label_of(line) for line in lines if _label_of(line).casefold() in names]
        if not chosen and lines:
            chosen = [_label_of(lines[0])]
        return {"entities": chosen, "rationale": "on the gold path"}

    def evaluate(inputs: dict[str, Any]) -> dict[str, Any]:
        failed = str(inputs.get("observation", "")).startswith(("Nothing was found", "No entity"))
        return {"decision": "correct_path" if failed else "proceed", "reason": "scripted"}

    def answer(inputs: dict[str, Any]) -> dict[str, Any]:
        evidence = [str(e) for e in inputs.get("evidence") or []]
        text = "\n".join(evidence).casefold()
        found = [a for a in gold(inputs)["answers"] if a.casefold() in text]
        if not found and evidence:
            found = [evidence[-1].rstrip(")").rsplit(", ", 1)[-1]]
        return {"answers": found, "reasoning": "read from the evidence"}

    return {
        "Decompose": decompose,
        "Replan": decompose,
        "PredictOutcome": lambda i: {"prediction": f"the step will {i.get('step', '')}"},
        "Think": lambda i: {"thought": "compared", "missing": "nothing"},
        "Evaluate": evaluate,
        "Answer": answer,
        "SelectRelations": select_relations,
        "SelectEntities": select_entities,
    }


def golds_from_examples(examples) -> dict[str, dict[str, Any]]:
    """Gold-path facts of loaded examples (see `ppoga_dspy.experiments.datasets`), keyed by question text.

    Relations come from `metadata["paths"]` (branches in order); entities on the path from the IRN
    gold-path text when there is one (`a#r1#b#r2#c`), plus the answers.
    """
    golds: dict[str, dict[str, Any]] = {}
    for example in examples:
        metadata = dict(getattr(example, "metadata", {}) or {})
        relations = [r for branch in metadata.get("paths") or [metadata.get("path") or []] for r in branch]
        entities: list[str] = []
        group = metadata.get("group")
        if isinstance(group, str) and "#" in group:
            for branch in group.split("*"):
                parts = [p for p in branch.split("#<end>#")[0].split("#") if p]
                entities.extend(parts[2::2])
        answers = list(getattr(example, "answers", []) or [])
        golds[example.question.strip()] = {"relations": relations, "entities": entities + answers, "answers": answers}
    return golds


#: The `--lm` spec of the scripted perfect planner that follows each question's gold path.
ORACLE_LM = "oracle/gold-path"


def oracle_lm(examples: list, **kwargs: Any):
    """The scripted perfect planner for these examples: one definition for eval, compile's teacher and tune."""
    return scripted_lm(ScriptedEngine(gold_path_handlers(golds_from_examples(examples))), "oracle-gold-path", **kwargs)
