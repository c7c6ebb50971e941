"""The fast embedded engine (issue 12): prefix cache, dtype choice, and replies equal to the legacy engine's.

The mechanics tests run without weights; the ones marked slow load Gemma 3 270M (about a second from
the conversion cache) and compare short greedy replies, so they stay within a few seconds each.
"""

from __future__ import annotations

import dspy
import pytest

from ppoga_dspy.inference import loading, options
from ppoga_dspy.inference.options import resolve_dtype
from ppoga_dspy.inference.prefix_cache import PrefixCache
from ppoga_dspy.lm.embedded import EmbeddedEngine
from ppoga_dspy.lm.errors import LMConfigError


class _FakeKV:
    """Stands in for a DynamicCache: tracks its length and the crops asked of it."""

    def __init__(self, length: int) -> None:
        self.length = length

    def crop(self, tokens_to_remove: int) -> None:
        assert tokens_to_remove < 0
        self.length += tokens_to_remove


def test_prefix_cache_hands_out_the_longest_shared_prefix_cropped():
    cache = PrefixCache(max_entries=4, min_reuse=2)
    cache.put([1, 2, 3, 4, 5], _FakeKV(5))
    cache.put([1, 2, 9, 9], _FakeKV(4))
    kv, reused = cache.take([1, 2, 3, 4, 7, 8])
    assert reused == 4 and kv.length == 4  # cropped back to what the new sequence shares
    assert len(cache) == 1  # taken out: the caller extends it and puts it back
    # Identical sequence: one token is always left to compute, its logits start the reply.
    cache.put([5, 6, 7], _FakeKV(3))
    kv, reused = cache.take([5, 6, 7])
    assert reused == 2 and kv.length == 2
    assert cache.take([42, 43, 44]) == (None, 0)


def test_prefix_cache_evicts_oldest_beyond_its_token_budget():
    cache = PrefixCache(max_entries=8, max_tokens=10, min_reuse=1)
    cache.put([1] * 6, _FakeKV(6))
    cache.put([2] * 6, _FakeKV(6))
    assert len(cache) == 1 and cache.take([1] * 6 + [3]) == (None, 0)


def test_bf16_only_where_the_cpu_has_it(monkeypatch):
    monkeypatch.delenv(options.DTYPE_ENV, raising=False)
    monkeypatch.setattr(options, "native_bf16_supported", lambda: False)
    assert resolve_dtype() == "float32"
    assert resolve_dtype("bfloat16") == "bfloat16"  # an explicit choice is honoured
    monkeypatch.setattr(options, "native_bf16_supported", lambda: True)
    assert resolve_dtype() == "bfloat16"
    monkeypatch.setenv(options.DTYPE_ENV, "fp32")
    assert resolve_dtype() == "float32"
    monkeypatch.setenv(options.DTYPE_ENV, "float16")
    with pytest.raises(LMConfigError, match="bfloat16"):
        resolve_dtype()
    with pytest.raises(LMConfigError):
        EmbeddedEngine(dtype="int4")  # type: ignore[arg-type]


def test_legacy_engine_is_selectable_and_survives_save_state(monkeypatch):
    monkeypatch.setenv(options.LEGACY_ENV, "1")
    assert EmbeddedEngine().legacy is True
    monkeypatch.delenv(options.LEGACY_ENV)
    engine = EmbeddedEngine(dtype="float32")
    assert engine.legacy is False
    again = EmbeddedEngine.load_state(engine.dump_state())
    assert (again.legacy, again.dtype) == (False, "float32")


class TopicQA(dspy.Signature):
    """Name the topic of the question, then answer it in a few words."""

    question: str = dspy.InputField()
    topic: str = dspy.OutputField()
    answer: str = dspy.OutputField()


def _chats() -> list[list[dict[str, str]]]:
    adapter = dspy.ChatAdapter()
    demos = [dspy.Example(question="What is the capital of Spain?", topic="geography", answer="Madrid")]
    return [
        adapter.format(TopicQA, demos=demos, inputs={"question": "Who wrote Hamlet?"}),
        # Same system prompt and demo: the second call reuses the first one's prefix.
        adapter.format(TopicQA, demos=demos, inputs={"question": "What is the capital of France?"}),
        [{"role": "user", "content": "List three animals, separated by commas."}],
    ]


@pytest.mark.slow
def test_fast_fp32_engine_gives_the_legacy_greedy_replies():
    legacy = EmbeddedEngine(legacy=True)
    fast = EmbeddedEngine(dtype="float32", stop_loops=False)  # the legacy engine decodes loops out
    store = fast.loaded().prefix_cache
    store.clear()
    for chat in _chats():
        assert fast.generate(chat, max_tokens=24) == legacy.generate(chat, max_tokens=24)
    assert store.hits >= 2  # the fields of a guided reply continue from the cache


@pytest.mark.slow
def test_prefix_cache_does_not_change_the_reply():
    cached = EmbeddedEngine(dtype="float32")
    uncached = EmbeddedEngine(dtype="float32", prefix_cache=False)
    chats = _chats()
    for chat in chats + chats[:1]:  # a repeat of the first chat is (nearly) all cache hit
        assert cached.generate(chat, max_tokens=24) == uncached.generate(chat, max_tokens=24)


@pytest.mark.slow
def test_a_reply_says_how_many_of_its_prompt_tokens_came_from_the_cache():
    """The run summary's "prompt tokens reused" comes from here: a call of a predictor whose system prompt and demos
    an earlier call computed takes them from the cache, and says so in OpenAI's usage field."""
    from dspy.clients.call_result import usage_dict

    from ppoga_dspy.method.costs import Costs

    engine = EmbeddedEngine()
    store = engine.loaded().prefix_cache
    store.clear()
    uncached = EmbeddedEngine(prefix_cache=False).generate(_chats()[0], max_tokens=8)
    assert uncached.cached_tokens == 0
    first, second = (engine.generate(chat, max_tokens=8) for chat in _chats()[:2])
    assert 0 < second.cached_tokens < second.prompt_tokens  # the shared head, not the new question
    assert second.cached_tokens >= first.cached_tokens
    repeat = engine.generate(_chats()[1], max_tokens=8)
    assert repeat.cached_tokens >= repeat.prompt_tokens - 1  # all but the token whose logits start the reply
    usage = usage_dict(engine._response(second))
    assert usage["prompt_tokens_details"]["cached_tokens"] == second.cached_tokens
    costs = Costs()
    costs.add_lm("decompose", "planner", [usage])
    assert costs.to_dict()["prompt_tokens_reused"] == second.cached_tokens
    assert costs.to_dict()["prompt_tokens"] == second.prompt_tokens


def test_greedy_loops_are_recognised_only_when_long_enough():
    from ppoga_dspy.inference.decode_loop import greedy_loop

    block = [5, 6, 7, 8, 9, 10]
    assert greedy_loop([1, 2, 3] + block * 4) == 6  # 24 tokens, four copies
    assert greedy_loop([1, 2, 3] + block * 3) == 0  # 18 tokens: too short to call it a loop
    assert greedy_loop(list(range(40))) == 0
    assert greedy_loop([4] * 23) == 0 and greedy_loop([4] * 24) == 1
    names = list(range(100, 150))  # a list of a dozen names, about 50 tokens, written out twice: a loop already
    assert greedy_loop([1, 2] + names + names) == 50
    assert greedy_loop([1, 2] + names + names[:-1]) == 0  # not yet a whole second copy
    assert greedy_loop(names[:20] + names[:20]) == 0  # a short block needs three copies


def test_lookup_draft_continues_the_latest_earlier_ngram():
    from ppoga_dspy.inference.decoding import lookup_draft

    context = [1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 1, 2, 3]
    assert lookup_draft(context, limit=3) == [7, 8, 1]  # latest earlier "1 2 3" is followed by 7 8 1
    assert lookup_draft(context, limit=1) == [7]
    assert lookup_draft(context, limit=0) == []
    assert lookup_draft([1, 2, 3, 4], limit=4) == []  # no earlier occurrence of any tail n-gram
    assert lookup_draft([5, 6, 0, 5, 6], limit=8) == [0, 5, 6]  # ends where the context ends
    assert lookup_draft([4, 4, 4, 4], limit=2) == [4]  # a run proposes itself


def _copying_chats() -> list[list[dict[str, str]]]:
    names = "film.film.directed_by, people.person.place_of_birth, film.film.starring, film.film.music"
    return [
        [{"role": "user", "content": f"Candidates: {names}. Repeat the candidates exactly: {names}. Again:"}],
        [{"role": "user", "content": "Count: one two three four five six seven, one two three four five six seven, "
                                     "one two three"}],
    ]


@pytest.mark.slow
def test_speculation_keeps_the_greedy_reply_in_fewer_forward_passes():
    spec = EmbeddedEngine(dtype="float32", speculate=True)
    plain = EmbeddedEngine(dtype="float32", speculate=False, prefix_cache=False)
    model = spec.loaded().model
    calls = {"n": 0}
    forward = model.forward

    def counted(*args, **kwargs):
        calls["n"] += 1
        return forward(*args, **kwargs)

    model.forward = counted
    try:
        passes = {}
        for label, engine in (("plain", plain), ("spec", spec)):
            spec.loaded().prefix_cache.clear()
            calls["n"] = 0
            replies = [engine.generate(chat, max_tokens=40) for chat in _copying_chats()]
            passes[label] = calls["n"]
            if label == "plain":
                expected = replies
        assert replies == expected
        assert passes["spec"] < passes["plain"]
        # the prefix cache was left consistent: a repeat of the first chat gives the same reply
        assert spec.generate(_copying_chats()[0], max_tokens=40) == expected[0]
    finally:
        del model.forward


def test_a_shared_prompt_head_stays_cached_for_the_next_call():
    """Another predictor's call shares only the first tokens: it gets a copy, the entry stays for its owner."""
    cache = PrefixCache(max_entries=4, min_reuse=2, continuation_slack=2)
    cache.put([1, 2, 3, 4, 5, 6, 7, 8], _FakeKV(8))
    kv, reused = cache.take([1, 2, 9, 9])  # shares 2 of 8: a copy, cropped
    assert reused == 2 and kv.length == 2
    assert len(cache) == 1
    kv, reused = cache.take([1, 2, 3, 4, 5, 6, 7, 8, 9])  # its own continuation: handed out whole
    assert reused == 8 and kv.length == 8 and len(cache) == 0


class _Vocabulary:
    """A five-token vocabulary: enough for the decoder's quote and newline marks."""

    pieces = ['"', "a", '",', "\n", "\u2581b"]

    def __len__(self) -> int:
        return len(self.pieces)

    def convert_ids_to_tokens(self, ids):
        return [self.pieces[i] for i in ids]


def test_decoder_marks_are_kept_beside_the_model_and_read_back(tmp_path, monkeypatch):
    import threading

    from ppoga_dspy.inference import constraints

    def loaded() -> loading.LoadedModel:
        return loading.LoadedModel(None, None, _Vocabulary(), 0, 0.0, threading.Lock(),
                                    marks_file=tmp_path / "decoder-marks.json")

    assert loaded().tokens_starting_with('"') == [0, 2]
    assert (tmp_path / "decoder-marks.json").is_file()
    reading = constraints.tokens_by_prefix
    monkeypatch.setattr(constraints, "tokens_by_prefix", lambda *a: pytest.fail("the vocabulary was read again"))
    again = loaded()  # a new process
    assert again.tokens_starting_with('"') == [0, 2] and again.tokens_starting_with("\n") == [3]
    (tmp_path / "decoder-marks.json").write_text("{not json")
    monkeypatch.setattr(constraints, "tokens_by_prefix", reading)
    assert loaded().tokens_starting_with("\n") == [3]  # a damaged file is only a slower start
