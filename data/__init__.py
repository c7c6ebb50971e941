"""The demo KG and its questions, shipped inside the wheel as `ppoga_dspy.data` (pyproject maps this folder).

Read through `importlib.resources` so that a non-editable install, a zip import or a source checkout
all find the same files; `demo_file` falls back to the folder beside this file for a bare checkout
on `sys.path` (no install at all).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["DEMO_KG", "DEMO_QUESTIONS", "DEMO_TRAIN", "demo_file"]


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


DEMO_KG = demo_file("demo-kg.nt")
DEMO_QUESTIONS = demo_file("questions.jsonl")
DEMO_TRAIN = demo_file("train-questions.jsonl")
