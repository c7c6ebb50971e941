"""The program's prompt format: DSPy's ChatAdapter with every field stated once.

DSPy's ChatAdapter writes each field three times: in the "Your input/output fields are" list (name,
type, description), again as a `[[ ## name ## ]]\\n{name}` placeholder block ("All interactions will be
structured in the following way ...", with a JSON schema even for a plain `list[str]`), and a third
time in the closing "Respond with the corresponding output fields ..." reminder of the user message.
On PPoGA's short prompts that middle block was about half of every system message. The compact
adapter keeps the field list (name, type, description), replaces the placeholder block by one sentence
on the header format, writes a JSON schema only where the type name does not say what to write (an
object such as a plan step; titles left out, `$ref`s inlined), and closes the user message with
"Respond with `[[ ## a ## ]]`, then `[[ ## b ## ]]`, then `[[ ## completed ## ]]`." (no type notes: the field
list has them). Our readers of prompts read both formats: the scripted engine (`parse_request`),
`inference/guided.py` (`adapter_output_fields`) and `inference/constraints.py` (`REMINDER`, types, schemas).
The reply format, its parsing, the input sections and demos are ChatAdapter's, unchanged.
"""

from __future__ import annotations

import functools
import textwrap
from typing import Any

import pydantic
from dspy.adapters.chat_adapter import ChatAdapter

#: The one sentence that replaces ChatAdapter's placeholder block.
STRUCTURE = "Inputs come under `[[ ## name ## ]]` headers; reply with the output fields in order, each under its own."
#: How an output field's JSON schema is introduced (`inference/constraints.py` reads it back).
SCHEMA_LINE = "JSON schema of `{name}`: {schema}"
#: Keys under which a schema maps names to sub-schemas (a property called `title` there is kept).
_NAMED = ("properties", "$defs", "definitions")


def _tidy(schema: Any, *, named: bool = False) -> Any:
    """A JSON schema without `title` keys (they repeat the name), `type` first, other keys sorted (DSPy's order)."""
    if isinstance(schema, list):
        return [_tidy(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept = {key: value for key, value in schema.items() if named or not (key == "title" and isinstance(value, str))}
    ordered = sorted(kept.items(), key=lambda item: (item[0] != "type", item[0]))  # the order constraints decode in
    return {key: _tidy(value, named=not named and key in _NAMED) for key, value in ordered}


def object_schema(annotation: Any) -> dict[str, Any] | None:
    """The JSON schema of a type that holds objects (a pydantic model), None when its name says it all.

    `list[str]` or `Literal['a', 'b']` are plain from the type name in the field list; a `list[PlanStep]`
    needs the step's properties, their descriptions and the `enum` of its action.
    """
    try:
        schema = pydantic.TypeAdapter(annotation).json_schema()
    except (pydantic.PydanticUserError, TypeError, ValueError):
        return None
    text = str(schema)
    if "'properties'" not in text and "'$defs'" not in text:
        return None
    return _tidy(_inlined(schema))


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with each `{"$ref": "#/$defs/X"}` replaced by X's schema: a plan step is described where it is
    used, without the `$defs` / `$ref` indirection."""
    defs = schema.get("$defs") or {}

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[len("#/$defs/"):] in defs and len(node) == 1:
            return inline(defs[ref[len("#/$defs/"):]])
        return {key: inline(value) for key, value in node.items() if key != "$defs"}

    return inline(schema)


def neutral(value: Any) -> Any:
    """`value` with every string in it through `ppoga_dspy.text.neutralise_fields`: no value (a KG label, a
    question, a demo) can open a field of its own in the prompt (a `[[ ## decision ## ]]` in a label once set
    another stage's decision through an echoing model)."""
    from ppoga_dspy.text import neutralise_fields

    if isinstance(value, str):
        return neutralise_fields(value)
    if isinstance(value, (list, tuple)):
        return type(value)(neutral(item) for item in value) if isinstance(value, list) else tuple(map(neutral, value))
    mapping = isinstance(value, dict) or callable(getattr(value, "items", None))
    if mapping and not isinstance(value, pydantic.BaseModel):
        return {key: neutral(item) for key, item in value.items()}  # a demo is a dspy.Example
    if isinstance(value, pydantic.BaseModel):
        try:
            return value.model_copy(update={name: neutral(getattr(value, name)) for name in type(value).model_fields})
        except (TypeError, ValueError, AttributeError):
            return value
    return value


class CompactChatAdapter(ChatAdapter):
    """ChatAdapter whose system message states each field once (see the module docstring for why), and whose
    field values can never hold a field header (`neutral`)."""

    def format_user_message_content(self, signature: Any, inputs: dict[str, Any], prefix: str = "", suffix: str = "",
                                    main_request: bool = False) -> str:
        return super().format_user_message_content(signature, neutral(inputs), prefix, suffix, main_request)

    def format_assistant_message_content(self, signature: Any, outputs: dict[str, Any],
                                         missing_field_message: Any = None) -> str:
        return super().format_assistant_message_content(signature, neutral(outputs), missing_field_message)

    def format_field_structure(self, signature: Any) -> str:
        import json

        lines = [STRUCTURE]
        for name, info in signature.output_fields.items():
            schema = object_schema(info.annotation)
            if schema is not None:
                lines.append(SCHEMA_LINE.format(name=name, schema=json.dumps(schema, ensure_ascii=False)))
        return "\n".join(lines)

    def user_message_output_requirements(self, signature: Any) -> str:
        """The closing reminder, field headers only: each field's type is in the system message's field list."""
        headers = ", then ".join(f"`[[ ## {name} ## ]]`" for name in signature.output_fields)
        return f"Respond with {headers}, then `[[ ## completed ## ]]`."

    def format_task_description(self, signature: Any) -> str:
        """The instructions, dedented (ChatAdapter indents every line by eight spaces)."""
        return "Your objective:\n" + textwrap.dedent(signature.instructions).strip()


@functools.cache
def compact_adapter(*, json_fallback: bool = True) -> CompactChatAdapter:
    """The adapter every predictor of the program runs with (`json_fallback`: re-ask in JSON after a parse failure).

    One instance per setting, shared: it holds no per-call state, and every LM call binds it."""
    return CompactChatAdapter(use_json_adapter_fallback=json_fallback)
