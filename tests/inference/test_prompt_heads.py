"""Prompt heads kept on disk (inference/prompt_heads.py): a predictor's system message is prefilled once per machine.

The store tests use real transformers caches of random tensors; the slow one loads Gemma 3 270M and
checks that a fresh store (a new process) reuses the head, that the head holds the system message and
nothing of the question, and that the reply is the one computed without any cache.
"""

from __future__ import annotations

import dspy
import pytest

from ppoga_dspy.inference.prompt_heads import HEADS_ENV, MIN_HEAD_TOKENS, HeadStore, heads_enabled, system_head
from ppoga_dspy.lm.embedded import EmbeddedEngine


def _kv(length: int, layers: int = 3):
    import torch
    from transformers import DynamicCache

    generator = torch.Generator().manual_seed(length)
    return DynamicCache(ddp_cache_data=[
        (torch.randn(1, 1, length, 8, generator=generator), torch.randn(1, 1, length, 8, generator=generator))
        for _ in range(layers)])


def test_a_head_saved_by_one_store_is_found_and_loaded_cropped_by_another(tmp_path):
    import torch

    head = list(range(100, 140))
    kv = _kv(50)  # the call's whole prompt: the head and what followed it
    HeadStore(tmp_path).save(head, kv)

    again = HeadStore(tmp_path)  # a new process: reads the folder
    found, n = again.longest(head + [7, 8, 9])
    assert n == len(head) and again.knows(head)
    loaded = again.load(found, 30)
    assert loaded.get_seq_length() == 30
    for mine, theirs in zip(kv.layers, loaded.layers, strict=True):
        assert torch.equal(mine.keys[:, :, :30], theirs.keys) and torch.equal(mine.values[:, :, :30], theirs.values)
    assert again.longest([1, 2, 3]) == (None, 0)


def test_short_heads_are_not_kept_and_damaged_files_are_skipped(tmp_path):
    store = HeadStore(tmp_path)
    store.save(list(range(MIN_HEAD_TOKENS - 1)), _kv(40))
    assert len(store) == 0 and not list(tmp_path.iterdir())
    store.save(list(range(40)), _kv(40))
    (tmp_path / "garbage.safetensors").write_bytes(b"not a safetensors file")
    assert len(HeadStore(tmp_path)) == 1


def test_the_store_forgets_its_least_recently_used_heads(tmp_path):
    import os

    store = HeadStore(tmp_path, max_files=2)
    for start, stamp in ((0, 1_000_000), (1000, 2_000_000)):
        store.save(list(range(start, start + 40)), _kv(40))
        newest = max(tmp_path.glob("*.safetensors"), key=lambda p: p.stat().st_mtime_ns)
        os.utime(newest, (stamp, stamp))  # an unambiguous age: the first head is the least recently used
    store.save(list(range(2000, 2040)), _kv(40))
    assert len(list(tmp_path.glob("*.safetensors"))) == 2
    again = HeadStore(tmp_path)
    assert not again.knows(list(range(0, 40))) and again.knows(list(range(1000, 1040)))


class _CharTokenizer:
    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [ord(c) for c in text]}


def test_the_head_ends_with_the_system_message():
    system = "Your input fields are: question. Answer it in one word, as the demos do."
    prompt = f"<bos>System: {system}\n\nUser: Who wrote Hamlet?\n\nAssistant:"
    ids = _CharTokenizer()(prompt)["input_ids"]
    head = system_head(prompt, ids, system, _CharTokenizer())
    assert "".join(map(chr, head)) == f"<bos>System: {system}"
    assert system_head(prompt, ids, None, _CharTokenizer()) == []
    assert system_head(prompt, ids, "Answer.", _CharTokenizer()) == []  # too short to be worth a file


def test_heads_can_be_turned_off(monkeypatch):
    monkeypatch.delenv(HEADS_ENV, raising=False)
    assert heads_enabled()
    monkeypatch.setenv(HEADS_ENV, "off")
    assert not heads_enabled()


class TopicQA(dspy.Signature):
    """Name the topic of the question, then answer it in a few words. Keep both short and plain."""

    question: str = dspy.InputField()
    topic: str = dspy.OutputField()
    answer: str = dspy.OutputField()


@pytest.mark.slow
def test_a_new_process_reuses_the_head_and_the_reply_is_unchanged(tmp_path, monkeypatch):
    adapter = dspy.ChatAdapter()
    demos = [dspy.Example(question="What is the capital of Spain?", topic="geography", answer="Madrid")]
    first = adapter.format(TopicQA, demos=demos, inputs={"question": "Who wrote Hamlet?"})
    second = adapter.format(TopicQA, demos=demos, inputs={"question": "What is the capital of France?"})
    engine = EmbeddedEngine(dtype="float32")
    store = engine.loaded().prefix_cache
    monkeypatch.setattr(store, "heads", HeadStore(tmp_path))
    store.clear()
    engine.generate(first, max_tokens=16)
    assert store.heads.saves == 1
    saved = HeadStore(tmp_path)
    (head,) = saved._index()
    text = engine.loaded().tokenizer.decode(head.ids)
    assert text.rstrip().endswith(first[0]["content"].rstrip()[-40:]) and "Hamlet" not in text

    store.clear()  # a new process: nothing in memory, the head on disk
    monkeypatch.setattr(store, "heads", saved)
    reply = engine.generate(second, max_tokens=16)
    assert saved.loads == 1
    assert reply == EmbeddedEngine(dtype="float32", prefix_cache=False).generate(second, max_tokens=16)


def test_a_cache_it_cannot_write_is_tried_once(tmp_path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the heads folder should be")
    store = HeadStore(blocker / "heads")
    with caplog.at_level("WARNING"):
        store.save(list(range(40)), _kv(40))
        store.save(list(range(100, 140)), _kv(40))
    assert store.saves == 0 and len(caplog.records) == 1 and "PPOGA_MODEL_CACHE" in caplog.records[0].getMessage()
