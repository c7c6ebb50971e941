"""`ppoga compile --optimizer mipro|gepa` from the CLI, offline: scripted student, scripted prompt writer
(`oracle/proposer`), a budget flag; artifacts that reload; the dev score reported on questions the optimizer did
not select on; GEPA's run folder resumes; bad combinations are one line each."""

from __future__ import annotations

import json

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.errors import ConfigError
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.optimizers.artifact import load_artifact

BASE = ["compile", "--dataset", "demo-train", "--split", "train", "--lm", "oracle/noisy:0.5", "--limit", "6",
        "--dev-limit", "2", "--max-demos", "1", "--json"]


def _compile(capsys, out, *flags: str) -> dict:
    capsys.readouterr()
    assert main([*BASE, "--out", str(out), *flags]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.parametrize(("optimizer", "flags"), [
    ("mipro", ["--prompt-lm", "oracle/proposer", "--trials", "2", "--candidates", "2"]),
    ("gepa", ["--reflection-lm", "oracle/proposer", "--max-metric-calls", "12"]),
])
def test_mipro_and_gepa_finish_from_the_cli_and_reload(optimizer, flags, capsys, tmp_path, demo_kg):
    out = tmp_path / f"{optimizer}.json"
    report = _compile(capsys, out, "--optimizer", optimizer, *flags)
    assert report["reported_on"] == "dev" and report["selected_on"].startswith("train")
    assert report["selected_on_questions"] == 2 and report["dev_after"]["n"] == 2  # 6 train: 4 to train, 2 to select
    artifact = load_artifact(out)
    assert artifact.optimizer == optimizer and artifact.scores["reported_on"] == "dev"
    program = PPoGA(demo_kg)
    artifact.apply(program)
    saved = tmp_path / "dspy.json"
    program.save(str(saved))  # and DSPy's own save/load round-trips what the artifact gave
    again = PPoGA(demo_kg)
    again.load(str(saved))
    assert again.dump_state() == program.dump_state()


def test_gepa_run_folder_resumes(capsys, tmp_path):
    out = tmp_path / "gepa.json"
    flags = ["--optimizer", "gepa", "--reflection-lm", "oracle/proposer", "--max-metric-calls", "8"]
    _compile(capsys, out, *flags)
    folder = tmp_path / "gepa.json.gepa"
    assert (folder / "gepa_state.bin").is_file()
    state = (folder / "gepa_state.bin").stat().st_mtime_ns
    _compile(capsys, out, *flags)  # the budget is spent: the rerun reads the state and proposes nothing new
    assert (folder / "gepa_state.bin").stat().st_mtime_ns >= state
    assert load_artifact(out).optimizer == "gepa"


@pytest.mark.parametrize(("flags", "says"), [
    (["--optimizer", "mipro", "--trials", "2"], "--prompt-lm oracle/proposer"),
    (["--optimizer", "gepa", "--max-metric-calls", "8"], "--reflection-lm oracle/proposer"),
    (["--optimizer", "bootstrap", "--trials", "2"], "--trials applies to --optimizer mipro"),
    (["--optimizer", "gepa", "--reflection-lm", "oracle/proposer", "--select-split", "dev"], "also --dev-split"),
])
def test_bad_combinations_are_one_line(flags, says, capsys, tmp_path):
    capsys.readouterr()
    assert main([*BASE, "--out", str(tmp_path / "x.json"), *flags]) == ConfigError.exit_code
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("ppoga compile: error:") and says in error
    assert not (tmp_path / "x.json").exists()


def test_an_optimizer_failure_is_one_line_with_its_kind(capsys, tmp_path):
    """A prompt writer that cannot answer MIPROv2's signatures: one line naming the optimizer and the error kind."""
    capsys.readouterr()
    code = main([*BASE, "--out", str(tmp_path / "x.json"), "--optimizer", "mipro", "--trials", "2",
                 "--prompt-lm", "oracle/gold-path"])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and error.startswith("ppoga compile: error: --optimizer mipro failed (") and "Error" in error
