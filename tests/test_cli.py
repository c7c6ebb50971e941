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


def _one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"ppoga {command}: error: ") and "  " not in lines[0]
    return lines[0]


def test_flags_are_checked_before_any_work_one_line_each(capsys, tmp_path):
    import pytest

    from ppoga_dspy.errors import ConfigError

    out = str(tmp_path / "r.jsonl")
    for bad, expected in ((["--threads", "0"], "--threads: 0 is too small"),
                          (["--threads", "-3"], "--threads: -3 is too small"),
                          (["--limit", "0"], "omit --limit to run every question")):
        with pytest.raises(SystemExit) as stop:
            main(["eval", "--dataset", "demo", "--lm", "oracle/gold-path", "--out", out, *bad])
        assert stop.value.code == ConfigError.exit_code
        assert expected in _one_error_line(capsys.readouterr().err, "eval")
    assert main(["ask", "Who?", "--set", "max_replans=abc"]) == ConfigError.exit_code
    assert "max_replans" in _one_error_line(capsys.readouterr().err, "ask")
    # The provider is checked before the KG is opened: a missing KG file would otherwise be the error (exit 3).
    missing_kg = str(tmp_path / "no-such-kg.nt")
    assert main(["eval", "--dataset", "demo", "--lm", "foo/bar", "--kg", missing_kg, "--out", out]) == 2
    line = _one_error_line(capsys.readouterr().err, "eval")
    assert "unknown provider 'foo'" in line and "openai" in line
    assert main(["eval", "--dataset", "demo", "--lm", "oracle/gold-path", "--executor-lm", "nope/x",
                 "--kg", missing_kg, "--out", out]) == 2
    assert "--executor-lm nope/x: unknown provider" in capsys.readouterr().err
    assert not (tmp_path / "r.jsonl").exists()


def test_known_providers_come_from_litellm_offline():
    from ppoga_dspy.app.checks import check_lm_spec, known_providers

    names = known_providers()
    assert {"openai", "anthropic", "hosted_vllm", "ollama_chat", "local"} <= names and "foo" not in names
    for spec in ("openai/gpt-4o-mini", "hosted_vllm/Qwen/Qwen2.5-7B-Instruct", "local/embedded", "oracle/gold-path",
                 "openai/qwen@http://127.0.0.1:8000/v1"):
        check_lm_spec(spec)


def test_exit_codes_say_what_happened(capsys, tmp_path):
    import json

    from ppoga_dspy.errors import QUESTIONS_FAILED, ConfigError
    from tests.conftest import shared_data

    out = tmp_path / "down.jsonl"
    code = main(["eval", "--dataset", "demo", "--lm", "oracle/gold-path", "--limit", "2", "--out", str(out),
                 "--kg", "http://127.0.0.1:9/sparql", "--timeout", "0.5", "--retries", "0", "--no-progress"])
    captured = capsys.readouterr()
    assert code == QUESTIONS_FAILED, captured.err
    assert "2 of 2 questions failed" in captured.err and "--retry-failed" in captured.err
    assert len(out.read_text().splitlines()) == 2  # the run file is still complete
    # report --json: stdout is JSON and nothing else
    assert main(["report", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["failed"] == 2 and "PPoGA evaluation" not in captured.out + captured.err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["report", str(empty)]) == DataError.exit_code
    assert "is empty" in _one_error_line(capsys.readouterr().err, "report")
    kb = str(shared_data("pathquestion", "2H-kb.txt"))
    assert main(["kg", "relations", "no_such_person", "--kg", kb]) == ConfigError.exit_code
    assert "entity 'no_such_person' is unknown" in _one_error_line(capsys.readouterr().err, "kg")
    assert main(["kg", "neighbors", "ludwig_ii_of_bavaria", "no_such_relation", "--kg", kb]) == ConfigError.exit_code
    line = _one_error_line(capsys.readouterr().err, "kg")
    assert "relation 'no_such_relation' is unknown" in line and "parents" in line
    assert main(["kg", "neighbors", "ludwig_ii_of_bavaria", "parents", "--kg", kb, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["neighbors"]


def test_the_offline_model_has_one_name_and_outputs_are_ignored(capsys, tmp_path):
    from ppoga_dspy.app.naming import DEFAULT_EMBEDDED_DISPLAY, display_lm
    from ppoga_dspy.lm.factory import default_lm_notice

    assert display_lm("local/gemma3-270m") == DEFAULT_EMBEDDED_DISPLAY == display_lm("local/embedded")
    mixed = display_lm("planner=local/gemma3-270m executor=openai/x")
    assert mixed == f"planner={DEFAULT_EMBEDDED_DISPLAY} executor=openai/x"
    assert DEFAULT_EMBEDDED_DISPLAY in default_lm_notice() and "  " not in default_lm_notice()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert DEFAULT_EMBEDDED_DISPLAY in readme and "Gemma-270M" not in readme
    ignored = subprocess.run(["git", "check-ignore", "stores/wc2014", "runs/wc-p2.jsonl", "artifacts/gpt.json",
                              "runs/x.jsonl.lock"], cwd=REPO, capture_output=True, text=True)
    assert len(ignored.stdout.split()) == 4, ignored.stdout


def test_a_down_endpoint_says_one_try_not_one_tries(tmp_path):
    import pytest

    from ppoga_dspy.kg import KGError, open_kg

    kg = open_kg("http://127.0.0.1:9/sparql", timeout=0.5, retries=0)
    with pytest.raises(KGError) as failure:
        kg.relations("m.0demo060")
    assert "1 try" in str(failure.value) and "1 tries" not in str(failure.value) and "  " not in str(failure.value)


def test_cost_table_names_the_offline_model():
    from rich.console import Console

    from ppoga_dspy.app.naming import DEFAULT_EMBEDDED_DISPLAY
    from ppoga_dspy.cli.render import render_prediction

    console = Console(record=True, width=200)
    render_prediction(console, {"question": "Q?", "kg": "demo", "lm": "local/gemma3-270m", "answers": ["London"],
                                "costs": {"lm_calls": 1, "prompt_tokens": 10, "completion_tokens": 2}})
    assert f"cost ({DEFAULT_EMBEDDED_DISPLAY})" in console.export_text()


def test_a_rule_overriding_the_model_reads_as_words():
    from rich.console import Console

    from ppoga_dspy.cli.render import render_prediction
    from ppoga_dspy.method.vocabulary import Decision

    console = Console(record=True, width=200)
    note = {"stage": "decision_changed", "outputs": {"model": Decision.PROCEED, "applied": Decision.FINISH,
                                                      "attempts": 0, "replans": 1}}
    render_prediction(console, {"question": "Q?", "kg": "demo", "answers": ["London"], "trace": [note]})
    text = console.export_text()
    assert "the model chose proceed, the caps applied finish (path corrections 0, replans 1)" in text
    assert "<Decision" not in text


def test_the_scripted_planners_and_the_no_model_baseline_pass_the_spec_check():
    from ppoga_dspy.app.checks import check_lm_spec

    for spec in ("oracle/gold-path", "oracle/noisy:0.3", "none"):
        check_lm_spec(spec)
