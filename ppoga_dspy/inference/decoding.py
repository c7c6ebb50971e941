"""Decoding shortcuts of the embedded engine that leave the greedy choice what it was.

Both exist because of where a reply's time goes on 2 CPU cores (issue 12): after prefill, each
one-token forward pass of Gemma 3 270M costs about 48 ms, 19 ms of it in the 262k-row output layer.
- `PartialHead`: a constrained step (a choice among candidate names) needs the logits of a few
  tokens, not of the whole vocabulary.
- `lookup_draft` (prompt-lookup decoding): the small model copies a lot (plans, relation names,
  entity names from its prompt and demos). Tokens that continue an n-gram already in the context
  are proposed as a draft and checked in one forward pass (8 tokens cost about 64 ms, one 48 ms);
  the model's own greedy token is kept at every position, so a wrong draft costs time, never text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Bumped whenever the fast path's greedy replies change (a kernel, the dtype of a score, a shortcut's
#: rounding): part of the engine's identity, so DSPy's response cache never serves an older decoder's reply.
#: 2: eager bf16 attention, prompt-lookup drafts, constrained steps scored in float32.
#: 3: a block of 32 tokens or more written twice in a row ends the field as a loop (decode_loop.greedy_loop).
#: 4: a sliding-window layer's attention reads only its window (inference/windowed_attention.py): same sums,
#:    other matmul shapes, so a reply may differ by rounding.
DECODER_VERSION = 4

#: Longest and shortest n-gram matched against the context, and the most tokens proposed at once.
LOOKUP_MAX_NGRAM = 4
LOOKUP_MIN_NGRAM = 2
LOOKUP_MAX_DRAFT = 8


def lookup_draft(
    context: Sequence[int],
    limit: int = LOOKUP_MAX_DRAFT,
    max_ngram: int = LOOKUP_MAX_NGRAM,
    min_ngram: int = LOOKUP_MIN_NGRAM,
) -> list[int]:
    """Up to `limit` tokens that followed the latest earlier occurrence of the context's last n tokens.

    The longest n (from `max_ngram` down to `min_ngram`) with an earlier occurrence wins; the most
    recent occurrence is taken (the model's own last copy is its likeliest next one). Empty when
    nothing matches or `limit` < 1.
    """
    size = len(context)
    if limit < 1:
        return []
    for n in range(min(max_ngram, size - 1), min_ngram - 1, -1):
        tail = list(context[size - n :])
        first = tail[0]
        # the occurrence must end before the tail starts being itself, and leave a token to propose
        for start in range(size - n - 1, -1, -1):
            if context[start] == first and list(context[start : start + n]) == tail:
                follow = list(context[start + n : start + n + limit])
                if follow:
                    return follow
    return []


class PartialHead:
    """Next-token logits of only the tokens a constrained step may take.

    Why: the output layer of Gemma 3 270M is 262k x 640, the largest matrix in the model (about 40 % of
    a one-token forward pass), and a constrained step reads a handful of its rows. The body runs as
    in a full forward pass; then only the wanted rows of the output layer are multiplied, in float32,
    with the model's final soft-capping, so each score is the full pass's logit computed without the
    bf16 rounding that makes close candidates tie. A model whose layout is not the usual `model` +
    `lm_head` gets the full pass.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        body, output = getattr(model, "model", None), model.get_output_embeddings()
        self.split = body is not None and output is not None and getattr(output, "bias", None) is None
        self.body, self.weight = body, (output.weight if output is not None else None)
        self.cap = getattr(model.config, "final_logit_softcapping", None)

    def logits(self, input_ids: Any, cache: Any, wanted: Any) -> Any:
        """Logits of the tokens `wanted` (a long tensor) after `input_ids`, extending `cache`."""
        import torch

        if not self.split:
            return self.model(input_ids=input_ids, cache=cache, use_cache=True, logits_to_keep=1).logits[0, -1][wanted]
        hidden = self.body(input_ids=input_ids, cache=cache, use_cache=True).last_hidden_state[0, -1]
        # In float32 whatever the model's dtype: bf16 logits keep 8 bits of mantissa (steps of 1/16 at 8-16),
        # so near candidates tie and the first listed wins (the answer's `"]` over `", "`); a few rows cost nothing.
        logits = torch.nn.functional.linear(hidden.float(), self.weight.index_select(0, wanted).float())
        if self.cap:
            logits = torch.tanh(logits / self.cap) * self.cap
        return logits


