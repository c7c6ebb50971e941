"""Two real runs of the demo (the scripted perfect planner, and the noisy one that makes mistakes and corrects
them), written once per session by `ppoga eval` itself, for the report tests to read."""

from __future__ import annotations

from pathlib import Path

import pytest


def _eval(out: Path, lm: str, *extra: str) -> Path:
    from ppoga_dspy.cli import main

    assert main(["eval", "--dataset", "demo", "--lm", lm, "--out", str(out), "--no-progress", *extra]) == 0
    return out


@pytest.fixture(scope="session")
def demo_runs(tmp_path_factory) -> dict[str, Path]:
    """{"gold": the oracle's run, "noisy": oracle/noisy:0.3 with prompts kept, "part": the gold run's first 20}."""
    folder = tmp_path_factory.mktemp("runs")
    gold = _eval(folder / "gold.jsonl", "oracle/gold-path")
    # the noisy planner's relation mistakes are made at the Executor's choice: asked, as the paper does (the gate
    # that follows a step's named relation would settle them)
    noisy = _eval(folder / "noisy.jsonl", "oracle/noisy:0.3", "--keep-prompts", "--set", "follow_named_relations=false")
    part = folder / "part.jsonl"
    part.write_text("".join(gold.read_text(encoding="utf-8").splitlines(keepends=True)[:20]), encoding="utf-8")
    return {"gold": gold, "noisy": noisy, "part": part}
