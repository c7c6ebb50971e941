"""Fault bench: run `ppoga eval` against LM and SPARQL servers that misbehave on purpose, and show what happens.

For each fault it starts one loopback fault server (`ppoga_dspy.testing.faults`), runs `ppoga eval` as a
subprocess on the first N demo questions (the demo dataset ships inside the package: no `--data` needed),
and prints:

* exit code of `ppoga eval`;
* seconds until the run ended (the clear failure, or the end of the run for faults that do not fail it);
* requests the fault server received;
* rows in the run file, questions lost (asked but absent) and duplicated (more than one row);
* how the questions ended (status/error kind counts) and the first error line.

LM faults run the default demo KG with `--lm openai/fault@URL`; KG faults run `--kg URL --dialect freebase`
with the scripted gold-path planner (`--lm oracle/gold-path`, no model); `two-writers` runs two `eval`
processes on the same `--out` at once (one writer per run file is the runs-cli branch's lock).

    python benchmarks/fault_bench.py                      # every fault, 3 questions each
    python benchmarks/fault_bench.py --questions 5 --only hang
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ppoga_dspy.testing.faults import FaultLMServer, FaultSparqlServer  # noqa: E402

LM_FAULTS = ("empty", "garbage", "huge", "always-replan", "http500", "hang")
KG_FAULTS = ("refuse", "hang", "http500", "garbage-json", "non-utf8")


@dataclass
class Outcome:
    fault: str
    exit_code: int
    seconds: float
    requests: int
    rows: int
    lost: int
    duplicated: int
    endings: str
    first_error: str


def _env(cache_dir: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True", "DSPY_CACHEDIR": str(cache_dir), "PPOGA_NO_CACHE": "1"}


def _eval_command(out: Path, questions: int, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "ppoga_dspy", "eval", "--dataset", "demo", "--limit", str(questions),
            "--out", str(out), "--no-progress", *extra]


def _read_rows(out: Path) -> list[dict]:
    if not out.exists():
        return []
    rows = []
    for line in out.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "id" in row:
            rows.append(row)
    return rows


def _outcome(fault: str, codes: list[int], seconds: float, requests: int, out: Path, asked: int,
             stderr: str) -> Outcome:
    rows = _read_rows(out)
    ids = Counter(str(r["id"]) for r in rows)
    endings = Counter(r.get("status", "?") if r.get("status") == "ok" else f"failed:{r.get('error_kind')}"
                      for r in rows)
    errors = [str(r.get("error")) for r in rows if r.get("error")]
    first = errors[0] if errors else next((ln for ln in stderr.splitlines() if "error" in ln.lower()), "")
    return Outcome(
        fault=fault,
        exit_code=codes[0] if len(codes) == 1 else "/".join(map(str, codes)),  # type: ignore[arg-type]
        seconds=seconds,
        requests=requests,
        rows=len(rows),
        lost=max(0, asked - len(ids)),
        duplicated=sum(n - 1 for n in ids.values()),
        endings=", ".join(f"{k} {v}" for k, v in sorted(endings.items())),
        first_error=first[:110],
    )


def run_lm_fault(mode: str, questions: int, lm_timeout: float, workdir: Path) -> Outcome:
    out = workdir / f"lm-{mode}.jsonl"
    with FaultLMServer(mode) as server:
        started = time.perf_counter()
        done = subprocess.run(_eval_command(out, questions, ["--lm", server.spec(), "--lm-timeout", str(lm_timeout)]),
                              capture_output=True, text=True, env=_env(workdir), cwd=workdir, timeout=900)
        seconds = time.perf_counter() - started
        requests = server.requests
    return _outcome(f"lm:{mode}", [done.returncode], seconds, requests, out, questions, done.stderr)


def run_kg_fault(mode: str, questions: int, kg_timeout: float, workdir: Path) -> Outcome:
    out = workdir / f"kg-{mode}.jsonl"
    with FaultSparqlServer(mode) as server:
        started = time.perf_counter()
        done = subprocess.run(
            _eval_command(out, questions, ["--kg", server.url, "--dialect", "freebase", "--timeout", str(kg_timeout),
                                           "--lm", "oracle/gold-path"]),
            capture_output=True, text=True, env=_env(workdir), cwd=workdir, timeout=900,
        )
        seconds = time.perf_counter() - started
        requests = server.requests
    return _outcome(f"kg:{mode}", [done.returncode], seconds, requests, out, questions, done.stderr)


def run_two_writers(questions: int, workdir: Path) -> Outcome:
    out = workdir / "two-writers.jsonl"
    command = _eval_command(out, questions, ["--lm", "oracle/gold-path"])
    started = time.perf_counter()
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(workdir),
                              cwd=workdir) for _ in range(2)]
    results = [p.communicate(timeout=900) for p in procs]
    seconds = time.perf_counter() - started
    stderr = "\n".join(err for _, err in results)
    return _outcome("two-writers", [p.returncode for p in procs], seconds, 0, out, questions, stderr)


def render(outcomes: list[Outcome]) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.MARKDOWN, title=None)
    for name in ("fault", "exit", "seconds", "requests", "rows", "lost", "duplicated", "endings", "first error"):
        table.add_column(name, justify="right" if name in ("exit", "seconds", "requests", "rows", "lost",
                                                           "duplicated") else "left", overflow="fold")
    for o in outcomes:
        table.add_row(o.fault, str(o.exit_code), f"{o.seconds:.1f}", str(o.requests), str(o.rows), str(o.lost),
                      str(o.duplicated), o.endings, o.first_error)
    Console(width=220).print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=3, help="demo questions per fault (default 3)")
    parser.add_argument("--writers-questions", type=int, default=10,
                        help="demo questions for the two-writers case (default 10)")
    parser.add_argument("--lm-timeout", type=float, default=5.0, help="--lm-timeout of the LM runs (default 5)")
    parser.add_argument("--kg-timeout", type=float, default=2.0, help="--timeout of the KG runs (default 2)")
    parser.add_argument("--only", action="append", default=[], metavar="FAULT",
                        help="run only faults whose name contains this text (repeatable), e.g. --only kg:")
    parser.add_argument("--json", action="store_true", help="also print the outcomes as JSON lines")
    args = parser.parse_args(argv)
    if args.questions < 1 or args.writers_questions < 1:
        parser.error("--questions and --writers-questions must be at least 1")

    def wanted(name: str) -> bool:
        return not args.only or any(part in name for part in args.only)

    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="fault-bench-") as tmp:
        workdir = Path(tmp)
        for mode in LM_FAULTS:
            if wanted(f"lm:{mode}"):
                outcomes.append(run_lm_fault(mode, args.questions, args.lm_timeout, workdir))
                print(f"done lm:{mode}", file=sys.stderr, flush=True)
        for mode in KG_FAULTS:
            if wanted(f"kg:{mode}"):
                outcomes.append(run_kg_fault(mode, args.questions, args.kg_timeout, workdir))
                print(f"done kg:{mode}", file=sys.stderr, flush=True)
        if wanted("two-writers"):
            outcomes.append(run_two_writers(args.writers_questions, workdir))
    render(outcomes)
    if args.json:
        for o in outcomes:
            print(json.dumps(o.__dict__))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
