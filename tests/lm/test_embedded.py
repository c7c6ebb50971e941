"""The embedded offline model, for real: generation through DSPy, usage, budgets, stops, threads, the server.

Marked slow: the model loads once per session (about a second from the conversion cache, about a
minute the first time on a fresh machine) and each reply takes seconds on 2 cores.
"""

from __future__ import annotations

import threading

import dspy
import pytest

from ppoga_dspy.inference.decode_loop import render_transcript
from ppoga_dspy.inference.guided import CHAT_ADAPTER_END, adapter_output_fields
from ppoga_dspy.lm.embedded import EmbeddedEngine, is_loaded, load_embedded
from ppoga_dspy.lm.factory import make_lm
from ppoga_dspy.lm.server import serve_lm


class CapitalQA(dspy.Signature):
    """Answer the question with the name of a city."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


class TopicQA(dspy.Signature):
    """Name the topic of the question, then answer it in a few words."""

    question: str = dspy.InputField()
    topic: str = dspy.OutputField()
    answer: str = dspy.OutputField()


def lm_for(engine: EmbeddedEngine, **options) -> dspy.LM:
    return make_lm(engine.model_string, engine=engine, cache=False, **options)


def test_adapter_fields_are_read_from_the_chat_adapter_prompt():
    messages = dspy.ChatAdapter().format(TopicQA, demos=[], inputs={"question": "q"})
    assert adapter_output_fields(messages) == ["topic", "answer"]
    assert adapter_output_fields([{"role": "user", "content": "Just chat."}]) == []


def test_transcript_rendering_ends_in_an_open_assistant_turn():
    text = render_transcript([{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi "}])
    assert text == "System: Be brief.\n\nUser: Hi\n\nAssistant:"


@pytest.mark.slow
def test_predict_through_the_embedded_model_completes_with_usage(embedded_engine):
    lm = lm_for(embedded_engine)
    with dspy.context(lm=lm, track_usage=True):
        prediction = dspy.Predict(TopicQA)(question="What is the capital of France?")
    assert isinstance(prediction.topic, str) and isinstance(prediction.answer, str)
    assert prediction.answer.strip()  # field-guided decoding: the reply always parses
    usage = prediction.get_lm_usage()[lm.model]
    assert usage["prompt_tokens"] > 50 and 0 < usage["completion_tokens"] <= lm.kwargs["max_tokens"]
    entry = lm.history[-1]
    assert entry["usage"]["prompt_tokens"] == usage["prompt_tokens"]
    assert "[[ ## topic ## ]]" in entry["outputs"][0] and CHAT_ADAPTER_END in entry["outputs"][0]


@pytest.mark.slow
def test_greedy_replies_are_deterministic_and_honour_max_tokens(embedded_engine):
    chat = [{"role": "user", "content": "Tell me a long story about a dragon and a knight."}]
    first = embedded_engine.generate(chat, max_tokens=6)
    assert 0 < first.completion_tokens <= 6
    if first.completion_tokens == 6:
        assert first.finish_reason == "length"
    assert embedded_engine.generate(chat, max_tokens=6) == first  # greedy: same prompt, same reply
    tokenizer = load_embedded(embedded_engine.name).tokenizer
    prompt_ids = tokenizer(embedded_engine.render(chat), add_special_tokens=False)["input_ids"]
    assert first.prompt_tokens == len(prompt_ids)


@pytest.mark.slow
def test_stop_sequences_cut_the_reply(embedded_engine):
    chat = [{"role": "user", "content": "List ten animals, separated by commas."}]
    free = embedded_engine.generate(chat, max_tokens=24)
    # A stop sequence taken from the middle of the free reply, at its first occurrence.
    cut = next(
        (
            i
            for i in range(len(free.text) // 2, len(free.text) - 2)
            if free.text[i : i + 3].strip() and free.text.find(free.text[i : i + 3]) == i
        ),
        None,
    )
    assert cut is not None, f"reply too short or repetitive to cut: {free.text!r}"
    stopped = embedded_engine.generate(chat, max_tokens=24, stop=[free.text[cut : cut + 3]])
    assert stopped.text == free.text[:cut].strip()
    assert stopped.finish_reason == "stop" and stopped.completion_tokens <= free.completion_tokens


@pytest.mark.slow
def test_sampling_with_a_seed_is_reproducible(embedded_engine):
    chat = [{"role": "user", "content": "Write a word."}]
    one = embedded_engine.generate(chat, max_tokens=8, temperature=1.0, seed=7)
    two = embedded_engine.generate(chat, max_tokens=8, temperature=1.0, seed=7)
    assert one == two


@pytest.mark.slow
def test_engine_is_shared_safely_between_threads_and_copies(embedded_engine):
    lm = lm_for(embedded_engine, max_tokens=24)
    replies: dict[int, list[str]] = {}

    def ask(i: int) -> None:
        with dspy.context(lm=lm):
            replies[i] = lm("Name a colour.")

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert len(replies) == 3 and len({tuple(r) for r in replies.values()}) == 1  # greedy: all equal
    assert is_loaded(embedded_engine.name)


@pytest.mark.slow
def test_embedded_model_behind_the_loopback_server(embedded_engine):
    with serve_lm(embedded_engine) as server:
        assert server.model_name == embedded_engine.model_string
        lm = make_lm(server.spec(), cache=False, max_tokens=48)
        with dspy.context(lm=lm, track_usage=True):
            prediction = dspy.Predict(CapitalQA)(question="What is the capital of Italy?")
        assert isinstance(prediction.answer, str) and prediction.answer.strip()
        usage = prediction.get_lm_usage()[lm.model]
        assert server.stats.requests == 1
        assert usage["prompt_tokens"] == server.stats.prompt_tokens > 50
        assert usage["completion_tokens"] == server.stats.completion_tokens > 0


@pytest.mark.slow
def test_prompt_over_the_context_window_is_a_context_length_error(embedded_engine):
    from dspy.utils.exceptions import LMError

    window = load_embedded(embedded_engine.name).context_window
    lm = lm_for(embedded_engine, max_tokens=16)
    with pytest.raises(LMError, match="window"):
        lm("word " * window)
