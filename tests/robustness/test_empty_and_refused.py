"""Empty work and a KG that refuses every identifier (#30, classes 8 and 9): refused before any LM call, or failed
with kind "kg"; never an 'ok' question made of fallbacks."""

from __future__ import annotations

import json

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.errors import ConfigError
from ppoga_dspy.testing.faults import FaultLMServer
from tests.conftest import DEMO_KG, DEMO_QUESTIONS


def _error_line(err: str, command: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith(f"ppoga {command}: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("question", ["", "   ", "\x00\x1b[2J", "\t\n"])
def test_an_empty_question_is_refused_before_any_lm_call(question, capsys):
    with FaultLMServer("ok") as server:
        assert main(["ask", question, "--lm", server.spec()]) == ConfigError.exit_code
        assert server.requests == 0
    assert "question is empty" in _error_line(capsys.readouterr().err, "ask")


def test_a_dataset_with_a_blank_question_is_one_line(tmp_path, capsys):
    lines = DEMO_QUESTIONS.read_text(encoding="utf-8").splitlines()[:2]
    item = json.loads(lines[1])
    item["question"] = "  "
    path = tmp_path / "q.jsonl"
    path.write_text(lines[0] + "\n" + json.dumps(item) + "\n", encoding="utf-8")
    code = main(["eval", "--dataset", f"demo:{path}", "--kg", str(DEMO_KG), "--lm", "none",
                 "--out", str(tmp_path / "r.jsonl")])
    assert code == 3 and "is empty" in _error_line(capsys.readouterr().err, "eval")


@pytest.mark.parametrize("content", [b"", b"# nothing but a comment\n"])
def test_an_empty_kg_is_refused_before_any_lm_call(content, tmp_path, capsys):
    kg = tmp_path / "empty.nt"
    kg.write_bytes(content)
    with FaultLMServer("ok") as server:
        assert main(["ask", "Who directed Inception?", "--kg", str(kg), "--lm", server.spec()]) == 3  # data
        assert server.requests == 0
    assert "holds no triples" in _error_line(capsys.readouterr().err, "ask")


def test_an_irn_kb_with_spaced_names_loads_and_answers_and_a_bad_name_is_refused_at_load(tmp_path, capsys):
    kb = tmp_path / "kb.txt"
    kb.write_text("The Matrix\tdirected_by\tLana Wachowski\nThe Matrix\tstarred_actors\tKeanu Reeves\n",
                  encoding="utf-8")
    store = tmp_path / "store"
    assert main(["kg", "load", str(kb), "--format", "irn", "--store", str(store)]) == 0
    capsys.readouterr()
    assert main(["kg", "neighbors", "The Matrix", "directed_by", "--kg", str(store), "--json"]) == 0
    assert "Lana Wachowski" in capsys.readouterr().out
    bad = tmp_path / "bad.txt"
    bad.write_text("ok\tr\tfine\nbad\x1b[2Jname\tr\tx\n", encoding="utf-8")
    assert main(["kg", "load", str(bad), "--format", "irn", "--store", str(tmp_path / "s2")]) == 3
    assert f"{bad}:2" in _error_line(capsys.readouterr().err, "kg")


class _Refusing:
    """A KG whose every look-up is refused by its dialect (what an IRN store with unqueryable names did)."""

    def __init__(self, kg):
        self._kg = kg

    def __getattr__(self, name):
        attr = getattr(self._kg, name)
        if not callable(attr) or name in ("close",):
            return attr

        def refuse(*args, **kwargs):
            from ppoga_dspy.kg import InvalidIdentifier

            raise InvalidIdentifier(f"irn dialect: {args[:1]!r} is not a valid entity name")

        return refuse


def test_a_question_whose_kg_calls_all_failed_fails_with_kind_kg(demo_kg):
    from ppoga_dspy.lm.no_model import NoModel
    from ppoga_dspy.method.program import PPoGA

    program = PPoGA(_Refusing(demo_kg), role_lms={"planner": NoModel(), "executor": NoModel()})
    prediction = program(question="Who directed Inception?", topic_entities={"m.0demo001": "Inception"})
    assert prediction.status == "failed" and prediction.error_kind == "kg", (prediction.status, prediction.error)
    assert "every KG query" in prediction.error and prediction.answers == []
