"""Hostile text and odd paths through the real commands (#30, classes 1, 2, 4, 5): one line and the kind's exit
code, nothing lost, nothing printed raw. LM faults are loopback servers (`ppoga_dspy.testing.faults`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.errors import ConfigError, DataError
from ppoga_dspy.testing.faults import FaultLMServer
from tests.conftest import DEMO_KG, DEMO_QUESTIONS


def _one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip() and not line.startswith("ppoga eval: ")
             or line.startswith(f"ppoga {command}: error")]
    errors = [line for line in lines if line.startswith(f"ppoga {command}: error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- 1 and 2: text that is not valid Unicode, and text that looks like markup or escapes ---------------------


@pytest.mark.parametrize("mode", ["surrogate", "markup", "escapes"])
def test_hostile_lm_replies_are_kept_resumed_and_printed_as_text(mode, tmp_path, capsys):
    out = tmp_path / "[bold]run[/].jsonl"  # a path that looks like markup, too
    with FaultLMServer(mode) as server:
        argv = ["eval", "--dataset", "demo", "--limit", "2", "--out", str(out), "--lm", server.spec(),
                "--lm-timeout", "5", "--no-progress"]
        assert main(argv) == 0
        first = capsys.readouterr()
        assert "Traceback" not in first.err and "\x1b]8" not in first.out and "\x1b[2J" not in first.out
        assert len(_rows(out)) == 2
        assert main(argv) == 0  # the resume reads what was written (cache on: replies were cleaned before caching)
        assert "Traceback" not in capsys.readouterr().err and len(_rows(out)) == 2
        assert main(["report", str(out)]) == 0
        assert main(["ask", "Who directed Inception?", "--lm", server.spec(), "--lm-timeout", "5"]) == 0
        asked = capsys.readouterr()
        assert "Traceback" not in asked.err and "\x1b]8" not in asked.out and "\x1b[2J" not in asked.out
        assert "answer" in asked.out


def test_a_question_with_bad_unicode_or_markup_is_answered_and_printed(tmp_path, capsys):
    question = "Who directed [bold]Inception[/]? \udcff \x1b[2J"  # argv's bad bytes arrive as lone surrogates
    assert main(["ask", question, "--lm", "none", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert "\x1b" not in result["question"] and "\ufffd" in result["question"] and "[bold]" in result["question"]
    assert main(["ask", question, "--lm", "none"]) == 0
    shown = capsys.readouterr()
    assert "[bold]Inception[/]" in shown.out and "\x1b[2J" not in shown.out


def test_question_files_with_surrogates_run_and_bad_bytes_are_one_line(tmp_path, capsys):
    items = [json.loads(line) for line in DEMO_QUESTIONS.read_text(encoding="utf-8").splitlines()[:2]]
    items[0]["question"] += " \\ud800"  # JSON escape of a lone surrogate
    text = "\n".join(json.dumps(i).replace("\\\\ud800", "\\ud800") for i in items) + "\n"
    good = tmp_path / "q.jsonl"
    good.write_text(text, encoding="utf-8")
    out = tmp_path / "r.jsonl"
    kg = ["--kg", str(DEMO_KG)]
    assert main(["eval", "--dataset", f"demo:{good}", "--out", str(out), "--lm", "none", "--no-progress", *kg]) == 0
    assert len(_rows(out)) == 2 and "\ufffd" in _rows(out)[0]["question"]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(text.encode() + b'{"id": "x", "question": "\xff\xfe"}\n')
    assert main(["eval", "--dataset", f"demo:{bad}", "--out", str(tmp_path / "b.jsonl"), "--lm", "none", *kg]) == 3
    assert str(bad) in _one_error_line(capsys.readouterr().err, "eval")


def test_a_config_file_with_bad_bytes_is_one_line(tmp_path, capsys):
    config = tmp_path / "ppoga.toml"
    config.write_bytes(b'[lm]\nlm = "openai/x\xff"\n')
    assert main(["ask", "Who?", "--config", str(config)]) == ConfigError.exit_code
    assert "not UTF-8" in _one_error_line(capsys.readouterr().err, "ask")
    assert main(["ask", "Who?", "--config", "/dev/zero"]) == ConfigError.exit_code
    assert "not a regular file" in _one_error_line(capsys.readouterr().err, "ask")


# -- 4: paths that are not ordinary files ------------------------------------------------------------------


def _eval(out: str, *extra: str) -> int:
    return main(["eval", "--dataset", "demo", "--limit", "1", "--out", out, "--lm", "none", "--no-progress", *extra])


def test_output_paths_are_checked_before_any_work(tmp_path, capsys):
    (tmp_path / "dir.jsonl").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "locked.jsonl.lock").mkdir()
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    cases = {"/dev/zero": "not a regular file", str(tmp_path / "dir.jsonl"): "is a directory",
             str(fifo): "not a regular file", str(tmp_path / "file" / "r.jsonl"): "not a directory",
             str(tmp_path / "locked.jsonl"): "lock", "/proc/version": "cannot be written",
             }
    for out, expected in cases.items():
        assert _eval(out) == ConfigError.exit_code, out
        assert expected in _one_error_line(capsys.readouterr().err, "eval"), out
    questions = tmp_path / "questions.jsonl"  # the dataset given as --out, also through a link
    questions.write_bytes(DEMO_QUESTIONS.read_bytes())
    (tmp_path / "q-link.jsonl").symlink_to(questions)
    for out in (questions, tmp_path / "q-link.jsonl"):
        assert main(["eval", "--dataset", f"demo:{questions}", "--kg", str(DEMO_KG), "--out", str(out), "--lm", "none",
                     "--limit", "1"]) == ConfigError.exit_code
        assert "input file" in _one_error_line(capsys.readouterr().err, "eval")
    assert questions.read_bytes() == DEMO_QUESTIONS.read_bytes()
    assert main(["ask", "Who?", "--lm", "none", "--trace", str(tmp_path / "dir.jsonl")]) == ConfigError.exit_code
    assert "--trace" in _one_error_line(capsys.readouterr().err, "ask")
    assert (tmp_path / "file").read_text() == "x"


def test_a_run_file_through_a_link_shares_the_real_files_lock_and_the_link_stays(tmp_path, capsys):
    from ppoga_dspy.evaluation.runs import lock_path, run_lock

    real = tmp_path / "real.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    with run_lock(link) as lock:  # one lock for both names: a second process writing either is refused
        assert lock == lock_path(real)
    assert _eval(str(link), "--limit", "2") == 0
    assert link.is_symlink() and len(_rows(real)) == 2


def test_a_run_file_on_a_device_is_never_read(capsys):
    from ppoga_dspy.evaluation.runs import EvaluationError, read_rows

    with pytest.raises(EvaluationError, match="not a regular file"):
        read_rows(Path("/dev/zero"))
    assert main(["report", "/dev/zero"]) == DataError.exit_code
    assert "not a regular file" in _one_error_line(capsys.readouterr().err, "report")


# -- 5: damaged run files ----------------------------------------------------------------------------------

GOOD = b'{"id": "a", "status": "ok", "metrics": {"hits@1": 1.0}}\n'


@pytest.mark.parametrize(("damage", "line"), [
    (b"[1, 2]\n", 2), (b'"text"\n', 2), (b'{"id": 7}\n', 2), (b'{"no_id": 1}\n', 2), (b'{"id": "\xff\xfe"}\n', 2),
    (b"[" * 100_000 + b"\n", 2), (b"\x00\x01garbage\n", 2),
])
def test_a_damaged_line_is_one_error_naming_its_line(damage, line, tmp_path, capsys):
    run = tmp_path / "r.jsonl"
    run.write_bytes(GOOD + damage + GOOD.replace(b'"a"', b'"b"'))
    assert main(["report", str(run)]) == DataError.exit_code
    assert f"{run}:{line}" in _one_error_line(capsys.readouterr().err, "report")
    assert _eval(str(run)) == DataError.exit_code  # the resume says the same, before any work
    assert f"{run}:{line}" in _one_error_line(capsys.readouterr().err, "eval")


def test_a_last_line_cut_inside_a_character_is_dropped(tmp_path):
    from ppoga_dspy.evaluation.runs import read_rows

    run = tmp_path / "r.jsonl"
    run.write_bytes(GOOD + '{"id": "b", "question": "caf\u00e9'.encode()[:-1])
    assert [r["id"] for r in read_rows(run)] == ["a"]
