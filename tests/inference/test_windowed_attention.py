"""A sliding-window layer's attention reads only its window and gives what the full eager path gives.

A tiny random Gemma 3 (window of 8 tokens, sliding and global layers) runs the same token sequence both
ways, as the engine does: a long prefill, then blocks of a few tokens over the growing KV cache. The
windowed path must actually slice (the keys it multiplies are counted) and match the eager logits.
"""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache, Gemma3ForCausalLM, Gemma3TextConfig

from ppoga_dspy.inference import windowed_attention
from ppoga_dspy.inference.windowed_attention import WINDOWED_EAGER, register_windowed_eager

WINDOW = 8


def _tiny_gemma() -> Gemma3ForCausalLM:
    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, sliding_window=WINDOW,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"], max_position_embeddings=256,
    )
    return Gemma3ForCausalLM(config).eval()


def _logits(model: Gemma3ForCausalLM, ids: torch.Tensor, blocks: list[int]) -> torch.Tensor:
    """Logits of every position of `ids`, computed as a prefill of the first part and then `blocks` on the cache."""
    cache = DynamicCache()
    prefill = ids.shape[1] - sum(blocks)
    parts, start = [], 0
    with torch.no_grad():
        for size in [prefill, *blocks]:
            out = model(input_ids=ids[:, start:start + size], cache=cache, use_cache=True)
            parts.append(out.logits)
            start += size
    return torch.cat(parts, dim=1)


@pytest.mark.parametrize("prefill_chunk", [4, 256])
def test_sliding_layers_read_only_their_window_and_give_the_eager_logits(monkeypatch, prefill_chunk):
    monkeypatch.setattr(windowed_attention, "QUERY_CHUNK", prefill_chunk)  # 4: a prefill runs in chunks
    model = _tiny_gemma()
    ids = torch.randint(0, 97, (1, 60))
    blocks = [1, 5, 1, 3]  # decode steps and prompt-lookup drafts over the cache

    model.set_attn_implementation("eager")
    eager = _logits(model, ids, blocks)

    seen: list[int] = []
    from transformers.models.gemma3 import modeling_gemma3  # the windowed path imports eager from here per call

    original = modeling_gemma3.eager_attention_forward

    def counting(module, query, key, value, mask, **kwargs):
        seen.append(key.shape[-2])
        return original(module, query, key, value, mask, **kwargs)

    monkeypatch.setattr(modeling_gemma3, "eager_attention_forward", counting)
    model.set_attn_implementation(register_windowed_eager())
    assert model.config._attn_implementation == WINDOWED_EAGER
    windowed = _logits(model, ids, blocks)

    torch.testing.assert_close(windowed, eager, rtol=1e-5, atol=1e-5)
    # a decode step of one token over 51+ cached positions reads at most window + 1 keys in a sliding layer,
    # while the global layer still reads them all
    assert min(seen) <= WINDOW + 1
    assert max(seen) >= 50
    if prefill_chunk == 4:  # the 50-token prefill ran in chunks, none reading more than its window + chunk
        assert seen.count(max(seen)) < len(seen) // 2


@pytest.mark.slow
def test_the_embedded_model_runs_the_windowed_path_in_bfloat16(embedded_engine):
    loaded = embedded_engine.loaded()
    if loaded.dtype != "bfloat16":
        pytest.skip("this CPU has no native bf16: the float32 model keeps sdpa, the legacy engine's reference")
    assert loaded.model.config._attn_implementation == WINDOWED_EAGER
