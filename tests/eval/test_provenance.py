"""Work is never mixed: eval refuses to append a run of another seed, split or dataset to a file, and tune refuses
to resume a study made with another LM, dataset, split, seed or set of questions (one line each, exit 2)."""

from __future__ import annotations

import json

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.errors import ConfigError
from ppoga_dspy.evaluation.runs import read_rows


def _eval(out, *extra: str) -> int:
    return main(["eval", "--dataset", "demo", "--lm", "oracle/gold-path", "--limit", "2", "--no-progress",
                 "--out", str(out), *extra])


@pytest.mark.parametrize(("first", "second", "named"), [
    (("--seed", "0"), ("--seed", "1"), "seed"),
    (("--split", "dev"), ("--split", "test"), "split"),
])
def test_eval_refuses_to_append_another_seed_or_split(first, second, named, tmp_path, capsys):
    out = tmp_path / "run.jsonl"
    assert _eval(out, *first) == 0
    rows = read_rows(out)
    assert rows and all(row[named] is not None for row in rows)
    capsys.readouterr()
    assert _eval(out, *second) == ConfigError.exit_code
    err = capsys.readouterr().err.strip().splitlines()
    assert any(f"holds rows from {named}" in line and "another --out" in line for line in err), err
    assert read_rows(out) == rows  # nothing appended
    assert _eval(out, *first) == 0  # the same flags resume


def _tune(out, dataset: str, *extra: str) -> int:
    return main(["tune", "--dataset", dataset, "--lm", "oracle/gold-path", "--program", "none", "--trials", "1",
                 "--limit", "2", "--out", str(out), "--json", *extra])


def test_tune_refuses_a_study_of_another_dataset_or_lm(tmp_path, capsys):
    out = tmp_path / "tuned.json"
    assert _tune(out, "demo") == 0
    made = json.loads(capsys.readouterr().out)
    assert made["trials"] == 1
    out.unlink()
    storage = made["storage"]
    # the case: another dataset on the same study ran 0 trials and wrote a mislabelled artifact
    assert _tune(out, "demo-train", "--storage", storage) == ConfigError.exit_code
    error = capsys.readouterr().err.strip().splitlines()[-1]  # after the one progress line, one error line
    assert error.startswith("ppoga tune: error:") and "was made with dataset 'demo'" in error and "demo-train" in error
    assert not out.exists()
    assert _tune(out, "demo", "--storage", storage, "--lm", "none") == ConfigError.exit_code
    assert "was made with lm 'oracle/gold-path'" in capsys.readouterr().err
    assert _tune(out, "demo", "--storage", storage, "--trials", "2") == 0  # the same work resumes
    assert json.loads(capsys.readouterr().out)["trials"] == 2
