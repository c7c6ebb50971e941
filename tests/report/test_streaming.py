"""Reports at scale (#41): a run file is summarized from per-row digests read one row at a time, never holding the
reasoning, and the HTML page holds the aggregates only, each question's reasoning going to part files beside it.

Memory is checked without timing: the allocations of reading a run whose rows carry a large trace stay near one
row's size (tracemalloc), and the page's size does not change when every row's reasoning grows tenfold."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.evaluation.digests import DIGEST_KEY, read_run_digests
from ppoga_dspy.evaluation.evaluate import summarize
from ppoga_dspy.evaluation.runs import EvaluationError, read_run_checked
from ppoga_dspy.report.data import correction_effects, trace_counts
from ppoga_dspy.report.html import ReportError, parts_folder, write_report

#: The fields that carry a row's reasoning: never in a digest.
REASONING = ("trace", "memory", "reasoning_chains", "reasoning")


def _inflated(source, out, *, pad: int, copies: int = 1) -> list[dict]:
    """The source run's rows, each with `pad` characters more reasoning (a long observation in its first step
    cycle and a long note in its trace), repeated `copies` times with fresh ids; written to `out`."""
    rows = []
    for copy in range(copies):
        for row in read_run_checked(source)[0]:
            row = json.loads(json.dumps(row))
            row["id"] = f"{row['id']}#{copy}" if copy else row["id"]
            cycles = row["memory"].get("step_cycles") or [{}]
            cycles[0]["observation"] = "x" * pad
            row["memory"]["step_cycles"] = cycles
            row["trace"].append({"stage": "note", "outputs": {"text": "y" * pad}})
            rows.append(row)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


def test_digests_summarize_as_the_rows_do_and_hold_no_reasoning(demo_runs):
    rows, damaged = read_run_checked(demo_runs["noisy"])
    digests, damaged_too = read_run_digests(demo_runs["noisy"], derive=(trace_counts,))
    assert damaged == damaged_too == [] and [d["id"] for d in digests] == [r["id"] for r in rows]
    assert summarize(digests) == summarize(rows)
    assert correction_effects(digests) == correction_effects(rows)
    assert not any(field in d for d in digests for field in REASONING)
    assert all(not isinstance(v, (dict, list)) for d in digests for v in d["costs"].values())


def _peak_reading(path) -> int:
    tracemalloc.start()
    try:
        digests, _ = read_run_digests(path, derive=(trace_counts,))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert digests
    return peak


def test_reading_a_run_holds_one_row_at_a_time(demo_runs, tmp_path):
    """Rows of 300 KB of reasoning each: reading their digests allocates a few rows' worth, whatever the file's
    size (twice the rows, about the same peak; far below the file)."""
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    _inflated(demo_runs["gold"], small, pad=150_000, copies=2)
    _inflated(demo_runs["gold"], large, pad=150_000, copies=4)
    size = large.stat().st_size
    assert size > 40e6
    peak_small, peak_large = _peak_reading(small), _peak_reading(large)
    assert peak_large < 1.5 * peak_small + 2e6, f"peak {peak_small / 1e6:.1f} -> {peak_large / 1e6:.1f} MB"
    assert peak_large < size / 3, f"peak {peak_large / 1e6:.1f} MB while reading a {size / 1e6:.0f} MB run"


def test_the_page_does_not_grow_with_the_reasoning(demo_runs, tmp_path):
    """The same run with every row's reasoning 100 KB longer: the page is byte for byte as large; only the
    part files grow. So a page's size is set by its questions' count and the aggregates, not by their detail."""
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    _inflated(demo_runs["gold"], small, pad=10)
    _inflated(demo_runs["gold"], large, pad=50_000)
    sizes = {}
    for run in (small, large):
        page = tmp_path / f"{run.stem}.html"
        assert main(["report", str(run), "--html", str(page)]) == 0
        detail = sum(p.stat().st_size for p in parts_folder(page).iterdir())
        sizes[run.stem] = (page.stat().st_size - len(str(run)), detail)  # the page names its run once
    assert sizes["small"][0] == sizes["large"][0]
    assert sizes["large"][1] > sizes["small"][1] + 35 * 50_000  # each view shows the long observation


def test_a_report_written_again_replaces_its_parts(demo_runs, tmp_path):
    rows, _ = read_run_digests(demo_runs["gold"])
    page = tmp_path / "r.html"
    write_report(page, {"gold": rows}, part_size=5)
    assert len(list(parts_folder(page).iterdir())) == 7
    write_report(page, {"gold": rows}, part_size=20)
    assert sorted(p.name for p in parts_folder(page).iterdir()) == ["part-0001.js", "part-0002.js"]
    assert not parts_folder(page).with_name("r.html.parts.tmp").exists()


def test_a_parts_folder_that_is_not_ours_is_left_alone(demo_runs, tmp_path):
    rows, _ = read_run_digests(demo_runs["gold"])
    page = tmp_path / "r.html"
    parts_folder(page).write_text("mine", encoding="utf-8")
    with pytest.raises(ReportError, match="is not a folder"):
        write_report(page, {"gold": rows})
    parts_folder(page).unlink()
    parts_folder(page).mkdir()
    (parts_folder(page) / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ReportError, match="notes.txt"):
        write_report(page, {"gold": rows})
    assert (parts_folder(page) / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_a_run_changed_under_the_report_is_named(demo_runs, tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(demo_runs["gold"].read_bytes())
    rows, _ = read_run_digests(path)
    path.write_bytes(b"\n" * path.stat().st_size)  # the rows' places now hold blank lines
    with pytest.raises(EvaluationError, match=r"run\.jsonl:\d+ is no longer a row"):
        write_report(tmp_path / "r.html", {"run": rows})
    assert DIGEST_KEY in rows[0]
