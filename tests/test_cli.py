"""The `ppoga` entry point: light to start, clear on bad input."""

from __future__ import annotations

import subprocess
import sys

from ppoga_dspy.cli import main
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
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 2
    assert "ppoga eval" in capsys.readouterr().err
    assert main(["ask", "Who?", "--program", str(tmp_path / "none.json")]) == 2
    assert "no artifact" in capsys.readouterr().err
