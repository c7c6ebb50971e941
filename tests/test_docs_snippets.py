"""Every Python snippet of the README and the docs runs, as written, offline; and every documented way of naming
an LM from Python is accepted (a model string wherever an LM is taken).

A ```python block runs in a fresh interpreter in the repository root. A block that needs something this test
cannot give (an API key, a server) is marked on the line before it with `<!-- not run: REASON -->`; the test
still compiles it, so a marked snippet cannot rot into a syntax error.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO_KG, REPO

_BLOCK = re.compile(r"(?P<before>[^\n]*)\n```python\n(?P<code>.*?)\n```", re.DOTALL)
_NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<reason>.+?)\s*-->")


def _documents() -> list[Path]:
    found = [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [p for p in found if p.is_file()]


def _snippets() -> list[tuple[str, str, str | None]]:
    """(id, code, reason not run or None) for every ```python block of the documents."""
    found = []
    for path in _documents():
        text = "\n" + path.read_text(encoding="utf-8")
        for number, match in enumerate(_BLOCK.finditer(text), 1):
            skip = _NOT_RUN.search(match["before"])
            line = text[: match.start("code")].count("\n")
            found.append((f"{path.relative_to(REPO)}:{line}#{number}", match["code"], skip["reason"] if skip else None))
    return found


SNIPPETS = _snippets()


@pytest.mark.parametrize(("where", "code", "not_run"), SNIPPETS or [("none", "", "no python snippets")],
                         ids=[s[0] for s in SNIPPETS] or ["none"])
def test_snippet_runs(where, code, not_run, tmp_path):
    compile(code, where, "exec")  # even a snippet that is not run must be valid Python
    if not_run:
        pytest.skip(f"{where}: not run ({not_run})")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "DSPY_CACHEDIR": str(tmp_path / "dspy-cache")}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"{where} failed:\n{done.stderr[-3000:]}"


def test_program_settings_take_a_model_string():
    """The README's entry, `ProgramSettings(kg=..., lm='openai/gpt-4o-mini')`, builds (no call is made)."""
    from ppoga_dspy.app import ProgramSettings
    from ppoga_dspy.app.session import role_lms_for
    from ppoga_dspy.lm import LMSettings

    settings = ProgramSettings(kg=str(DEMO_KG), lm="openai/gpt-4o-mini")
    assert isinstance(settings.lm, LMSettings) and settings.lm.lm == "openai/gpt-4o-mini"
    lms, description = role_lms_for(settings)
    assert description == "openai/gpt-4o-mini" and lms["planner"].model == "openai/gpt-4o-mini"
    as_dict = ProgramSettings(lm={"lm": "openai/gpt-4o-mini", "temperature": 0.5})
    assert as_dict.lm.temperature == 0.5


def test_program_settings_take_an_lm_object_and_refuse_a_bad_spec_in_one_line():
    import dspy

    from ppoga_dspy.app import ProgramSettings
    from ppoga_dspy.app.session import role_lms_for
    from ppoga_dspy.lm import LMConfigError

    lm = dspy.LM("openai/gpt-4o-mini", temperature=0.0, max_tokens=64)
    lms, description = role_lms_for(ProgramSettings(lm=lm))
    assert lms == {"planner": lm, "executor": lm} and description == "openai/gpt-4o-mini"
    with pytest.raises(LMConfigError, match="contains whitespace"):
        ProgramSettings(lm="not a spec")


def test_open_program_with_a_model_string_answers():
    """The documented entry end to end, with the no-model baseline named by its string."""
    from ppoga_dspy.app import ProgramSettings, open_program

    with open_program(ProgramSettings(kg=str(DEMO_KG), lm="none", program="none")) as opened:
        prediction = opened.program(question="Who directed Inception?")
    assert prediction.status == "ok" and opened.lm_description == "none"


def test_ppoga_role_lms_and_teacher_take_model_strings(demo_kg):
    from ppoga_dspy.lm import LMConfigError, as_lm
    from ppoga_dspy.method.program import PPoGA

    program = PPoGA(demo_kg, role_lms={"planner": "openai/gpt-4o-mini"})
    assert program.role_lms["planner"].model == "openai/gpt-4o-mini"
    assert as_lm(None) is None and as_lm(program.role_lms["planner"]) is program.role_lms["planner"]
    with pytest.raises(LMConfigError, match="scripted planner"):
        as_lm("oracle/gold-path", what="--teacher-lm")
