"""The demo KG and its questions, shipped inside the wheel as `ppoga_dspy.data` (pyproject maps this folder).

Read through `importlib.resources` so that a non-editable install, a zip import or a source checkout
all find the same files; `demo_file` falls back to the folder beside this file for a bare checkout
on `sys.path` (no install at all).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["DEMO_KG", "DEMO_QUESTIONS", "DEMO_TRAIN", "default_artifact", "demo_file"]


def demo_file(name: str) -> Path:
    """A file of the demo (`demo-kg.nt`, `questions.jsonl`) as a real path on disk."""
    try:
        found = resources.files(__name__).joinpath("demo", name)
        path = Path(str(found))
        if path.is_file():
            return path
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parent / "demo" / name


def default_artifact(lm_description: str) -> Path | None:
    """The compiled artifact shipped for this LM (used when no --program is given), or None.

    Only the embedded offline model has one: it is the main job's default, and a 270M base model
    needs its demos (see README, "Compile and tune").
    """
    name = _DEFAULT_ARTIFACTS.get(lm_description)
    if name is None:
        return None
    try:
        path = Path(str(resources.files(__name__).joinpath(name)))
    except (ModuleNotFoundError, TypeError):
        path = Path(__file__).resolve().parent / name
    return path if path.is_file() else None


# LM spec (as `lm_spec_of` writes it) -> artifact file in this folder, made by `ppoga compile`.
_DEFAULT_ARTIFACTS = {"local/gemma3-270m": "embedded-demo.json"}

DEMO_KG = demo_file("demo-kg.nt")
DEMO_QUESTIONS = demo_file("questions.jsonl")
DEMO_TRAIN = demo_file("train-questions.jsonl")
