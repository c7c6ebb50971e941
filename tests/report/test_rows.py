"""Run rows keep the reasoning (plan, step cycles, corrections), compactly, and `ppoga show` prints it."""

from __future__ import annotations

import json

from ppoga_dspy.cli import main
from ppoga_dspy.errors import DataError
from ppoga_dspy.evaluation.runs import read_run
from ppoga_dspy.report.reasoning import corrections, has_reasoning, timeline

LM_STAGES = {"decompose", "predict", "think", "evaluate", "answer", "select_relations", "select_entities", "replan"}


def test_rows_keep_plan_cycles_and_a_compact_trace(demo_runs):
    rows = read_run(demo_runs["gold"])
    assert len(rows) == 35 and all(has_reasoning(r) for r in rows)
    for row in rows:
        plan = row["memory"]["strategic"]["plan"]
        assert plan and all(step["status"] in ("completed", "failed", "in progress", "not started") for step in plan)
        cycles = row["memory"]["step_cycles"]
        assert cycles and all({"objective", "observation", "decision"} <= c.keys() for c in cycles)
        assert all("triples" not in c for c in cycles)  # the observation text shows them
        assert row["reasoning_chains"] and row["lm"] == "oracle/gold-path" and row["dataset"] == "demo"
        # no prompt inputs by default; KG queries keep theirs (an entity and a direction)
        assert not [e for e in row["trace"] if e["stage"] in LM_STAGES and "inputs" in e]
        assert all("at" not in e for e in row["trace"])


def test_keep_prompts_keeps_the_calls_inputs_and_costs_bytes(demo_runs):
    gold, noisy = demo_runs["gold"], demo_runs["noisy"]
    calls = [e for r in read_run(noisy) for e in r["trace"] if e["stage"] in LM_STAGES]
    assert calls and all("inputs" in e for e in calls)
    assert {"question", "step"} <= set(next(e for e in calls if e["stage"] == "predict")["inputs"])
    per_row = gold.stat().st_size / len(read_run(gold))
    assert per_row < 12_000, per_row  # 10,000 questions stay near 100 MB (measured about 6.3 KB on the demo)


def test_corrections_land_on_the_cycle_that_made_them(demo_runs):
    rows = read_run(demo_runs["noisy"])
    corrected = [r for r in rows if corrections(r)["path_correction"]]
    replanned = [r for r in rows if corrections(r)["plan_correction"]]
    assert corrected and replanned, "the noisy planner at 0.3 corrects paths and replans on the demo"
    for row in corrected + replanned:
        line = timeline(row)
        assert len(line.cycles) == len(row["memory"]["step_cycles"])
        for view in line.cycles:
            stages = [n["stage"] for n in view.after]
            decision = view.cycle["decision"]
            assert ("path_correction" in stages) == (decision == "correct_path"), (row["id"], decision, stages)
            assert ("plan_correction" in stages) == (decision == "replan"), (row["id"], decision, stages)
            assert view.calls >= 1  # at least the evaluation call
    assert any(r["memory"]["strategic"]["archived_plans"] for r in replanned)


def test_show_prints_one_question_as_ask_does(demo_runs, capsys):
    row = next(r for r in read_run(demo_runs["noisy"]) if corrections(r)["plan_correction"])
    assert main(["show", str(demo_runs["noisy"]), row["id"]]) == 0
    out = capsys.readouterr().out
    assert row["question"] in out and "step 1, attempt 1" in out and "Plan 1 (abandoned)" in out
    assert "plan_correction" in out and "answer" in out and "Evidence chain 1" in out and "Gold:" in out


def test_show_unknown_id_is_one_line(demo_runs, capsys):
    assert main(["show", str(demo_runs["gold"]), "demo-0"]) == DataError.exit_code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no question with id 'demo-0'" in err and "demo-001" in err


def test_show_a_missing_file_or_json(demo_runs, capsys, tmp_path):
    assert main(["show", str(tmp_path / "none.jsonl"), "demo-001"]) == DataError.exit_code
    assert "no run file at" in capsys.readouterr().err
    assert main(["show", str(demo_runs["gold"]), "demo-001", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "demo-001"
