"""Settings in one place: everything a flag sets (KG, dialect, program, stage mode, thresholds) can come from
ppoga.toml or PPOGA_* variables; flags win over the environment, which wins over the file."""

from __future__ import annotations

import pytest

from ppoga_dspy.cli import build_parser
from ppoga_dspy.cli.common import program_settings
from ppoga_dspy.errors import ConfigError
from tests.conftest import DEMO_KG

TOML = f"""
[kg]
kg = "{DEMO_KG}"
dialect = "freebase"
timeout = 7.5

[program]
program = "none"
stages = "fused"

[thresholds]
max_replans = 0
use_prediction = false
"""


@pytest.fixture
def configured(tmp_path, monkeypatch):
    for name in ("PPOGA_KG", "PPOGA_DIALECT", "PPOGA_PROGRAM", "PPOGA_STAGES", "PPOGA_SET", "PPOGA_KG_TIMEOUT",
                 "PPOGA_CONFIG", "PPOGA_LM", "PPOGA_FOREIGN_DEMOS"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "ppoga.toml").write_text(TOML + '\n[lm]\nlm = "none"\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _settings(*argv: str):
    return program_settings(build_parser().parse_args(["ask", "Who directed Inception?", *argv]))


def test_the_file_sets_what_the_flags_set(configured):
    settings = _settings()
    assert settings.kg == str(DEMO_KG) and settings.dialect == "freebase" and settings.timeout == 7.5
    assert settings.program == "none" and settings.stages == "fused"
    assert settings.overrides == {"max_replans": "0", "use_prediction": "false"}
    assert settings.lm.lm == "none"


def test_the_environment_wins_over_the_file_and_flags_over_both(configured, monkeypatch):
    monkeypatch.setenv("PPOGA_STAGES", "paper")
    monkeypatch.setenv("PPOGA_SET", "max_replans=1, prune_threshold=9")
    settings = _settings()
    assert settings.stages == "paper"
    assert settings.overrides == {"max_replans": "1", "use_prediction": "false", "prune_threshold": "9"}
    settings = _settings("--stages", "fused", "--set", "max_replans=2", "--timeout", "3")
    assert settings.stages == "fused" and settings.overrides["max_replans"] == "2" and settings.timeout == 3.0


def test_the_settings_reach_the_program(configured):
    from ppoga_dspy.app import open_program

    with open_program(_settings()) as opened:
        assert opened.program.thresholds.max_replans == 0 and not opened.program.thresholds.use_prediction
        assert str(opened.program.stages) == "fused" and opened.artifact is None
        assert opened.program(question="Who directed Inception?").status == "ok"


@pytest.mark.parametrize(("text", "says"), [
    ("[kg]\nkgg = 'x'\n", "[kg] kgg: unknown setting"),
    ("[program]\nstages = 'fused'\nthresholds = 3\n", "[program] thresholds: unknown setting"),
    ("[thresholds]\nmax_replans = 'many'\n", "max_replans"),
])
def test_a_bad_file_is_one_line(configured, text, says):
    (configured / "ppoga.toml").write_text(text)
    with pytest.raises(ConfigError, match=says.replace("[", r"\[").replace("]", r"\]")):
        from ppoga_dspy.app import open_program

        with open_program(_settings()):
            pass


@pytest.mark.parametrize(("variable", "setting", "says"), [
    ("PPOGA_STAGES", "stages", "stages = 'bogus': Input should be 'paper' or 'fused' (set by --stages, PPOGA_STAGES"),
    ("PPOGA_FOREIGN_DEMOS", "foreign_demos", "foreign_demos = 'bogus': Input should be 'compiled' or 'unnamed' "
                                             "(set by --foreign-demos, PPOGA_FOREIGN_DEMOS"),
])
def test_a_bad_value_from_the_environment_or_the_file_is_one_line(configured, monkeypatch, variable, setting, says):
    """A value the flag's choices would refuse, given by a PPOGA_* variable or ppoga.toml, is a ConfigError naming
    the setting and where it is set, not pydantic's traceback."""
    import re

    monkeypatch.setenv(variable, "bogus")
    with pytest.raises(ConfigError, match=re.escape(says)):
        _settings()
    monkeypatch.delenv(variable)
    (configured / "ppoga.toml").write_text(f"[program]\n{setting} = 'bogus'\n")
    with pytest.raises(ConfigError, match=re.escape(says)):
        _settings()
