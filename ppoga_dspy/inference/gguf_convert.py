"""A one-pass GGUF -> transformers conversion for the embedded model's first load (issue 12, cold start).

transformers' own GGUF path (`from_pretrained(..., gguf_file=...)`) parses the file with gguf-py's
`GGUFReader`, which builds a numpy view per element of every metadata array: Gemma 3's 262,144-token
vocabulary (tokens, scores, token types) makes that 15-20 s per parse on two cores, and a tokenizer
plus a model load parse the file three times (the tokenizer's config, the model's config, the
weights). This module reads the file once with `struct` (well under a second), builds the config with
transformers' own key mapping, de-quantizes each tensor with gguf-py's `dequantize` (the very function
transformers uses, so the weights are bit-identical), row chunk by row chunk straight into the dtype
that will run (no float32 copy of the 168M-parameter embedding), and writes a folder that
`from_pretrained` loads like any checkpoint: `model.safetensors`, `config.json`,
`generation_config.json` and the tokenizer (built by transformers' own GGUF tokenizer converter).

Only architectures whose tensor processing is element-wise are converted here (`FAST_ARCHITECTURES`);
anything else, or any failure, falls back to transformers' path in the caller.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Architectures this converter handles: their GGUF tensor processor only renames and subtracts one from
#: the norms (transformers' `Gemma2TensorProcessor`), so a tensor can be processed in row chunks.
FAST_ARCHITECTURES = frozenset({"gemma3"})

#: A tensor above this many elements is de-quantized and cast in row chunks of about this size.
CHUNK_ELEMENTS = 1 << 22

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GgufTensor:
    name: str
    shape: tuple[int, ...]  # numpy / torch order (GGUF stores the fastest-moving dimension first)
    ggml_type: int
    offset: int  # from the start of the data section


@dataclass
class GgufFile:
    """A GGUF's metadata (arrays as lists, strings decoded) and tensor table, over a memory map of the file."""

    path: Path
    metadata: dict[str, Any]
    tensors: list[GgufTensor]
    blob: Any  # numpy uint8 memmap
    data_start: int

    @property
    def architecture(self) -> str:
        return str(self.metadata["general.architecture"])

    def raw(self, tensor: GgufTensor) -> Any:
        """The tensor's bytes shaped as gguf-py's `GGUFReader` shapes them: rows of blocks (quantized) or values."""
        import numpy as np
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

        qtype = GGMLQuantizationType(tensor.ggml_type)
        block, size = GGML_QUANT_SIZES[qtype]
        elements = 1
        for dim in tensor.shape:
            elements *= dim
        start = self.data_start + tensor.offset
        data = self.blob[start : start + elements // block * size]
        if qtype == GGMLQuantizationType.F32:
            return data.view(np.float32).reshape(tensor.shape)
        if qtype == GGMLQuantizationType.F16:
            return data.view(np.float16).reshape(tensor.shape)
        return data.reshape(*tensor.shape[:-1], tensor.shape[-1] // block * size)


def read_gguf(path: str | Path) -> GgufFile:
    """Parse a GGUF v2/v3 file's metadata and tensor table (the tensor data stays on disk, memory-mapped)."""
    import numpy as np

    path = Path(path)
    blob = np.memmap(path, mode="r", dtype=np.uint8)
    buffer = memoryview(blob)
    if bytes(buffer[:4]) != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file")
    version, tensor_count, kv_count = struct.unpack_from("<IQQ", buffer, 4)
    if version not in (2, 3):
        raise ValueError(f"{path} is GGUF v{version}; only v2 and v3 are read here")
    pos = 24

    def string(at: int) -> tuple[str, int]:
        (length,) = struct.unpack_from("<Q", buffer, at)
        at += 8
        return bytes(buffer[at : at + length]).decode("utf-8"), at + length

    def value(kind: int, at: int) -> tuple[Any, int]:
        if kind in _SCALAR:
            fmt = _SCALAR[kind]
            return struct.unpack_from(fmt, buffer, at)[0], at + struct.calcsize(fmt)
        if kind == _STRING:
            return string(at)
        if kind == _ARRAY:
            item, count = struct.unpack_from("<IQ", buffer, at)
            at += 12
            if item in _SCALAR:
                fmt = _SCALAR[item]
                width = struct.calcsize(fmt)
                return list(struct.unpack_from(f"<{count}{fmt[1]}", buffer, at)), at + count * width
            items = []
            for _ in range(count):
                one, at = value(item, at)
                items.append(one)
            return items, at
        raise ValueError(f"{path}: unknown GGUF metadata type {kind}")

    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key, pos = string(pos)
        (kind,) = struct.unpack_from("<I", buffer, pos)
        metadata[key], pos = value(kind, pos + 4)
    tensors = []
    for _ in range(tensor_count):
        name, pos = string(pos)
        (dims,) = struct.unpack_from("<I", buffer, pos)
        shape = struct.unpack_from(f"<{dims}Q", buffer, pos + 4)
        pos += 4 + 8 * dims
        ggml_type, offset = struct.unpack_from("<IQ", buffer, pos)
        pos += 12
        tensors.append(GgufTensor(name, tuple(int(d) for d in reversed(shape)), int(ggml_type), int(offset)))
    alignment = int(metadata.get("general.alignment", 32))
    data_start = (pos + alignment - 1) // alignment * alignment
    return GgufFile(path, metadata, tensors, blob, data_start)


def config_dict(gguf: GgufFile) -> dict[str, Any]:
    """The transformers config of the file, as `load_gguf_checkpoint(..., return_tensors=False)["config"]` builds it
    (the steps that apply to `FAST_ARCHITECTURES`)."""
    from transformers.integrations.ggml import GGUF_CONFIG_DEFAULTS_MAPPING
    from transformers.modeling_gguf_pytorch_utils import GGUF_TO_TRANSFORMERS_MAPPING

    architecture = gguf.architecture
    if architecture not in FAST_ARCHITECTURES:
        raise ValueError(f"the one-pass converter does not handle {architecture!r}")
    config: dict[str, Any] = {}
    config["tie_word_embeddings"] = all(t.name != "output.weight" for t in gguf.tensors)
    for key, default in (GGUF_CONFIG_DEFAULTS_MAPPING.get(architecture) or {}).items():
        config.setdefault(key, default)
    renames = GGUF_TO_TRANSFORMERS_MAPPING["config"]
    for key, raw in gguf.metadata.items():
        prefix, _, rest = key.partition(".")
        renamed = renames.get(prefix, {}).get(rest) if prefix in renames else None
        if renamed is None or renamed == -1:
            continue
        config[renamed] = _legacy_value(raw)
    if config.get("model_type") == "gemma3":
        config["model_type"] = "gemma3_text"
    if "vocab_size" not in config and "tokenizer.ggml.tokens" in gguf.metadata:
        config["vocab_size"] = len(gguf.metadata["tokenizer.ggml.tokens"])
    return config


def _legacy_value(raw: Any) -> Any:
    """A metadata value as transformers' `_gguf_parse_value` leaves it: a one-element array is its element."""
    if isinstance(raw, list) and len(raw) == 1:
        return raw[0]
    return raw


def convert(
    gguf_path: str | Path,
    target: str | Path,
    dtype: str,
    tokenizer_type: Any = None,
    advance: Callable[[str], None] | None = None,
) -> None:
    """Write `gguf_path` as a transformers checkpoint folder `target` (which must not exist yet) in `dtype`.

    `advance(step)` is called as each part finishes ("tokenizer", "weights", "saved").
    """
    import numpy as np
    import torch
    from gguf import dequantize
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor, get_gguf_hf_weights_map

    gguf = read_gguf(gguf_path)
    target = Path(target)
    target.mkdir(parents=True)
    parsed = {"config": config_dict(gguf)}
    config = AutoConfig.for_model(**parsed["config"])
    config.architectures = [AutoModelForCausalLM._model_mapping[type(config)].__name__]

    if tokenizer_type is None:  # what AutoTokenizer picks for gemma3_text, without its config pass over the file
        from transformers.models.gemma.tokenization_gemma import GemmaTokenizer

        tokenizer_type = GemmaTokenizer
    tokenizer = tokenizer_type.from_pretrained(str(Path(gguf_path).parent), gguf_file=Path(gguf_path).name)
    tokenizer.save_pretrained(target)
    del tokenizer
    if advance:
        advance("tokenizer")

    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config)
    processor = TENSOR_PROCESSORS.get(gguf.architecture, TensorProcessor)(config=parsed["config"])
    names = get_gguf_hf_weights_map(skeleton, processor)
    del skeleton
    torch_dtype = getattr(torch, dtype)
    tensors: dict[str, Any] = {}
    for info in gguf.tensors:
        raw = gguf.raw(info)
        rows = raw.shape[0] if raw.ndim > 1 else 1
        per_row = max(1, info_elements(info) // max(rows, 1))
        step = rows if raw.ndim == 1 else max(1, CHUNK_ELEMENTS // per_row)
        out = None
        name = None
        for start in range(0, rows, step):
            part = raw if raw.ndim == 1 else raw[start : start + step]
            result = processor.process(weights=dequantize(part, info.ggml_type), name=info.name,
                                       tensor_key_mapping=names, parsed_parameters=parsed)
            name = result.name
            if name not in names:
                break
            chunk = torch.from_numpy(np.ascontiguousarray(result.weights, dtype=np.float32)).to(torch_dtype)
            if raw.ndim == 1:
                out = chunk.clone() if chunk.dtype == torch.float32 else chunk
                break
            if out is None:
                out = torch.empty((rows, *chunk.shape[1:]), dtype=torch_dtype)
            out[start : start + chunk.shape[0]] = chunk
        if name in names and out is not None:
            tensors[names[name]] = out
    if advance:
        advance("weights")

    save_file(tensors, str(target / "model.safetensors"), metadata={"format": "pt"})
    del tensors
    config.dtype = torch_dtype
    config.save_pretrained(target)
    GenerationConfig.from_model_config(config).save_pretrained(target)
    if advance:
        advance("saved")


def info_elements(info: GgufTensor) -> int:
    n = 1
    for dim in info.shape:
        n *= dim
    return n
