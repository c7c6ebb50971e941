"""Decode-time constraints for the embedded engine: which output fields of a ChatAdapter prompt have a
closed set of right answers, and the token trie that keeps decoding inside that set.

A tiny model asked to "copy the relation names exactly from the candidates" paraphrases, invents
names or writes prose, and the Executor then falls back to the best-ranked candidate. The engine
already writes the `[[ ## field ## ]]` headers itself (field-guided decoding); with constraints it
also writes the structure of three kinds of value and lets the model choose only where a choice is
real, and caps the length of a fourth:

- a *choice* (`list[str]` output whose candidates are in the prompt's `candidates` input: the
  Executor's `relations` and `entities`): a JSON list of one to `CHOICE_LIMIT` candidate names, each
  decoded through a trie of the candidates' tokens, so every name is exactly one of them; with no candidates
  (`[]`, the fused evaluation after the last step) it is `[]`, where a free model listed relations it made up;
- a *one-of* (`Literal[...]` output, e.g. Evaluate's `decision`): exactly one of the literals;
- a *free text* (`str` output): written freely, at most `FREE_TEXT_TOKENS` tokens, so that a model that lists
  what it saw instead of writing the one sentence asked for stops there;
- an *object list* (`list[Model]` whose JSON schema items are objects of string properties, e.g.
  Decompose's `steps`, Replan's `new_steps`): `[{"objective": "...", "action": "explore", ...}]`,
  the keys and punctuation written by the engine, the strings by the model, and a property with a
  schema `enum` (a step's `action`) chosen among its values.

Everything here reads only the prompt text DSPy's ChatAdapter (or our compact adapter, lm/adapter.py)
writes (`lm` may import no signatures): the closing "Respond with ..." sentence names the output
fields in order (ChatAdapter's adds their types), the system message lists each field with its type
and description and carries JSON schemas (ChatAdapter's placeholder notes, or the compact adapter's
`JSON schema of` lines), and the last user message carries the inputs. A prompt that does not parse as expected gets no
constraint: the field is decoded freely, as before.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: Bumped whenever the constrained decoder writes different replies for the same prompt: it is part of the
#: engine's identity (`EmbeddedEngine.dump_state`), so the response cache never serves an older decoder's reply.
RULES_VERSION = 6
#: Names chosen at most per choice field: the Executor follows at most 3 relations / entities per step by
#: default (`relations_per_step`, `entities_per_step`), so a fourth would be cut anyway.
CHOICE_LIMIT = 3
#: Objects at most in a constrained object list (Decompose asks for "usually 1 to 3" steps).
OBJECT_LIMIT = 4
#: Tokens at most per free string inside an object (a step's objective or expected outcome).
STRING_TOKENS = 48
#: Tokens at most per free-text (`str`) output field, by default (`FreeText`): the teacher's demos write one sentence
#: per field (a thought, a reason, a prediction: 10 to 70 tokens), while a tiny model lists every entity it saw for
#: two hundred tokens, and on the CPU a written token costs as much as twenty-five read ones.
FREE_TEXT_TOKENS = 48
#: Output fields that choose among the prompt's `candidates` even without "from the candidates" in their description.
CHOICE_FIELDS = ("relations", "entities")
#: The output field that names answers; given an `evidence` input, it chooses among the evidence's names.
ANSWER_FIELD = "answers"

# `[[ ## name ## ]]` optionally followed by ` (must be formatted as a valid Python TYPE)`.
_REMINDER_FIELD = re.compile(r"`\[\[ ## (\w+) ## \]\]`(?: \(must be formatted as a valid Python (.*?)\))?(?=,|$| and)")
#: The closing sentence naming the output fields in order (group 1), as ChatAdapter writes it ("Respond with the
#: corresponding output fields, starting with the field `[[ ## a ## ]]` (must be formatted as a valid Python
#: list[str]), then `[[ ## b ## ]]`, and then ending with the marker for `[[ ## completed ## ]]`.") or as the compact
#: adapter does (lm/adapter.py: "Respond with `[[ ## a ## ]]`, then `[[ ## b ## ]]`, then `[[ ## completed ## ]]`.").
REMINDER = re.compile(
    r"Respond with (?:the corresponding output fields, starting with the field )?(`\[\[ ## .*?)"
    r",? (?:and )?then (?:ending with the marker for )?`\[\[ ## completed ## \]\]`",
    re.S,
)
_SECTION = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## \w+ ## \]\]|\n\nRespond with |\Z)", re.S)
_SCHEMA_NOTE = "# note: the value you produce must adhere to the JSON schema: "
# The compact adapter (lm/adapter.py `SCHEMA_LINE`) states a schema once, only for a field of objects.
_COMPACT_SCHEMA = re.compile(r"^JSON schema of `(\w+)`: (.*)$", re.M)
_DESCRIPTION = re.compile(r"^\d+\. `(\w+)` \(([^\n]*?)\): ?(.*)$", re.M)


@dataclass(frozen=True)
class Choice:
    """A JSON list of names, each one of `options` (no repeats), at most `limit` of them."""

    options: tuple[str, ...]
    limit: int = CHOICE_LIMIT


@dataclass(frozen=True)
class OneOf:
    """Exactly one of `options`, written bare (how ChatAdapter writes a Literal)."""

    options: tuple[str, ...]


@dataclass(frozen=True)
class ObjectList:
    """A JSON list of one to `limit` objects with these string properties, in this order.

    `options` pairs a property with its closed set of values (a schema `enum`, e.g. a plan step's
    `action`); such a property is decoded as a choice among them, the others freely.
    """

    properties: tuple[str, ...]
    limit: int = OBJECT_LIMIT
    options: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def options_of(self, name: str) -> tuple[str, ...] | None:
        return dict(self.options).get(name)


@dataclass(frozen=True)
class FreeText:
    """A free-text value of at most `limit` tokens, cut back to its last whole word when it runs over."""

    limit: int = FREE_TEXT_TOKENS


Constraint = Choice | OneOf | ObjectList | FreeText


@dataclass
class PromptFields:
    """What one ChatAdapter prompt asks for: output fields in order, their types, descriptions, schemas, inputs."""

    outputs: list[str] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)
    schemas: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)


def _last_user(chat: Sequence[dict[str, str]]) -> str:
    return next((m["content"] for m in reversed(chat) if m["role"] == "user"), "")


def output_fields(chat: Sequence[dict[str, str]]) -> list[str]:
    """The output field names the closing sentence of the last user message asks for, in order ([] if none)."""
    reminder = REMINDER.search(_last_user(chat))
    return [name for name, _ in _REMINDER_FIELD.findall(reminder.group(1))] if reminder else []


def read_prompt(chat: Sequence[dict[str, str]]) -> PromptFields:
    """Parse the output fields (with types), their descriptions and schemas, and the last user message's inputs."""
    last_user = _last_user(chat)
    system = next((m["content"] for m in chat if m["role"] == "system"), "")
    found = PromptFields()
    reminder = REMINDER.search(last_user)
    if reminder is None:
        return found
    listed: dict[str, str] = {}
    for name, type_text, text in _DESCRIPTION.findall(system):
        found.descriptions.setdefault(name, text.strip())
        listed.setdefault(name, type_text)
    for name, type_text in _REMINDER_FIELD.findall(reminder.group(1)):
        found.outputs.append(name)  # the compact reminder leaves the type to the system message's field list
        found.types[name] = type_text or listed.get(name, "str")
    found.schemas = _schemas(system, found.outputs)
    body = last_user[: reminder.start()]
    for name, value in _SECTION.findall(body):
        found.inputs[name] = value.strip()
    return found


def _schemas(system: str, outputs: list[str]) -> dict[str, Any]:
    """Output field -> JSON schema, as ChatAdapter notes it (`{name}        # note: ...`) or the compact adapter
    states it (`JSON schema of `name`: ...`); a schema that is not valid JSON is left out."""
    texts = {name: text for name, text in _COMPACT_SCHEMA.findall(system) if name in outputs}
    for name in outputs:
        start = system.find(f"{{{name}}}        {_SCHEMA_NOTE}")
        if start >= 0 and name not in texts:
            texts[name] = system[start:].split("\n", 1)[0].split(_SCHEMA_NOTE, 1)[1]
    schemas: dict[str, Any] = {}
    for name, text in texts.items():
        try:
            schemas[name] = json.loads(text)
        except json.JSONDecodeError:
            pass
    return schemas


def _string_list(text: str | None) -> list[str] | None:
    """The input's list of strings (`[]` for an empty one: nothing to choose from), or None if it is none."""
    if not text:
        return None
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text)
        except (ValueError, SyntaxError, TypeError):
            continue
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
    return None


#: SelectEntities shows each candidate as "entity  <- (from, relation)"; its bare name is a valid choice too.
ENTITY_LINE_MARK = "  <- "


def choice_options(candidates: Sequence[str]) -> tuple[str, ...]:
    """Every candidate, and each line's bare entity name before `ENTITY_LINE_MARK` (no duplicates, order kept)."""
    options: dict[str, None] = {}
    for candidate in candidates:
        if ENTITY_LINE_MARK in candidate:
            options.setdefault(candidate.split(ENTITY_LINE_MARK, 1)[0].strip(), None)
        options.setdefault(candidate, None)
    return tuple(o for o in options if o)


def _literal_options(type_text: str) -> tuple[str, ...] | None:
    if not (type_text.startswith("Literal[") and type_text.endswith("]")):
        return None
    try:
        values = ast.literal_eval("[" + type_text[len("Literal[") : -1] + "]")
    except (ValueError, SyntaxError):
        return None
    options = tuple(str(v) for v in values if isinstance(v, (str, int)) and not isinstance(v, bool))
    return options or None


def object_list(schema: Any) -> ObjectList | None:
    """An object list for a list-of-objects schema whose properties are all strings (required first)."""
    if not isinstance(schema, dict) or schema.get("type") != "array":
        return None
    items = schema.get("items") or {}
    if "$ref" in items:
        ref = str(items["$ref"]).rsplit("/", 1)[-1]
        items = (schema.get("$defs") or {}).get(ref) or {}
    properties = items.get("properties") if isinstance(items, dict) else None
    if not isinstance(properties, dict) or not properties:
        return None
    if any(not isinstance(p, dict) or p.get("type") != "string" for p in properties.values()):
        return None
    required = [p for p in items.get("required", []) if p in properties]
    names = tuple(required + [p for p in properties if p not in required])
    options = tuple(
        (name, tuple(str(v) for v in enum))
        for name in names
        if isinstance(enum := properties[name].get("enum"), list) and enum and all(isinstance(v, str) for v in enum)
    )
    return ObjectList(names, options=options)


def is_choice_field(name: str, type_text: str, description: str) -> bool:
    """Whether an output field chooses among the prompt's `candidates` input: a `list[str]` named in `CHOICE_FIELDS`
    or described as copied "from the candidates" (SelectRelationPairs' `pairs`, the fused calls' relations chosen
    one step ahead). The one rule for every constrained backend (`lm/structured.py` reads it too), so that a call
    with candidates constrains its choice and leaves its other lists (the fused evaluation's `answers`) free."""
    return type_text == "list[str]" and (name in CHOICE_FIELDS or "from the candidates" in description)


def constraints_for(chat: Sequence[dict[str, str]], *, free_text_tokens: int = FREE_TEXT_TOKENS,
                    ) -> dict[str, Constraint]:
    """Output field -> its constraint, for the fields of this prompt that have one (others are decoded freely).

    A `str` field is capped at `free_text_tokens` (0: no cap)."""
    prompt = read_prompt(chat)
    found: dict[str, Constraint] = {}
    candidates = _string_list(prompt.inputs.get("candidates"))  # [] -> a choice of `[]`, no token decoded
    evidence = _string_list(prompt.inputs.get("evidence"))
    for name in prompt.outputs:
        type_text = prompt.types.get(name, "str")
        if candidates is not None and is_choice_field(name, type_text, prompt.descriptions.get(name, "")):
            found[name] = Choice(choice_options(candidates))
        elif type_text == "list[str]" and name == ANSWER_FIELD and evidence and (names := evidence_names(evidence)):
            found[name] = Choice(names)
        elif (options := _literal_options(type_text)) is not None:
            found[name] = OneOf(options)
        elif type_text.startswith("list[") and (objects := object_list(prompt.schemas.get(name))):
            found[name] = in_demo_order(objects, demo_keys(chat, name))
        elif type_text == "str" and free_text_tokens > 0:
            found[name] = FreeText(free_text_tokens)
    return found


def evidence_names(lines: Sequence[str]) -> tuple[str, ...]:
    """Every entity or value named in evidence lines, in order of appearance (no duplicates).

    Answer asks for names "exactly as they are named in the evidence"; the tiny model copies them with
    typos (it wrote 1989-04-04 from a fact saying 1979-04-04), so its answer is decoded as a choice among
    them. A line is `(head, relation, tail)`, where either end may list several names as `a; b` and a
    mediator (CVT) node reads `[relation: value; relation: value]` (its values are names too).
    """
    names: dict[str, None] = {}
    for line in lines:
        text = line.strip()
        if not (text.startswith("(") and text.endswith(")")):
            continue
        parts = _top_level_split(text[1:-1], ", ")
        middle = _relation_index(parts)
        if middle is None:
            continue
        for side in (", ".join(parts[:middle]), ", ".join(parts[middle + 1 :])):
            for item in _top_level_split(side, "; "):
                for name in _mediator_values(item) if item.startswith("[") else [item.strip()]:
                    if name:
                        names.setdefault(name, None)
    return tuple(names)


def _relation_index(parts: Sequence[str]) -> int | None:
    """Which inner part of a fact is its relation: one word, a dotted or underscored one first (a name may hold
    a comma, "Paris, Texas", and a one-word part of it must not pass for the relation)."""
    words = [i for i in range(1, len(parts) - 1) if parts[i] and not any(c.isspace() for c in parts[i])]
    marked = [i for i in words if "." in parts[i] or "_" in parts[i]]
    return (marked or words or [None])[0]


def _mediator_values(item: str) -> list[str]:
    """The values of a mediator's `[relation: value; ...]` description."""
    inner = item.strip()[1:-1] if item.strip().endswith("]") else item.strip()[1:]
    return [part.split(": ", 1)[1].strip() for part in _top_level_split(inner, "; ") if ": " in part]


def _top_level_split(text: str, separator: str) -> list[str]:
    """`text` split on `separator` outside square brackets (a mediator's facts stay one item)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        char = text[i]
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            i += len(separator)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def demo_keys(chat: Sequence[dict[str, str]], name: str) -> list[str]:
    """The property order of the first object the prompt's demos write for output field `name`, or [].

    A model that copies its demonstrations writes an object's keys in their order; written in any other
    order, the object leaves the pattern it copies (after `"expected_outcome": "..."` the demos went on
    with `", "action"`, so the model chose to open another step instead of closing the list).
    """
    header = f"[[ ## {name} ## ]]\n"
    for message in chat:
        content = message.get("content") or ""
        if message.get("role") != "assistant" or header not in content:
            continue
        text = content.split(header, 1)[1].split("\n\n", 1)[0].strip()
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return [str(key) for key in value[0]]
    return []


def in_demo_order(objects: ObjectList, keys: Sequence[str]) -> ObjectList:
    """`objects` with its properties in the demos' key order (properties the demos lack keep their place after)."""
    shown = [k for k in keys if k in objects.properties]
    if not shown:
        return objects
    order = tuple(shown + [p for p in objects.properties if p not in shown])
    return ObjectList(order, limit=objects.limit, options=objects.options)


class TokenTrie:
    """The token sequences of a set of options as a trie: which tokens may come next after a prefix.

    A node is a dict of token -> child node; the key `TokenTrie.END` marks that an option ends there
    (its value is the option's index).
    """

    END = -1

    def __init__(self, sequences: Sequence[Sequence[int]]) -> None:
        self.root: dict[int, Any] = {}
        for index, sequence in enumerate(sequences):
            node = self.root
            for token in sequence:
                node = node.setdefault(int(token), {})
            node.setdefault(self.END, index)  # the first option wins when two tokenize the same

    @classmethod
    def of_texts(cls, tokenizer: Any, texts: Sequence[str]) -> TokenTrie:
        return cls([tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts])

    @staticmethod
    def next_tokens(node: dict[int, Any]) -> list[int]:
        """Tokens allowed after this node (END excluded)."""
        return [t for t in node if t != TokenTrie.END]

    @staticmethod
    def ended(node: dict[int, Any]) -> int | None:
        """The index of the option that ends at this node, or None."""
        return node.get(TokenTrie.END)

    def walk(self, tokens: Sequence[int]) -> dict[int, Any] | None:
        """The node reached by `tokens` from the root, or None when they leave the trie."""
        node = self.root
        for token in tokens:
            node = node.get(int(token))
            if node is None:
                return None
        return node


def tokens_by_prefix(tokenizer: Any, prefixes: Sequence[str]) -> dict[str, list[int]]:
    """For each prefix, the ids of the vocabulary tokens whose text starts with it, in one pass over the vocabulary.

    One pass because reading a 262k-token vocabulary costs about 0.2 s and the decoder needs several marks.
    """
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    found: dict[str, list[int]] = {prefix: [] for prefix in prefixes}
    wanted = tuple(found)
    for index, piece in enumerate(pieces):
        if not piece:
            continue
        text = piece.replace("\u2581", " ")  # SentencePiece's word-start mark
        if text.startswith(wanted):
            for prefix in wanted:
                if text.startswith(prefix):
                    found[prefix].append(index)
    return found


def json_string_body(text: str) -> str:
    """`text` as the inside of a JSON string literal (quotes and backslashes escaped, no surrounding quotes)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]
