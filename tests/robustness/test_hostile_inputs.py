"""Hostile input files (#41, items 3, 4, 6, 7 and 8): refused before any LM call with `PATH:LINE` and what to do, or
read as meant. Real files in tmp folders, a real loopback LM server that counts what it was asked."""

from __future__ import annotations

import json

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.datasets.examples import DatasetError
from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.errors import ConfigError, DataError
from ppoga_dspy.testing.faults import FaultLMServer
from tests.conftest import DEMO_KG, DEMO_QUESTIONS

KB = ("The Matrix|directed_by|Lana Wachowski\nThe Matrix|starred_actors|Keanu Reeves\n"
      "Speed|starred_actors|Keanu Reeves\n")
QUESTIONS = ["who directed [The Matrix]\tLana Wachowski", "what films did [Keanu Reeves] act in\tThe Matrix|Speed"]
TEMPLATES = ["movie_to_director", "actor_to_movie"]


def _error_line(err: str, command: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith(f"ppoga {command}: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _metaqa(folder, questions=QUESTIONS, templates=TEMPLATES, *, bom: bytes = b""):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kb.txt").write_text(KB, encoding="utf-8")
    path = folder / "qa_test.txt"
    path.write_bytes(bom + ("\n".join(questions) + "\n").encode())
    (folder / "qa_test_qtype.txt").write_bytes(bom + ("\n".join(templates) + "\n").encode())
    return path


def _eval_paid(dataset: str, tmp_path, capsys, *extra: str) -> tuple[int, int, str]:
    """Exit code, LM requests made and the error line of `ppoga eval` on a dataset, against a counting server."""
    with FaultLMServer("ok") as server:
        code = main(["eval", "--dataset", dataset, "--kg", str(DEMO_KG), "--out", str(tmp_path / "r.jsonl"),
                     "--lm", server.spec(), "--no-progress", *extra])
        requests = server.requests
    return code, requests, capsys.readouterr().err


# -- 3: a MetaQA line without answers ------------------------------------------------------------------------------


@pytest.mark.parametrize("line", ["who directed [The Matrix]\t", "who directed [The Matrix]\t|||"])
def test_a_metaqa_line_without_answers_is_refused_at_load_before_any_call(line, tmp_path, capsys):
    path = _metaqa(tmp_path / "m", [QUESTIONS[1], "", line])  # a blank line between: the line number is the file's
    with pytest.raises(DatasetError, match=rf"{path}:3: no answers"):
        load_dataset(f"metaqa:{path}")
    code, requests, err = _eval_paid(f"metaqa:{path}", tmp_path, capsys)
    assert code == DataError.exit_code and requests == 0
    assert f"{path}:3: no answers" in _error_line(err, "eval")


# -- 4: a blank topic entity ---------------------------------------------------------------------------------------


def test_a_blank_metaqa_topic_is_refused_before_any_call(tmp_path, capsys):
    path = _metaqa(tmp_path / "m", [QUESTIONS[0], "who directed [ ]\tLana Wachowski"])
    code, requests, err = _eval_paid(f"metaqa:{path}", tmp_path, capsys)
    assert code == DataError.exit_code and requests == 0
    assert f"{path}:2" in _error_line(err, "eval") and "topic entity" in err


@pytest.mark.parametrize("topics", [{"": "Inception"}, {"m.0demo060": "  "}, {" ": " "}])
def test_a_blank_topic_in_a_question_file_is_refused_before_any_call(topics, tmp_path, capsys):
    item = json.loads(DEMO_QUESTIONS.read_text(encoding="utf-8").splitlines()[0])
    item["topic_entities"] = topics
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(item) + "\n", encoding="utf-8")
    code, requests, err = _eval_paid(f"demo:{path}", tmp_path, capsys)
    assert code == DataError.exit_code and requests == 0 and "blank topic entity" in _error_line(err, "eval")


def test_a_blank_topic_flag_is_refused_before_any_call(capsys):
    with FaultLMServer("ok") as server:
        assert main(["ask", "Who directed Inception?", "--topic", " ", "--lm", server.spec()]) == ConfigError.exit_code
        assert server.requests == 0
    assert "--topic is blank" in _error_line(capsys.readouterr().err, "ask")


# -- 6: a misspelt or unknown TOML table or key ---------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("[threshold]\nmax_replans = 0\n", "unknown table [threshold]"),
    ("[zzz]\nx = 1\n", "unknown table [zzz]"),
    ("max_replans = 0\n[lm]\nlm = \"none\"\n", "unknown top-level key 'max_replans'"),
])
def test_an_unknown_table_or_top_level_key_is_refused_naming_the_known_ones(text, expected, tmp_path, capsys):
    config = tmp_path / "ppoga.toml"
    config.write_text(text, encoding="utf-8")
    assert main(["ask", "Who directed Inception?", "--lm", "none", "--config", str(config)]) == ConfigError.exit_code
    line = _error_line(capsys.readouterr().err, "ask")
    assert expected in line and str(config) in line and "[thresholds]" in line and "[lm]" in line


@pytest.mark.parametrize(("text", "name"), [
    ("[thresholds]\nmax_replans = \"abc\"\n", "max_replans"),
    ("[thresholds]\nmax_replan = 1\n", "max_replan"),
])
def test_a_bad_threshold_in_the_file_is_reported_as_the_files(text, name, tmp_path, capsys):
    config = tmp_path / "ppoga.toml"
    config.write_text(text, encoding="utf-8")
    assert main(["ask", "Who directed Inception?", "--lm", "none", "--config", str(config)]) == ConfigError.exit_code
    line = _error_line(capsys.readouterr().err, "ask")
    assert f"{config}: [thresholds] {name}" in line and "--set" not in line


# -- 7: a byte-order mark at the head of a text input ---------------------------------------------------------------

BOM = b"\xef\xbb\xbf"


def test_a_bom_at_the_head_of_a_pipe_kb_is_not_part_of_the_first_name(tmp_path, capsys):
    kb = tmp_path / "kb.txt"
    kb.write_bytes(BOM + KB.encode())
    store = tmp_path / "store"
    assert main(["kg", "load", str(kb), "--store", str(store)]) == 0
    capsys.readouterr()
    assert main(["kg", "neighbors", "The Matrix", "directed_by", "--kg", str(store), "--json"]) == 0
    assert "Lana Wachowski" in capsys.readouterr().out


def test_a_bom_at_the_head_of_metaqa_files_and_a_question_file_is_read_as_text(tmp_path):
    examples = load_dataset(f"metaqa:{_metaqa(tmp_path / 'm', bom=BOM)}")
    assert [e.metadata["type"] for e in examples] == TEMPLATES
    assert list(examples[0].topic_entities) == ["The Matrix"]
    questions = tmp_path / "q.jsonl"
    questions.write_bytes(BOM + DEMO_QUESTIONS.read_bytes())
    assert load_dataset(f"demo:{questions}")[0].id == "demo-001"


def test_a_bom_at_the_head_of_a_config_file_is_not_a_statement(tmp_path, capsys):
    config = tmp_path / "ppoga.toml"
    config.write_bytes(BOM + b'[lm]\nlm = "none"\n[thresholds]\nmax_replans = 0\n')
    assert main(["ask", "Who directed Inception?", "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["question"] == "Who directed Inception?"


# -- 8: line splitting, the KB's format named, a question's length --------------------------------------------------


@pytest.mark.parametrize("char", ["\u2028", "\u0085", "\x0b", "\u2029", "\x1c"])
def test_a_question_holding_a_unicode_line_break_stays_one_question(char, tmp_path):
    path = _metaqa(tmp_path / "m", [f"who directed [The Matrix]{char} please\tLana Wachowski", QUESTIONS[1]])
    examples = load_dataset(f"metaqa:{path}")
    assert len(examples) == 2 and examples[0].answers == ["Lana Wachowski"]


@pytest.mark.parametrize("first", ["The Matrix|directed_by", "The Matrix|directed_by|Lana Wachowski|extra"])
def test_a_pipe_kb_with_a_bad_first_line_is_named_as_a_metaqa_kb(first, tmp_path, capsys):
    kb = tmp_path / "kb.txt"
    kb.write_text(first + "\n" + KB, encoding="utf-8")
    assert main(["kg", "load", str(kb), "--store", str(tmp_path / "s")]) == DataError.exit_code
    line = _error_line(capsys.readouterr().err, "kg")
    assert f"{kb}:1" in line and "MetaQA" in line and "IRN" not in line.split("read as")[0]


def test_a_question_over_the_cap_is_refused_before_any_call(tmp_path, capsys):
    long = "Who directed " + "Inception " * 20_000 + "?"  # 200 KB
    with FaultLMServer("ok") as server:
        assert main(["ask", long, "--lm", server.spec()]) == ConfigError.exit_code
        assert server.requests == 0
    assert "characters long" in _error_line(capsys.readouterr().err, "ask")
    item = json.loads(DEMO_QUESTIONS.read_text(encoding="utf-8").splitlines()[0])
    item["question"] = long
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(item) + "\n", encoding="utf-8")
    code, requests, err = _eval_paid(f"demo:{path}", tmp_path, capsys)
    assert code == DataError.exit_code and requests == 0 and "characters long" in _error_line(err, "eval")
