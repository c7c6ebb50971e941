"""Loading an embedded model once per process: the conversion cache, the GGUF conversion, the registry.

Loading a GGUF through transformers takes about a minute on 2 cores, nearly all of it gguf-py's
`GGUFReader` parsing Gemma's 262k-token vocabulary into numpy views, three times (tokenizer config,
model config, weights). The first load therefore converts with `inference/gguf_convert.py` instead: one
`struct` pass over the metadata, transformers' own config mapping, tokenizer builder and gguf-py's
`dequantize` (bit-identical weights), straight into the dtype that will run. The result is kept as
safetensors in that dtype under the conversion cache (`$PPOGA_MODEL_CACHE`, default
`~/.cache/ppoga-dspy/models`; `PPOGA_MODEL_CACHE=off` converts into a temporary folder each time),
which later processes load in a few seconds without casting (no float32 copy next to the bf16 one).

The weights are loaded lazily, once per process, into a module-level registry that every engine
instance (and every deep copy an optimizer makes) shares; `LoadedModel.lock` serialises generation on
them: torch already uses every core for one reply.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppoga_dspy.inference import constraints as _constraints
from ppoga_dspy.inference import decoding as _decoding
from ppoga_dspy.inference.cache_files import read_marks, write_marks
from ppoga_dspy.inference.catalogue import CATALOGUE, EmbeddedModelInfo, resolve_embedded_name
from ppoga_dspy.inference.fast_tokenizer import RustTokenizer
from ppoga_dspy.inference.lora import adapter_digest, apply_adapter
from ppoga_dspy.inference.model_loading import building_model
from ppoga_dspy.inference.options import resolve_dtype
from ppoga_dspy.inference.prefix_cache import PrefixCache
from ppoga_dspy.inference.prompt_heads import HeadStore, heads_enabled
from ppoga_dspy.inference.windowed_attention import register_windowed_eager
from ppoga_dspy.user_cache import cache_folder

logger = logging.getLogger(__name__)

# Environment switches for the conversion cache (see the module docstring).
MODEL_CACHE_ENV = "PPOGA_MODEL_CACHE"


@dataclass
class LoadedModel:
    """Weights, tokenizer, the lock that serialises generation on them, and their prefix cache."""

    info: EmbeddedModelInfo
    model: Any
    tokenizer: Any
    context_window: int
    load_seconds: float
    lock: threading.Lock
    dtype: str = "float32"
    prefix_cache: PrefixCache | None = None
    eos_ids: frozenset[int] = frozenset()
    adapter: str | None = None  # the LoRA adapter merged into the weights (path), if any
    #: Vocabulary look-ups of the constrained decoder (tokens starting with a quote, a newline), built on first use.
    marks: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    #: Where those look-ups are kept beside the cached conversion (a pass over 262k tokens costs 0.2-0.3 s a process).
    marks_file: Path | None = None

    @functools.cached_property
    def partial_head(self) -> _decoding.PartialHead:
        return _decoding.PartialHead(self.model)

    def tokens_starting_with(self, prefix: str) -> list[int]:
        if not self.marks and self.marks_file is not None:
            self.marks.update(read_marks(self.marks_file))
        if prefix not in self.marks:  # the decoder's marks are found together: one pass over the vocabulary
            wanted = [prefix, *(mark for mark in DECODER_MARKS if mark not in self.marks and mark != prefix)]
            self.marks.update(_constraints.tokens_by_prefix(self.tokenizer, wanted))
            if self.marks_file is not None:
                write_marks(self.marks_file, self.marks)
        return self.marks[prefix]


#: The prefixes the constrained decoder looks tokens up by (a quote ends or opens a string, a newline ends a field).
DECODER_MARKS = ('"', "\n")

_REGISTRY: dict[str, LoadedModel] = {}
_REGISTRY_LOCK = threading.Lock()


def _cache_root() -> Path | None:
    return cache_folder(MODEL_CACHE_ENV, "models")


def _converted_dir(info: EmbeddedModelInfo, gguf: Path, dtype: str = "float32") -> Path | None:
    root = _cache_root()
    if root is None:
        return None
    import transformers

    # Size + transformers version name the conversion: a new wheel or a new converter makes a new entry.
    # The cache holds the weights in the dtype that runs (float32 keeps the name it always had).
    suffix = "" if dtype == "float32" else f"-{dtype}"
    return root / f"{info.name}-{gguf.stat().st_size}-transformers{transformers.__version__}{suffix}"


def _save_converted(model: Any, tokenizer: Any, target: Path) -> None:
    """Write a model converted by transformers' own GGUF path as safetensors, atomically (temp folder, rename)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        # transformers refuses to save a model it loaded through its GGUF quantizer, although the
        # weights are plain float tensors by now; detach the quantizer for the save.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _publish(tmp, target)
    except OSError as exc:
        logger.warning("could not cache the converted model under %s (%s); the next load converts again", target, exc)


def _publish(tmp: Path, target: Path) -> None:
    try:
        os.replace(tmp, target)
    except OSError:  # another process finished first; its copy is as good as ours
        shutil.rmtree(tmp, ignore_errors=True)


class _LoadProgress:
    """A one-line progress bar on stderr while the model loads: a cold load converts for several seconds.

    `steps` names what each stage does; the line shows the one running now, so a slow stage is visible.
    """

    def __init__(self, name: str, steps: list[str]) -> None:
        from tqdm.auto import tqdm

        self.name, self.steps = name, steps
        # disable=False: a line also in CI logs (not a TTY), where a silent minute looks like a hang.
        self.bar = tqdm(
            total=len(steps), file=sys.stderr, leave=False, disable=False, bar_format="{desc} {n}/{total} [{elapsed}]"
        )
        self._describe()

    def _describe(self) -> None:
        step = self.steps[self.bar.n] if self.bar.n < len(self.steps) else "ready"
        self.bar.set_description_str(f"loading local/{self.name}: {step}")

    def advance(self, *_: object) -> None:
        self.bar.update(1)
        self._describe()

    def close(self) -> None:
        self.bar.close()


def _fast_convertible(gguf: Path) -> bool:
    """Whether the one-pass converter (`inference/gguf_convert.py`) handles this file's architecture."""
    from ppoga_dspy.inference import gguf_convert

    try:
        return gguf_convert.read_gguf(gguf).architecture in gguf_convert.FAST_ARCHITECTURES
    except (OSError, ValueError, KeyError) as exc:
        logger.info("cannot read %s directly (%s); using transformers' GGUF loader", gguf, exc)
        return False


def _convert_fast(gguf: Path, target: Path, dtype: str, progress: _LoadProgress) -> bool:
    """Convert `gguf` into the folder `target` with the one-pass converter; False (and nothing written) on failure."""
    from ppoga_dspy.inference import gguf_convert

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        gguf_convert.convert(gguf, tmp / "model", dtype, advance=progress.advance)
    except Exception as exc:  # any surprise from a newer transformers/gguf: the stock path still works
        shutil.rmtree(tmp, ignore_errors=True)
        logger.warning("the one-pass GGUF conversion failed (%s: %s); using transformers' GGUF loader",
                       type(exc).__name__, exc)
        return False
    _publish(tmp / "model", target)
    shutil.rmtree(tmp, ignore_errors=True)
    return True


def _transformers_load_steps(*, caching: bool) -> list[str]:
    """The progress steps of transformers' own GGUF path (other architectures, or when the converter fails)."""
    return ["de-quantizing the GGUF (first run only)", *(["caching the converted weights"] if caching else [])]


def _load(info: EmbeddedModelInfo, dtype: str, adapter: Path | None = None, digest: str | None = None) -> LoadedModel:
    """Load `info` in `dtype`: from the conversion cache, else convert the GGUF once (and cache it).

    A cold load converts with the one-pass converter of `inference/gguf_convert.py` into the cache folder (or a
    temporary one with the cache off) and then loads that folder exactly as a warm load does: 26 s in all
    on two busy cores, where transformers' own GGUF path (it parses the file three times) took about 100 s.
    That path stays the fallback for other architectures or if the converter fails.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    gguf = info.assembled() if info.assembled is not None else None
    converted = _converted_dir(info, gguf, dtype) if gguf is not None else None
    cached = converted is not None and (converted / "config.json").is_file()
    if not cached:  # the GGUF will be read: locate it properly (assemble, verify)
        gguf = info.locate()
        converted = _converted_dir(info, gguf, dtype)
        cached = converted is not None and (converted / "config.json").is_file()
    fast = not cached and _fast_convertible(gguf)
    scratch = None
    if fast and converted is None:  # cache off: convert into a temporary folder, removed once loaded
        scratch = Path(tempfile.mkdtemp(prefix="ppoga-embedded-"))
        converted = scratch / "model"
    merging = ["merging the LoRA adapter"] if adapter is not None else []
    if cached:
        steps = ["reading the converted weights", *merging]
    elif fast:
        steps = ["building the tokenizer from the GGUF (first run only)", "de-quantizing the GGUF (first run only)",
                 "caching the converted weights", "reading the converted weights", *merging]
    else:
        steps = [*_transformers_load_steps(caching=converted is not None), *merging]
    progress = _LoadProgress(info.name, steps)
    target = getattr(torch, dtype)
    with building_model():  # one model construction at a time in the process (see inference/model_loading.py)
        try:
            if fast:
                logger.info("converting embedded model %s from %s into %s (%s)", info.name, gguf, converted, dtype)
                if scratch is not None:
                    converted.parent.mkdir(parents=True, exist_ok=True)
                fast = _convert_fast(gguf, converted, dtype, progress)
                if not fast:
                    progress.close()
                    progress = _LoadProgress(info.name, [*_transformers_load_steps(caching=scratch is None), *merging])
            if cached or fast:
                logger.info("loading embedded model %s from %s", info.name, converted)
                tokenizer = RustTokenizer.load(converted)
                # The cache is in the dtype that runs, so nothing is cast (an older float32 entry casts while loading).
                model = AutoModelForCausalLM.from_pretrained(converted, dtype=target)
                progress.advance()
            else:
                logger.info("loading embedded model %s from %s (first time: de-quantizing)", info.name, gguf)
                tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
                model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=target)
                progress.advance()
                if converted is not None and scratch is None:
                    _save_converted(model, tokenizer, converted)
                    progress.advance()
            if model.dtype != target:
                model = model.to(target)
            if adapter is not None:
                model = apply_adapter(model, adapter)
                progress.advance()
        finally:
            progress.close()
            if scratch is not None:  # the weights are in memory (or mapped: unlinking a mapped file is fine)
                shutil.rmtree(scratch, ignore_errors=True)
    model.eval()
    if dtype == "bfloat16":
        # Measured on 2 CPU cores: torch's CPU flash kernel (sdpa) runs an 850-token Gemma 3 prefill in
        # 1.62 s on one thread, the eager path (bf16 matmuls + softmax) in 1.38 s; a warm `ppoga ask` is 8 %
        # faster. Reading only a sliding layer's window made recorded fused 3-hop calls 1.25x faster again, with
        # the same replies. float32 keeps sdpa: that model is shared with the legacy engine, whose replies are the
        # reference.
        model.set_attn_implementation(register_windowed_eager())
    window = int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
    kept = converted if scratch is None else None  # the conversion cache's folder for this model, if any
    seconds = time.perf_counter() - started
    logger.info("embedded model %s (%s) ready in %.1f s", info.name, dtype, seconds)
    return LoadedModel(
        info,
        model,
        tokenizer,
        window,
        seconds,
        threading.Lock(),
        dtype,
        PrefixCache(heads=_head_store(kept, digest)),
        frozenset(_eos_ids(model, tokenizer)),
        str(adapter) if adapter is not None else None,
        marks_file=kept / "decoder-marks.json" if kept is not None else None,
    )


def _head_store(converted: Path | None, digest: str | None) -> HeadStore | None:
    """The prompt heads of this model (`inference/prompt_heads.py`), beside its cached conversion; None without one.

    `digest` is the merged LoRA adapter's (`lora.adapter_digest`), None for the base model.
    """
    if converted is None or not heads_enabled():
        return None
    import torch

    # The converted folder's name holds model, size, transformers version and dtype; torch's version
    # (its kernels) and the adapter's content complete what decides the KV values.
    name = f"{converted.name}-torch{torch.__version__}" + (f"-lora{digest}" if digest else "")
    return HeadStore(converted.parent / "prompt-heads" / name)


def load_embedded(
    name: str | None = None, *, dtype: str | None = None, legacy: bool = False, adapter: str | Path | None = None
) -> LoadedModel:
    """The loaded model `name` (default: the catalogue default), loading it on first use in this process.

    The legacy engine always gets float32 weights; the fast one `resolve_dtype(dtype)`. `adapter`, a
    LoRA adapter folder (`ppoga compile --optimizer finetune`), is merged into the weights. Each (model,
    dtype, adapter content) is loaded once per process and shared by every engine and deep copy.
    """
    info = CATALOGUE[resolve_embedded_name(name)]
    chosen = "float32" if legacy else resolve_dtype(dtype)
    key = f"{info.name}:{chosen}"
    folder = digest = None
    if adapter is not None:
        folder = Path(adapter).resolve()
        digest = adapter_digest(folder)
        key += f"+{digest}"  # the content, not the path: a retrained adapter is another model
    with _REGISTRY_LOCK:  # one load per process even when several threads ask at once
        loaded = _REGISTRY.get(key)
        if loaded is None:
            loaded = _REGISTRY[key] = _load(info, chosen, folder, digest)
    return loaded


def is_loaded(name: str | None = None) -> bool:
    """Whether `name` is already in memory in any precision (so a call will not pay the load time)."""
    wanted = resolve_embedded_name(name)
    return any(key.split(":", 1)[0] == wanted for key in _REGISTRY)


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids = model.generation_config.eos_token_id
    found = set(ids if isinstance(ids, list) else [ids] if ids is not None else [])
    if tokenizer.eos_token_id is not None:
        found.add(tokenizer.eos_token_id)
    return found
