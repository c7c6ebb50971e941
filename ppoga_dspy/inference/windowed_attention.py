"""Eager attention that reads, in a sliding-window layer, only the keys that layer can see.

Gemma 3 keeps five of every six layers local: a token there attends to the last `sliding_window` (512) tokens.
transformers' eager path keeps every layer's whole KV cache (the prefix cache needs it: a cached prefix is
extended, cut back and shared between calls) and lets the mask hide the rest, so a decode step of a
1,800-token fused prompt multiplied and soft-maxed 1,800 keys in all 18 layers where 15 of them need the last
512. Profiled on recorded `think_evaluate` prompts, attention was a third of a fully cached call.

This function slices the keys, values and mask of a sliding layer down to the window before the same eager
arithmetic, and cuts a long block of queries (a prefill) into chunks that each read only their own window.
What is dropped is what the mask sets to minus infinity, whose softmax weight is exactly zero: the result
is the same sum over the same keys, differing from the unsliced path only by the rounding of differently
shaped matmuls. Global layers, and sliding layers whose cache is still within the window, take the plain path.
"""

from __future__ import annotations

from typing import Any

#: The name the engine sets as the model's attention implementation (`loading._load`).
WINDOWED_EAGER = "ppoga_windowed_eager"

#: Queries per chunk of a sliding layer's prefill: each chunk reads `QUERY_CHUNK + window` keys instead of all.
QUERY_CHUNK = 256


def windowed_eager_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    *,
    sliding_window: int | None = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """transformers' eager attention over only the keys a sliding layer's window reaches (see module doc).

    The query block is the last `query.shape[-2]` positions of the key sequence (a prefill or a decode step
    over a KV cache); the mask is the eager 4-D additive mask over the whole key sequence, or None.
    """
    import torch
    from transformers.models.gemma3.modeling_gemma3 import eager_attention_forward

    keys, queries = key.shape[-2], query.shape[-2]
    if not sliding_window or keys <= sliding_window + min(queries, QUERY_CHUNK):
        return eager_attention_forward(module, query, key, value, attention_mask, **kwargs)
    start_of_queries = keys - queries  # the key position of the block's first query
    outputs = []
    for first in range(0, queries, QUERY_CHUNK):
        last = min(first + QUERY_CHUNK, queries)
        # query i (key position p) sees keys p - window + 1 .. p: the chunk needs keys from its first query's
        # window start to its last query
        lo = max(0, start_of_queries + first - sliding_window + 1)
        hi = start_of_queries + last
        mask = None if attention_mask is None else attention_mask[..., first:last, lo:hi]
        outputs.append(eager_attention_forward(module, query[..., first:last, :], key[..., lo:hi, :],
                                               value[..., lo:hi, :], mask, **kwargs)[0])
    # eager_attention_forward returns (batch, queries, heads, dim): the chunks join along the queries. The
    # attention weights (asked only with output_attentions, which the engine never sets) are not returned.
    return (outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=1)), None


def register_windowed_eager() -> str:
    """Make `WINDOWED_EAGER` a valid attention implementation (with the eager mask) and return its name. Registering
    again only sets the same entries."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(WINDOWED_EAGER, windowed_eager_attention)
    AttentionMaskInterface.register(WINDOWED_EAGER, eager_mask)
    return WINDOWED_EAGER
