"""The embedded model's tokenizer straight from `tokenizer.json`, without transformers' tokenizer class.

Why: for Gemma 3's 262k-token vocabulary, `AutoTokenizer.from_pretrained` parses `tokenizer.json` in
Python twice and then rebuilds the Rust tokenizer from the parsed vocabulary: 2.7 s of a warm `ppoga ask`
on one core, where `tokenizers.Tokenizer.from_file` reads the same file in 1.0 s. The engine uses a
handful of the tokenizer's methods (encode without special tokens, decode skipping them, the vocabulary's
pieces, the special tokens' ids), so `RustTokenizer` gives exactly those on the Rust object that
transformers itself would wrap, and builds transformers' tokenizer only if something else is asked of it
(saving, a chat template). Tests check that both give the same ids, pieces and text.

A folder whose `tokenizer_config.json` asks for anything this class does not reproduce (a chat template,
clean-up of decoded spaces, a backend other than `tokenizers`) is loaded with transformers instead.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: `tokenizer_config.json` keys this class reads or that change nothing it does.
_UNDERSTOOD_KEYS = frozenset({
    "backend", "bos_token", "eos_token", "pad_token", "unk_token", "mask_token", "is_local", "local_files_only",
    "model_max_length", "tokenizer_class", "added_tokens_decoder", "clean_up_tokenization_spaces",
    "add_bos_token", "add_eos_token", "padding_side", "truncation_side", "model_input_names",
    "extra_special_tokens", "additional_special_tokens", "sp_model_kwargs", "spaces_between_special_tokens",
    "use_default_system_prompt",
})


def _token_text(value: Any) -> str | None:
    """A special token as `tokenizer_config.json` writes it: a string, or an AddedToken's dict."""
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


def reproducible(folder: Path) -> dict[str, Any] | None:
    """The folder's tokenizer config when `RustTokenizer` reproduces transformers' tokenizer for it, else None."""
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return None
    if not (folder / "tokenizer.json").is_file() or (folder / "chat_template.jinja").is_file():
        return None
    if config.get("backend", "tokenizers") != "tokenizers" or set(config) - _UNDERSTOOD_KEYS:
        return None
    if config.get("clean_up_tokenization_spaces") or config.get("add_bos_token") or config.get("add_eos_token"):
        return None  # we never add special tokens, and never clean up; a folder that asks is not ours to guess
    return config


class RustTokenizer:
    """The `transformers` tokenizer interface the embedded engine uses, on the raw `tokenizers.Tokenizer`.

    Anything else (`save_pretrained`, `apply_chat_template`...) is served by transformers' own tokenizer
    for the same folder, built on first use.
    """

    chat_template: str | None = None

    def __init__(self, folder: str | Path, config: dict[str, Any]) -> None:
        import tokenizers

        self.folder = Path(folder)
        self._rust = tokenizers.Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        self.bos_token = _token_text(config.get("bos_token"))
        self.eos_token = _token_text(config.get("eos_token"))
        self.pad_token = _token_text(config.get("pad_token"))
        self.unk_token = _token_text(config.get("unk_token"))
        self.bos_token_id = self._id_of(self.bos_token)
        self.eos_token_id = self._id_of(self.eos_token)
        self.pad_token_id = self._id_of(self.pad_token)
        self._full: Any = None
        self._full_lock = threading.Lock()

    @classmethod
    def load(cls, folder: str | Path) -> Any:
        """A `RustTokenizer` for `folder` where it reproduces transformers' tokenizer, else transformers' own."""
        config = reproducible(Path(folder))
        if config is not None:
            return cls(folder, config)
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(folder))

    def _id_of(self, token: str | None) -> int | None:
        return None if token is None else self._rust.token_to_id(token)

    def __len__(self) -> int:
        return self._rust.get_vocab_size(with_added_tokens=True)

    def __call__(self, text: str, add_special_tokens: bool = True, return_tensors: str | None = None) -> dict[str, Any]:
        ids = self._rust.encode(text, add_special_tokens=add_special_tokens).ids
        if return_tensors is None:
            return {"input_ids": ids}
        if return_tensors != "pt":
            raise ValueError(f"return_tensors={return_tensors!r}: only 'pt' or None")
        import torch

        return {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones((1, len(ids)), dtype=torch.long)}

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if isinstance(ids, int):
            ids = [ids]
        return self._rust.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str | None]:
        return [self._rust.id_to_token(int(i)) for i in ids]

    def _transformers(self) -> Any:
        with self._full_lock:
            if self._full is None:
                from transformers import AutoTokenizer

                self._full = AutoTokenizer.from_pretrained(str(self.folder))
            return self._full

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._transformers(), name)
