"""The engine's switches read from the environment: compute dtype, torch threads, legacy path, constraints,
the free-text cap.

Each switch is an environment variable so that a benchmark or a shared machine can flip it without a flag;
a bad value is a one-line `InferenceConfigError` naming the variable.
"""

from __future__ import annotations

import os
from typing import Literal

from ppoga_dspy.inference.errors import InferenceConfigError

#: Compute precision of the fast path: `auto` (bf16 where the CPU has native bf16, else fp32),
#: `bfloat16` or `float32`. The legacy path is always float32, as it always was.
DTYPE_ENV = "PPOGA_EMBEDDED_DTYPE"
#: Torch threads of the fast path (default: every core this process may use).
THREADS_ENV = "PPOGA_EMBEDDED_THREADS"
#: `1` selects the legacy engine (full `generate` per field, fp32): kept to measure against.
LEGACY_ENV = "PPOGA_EMBEDDED_LEGACY"
#: `0` turns the decode-time constraints off (`constrain=False`; `inference/constraints.py`): kept to measure against.
CONSTRAIN_ENV = "PPOGA_EMBEDDED_CONSTRAIN"
#: Tokens at most per free-text output field (`constraints.FreeText`); `0` lifts the cap: kept to measure against.
FREE_TEXT_TOKENS_ENV = "PPOGA_EMBEDDED_FREE_TEXT_TOKENS"
DTypeName = Literal["auto", "bfloat16", "float32"]


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
        raise InferenceConfigError(f"{DTYPE_ENV} / dtype must be auto, bfloat16 or float32, not {requested or value!r}")
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
    raise InferenceConfigError(f"{CONSTRAIN_ENV} must be 1 or 0 (on or off), not {value!r}")


def resolve_free_text_tokens(requested: int | None, default: int) -> int:
    """Tokens at most per free-text field: `requested`, else $PPOGA_EMBEDDED_FREE_TEXT_TOKENS, else `default`
    (`0`: no cap)."""
    if requested is not None:
        checked = _whole_number("free_text_tokens", requested, minimum=0)
    else:
        checked = _whole_number(FREE_TEXT_TOKENS_ENV, os.environ.get(FREE_TEXT_TOKENS_ENV), minimum=0)
    return default if checked is None else checked


def _whole_number(name: str, value: object, *, minimum: int) -> int | None:
    """`value` (a setting or an environment variable's text) as a whole number of at least `minimum`; None when
    unset. Anything else is an `InferenceConfigError` naming `name`."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = int(value) if not isinstance(value, (bool, float)) else -1
    except ValueError:
        number = -1
    if number < minimum:
        raise InferenceConfigError(f"{name} must be a whole number of at least {minimum}, not {value!r}")
    return number


def embedded_threads() -> int:
    """Torch threads for the fast path: $PPOGA_EMBEDDED_THREADS, else every core this process may use.

    Generation is serialised per model (one reply at a time, also under `ppoga eval --threads N`), so
    the one reply running gets all cores. Processes that share a machine set the variable to their share.
    """
    threads = _whole_number(THREADS_ENV, os.environ.get(THREADS_ENV), minimum=1)
    return threads if threads is not None else _available_cores()


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

