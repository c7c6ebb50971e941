"""How long `ppoga report A B --html` takes on 1,000-question runs, how large the HTML is, and bytes per run row.

Two real runs are made with `ppoga eval` on a dataset (default: the shipped demo, 35 questions): the scripted
perfect planner (`oracle/gold-path`) and the noisy one (`oracle/noisy:0.2`, which errs and corrects itself),
the second with `--keep-prompts`. Their rows are then repeated, with fresh ids, to `--n` questions each (the
rows are real; only their number is made up), and `ppoga report A B --html` is timed in this process on them:
read, summarize, compare (10,000 bootstrap resamples), write; wall and CPU seconds are printed (on a shared
machine the CPU seconds are the figure that does not depend on the neighbours). Bytes per row are measured on
the real rows, as `eval` writes them (compact) and with `--keep-prompts`.

Each report runs in its own process (`ppoga_dspy.cli.main`), so its peak memory (VmHWM) is its own;
`ppoga report` without `--html` is timed too, and the run file's size is printed (issue 41's scale: 50,000 rows).

    python benchmarks/report_bench.py                       # 1,000 questions per run, the demo's rows
    python benchmarks/report_bench.py --n 50000 --one-run   # the 50k-row figures of docs/benchmarks/report.md
    python benchmarks/report_bench.py --n 1000 --dataset wc2014:../shared/data/wc2014/WC-P2.txt --limit 100
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _name, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("LITELLM_LOCAL_MODEL_COST_MAP", "True")):
    os.environ.setdefault(_name, _value)


def _eval(out: Path, dataset: str, lm: str, limit: int | None, *extra: str) -> list[dict]:
    from ppoga_dspy.cli import main
    from ppoga_dspy.evaluation.runs import read_run

    limit_args = ["--limit", str(limit)] if limit else []
    code = main(["eval", "--dataset", dataset, "--lm", lm, "--out", str(out), "--no-progress", *limit_args, *extra])
    if code != 0:
        raise SystemExit(f"report_bench: ppoga eval exited {code} on {dataset} with {lm}")
    return read_run(out)


def _repeat(rows: list[dict], n: int, out: Path) -> Path:
    """`n` rows made of the real ones, in order, each copy with its own id (so the report lists n questions)."""
    with out.open("w", encoding="utf-8") as handle:
        for index in range(n):
            row = rows[index % len(rows)]
            copy = index // len(rows)
            handle.write(json.dumps({**row, "id": f"{row['id']}#{copy}" if copy else row["id"]},
                                    ensure_ascii=False) + "\n")
    return out


#: The report in a process of its own, which writes its peak memory last: VmHWM, the high-water mark of its own
#: memory. (Its rusage max RSS would not do: Linux carries the parent's RSS at fork over the exec, so every report
#: would show this benchmark's own size after `ppoga eval`.)
_CHILD = ("import sys\nfrom ppoga_dspy.cli import main\ncode = main(sys.argv[1:])\n"
          "peak = next(line for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
          "sys.stderr.write('\\nreport_bench peak KiB ' + peak.split()[1] + '\\n')\nsys.exit(code)\n")


def _timed_report(argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak memory (MB, the process's VmHWM) of `ppoga report ARGV` in a process
    of its own."""
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-c", _CHILD, "report", *argv], stdout=subprocess.DEVNULL,
                                   stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        errors.seek(0)
        text = errors.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"report_bench: ppoga report exited {code}: {text.strip()[-500:]}")
    peak = int(text.rsplit("report_bench peak KiB ", 1)[1].split()[0])
    return wall, usage.ru_utime + usage.ru_stime, peak / 1024


def _folder_size(folder: Path) -> tuple[int, int]:
    """(files, bytes) of the report's parts folder (each question's reasoning, loaded by the page on demand)."""
    files = list(folder.iterdir()) if folder.is_dir() else []
    return len(files), sum(f.stat().st_size for f in files)


def _compact_bytes(rows: list[dict]) -> float:
    from ppoga_dspy.evaluation.row_reasoning import compact_trace

    sizes = [len((json.dumps({**r, "trace": compact_trace(r["trace"])}, ensure_ascii=False) + "\n").encode())
             for r in rows]
    return sum(sizes) / len(sizes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="questions per run in the timed report (default 1000)")
    parser.add_argument("--dataset", default="demo", help="where the real rows come from (default: demo)")
    parser.add_argument("--limit", type=int, default=None, help="questions of the dataset to run (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="keep the runs and the report in this folder")
    parser.add_argument("--one-run", action="store_true", help="time the one-run report only (not two compared)")
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="report-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    gold = _eval(folder / "real-gold.jsonl", args.dataset, "oracle/gold-path", args.limit)
    noisy = _eval(folder / "real-noisy.jsonl", args.dataset, "oracle/noisy:0.2", args.limit, "--keep-prompts")
    gold_bytes = (folder / "real-gold.jsonl").stat().st_size / len(gold)
    prompts_bytes = (folder / "real-noisy.jsonl").stat().st_size / len(noisy)
    a = _repeat(gold, args.n, folder / f"gold-{args.n}.jsonl")
    b = None if args.one_run else _repeat(noisy, args.n, folder / f"noisy-{args.n}.jsonl")
    report = folder / f"report-{args.n}.html"
    timings = {}
    cases = [("one run", [a])] + ([] if args.one_run else [("two runs compared", [a, b])])
    for label, files in cases:
        for html in (False, True):
            extra = ["--html", str(report)] if html else []
            seconds, cpu, peak = _timed_report([*map(str, files), *extra])
            timings[(label, html)] = (seconds, cpu, peak, report.stat().st_size if html else None,
                                      _folder_size(report.with_name(report.name + ".parts")) if html else None)
    print(f"\nreport_bench: real rows from {args.dataset}: {len(gold)} questions; repeated to {args.n} per run",
          file=sys.stderr)
    print(f"bytes per row: {gold_bytes:,.0f} (oracle/gold-path, as eval writes it); noisy:0.2 "
          f"{_compact_bytes(noisy):,.0f} compact, {prompts_bytes:,.0f} with --keep-prompts")
    print(f"run file of {args.n} rows: {a.stat().st_size / 1e6:.0f} MB (gold-path)"
          + (f", {b.stat().st_size / 1e6:.0f} MB (noisy:0.2, --keep-prompts)" if b else ""))
    for (label, html), (seconds, cpu, peak, size, parts) in timings.items():
        what = "ppoga report --html" if html else "ppoga report"
        page = f", HTML {size / 1e6:.2f} MB (+ {parts[1] / 1e6:.1f} MB of detail in {parts[0]} part files)" \
            if size is not None else ""
        print(f"{what}, {args.n} questions, {label}: {seconds:.2f} s wall ({cpu:.2f} s CPU), peak memory "
              f"{peak:,.0f} MB{page}")
    print("peak memory: each report process's own high-water mark (VmHWM)")
    print(f"load average while timing: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"files in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
