"""Run rows damaged in one field (#41, item 5): `report` and `report --html` skip the row and say how many, naming
`PATH:LINE` and the field; `show` of that row is one line naming them. Never a traceback."""

from __future__ import annotations

import json
import math

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.errors import DataError


@pytest.fixture(scope="module")
def run_lines(tmp_path_factory) -> list[str]:
    """Three real rows of a demo run (no model: fallbacks, trace, memory and costs all written)."""
    out = tmp_path_factory.mktemp("run") / "r.jsonl"
    assert main(["eval", "--dataset", "demo", "--limit", "3", "--out", str(out), "--lm", "none", "--no-progress"]) \
        in (0, 7)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    return lines


DAMAGE = {
    "time-text": ("time", "fast"),
    "calls-text": ("call_num", "abc"),
    "metrics-list": ("metrics", [1, 2]),
    "trace-text": ("trace", "x"),
    "metadata-text": ("metadata", "x"),
    "memory-strategic-text": ("memory", {"strategic": "x"}),  # named as `memory.strategic`
    "time-nan": ("time", math.nan),
    "calls-huge": ("call_num", 1e308),
    "newer-format": ("row_format", 99),
}


def _damaged(run_lines, tmp_path, name) -> tuple:
    field, value = DAMAGE[name]
    row = json.loads(run_lines[1])
    row[field] = value
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join([run_lines[0], json.dumps(row), run_lines[2]]) + "\n", encoding="utf-8")
    return path, row["id"], "memory.strategic" if field == "memory" else field


def _error_lines(err: str, command: str) -> list[str]:
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if line.startswith(f"ppoga {command}: ")]


@pytest.mark.parametrize("name", list(DAMAGE))
def test_report_skips_a_damaged_row_and_names_it(name, run_lines, tmp_path, capsys):
    path, _, field = _damaged(run_lines, tmp_path, name)
    assert main(["report", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    (warning,) = _error_lines(captured.err, "report")
    assert "skipped 1 damaged row" in warning and f"{path}:2" in warning and repr(field) in warning
    summary = json.loads(captured.out)
    assert summary["n"] == 2 and summary["damaged_rows"] == 1


@pytest.mark.parametrize("name", list(DAMAGE))
def test_report_html_skips_a_damaged_row(name, run_lines, tmp_path, capsys):
    path, _, field = _damaged(run_lines, tmp_path, name)
    page = tmp_path / "report.html"
    assert main(["report", str(path), "--html", str(page)]) == 0
    warnings = _error_lines(capsys.readouterr().err, "report")
    assert any(f"{path}:2" in line and repr(field) in line for line in warnings)
    assert page.stat().st_size > 0


@pytest.mark.parametrize("name", list(DAMAGE))
def test_show_of_a_damaged_row_is_one_line_naming_the_line_and_field(name, run_lines, tmp_path, capsys):
    path, qid, field = _damaged(run_lines, tmp_path, name)
    assert main(["show", str(path), qid]) == DataError.exit_code
    (line,) = _error_lines(capsys.readouterr().err, "show")
    assert f"{path}:2" in line and repr(field) in line
    good = json.loads(run_lines[0])["id"]
    assert main(["show", str(path), good]) == 0  # the file's sound rows still show


def test_a_file_of_damaged_rows_only_is_one_error(run_lines, tmp_path, capsys):
    path = tmp_path / "run.jsonl"
    row = json.loads(run_lines[0])
    row["time"] = "fast"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert main(["report", str(path)]) == DataError.exit_code
    (line,) = _error_lines(capsys.readouterr().err, "report")
    assert f"{path}:1" in line and "'time'" in line
