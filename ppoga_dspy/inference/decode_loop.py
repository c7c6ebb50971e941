"""The decode loop of the embedded engine: settings, prompt rendering, and free text continued token by token.

`Decoder` holds an engine's settings and continues a text: `_raw` with transformers' `generate` (the
legacy path) or `_continue` (the fast path). The reply's structure (ChatAdapter headers, constrained
values) is written on top of it in `inference/guided.py`.

Speed (issue 12). A reply used to cost one full prefill per output field (`model.generate` on
`prompt + reply-so-far + header`, from scratch) in float32. The default path now
- keeps the attention KV cache of recent token sequences in a `PrefixCache` keyed by token ids, so a
  field continues where the previous one stopped, and a call that shares the system prompt and demos
  of an earlier call (every call of one predictor does) only prefills what is new;
- keeps each predictor's prompt head (its system message: instructions and field descriptions, the
  same in every call) on disk as well (`inference/prompt_heads.py`), so a new process does not prefill it
  again: a warm `ppoga ask` prefilled about 1,400 tokens of system messages the last process had
  already encoded;
- runs a small greedy/sampling loop of its own over the model's forward pass (no per-call
  `generate` set-up, logits only for the last position, stop checks on a short decoded tail);
- computes in bfloat16 where the CPU has native bf16 (AVX512-BF16 / AMX), float32 elsewhere
  (`PPOGA_EMBEDDED_DTYPE=float32|bfloat16|auto`);
- ends a greedy field that has fallen into a loop (`greedy_loop`: the same block of tokens over and
  over, which greedy decoding never leaves) instead of decoding it to `max_tokens`: with the tiny
  model that was the costliest kind of call (256 tokens of "The best answer is:"), and its text is
  kept with one copy of the block, so the reply also ends properly and parses more often;
- checks prompt-lookup drafts (`decoding.lookup_draft`: what followed the last few tokens earlier in
  the prompt) in one forward pass per draft when decoding greedily, and scores a constrained step on
  only its candidates' rows of the output layer (`decoding.PartialHead`): on the 45 recorded prompts
  (one thread) 1,332 forward passes became 495 and the replay 1.7x faster, 41 replies identical and
  the other 4 differing by float rounding of the batched pass;
- runs bf16 attention on the eager path (bf16 matmuls), which beats torch's CPU flash kernel on these
  prompt lengths (see `loading._load`), and reads in a sliding-window layer only the keys its window reaches
  (`inference/windowed_attention.py`: 15 of Gemma 3's 18 layers, 1.25x on recorded fused 3-hop calls);
- runs torch on every core this process may use (`embedded_threads`; `PPOGA_EMBEDDED_THREADS=N`
  overrides it). Half the cores was the default while the CI machine was shared by many jobs (a
  descheduled thread stalls every parallel region: a 500-token prefill took 7.0 s on 2 threads and
  1.0 s on 1 under that load), but on a machine of its own all cores win (measured on 2 cores: a warm
  `ppoga ask` 85 s on 1 thread, 54 s on 2). `ppoga eval --threads N` runs N questions in one process,
  and their replies are serialised by the model's lock, so one reply at a time still gets every core;
  several *processes* sharing a machine should set `PPOGA_EMBEDDED_THREADS` to their share.
The old path stays selectable (`EmbeddedEngine(legacy=True)` or `PPOGA_EMBEDDED_LEGACY=1`) so that
`benchmarks/lm_bench.py` can measure old against new in one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ppoga_dspy.inference import decoding as _decoding
from ppoga_dspy.inference.catalogue import CATALOGUE, PromptStyle, resolve_embedded_name
from ppoga_dspy.inference.constraints import FREE_TEXT_TOKENS
from ppoga_dspy.inference.errors import InferenceConfigError
from ppoga_dspy.inference.loading import LoadedModel, _eos_ids, load_embedded
from ppoga_dspy.inference.lora import adapter_digest
from ppoga_dspy.inference.options import (
    DTypeName,
    constrain_from_environment,
    embedded_threads,
    legacy_from_environment,
    resolve_free_text_tokens,
)
from ppoga_dspy.inference.prefix_cache import drop_last

#: Replies are kept short by default: two CPU cores produce roughly 10-20 tokens per second.
DEFAULT_EMBEDDED_MAX_TOKENS = 256


def render_transcript(chat: Sequence[dict[str, str]]) -> str:
    """A plain `System:/User:/Assistant:` transcript ending in an open `Assistant:` turn (for base models)."""
    labels = {"system": "System", "user": "User", "assistant": "Assistant"}
    turns = [f"{labels.get(m['role'], 'User')}: {m['content'].strip()}" for m in chat]
    return "\n\n".join(turns) + "\n\nAssistant:"


# A base model continuing a transcript starts the next turn itself; stop it there.
_TRANSCRIPT_STOPS = ("\nUser:", "\nSystem:")


@dataclass(frozen=True)
class Generation:
    """One reply: its text (prompt echo and stop sequence removed) and what it cost."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: Literal["stop", "length"]
    #: Of `prompt_tokens`, how many came from the KV cache (an earlier call's prefix or a prompt head on disk). A
    #: cost note, not part of the reply: equal replies are equal whether or not the engine had them cached.
    cached_tokens: int = field(default=0, compare=False)


@dataclass(frozen=True)
class _Raw:
    text: str
    new_tokens: int
    stopped: bool


def _tail_hits_stop(tokenizer: Any, generated: Sequence[int], stops: Sequence[str], tail: int) -> bool:
    """Whether the decoded last `tail` generated tokens contain a stop sequence (shared by both engines)."""
    text = tokenizer.decode(generated[-tail:], skip_special_tokens=True)
    if len(generated) <= tail:  # leading whitespace is not a reply yet: "\n\n" there ends nothing
        text = text.lstrip()
    return any(s in text for s in stops)


def _stop_tail(stops: Sequence[str]) -> int:
    return max((len(s) for s in stops), default=0) + 8  # tokens are at least one character


class _StopOnText:
    """Stop generating once the decoded tail of the new tokens contains a stop sequence.

    transformers' own `stop_strings` pre-computes tables over the whole vocabulary on every call,
    which costs seconds to tens of seconds with Gemma's 262k-token vocabulary; decoding a short tail
    per step costs microseconds.
    """

    def __init__(self, tokenizer: Any, prompt_tokens: int, stops: Sequence[str]) -> None:
        self.tokenizer, self.prompt_tokens, self.stops = tokenizer, prompt_tokens, tuple(stops)
        self.tail = _stop_tail(stops)

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        generated = input_ids[0, self.prompt_tokens :]
        hit = _tail_hits_stop(self.tokenizer, generated, self.stops, self.tail)
        return torch.full((input_ids.shape[0],), hit, dtype=torch.bool, device=input_ids.device)


class Decoder:
    """An embedded engine's settings and its decode loop over free text. Cheap to construct; the weights load
    on the first call.

    `legacy=False` (default; `$PPOGA_EMBEDDED_LEGACY=1` flips it) uses the fast path of `_continue`;
    `legacy=True` is the original engine (`model.generate` per field, float32), kept so that measurements
    can compare the two in one process. `dtype` (`auto`, `bfloat16`, `float32`; default
    `$PPOGA_EMBEDDED_DTYPE` or `auto`) applies to the fast path only.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        prompt_style: PromptStyle | None = None,
        default_max_tokens: int = DEFAULT_EMBEDDED_MAX_TOKENS,
        guide_adapter_fields: bool = True,
        legacy: bool | None = None,
        dtype: DTypeName | None = None,
        prefix_cache: bool = True,
        stop_loops: bool = True,
        speculate: bool = True,
        constrain: bool | None = None,
        free_text_tokens: int | None = None,
        adapter: str | Path | None = None,
    ) -> None:
        self.name = resolve_embedded_name(name)
        self.info = CATALOGUE[self.name]
        if prompt_style not in (None, "chat_template", "transcript"):
            raise InferenceConfigError(f"prompt_style must be 'chat_template' or 'transcript', not {prompt_style!r}")
        self.prompt_style: PromptStyle = prompt_style or self.info.prompt_style
        self.default_max_tokens = default_max_tokens
        self.guide_adapter_fields = guide_adapter_fields
        self.legacy = legacy_from_environment() if legacy is None else bool(legacy)
        if dtype not in (None, "auto", "bfloat16", "float32"):
            raise InferenceConfigError(f"dtype must be 'auto', 'bfloat16' or 'float32', not {dtype!r}")
        self.dtype: DTypeName | None = dtype
        self.prefix_cache = prefix_cache
        self.stop_loops = stop_loops
        self.speculate = speculate
        self.threads = None if self.legacy else embedded_threads()
        self.constrain = constrain_from_environment() if constrain is None else bool(constrain)
        #: Tokens at most per free-text field of a guided reply (0: no cap); with `constrain` only.
        self.free_text_tokens = resolve_free_text_tokens(free_text_tokens, FREE_TEXT_TOKENS)
        # Checked and hashed now, not at the first call: a missing adapter is a configuration error, and the
        # digest is part of this engine's identity (the response cache never mixes base and adapted replies).
        self.adapter = str(Path(adapter).resolve()) if adapter is not None else None
        self.adapter_digest = adapter_digest(self.adapter) if self.adapter is not None else None

    def loaded(self) -> LoadedModel:
        """The weights this engine runs on (loading them on first use)."""
        return load_embedded(self.name, dtype=self.dtype, legacy=self.legacy, adapter=self.adapter)

    def _uses_template(self, tokenizer: Any) -> bool:
        return self.prompt_style == "chat_template" and bool(tokenizer.chat_template)

    def render(self, chat: Sequence[dict[str, str]]) -> str:
        """The exact prompt text the model sees for `chat`, ending where the assistant's reply begins."""
        tokenizer = self.loaded().tokenizer
        if self._uses_template(tokenizer):
            return tokenizer.apply_chat_template(list(chat), tokenize=False, add_generation_prompt=True)
        return (tokenizer.bos_token or "") + render_transcript(chat)

    def _raw(self, loaded: LoadedModel, text: str, budget: int, stops: Sequence[str], sampling: dict) -> _Raw:
        """Continue `text` for at most `budget` tokens; cut at the first stop sequence."""
        if not self.legacy:
            return self._continue(loaded, text, budget, stops, sampling)
        import torch
        from transformers import StoppingCriteriaList

        tokenizer, model = loaded.tokenizer, loaded.model
        # The rendered prompt already carries BOS / the template's special tokens.
        input_ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        start = int(input_ids.shape[1])
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        criteria = StoppingCriteriaList([_StopOnText(tokenizer, start, stops)]) if stops else None
        with torch.inference_mode():
            output = model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=budget,
                stopping_criteria=criteria,
                pad_token_id=pad,
                **sampling,
            )
        new_tokens = output[0, start:]
        # Decode only the new tokens: the prompt is never echoed back.
        decoded = tokenizer.decode(new_tokens, skip_special_tokens=True).lstrip()
        cut = min((i for i in (decoded.find(s) for s in stops) if i >= 0), default=-1)
        ended_on_eos = len(new_tokens) > 0 and int(new_tokens[-1]) in _eos_ids(model, tokenizer)
        return _Raw(decoded[:cut] if cut >= 0 else decoded, int(len(new_tokens)), cut >= 0 or ended_on_eos)

    def _continue(
        self, loaded: LoadedModel, text: str, budget: int, stops: Sequence[str], sampling: dict,
        ban_first: Sequence[int] = (),
    ) -> _Raw:
        """The fast `_raw`: same tokens in, same stopping rules, but prefix-cached and with our own decode loop.

        Greedy decoding here picks exactly what `generate` picks (argmax of the last logits; the
        model's generation config adds no logits processor), so only float rounding of the cached
        attention can tell the two apart. With `speculate` (greedy only) each forward pass also checks a
        prompt-lookup draft (`decoding.lookup_draft`): every kept token is still the model's argmax at its
        position, and the KV cache is cropped back past the first rejected draft token.
        """
        import torch

        tokenizer, model = loaded.tokenizer, loaded.model
        ids, kv, reused, store = self._cached_prefix(loaded, text)
        tail = _stop_tail(stops)
        generated: list[int] = []
        kept = 0  # with a loop cut: how many generated tokens the reply keeps
        generator = None
        greedy = not sampling.get("do_sample")
        watch_loops = self.stop_loops and greedy
        speculate = self.speculate and greedy
        pending = list(ids[reused:])  # fed next; every earlier position is in `kv`
        done = stopped = False
        with torch.inference_mode():
            while not done and len(generated) < budget:
                room = min(budget - len(generated) - 1, _decoding.LOOKUP_MAX_DRAFT)
                draft = _decoding.lookup_draft(ids + generated, room) if speculate and generated else []
                feed = torch.tensor([pending + draft], dtype=torch.long)
                rows = model(input_ids=feed, cache=kv, use_cache=True, logits_to_keep=len(draft) + 1).logits[0]
                for position in range(len(draft) + 1):
                    logits = rows[position]
                    if not generated and ban_first:
                        logits = logits.clone()
                        logits[torch.tensor(list(ban_first), dtype=torch.long)] = float("-inf")
                    token = _pick(logits, sampling, generator)
                    generated.append(token)
                    if token in loaded.eos_ids:
                        stopped = done = True
                    elif stops and _tail_hits_stop(tokenizer, generated, stops, tail):
                        done = True
                    elif watch_loops and (period := greedy_loop(generated)):
                        kept = len(generated) - loop_span(period) + period
                        stopped = done = True
                    if done or len(generated) >= budget or position == len(draft) or token != draft[position]:
                        break
                # `kv` holds what was fed; keep the prompt and every generated token but the last (fed next).
                drop_last(kv, kv.get_seq_length() - (len(ids) + len(generated) - 1))  # fed, past what was kept
                pending = [generated[-1]]
        if store is not None:
            store.put(ids + generated[:-1] if generated else ids[:reused], kv)
        decoded = tokenizer.decode(generated[:kept] if kept else generated, skip_special_tokens=True).lstrip()
        cut = min((i for i in (decoded.find(s) for s in stops) if i >= 0), default=-1)
        return _Raw(decoded[:cut] if cut >= 0 else decoded, len(generated), cut >= 0 or stopped)

    def _cached_prefix(self, loaded: LoadedModel, text: str) -> tuple[list[int], Any, int, Any]:
        """`text`'s token ids, the KV cache of its longest cached prefix (a fresh one if none), how many ids
        it covers, and the prefix store (None with the cache off)."""
        ids: list[int] = loaded.tokenizer(text, add_special_tokens=False)["input_ids"]
        store = loaded.prefix_cache if self.prefix_cache else None
        kv, reused = store.take(ids) if store is not None else (None, 0)
        if kv is None:
            from transformers import DynamicCache

            # Full (non-sliding) layers: a sliding-window layer keeps only its last window and could not
            # be cropped back to a shorter prefix. The model's masks still apply the sliding window.
            kv = DynamicCache()
        return ids, kv, reused, store


#: A loop must cover at least this many tokens (and three periods) before decoding stops on it.
LOOP_MIN_TOKENS = 24
#: A block this long or longer, written twice in a row word for word, is already a loop: two periods suffice.
LONG_LOOP_PERIOD = 32
LOOP_MAX_PERIOD = 96


def loop_span(period: int, min_tokens: int = LOOP_MIN_TOKENS) -> int:
    """How many tokens of repeats make a loop of this period (see `greedy_loop`)."""
    return 2 * period if period >= LONG_LOOP_PERIOD else max(3 * period, min_tokens)


def greedy_loop(generated: Sequence[int], min_tokens: int = LOOP_MIN_TOKENS, max_period: int = LOOP_MAX_PERIOD) -> int:
    """The period p if the last max(3p, min_tokens) tokens repeat one p-token block (2p for a block of at least
    `LONG_LOOP_PERIOD` tokens), else 0.

    Greedy decoding that has produced the same block three times (and at least `min_tokens` tokens
    of it) is at a fixed point: each further copy makes the next one likelier still. The caller keeps
    one copy of the block and ends the field. A long block (a list of a dozen names, about 50 tokens) written
    out twice is at the same fixed point; waiting for its third copy spent a whole 256-token reply budget.
    """
    n = len(generated)
    for period in range(1, min(max_period, n // 2) + 1):
        span = loop_span(period, min_tokens)
        if span > n:
            continue
        tail = generated[n - span :]
        if all(tail[i] == tail[i - period] for i in range(period, span)):
            return period
    return 0


def _pick(logits: Any, sampling: dict, generator: Any) -> int:
    """The next token: argmax when greedy, else temperature / top-p sampling from the torch RNG."""
    import torch

    if not sampling.get("do_sample"):
        return int(torch.argmax(logits))
    scores = logits.float() / float(sampling.get("temperature") or 1.0)
    probs = torch.softmax(scores, dim=-1)
    top_p = sampling.get("top_p")
    if top_p is not None and 0 < float(top_p) < 1:
        sorted_probs, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < float(top_p)  # always keeps the best token
        sorted_probs = sorted_probs * keep
        return int(order[torch.multinomial(sorted_probs / sorted_probs.sum(), 1, generator=generator)])
    return int(torch.multinomial(probs, 1, generator=generator))

