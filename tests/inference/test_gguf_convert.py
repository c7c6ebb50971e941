"""The one-pass GGUF conversion of a cold load (issue 12): the same tokenizer, weights and greedy replies as
transformers' own GGUF path, a conversion cache in the dtype that runs, and the threads default.

The slow tests build the reference once per module through transformers' GGUF path (about a minute on two
cores: that slowness is what the converter removes) and compare against it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppoga_dspy.inference import catalogue, gguf_convert, loading, options

PROMPTS = [
    "System: Answer briefly.\n\nUser: Where was the director of Inception born?\n\nAssistant:",
    "[[ ## relations ## ]]\n[\"film.film.directed_by\", \"people.person.place_of_birth\"]\n\n",
    "  leading spaces,\ttabs, ünïcödé, emoji 🙂 and <bos> <eos> markers",
]


def test_threads_default_to_every_usable_core(monkeypatch):
    monkeypatch.delenv(options.THREADS_ENV, raising=False)
    monkeypatch.setattr(options.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert options.embedded_threads() == 3
    monkeypatch.setenv(options.THREADS_ENV, "1")
    assert options.embedded_threads() == 1


def test_cache_folder_is_named_by_dtype(monkeypatch, tmp_path):
    monkeypatch.setenv(loading.MODEL_CACHE_ENV, str(tmp_path))
    gguf = tmp_path / "x.gguf"
    gguf.write_bytes(b"0" * 10)
    info = catalogue.CATALOGUE["gemma3-270m"]
    fp32 = loading._converted_dir(info, gguf, "float32")
    bf16 = loading._converted_dir(info, gguf, "bfloat16")
    assert fp32.name.startswith("gemma3-270m-10-transformers") and not fp32.name.endswith("float32")  # as before
    assert bf16.name == fp32.name + "-bfloat16"


@pytest.fixture(scope="module")
def gguf_path() -> Path:
    return catalogue.CATALOGUE["gemma3-270m"].locate()


@pytest.fixture(scope="module")
def reference(gguf_path):
    """Tokenizer and float32 model through transformers' own GGUF path (what every cold load used to do)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    return tokenizer, model.eval()


@pytest.mark.slow
def test_config_matches_transformers_parse(gguf_path):
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    assert gguf_convert.config_dict(gguf_convert.read_gguf(gguf_path)) == load_gguf_checkpoint(
        str(gguf_path), return_tensors=False)["config"]


@pytest.mark.slow
def test_float32_conversion_is_bit_identical(gguf_path, reference, tmp_path):
    import torch
    from safetensors import safe_open
    from transformers import AutoConfig, AutoTokenizer

    stock_tokenizer, stock_model = reference
    gguf_convert.convert(gguf_path, tmp_path / "m", "float32")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "m")
    for prompt in PROMPTS:
        assert tokenizer(prompt)["input_ids"] == stock_tokenizer(prompt)["input_ids"]
        assert tokenizer(prompt, add_special_tokens=False)["input_ids"] == stock_tokenizer(
            prompt, add_special_tokens=False)["input_ids"]
    assert len(tokenizer) == len(stock_tokenizer)
    stock_state = stock_model.state_dict()
    with safe_open(tmp_path / "m" / "model.safetensors", "pt") as weights:
        names = set(weights.keys())
        assert names == {n for n in stock_state if n != "lm_head.weight"}  # tied to the embedding, as saved before
        for name in names:
            assert torch.equal(weights.get_tensor(name), stock_state[name]), name
    config = AutoConfig.from_pretrained(tmp_path / "m").to_dict()
    expected = stock_model.config.to_dict()
    # `architectures` is written on save (the old cache files had it too); the in-memory reference has none yet.
    for key in ("dtype", "transformers_version", "_name_or_path", "quantization_config", "architectures"):
        config.pop(key, None)
        expected.pop(key, None)
    assert config == expected
    generation = json.loads((tmp_path / "m" / "generation_config.json").read_text())
    assert generation["eos_token_id"] == stock_model.generation_config.eos_token_id


@pytest.mark.slow
def test_cold_load_caches_bf16_and_replies_like_the_old_path(gguf_path, reference, tmp_path, monkeypatch):
    """A cold `_load` in bfloat16: the cache entry holds bf16 weights, and greedy replies equal those of the old
    path (transformers' GGUF load in float32, its weights cast to bfloat16, RoPE's frequencies kept in float32 as a
    bfloat16 load keeps them)."""
    import torch
    from safetensors import safe_open

    stock_tokenizer, stock_model = reference
    monkeypatch.setenv(loading.MODEL_CACHE_ENV, str(tmp_path))
    loaded = loading._load(catalogue.CATALOGUE["gemma3-270m"], "bfloat16")
    (entry,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert entry.name.endswith("-bfloat16")
    with safe_open(entry / "model.safetensors", "pt") as weights:
        assert {weights.get_tensor(n).dtype for n in weights.keys()} == {torch.bfloat16}
    assert loaded.model.dtype == torch.bfloat16
    # `Module.to` rounds every float buffer too, RoPE's inverse frequencies included, while a model loaded in
    # bfloat16 keeps them in float32 as transformers computes them: keep the reference's, so that only weights differ
    # (on a CPU with native bf16 the rounded frequencies flipped a near-tied greedy token).
    rope = {name: buffer.clone() for name, buffer in stock_model.named_buffers() if name.endswith("inv_freq")}
    old = stock_model.to(torch.bfloat16)
    for name, buffer in rope.items():
        owner, _, attribute = name.rpartition(".")
        setattr(old.get_submodule(owner), attribute, buffer)
    chosen_attention = loaded.model.config._attn_implementation
    loaded.model.set_attn_implementation(old.config._attn_implementation)  # compare weights, not kernels
    try:
        for prompt in PROMPTS:
            ids = stock_tokenizer(prompt, return_tensors="pt")
            assert loaded.tokenizer(prompt)["input_ids"] == ids["input_ids"][0].tolist()
            settings = {"max_new_tokens": 12, "do_sample": False}
            with torch.inference_mode():
                expected = old.generate(**ids, **settings)
                got = loaded.model.generate(**ids, **settings)
            assert got.tolist() == expected.tolist()
    finally:
        stock_model.to(torch.float32)
        loaded.model.set_attn_implementation(chosen_attention)
