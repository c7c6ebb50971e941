"""Guided replies: the engine writes the ChatAdapter's structure, the model only each field's value.

Field-guided decoding (`guide_adapter_fields`, on by default): when the prompt is one of DSPy's
ChatAdapter prompts, the engine writes each `[[ ## field ## ]]` header itself, in the order the
prompt asks for, and lets the model write only the values, each ending where the model starts a
header of its own. The reply is then always in the adapter's format; what the model puts in the
fields is still entirely its own. Tiny models almost never produce the headers unaided.

A field with a decode-time constraint (`inference/constraints.py`: a choice among candidates, one of a
few words, a list of objects) is decoded through a token trie of what it may name: the model chooses,
the engine writes the punctuation, so the value always parses. A constrained step scores only its
candidates' rows of the output layer (`decoding.PartialHead`).

`EmbeddedGenerator.generate(chat, ...) -> Generation` is the call `lm/embedded.py` makes (see the face, `__init__.py`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from ppoga_dspy.inference import constraints as _constraints
from ppoga_dspy.inference import schema_plan as _schema_plan
from ppoga_dspy.inference.decode_loop import _TRANSCRIPT_STOPS, Decoder, Generation, _pick
from ppoga_dspy.inference.loading import LoadedModel
from ppoga_dspy.inference.options import _TorchThreads
from ppoga_dspy.inference.prompt_heads import system_head

#: DSPy's ChatAdapter ends every reply with this marker; nothing after it is ever parsed, so the
#: engine stops there instead of letting a tiny model ramble on for the rest of its budget.
CHAT_ADAPTER_END = "[[ ## completed ## ]]"

# A field value ends where the model starts any next header (also the sloppy `[[##` spelling), or at
# a blank line: the tiny models rarely stop by themselves, and a blank line inside one value is rare
# (DSPy writes lists and objects as one-line JSON).
_FIELD_STOPS = ("[[ ##", "[[##", "\n\n")


def adapter_output_fields(chat: Sequence[dict[str, str]]) -> list[str]:
    """The output field names the adapter (ChatAdapter or our compact one) asks for in the last user message, or
    [] if it asks none; read by `constraints.output_fields`, the one reader of that closing sentence."""
    return _constraints.output_fields(chat)


class EmbeddedGenerator(Decoder):
    """Generate one reply to a chat on an embedded model: guided fields, constrained values, usage counts.

    Greedy decoding unless the temperature is above 0. Honours `max_tokens` (default
    `DEFAULT_EMBEDDED_MAX_TOKENS`) and stop sequences, and is safe to share between threads (one reply
    at a time per model: `LoadedModel.lock`).
    """

    def generate(
        self,
        chat: Sequence[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: Sequence[str] = (),
        seed: int | None = None,
    ) -> Generation:
        """Generate one reply to `chat` (`[{"role", "content"}]`); the engine's `complete` wraps this."""
        return self._generate(chat, None, max_tokens=max_tokens, temperature=temperature, top_p=top_p, stop=stop,
                              seed=seed)

    def generate_json(
        self,
        chat: Sequence[dict[str, str]],
        schema: dict[str, Any],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: Sequence[str] = (),
        seed: int | None = None,
    ) -> Generation | None:
        """A reply to `chat` that is `schema`'s JSON by construction (`schema_plan.py`), or None when the schema
        has a shape the engine cannot constrain (the caller then answers freely and conforms the reply)."""
        plan = _schema_plan.plan_for(schema)
        if plan is None:
            return None
        return self._generate(chat, plan, max_tokens=max_tokens, temperature=temperature, top_p=top_p, stop=stop,
                              seed=seed)

    def _generate(
        self,
        chat: Sequence[dict[str, str]],
        plan: _schema_plan.SchemaPlan | None,
        *,
        max_tokens: int | None,
        temperature: float | None,
        top_p: float | None,
        stop: Sequence[str],
        seed: int | None,
    ) -> Generation:
        import torch

        loaded = self.loaded()
        tokenizer = loaded.tokenizer
        prompt = self.render(chat)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        prompt_tokens = len(prompt_ids)
        budget = int(max_tokens or self.default_max_tokens)
        if prompt_tokens + budget > loaded.context_window:
            from dspy.lm15 import ContextLengthError

            raise ContextLengthError(
                f"the prompt has {prompt_tokens} tokens and max_tokens is {budget}, more than the "
                f"{loaded.context_window}-token window of local/{self.name}",
                provider="local",
            )
        stops = [s for s in stop if s]
        if not self._uses_template(tokenizer):  # a base model continuing a transcript writes the next turn
            stops.extend(_TRANSCRIPT_STOPS)
        sampling: dict[str, Any] = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        if temperature is not None and temperature > 0:
            sampling = {"do_sample": True, "temperature": float(temperature), "top_p": top_p, "top_k": None}
        fields = adapter_output_fields(chat) if self.guide_adapter_fields and plan is None else []
        constraints = (_constraints.constraints_for(chat, free_text_tokens=self.free_text_tokens)
                       if fields and self.constrain else {})
        threads = None if self.legacy else self.threads
        with loaded.lock, _TorchThreads(threads):
            store = loaded.prefix_cache if self.prefix_cache and not self.legacy else None
            if store is not None and store.heads is not None:
                system = next((m["content"] for m in chat if m.get("role") == "system"), None)
                store.offer_head(system_head(prompt, prompt_ids, system, tokenizer))
            if sampling["do_sample"] and seed is not None:
                torch.manual_seed(int(seed))
            if store is not None:
                store.begin_call()
            if plan is not None:
                reply = self._json(loaded, prompt, prompt_tokens, plan, budget, stops, sampling)
            elif not fields:
                raw = self._raw(loaded, prompt, budget, [*stops, CHAT_ADAPTER_END], sampling)
                finish = "stop" if raw.stopped or raw.new_tokens < budget else "length"
                reply = Generation(raw.text.strip(), prompt_tokens, raw.new_tokens, finish)
            else:
                reply = self._guided(loaded, prompt, prompt_tokens, fields, budget, [*stops, *_FIELD_STOPS],
                                     sampling, constraints)
            cached = min(store.call_reused or 0, prompt_tokens) if store is not None else 0
            return dataclasses.replace(reply, cached_tokens=cached)

    def _guided(
        self,
        loaded: LoadedModel,
        prompt: str,
        prompt_tokens: int,
        fields: Sequence[str],
        budget: int,
        stops: Sequence[str],
        sampling: dict,
        constraints: dict[str, _constraints.Constraint] | None = None,
    ) -> Generation:
        """Write the ChatAdapter headers ourselves; the model fills in each field's value.

        A field with a constraint (`inference/constraints.py`) is written by `_constrained`: the model chooses,
        the engine writes the structure, so the value always parses and names only what it may name.
        """
        tokenizer = loaded.tokenizer
        reply, used = "", 0
        if prompt.endswith(":"):  # an open "Assistant:" turn of a transcript: the reply starts after a space
            prompt += " "
        for field in fields:
            header = f"[[ ## {field} ## ]]\n"
            used += len(tokenizer(header, add_special_tokens=False)["input_ids"])
            if used >= budget:
                return Generation(reply.strip(), prompt_tokens, used, "length")
            constraint = (constraints or {}).get(field)
            if constraint is not None:
                value, spent = self._constrained(loaded, prompt + reply + header, constraint, budget - used, stops,
                                                 sampling)
                used += spent
                reply += header + value + "\n\n"
                continue
            raw = self._raw(loaded, prompt + reply + header, budget - used, stops, sampling)
            used += raw.new_tokens
            reply += header + raw.text.strip() + "\n\n"
            if not raw.stopped and used >= budget:
                return Generation(reply.strip(), prompt_tokens, used, "length")
        reply += CHAT_ADAPTER_END
        used += len(tokenizer(CHAT_ADAPTER_END, add_special_tokens=False)["input_ids"])
        return Generation(reply, prompt_tokens, used, "stop")

    # -- replies that are a JSON schema's object (inference/schema_plan.py) --------------------------------------

    def _json(
        self, loaded: LoadedModel, prompt: str, prompt_tokens: int, plan: _schema_plan.SchemaPlan, budget: int,
        stops: Sequence[str], sampling: dict,
    ) -> Generation:
        """Write the schema's object: braces, keys, quotes and commas by the engine, each value by the model through
        its constraint. Choices and one-ofs always run (they cost a few tokens each); the free strings share what
        is left of `budget` evenly, so a long first string cannot leave a later field unwritten."""
        if plan.whole is not None:
            value, used = self._json_value(loaded, prompt, plan.whole, budget, stops, sampling)
            return Generation(value, prompt_tokens, used, "stop")
        reply, used = "{", 0
        free = sum(isinstance(v, _schema_plan.FreeString | _schema_plan.StringList | _constraints.ObjectList)
                   for _, v in plan.fields)
        for position, (name, constraint) in enumerate(plan.fields):
            reply += ("" if position == 0 else ", ") + json.dumps(name, ensure_ascii=False) + ": "
            share = budget - used
            if isinstance(constraint, _schema_plan.FreeString | _schema_plan.StringList | _constraints.ObjectList):
                share = max(0, (budget - used) // max(1, free))
                free -= 1
            value, spent = self._json_value(loaded, prompt + reply, constraint, share, stops, sampling)
            reply += value
            used += spent
        reply += "}"
        return Generation(reply, prompt_tokens, used, "length" if used >= budget else "stop")

    def _json_value(
        self, loaded: LoadedModel, text: str, constraint: _schema_plan.Value, budget: int, stops: Sequence[str],
        sampling: dict,
    ) -> tuple[str, int]:
        """One property's value as JSON text, written after `text`, and the tokens the model decoded for it."""
        tokenizer = loaded.tokenizer
        if isinstance(constraint, _constraints.Choice):
            value = self._choice(loaded, text, constraint, sampling)
            return value, len(tokenizer(value, add_special_tokens=False)["input_ids"])
        if isinstance(constraint, _constraints.OneOf):
            bodies = [_constraints.json_string_body(o) for o in constraint.options]
            index, spent = self._choose(loaded, text + '"', _constraints.TokenTrie.of_texts(tokenizer, bodies),
                                        loaded.tokens_starting_with('"'), sampling)
            return '"' + bodies[index or 0] + '"', spent
        if isinstance(constraint, _constraints.ObjectList):
            if constraint.limit == 0 or budget <= 0:
                return "[]", 0
            value = self._object_list(loaded, text, constraint, budget, stops, sampling)
            return value, len(tokenizer(value, add_special_tokens=False)["input_ids"])
        if isinstance(constraint, _schema_plan.StringList):
            return self._json_strings(loaded, text, constraint.limit, budget, stops, sampling)
        return self._json_string(loaded, text + '"', budget, stops, sampling)

    def _json_string(
        self, loaded: LoadedModel, text: str, budget: int, stops: Sequence[str], sampling: dict
    ) -> tuple[str, int]:
        """`"..."`: the model's text after the opening quote in `text`, up to a quote or a newline, escaped."""
        if budget <= 0:
            return '""', 0
        string_stops = ['"', "\n", *stops]
        raw = (self._raw(loaded, text, budget, string_stops, sampling) if self.legacy
               else self._continue(loaded, text, budget, string_stops, sampling))
        return '"' + _constraints.json_string_body(raw.text.strip()) + '"', raw.new_tokens

    def _json_strings(
        self, loaded: LoadedModel, text: str, limit: int, budget: int, stops: Sequence[str], sampling: dict
    ) -> tuple[str, int]:
        """`["...", ...]`: one to `limit` strings by the model; after each the model chooses to close or go on."""
        if limit == 0 or budget <= 0:
            return "[]", 0
        separators = _constraints.TokenTrie.of_texts(loaded.tokenizer, ['"]', '", "'])
        value, spent = "[", 0
        for count in range(1, limit + 1):
            string, used = self._json_string(loaded, text + value + '"', max(1, budget - spent), stops, sampling)
            value += string[:-1]  # left open: the separator the model chooses closes it
            spent += used
            if count == limit or spent >= budget:
                break
            more, used = self._choose(loaded, text + value, separators, [], sampling)
            spent += used
            if more != 1:
                break
            value += '", '
        return value + '"]', spent

    # -- constrained values (inference/constraints.py) --------------------------------------------------

    def _constrained(
        self, loaded: LoadedModel, text: str, constraint: _constraints.Constraint, budget: int,
        stops: Sequence[str], sampling: dict,
    ) -> tuple[str, int]:
        """The value of one constrained field written after `text`, and the tokens it cost."""
        if isinstance(constraint, _constraints.FreeText):
            raw = self._raw(loaded, text, max(1, min(constraint.limit, budget)), stops, sampling)
            value = raw.text.strip()
            if not raw.stopped and raw.new_tokens >= constraint.limit:
                value = _whole_words(value)
            return value, raw.new_tokens
        if isinstance(constraint, _constraints.Choice):
            value = self._choice(loaded, text, constraint, sampling)
        elif isinstance(constraint, _constraints.OneOf):
            trie = _constraints.TokenTrie.of_texts(loaded.tokenizer, constraint.options)
            index, _ = self._choose(loaded, text, trie, loaded.tokens_starting_with("\n"), sampling)
            value = constraint.options[index if index is not None else 0]
        else:
            value = self._object_list(loaded, text, constraint, budget, stops, sampling)
        return value, len(loaded.tokenizer(value, add_special_tokens=False)["input_ids"])

    def _choice(self, loaded: LoadedModel, text: str, choice: _constraints.Choice, sampling: dict) -> str:
        """`["name", ...]`: one to `choice.limit` distinct options, each decoded through the options' token trie."""
        tokenizer = loaded.tokenizer
        quote_ids = loaded.tokens_starting_with('"')
        separators = _constraints.TokenTrie.of_texts(tokenizer, ['"]', '", "'])
        value, chosen = '["', []
        while len(chosen) < choice.limit:
            remaining = [o for o in choice.options if o not in chosen]
            if not remaining:
                break
            bodies = [_constraints.json_string_body(o) for o in remaining]
            index, _ = self._choose(loaded, text + value, _constraints.TokenTrie.of_texts(tokenizer, bodies),
                                    quote_ids, sampling)
            if index is None:
                break
            chosen.append(remaining[index])
            value += bodies[index]
            if len(chosen) == choice.limit or len(remaining) == 1:
                break
            more, _ = self._choose(loaded, text + value, separators, [], sampling)
            if more != 1:
                break
            value += '", "'
        return value + '"]' if chosen else "[]"

    def _object_list(
        self, loaded: LoadedModel, text: str, shape: _constraints.ObjectList, budget: int,
        stops: Sequence[str], sampling: dict,
    ) -> str:
        """`[{"p": "...", ...}, ...]`: keys and punctuation written here, each string by the model (one line)."""
        tokenizer = loaded.tokenizer
        # The closing quote belongs to the separator: after a string the model would write `"},` or `"}]` as
        # one token, and a lone `"` token at the end of the text leaves it off its own distribution.
        separators = _constraints.TokenTrie.of_texts(tokenizer, ['"}]', '"}, {'])
        string_stops = ['"', "\n", *stops]
        banned = loaded.tokens_starting_with('"')  # an empty first string (`""`) is no step
        value, spent = "[{", 0  # each string is left open: the next key's or the separator's text closes it
        for count in range(1, shape.limit + 1):
            for position, name in enumerate(shape.properties):
                value += ('"' if position == 0 else '", "') + f'{name}": "'
                if (options := shape.options_of(name)) is not None:
                    bodies = [_constraints.json_string_body(o) for o in options]
                    index, used = self._choose(loaded, text + value, _constraints.TokenTrie.of_texts(tokenizer, bodies),
                                               [], sampling)
                    spent += used
                    value += bodies[index or 0]
                    continue
                room = max(1, min(_constraints.STRING_TOKENS, budget - spent))
                if self.legacy:
                    raw = self._raw(loaded, text + value, room, string_stops, sampling)
                else:
                    raw = self._continue(loaded, text + value, room, string_stops, sampling,
                                         ban_first=banned if position == 0 else ())
                spent += raw.new_tokens
                value += _constraints.json_string_body(raw.text.strip())
            if count == shape.limit or spent >= budget:
                break
            more, _ = self._choose(loaded, text + value, separators, [], sampling)
            if more != 1:
                break
            value += '"}, {'
        return value + '"}]'

    def _choose(
        self, loaded: LoadedModel, text: str, trie: _constraints.TokenTrie, end_ids: Sequence[int], sampling: dict
    ) -> tuple[int | None, int]:
        """Decode one option of `trie` after `text`: the option's index (None for an empty trie) and tokens decoded.

        Each step the model's logits are masked to the tokens the trie allows next; where only one token
        is allowed it is taken without running the model. Where an option ends but a longer one goes on
        (`film` / `film.director`), the option ends when the best of `end_ids` (what may follow it, e.g.
        a closing quote) beats every continuation. Prefix-cached like `_continue`.
        """
        import torch

        head = loaded.partial_head
        ids, kv, reused, store = self._cached_prefix(loaded, text)
        fed, pending = list(ids[:reused]), list(ids[reused:])
        node, picked = trie.root, 0
        ends = torch.tensor(list(end_ids), dtype=torch.long) if end_ids else None
        with torch.inference_mode():
            while True:
                nexts, ended = trie.next_tokens(node), trie.ended(node)
                if not nexts:
                    break
                if len(nexts) == 1 and ended is None:
                    token = nexts[0]  # forced: no choice, no forward pass
                else:
                    step = torch.tensor([pending], dtype=torch.long)
                    wanted = torch.tensor(nexts, dtype=torch.long)
                    if ended is not None and ends is not None:
                        wanted = torch.cat([wanted, ends])
                    logits = head.logits(step, kv, wanted)
                    fed += pending
                    pending = []
                    scores = logits[: len(nexts)].float()
                    if ended is not None and ends is not None:
                        scores = torch.cat([scores, logits[len(nexts):].float().max().reshape(1)])
                    pick = _pick(scores, sampling, None)
                    if pick == len(nexts):  # the option ending here beat every continuation
                        break
                    token = nexts[pick]
                pending.append(token)
                picked += 1
                node = node[token]
        if store is not None and fed:
            store.put(fed, kv)  # the cache holds exactly the positions of `fed`
        return trie.ended(node), picked


def _whole_words(text: str) -> str:
    """`text` cut by a token cap, less the word the cap may have split (a text of one word is kept whole)."""
    if not text or text[-1] in " .,;:!?)]\"'":
        return text.rstrip()
    head, space, _ = text.rpartition(" ")
    return head.rstrip(" ,;:") if space and head.strip() else text
