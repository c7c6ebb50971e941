"""Runs compared: shared questions only, a warning on unequal coverage, won and lost, in the terminal too."""

from __future__ import annotations

from ppoga_dspy.cli import main
from ppoga_dspy.evaluation.runs import read_run
from ppoga_dspy.report.compare import compare_runs, comparison_json


def test_compare_on_shared_questions(demo_runs):
    gold, noisy, part = (read_run(demo_runs[k]) for k in ("gold", "noisy", "part"))
    comparison = compare_runs({"gold": gold, "noisy": noisy, "part": part}, resamples=2000)
    shared = [r["id"] for r in part]
    assert comparison.coverage.shared == shared and not comparison.coverage.equal
    warning = comparison.coverage.warning
    assert "gold: 35, noisy: 35, part: 20" in warning and "the 20 questions" in warning
    noisy_pair = comparison.pairs[0]
    right = {r["id"]: r["metrics"]["hits@1"] for r in gold}
    other = {r["id"]: r["metrics"]["hits@1"] for r in noisy}
    assert noisy_pair.lost == [i for i in shared if right[i] and not other[i]]
    assert noisy_pair.won == [i for i in shared if other[i] and not right[i]]
    hits = noisy_pair.differences["Hits@1"]
    assert hits.n == 20 and hits.low <= hits.difference <= hits.high
    assert hits.difference == sum(other[i] - right[i] for i in shared) / 20
    assert noisy_pair.mcnemar.a_only == len(noisy_pair.lost) and noisy_pair.mcnemar.b_only == len(noisy_pair.won)
    calls = noisy_pair.differences["LM calls / q"]
    assert calls.difference > 0 and calls.excludes_zero  # the noisy planner pays for its mistakes
    same = comparison.pairs[1]  # part is the gold run's first 20 rows: no difference at all
    assert (same.won, same.lost) == ([], []) and all(d.difference == 0 for d in same.differences.values())
    data = comparison_json(comparison)
    assert data["provenance"]["noisy"]["LM"] == "oracle/noisy:0.3" and data["only"]["gold"] == [
        r["id"] for r in gold[20:]]


def test_report_warns_on_unequal_coverage_and_compares(demo_runs, capsys):
    assert main(["report", str(demo_runs["gold"]), str(demo_runs["part"]), "--resamples", "500"]) == 0
    captured = capsys.readouterr()
    assert "warning: the runs cover different questions" in captured.err
    assert "compared on the 20 questions they share" in captured.err
    assert "20 shared questions" in captured.out and "McNemar" in captured.out and "provenance" in captured.out
