"""The `ppoga` entry point: light to start, clear on bad input."""

from __future__ import annotations

import subprocess
import sys

from ppoga_dspy.cli import main
from ppoga_dspy.errors import ArtifactError, DataError
from tests.conftest import REPO


def test_help_loads_no_heavy_library():
    code = ("import sys, ppoga_dspy.cli as c; c.build_parser(); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'dspy', 'optuna', 'pyoxigraph', 'sentence_transformers', 'torch', 'litellm', 'transformers'}))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_every_command_group_is_registered(capsys):
    assert main([]) == 1
    usage = capsys.readouterr().err
    for command in ("ask", "eval", "report", "compile", "tune", "kg"):
        assert command in usage


def test_bad_options_name_what_to_do(capsys, tmp_path):
    assert main(["eval", "--dataset", "nosuch:file.txt", "--out", str(tmp_path / "r.jsonl")]) == 2
    assert "unknown dataset spec" in capsys.readouterr().err
    assert main(["ask", "Who?", "--set", "max_replans=lots"]) == 2
    assert "invalid threshold" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing.jsonl")]) == DataError.exit_code
    assert "ppoga eval" in capsys.readouterr().err
    assert main(["ask", "Who?", "--program", str(tmp_path / "none.json")]) == ArtifactError.exit_code
    assert "no artifact" in capsys.readouterr().err


def test_each_error_kind_has_its_own_exit_code():
    from ppoga_dspy.errors import ConfigError, KGError, LMError, PPoGAError, exit_code_of
    from ppoga_dspy.kg import InvalidIdentifier, KGTimeoutError
    from ppoga_dspy.lm import LMConfigError

    kinds = [PPoGAError, ConfigError, DataError, KGError, LMError, ArtifactError]
    assert len({k.exit_code for k in kinds}) == len(kinds)
    assert all(issubclass(k, PPoGAError) for k in (KGTimeoutError, InvalidIdentifier, LMConfigError))
    assert exit_code_of(KGTimeoutError("slow")) == KGError.exit_code
    assert exit_code_of(InvalidIdentifier("bad id")) == ConfigError.exit_code  # the user's input to fix
    assert exit_code_of(LMConfigError("bad spec")) == ConfigError.exit_code
    assert exit_code_of(RuntimeError("bug")) == 1


def test_ask_with_a_missing_kg_is_one_line_and_no_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "ppoga_dspy", "ask", "--kg", str(tmp_path / "nowhere.nt")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "nowhere.nt" in lines[0] and "Traceback" not in result.stderr
