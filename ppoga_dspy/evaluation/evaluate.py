"""Parallel, resumable evaluation runs that write PoG-compatible JSONL, and their summaries.

Files: a run is one JSONL file, one line per finished question, appended as each question ends.
A line holds what PoG's evaluation scripts read (`question`, `RawQuestion`, `results`,
`reasoning_chains`, `call_num`, `input_token`, `output_token`, `total_token`, `time`) plus our
`id`, gold answers, both Hits@1 metrics and F1, status and error, costs and the full trace.

Resuming: questions whose id is already in the file are skipped, so an interrupted run (Ctrl-C, a
crash, a killed machine) continues where it stopped; a half-written last line is dropped first.
`retry_failed` also reruns the questions whose row failed; the new row supersedes the old one (the
last row of an id wins, see `ppoga_dspy.evaluation.runs`), and the file is compacted to one row
per id when the run ends. One process writes a file at a time (`PATH.lock`), and each row records
the LM and program fingerprint, so a resume with another LM or program is refused.
Summaries are computed from the file, so a resumed run reports the same totals as an
uninterrupted one.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import statistics
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppoga_dspy.evaluation.digests import CHOICE_STAGES, choice_counts  # noqa: F401 (where summaries read them)
from ppoga_dspy.evaluation.metrics import breakdown, hit_rog
from ppoga_dspy.evaluation.runs import (
    EvaluationError,
    RunLocked,
    RunMismatch,
    check_output_path,
    check_provenance,
    compact,
    program_fingerprint,
    read_rows,
    read_run,
    repair_tail,
    row_line,
    run_lock,
)
from ppoga_dspy.text import redact

__all__ = ["EvaluationError", "RunLocked", "RunMismatch", "RunResult", "answer_one", "example_id", "parallel_map",
           "program_fingerprint", "read_run", "record_for", "run_evaluation", "score_program", "summarize",
           "summary_table"]


def example_id(example: Any) -> str:
    """The example's own id, else a stable hash of its question (never Python's salted hash())."""
    given = getattr(example, "id", None) if not isinstance(example, dict) else example.get("id")
    if given:
        return str(given)
    question = example["question"] if isinstance(example, dict) else example.question
    return "q-" + hashlib.sha1(question.encode("utf-8")).hexdigest()[:12]


def record_for(example: Any, prediction: Any, seconds: float, *, keep_prompts: bool = False) -> dict[str, Any]:
    """One JSONL line: PoG's fields, our metrics, status, costs, and the reasoning (plan, step cycles, trace;
    see `ppoga_dspy.evaluation.row_reasoning`; `keep_prompts` keeps each LM call's inputs too)."""
    from ppoga_dspy.evaluation.metrics import score_prediction
    from ppoga_dspy.evaluation.row_reasoning import reasoning_fields

    costs = dict(getattr(prediction, "costs", {}) or {})
    answers = list(getattr(prediction, "answers", []) or [])
    metrics = score_prediction(example, prediction)
    metadata = dict(getattr(example, "metadata", {}) or {})
    from ppoga_dspy.evaluation.row_check import ROW_FORMAT

    return {
        "id": example_id(example),
        "row_format": ROW_FORMAT,  # a reader refuses rows of a newer format by name (row_check.py)
        "question": example.question,
        "RawQuestion": example.question,
        "topic_entities": dict(getattr(example, "topic_entities", {}) or {}),
        "results": answers[0] if answers else "",
        "answers": answers,
        "answer_ids": list(getattr(prediction, "answer_ids", []) or []),
        "ungrounded": list(getattr(prediction, "ungrounded", []) or []),  # answers that name no graph entity
        "gold": list(getattr(example, "answers", []) or []),
        "reasoning": getattr(prediction, "reasoning", ""),
        "reasoning_chains": getattr(prediction, "reasoning_chains", []),
        "call_num": costs.get("lm_calls", 0),
        "input_token": costs.get("prompt_tokens", 0),
        "cached_input_token": costs.get("prompt_tokens_reused", 0),  # of input_token, taken from the engine's cache
        "output_token": costs.get("completion_tokens", 0),
        "total_token": costs.get("total_tokens", 0),
        "time": round(seconds, 4),
        "unusable_replies": int(getattr(prediction, "unusable_replies", 0) or 0),  # LM replies that could not be used
        "status": getattr(prediction, "status", "ok"),
        "error_kind": getattr(prediction, "error_kind", None),
        "error": redact(prediction.error) if getattr(prediction, "error", None) else None,  # never a key
        "metrics": metrics,
        "metadata": metadata,
        "costs": costs,
        **reasoning_fields(prediction, keep_prompts=keep_prompts),  # memory, trace
    }


def failure_record(example: Any, exc: BaseException, seconds: float) -> dict[str, Any]:
    """A question the program could not even start (it never raises for bad replies; this is a bug)."""
    from types import SimpleNamespace

    failed = SimpleNamespace(answers=[], answer_ids=[], status="failed", error_kind="internal",
                             error=f"{type(exc).__name__}: {exc}", costs={}, trace=[], reasoning="",
                             reasoning_chains=[])
    return record_for(example, failed, seconds)


def answer_one(program: Callable[..., Any], example: Any, *, keep_prompts: bool = False) -> dict[str, Any]:
    """Run one question and make its record; a program that raises (a bug) still yields a failed record."""
    started = time.perf_counter()
    try:
        with _on_own_graph(program, example) as runner:
            prediction = runner(question=example.question, topic_entities=getattr(example, "topic_entities", None))
        return record_for(example, prediction, time.perf_counter() - started, keep_prompts=keep_prompts)
    except Exception as exc:
        return failure_record(example, exc, time.perf_counter() - started)


@contextlib.contextmanager
def _on_own_graph(program: Callable[..., Any], example: Any):
    """The program itself, or, when its KG stands for "each question on its own graph" (`per_question`, see
    datasets/own_graphs.py), a copy on this question's graph, which is built now and dropped when it ends: so a
    split of any size runs in the memory of one question's graph."""
    kg = getattr(program, "kg", None)
    if not getattr(kg, "per_question", False):
        yield program
        return
    with kg.open_for(example) as own:
        yield program.with_kg(own)


@dataclass
class RunResult:
    path: Path
    rows: list[dict[str, Any]]
    skipped: int
    ran: int
    interrupted: bool = False


def run_evaluation(
    program: Callable[..., Any],
    examples: Iterable[Any],
    *,
    out: Path,
    threads: int = 1,
    progress: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    provenance: dict[str, Any] | None = None,
    retry_failed: bool = False,
    keep_prompts: bool = False,
) -> RunResult:
    """Run `program` over the examples not yet in `out`, appending one line per finished question.

    `provenance` (e.g. `{"lm": "openai/gpt-4o-mini", "program": program_fingerprint(program)}`) is
    written into every row and checked against the rows already in the file (RunMismatch on a
    difference). `retry_failed` reruns questions whose latest row failed. `keep_prompts` keeps each LM call's
    inputs in the rows' trace (see `ppoga_dspy.evaluation.row_reasoning`). The file is locked for the
    whole run (RunLocked if another process holds it). Threads inherit the caller's DSPy context (LM,
    adapter, usage tracking). Ctrl-C stops submitting, lets questions in flight finish writing, and
    leaves a valid, resumable file.
    """
    out = check_output_path(Path(out), lock=True)  # the real file, writable, before any question is paid
    provenance = dict(provenance or {})
    with run_lock(out):
        repair_tail(out)
        existing = read_run(out)
        if provenance:
            check_provenance(out, existing, provenance)
        done = {row.get("id") for row in existing if not (retry_failed and row.get("status") == "failed")}
        examples = list(examples)
        todo = [ex for ex in examples if example_id(ex) not in done]
        skipped = len(examples) - len(todo)
        lock = threading.Lock()
        written: list[dict[str, Any]] = []
        bar = _progress(total=len(examples), initial=skipped, enabled=progress)
        hits = Counter()

        def solve(example: Any) -> dict[str, Any]:
            record = {**answer_one(program, example, keep_prompts=keep_prompts), **provenance}
            line = row_line(record)
            with lock:
                with out.open("a", encoding="utf-8") as handle:
                    handle.write(line)
                written.append(record)
                hits["n"] += 1
                hits["hit"] += record["metrics"]["hits@1"]
                bar.update(1)
                bar.set_postfix_str(f"hits@1 {hits['hit'] / hits['n']:.3f}")
            if on_record:
                on_record(record)
            return record

        interrupted = False
        try:
            parallel_map(solve, todo, threads=threads)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            bar.close()
        if len(read_rows(out)) != len(read_run(out)):
            compact(out)  # superseded rows (retried failures, an old double writer) leave the file
        return RunResult(path=out, rows=read_run(out), skipped=skipped, ran=len(written), interrupted=interrupted)


def parallel_map(fn: Callable[[Any], Any], items: Iterable[Any], *, threads: int = 1) -> list[Any]:
    """`fn` over items in `threads` threads, each inheriting the caller's DSPy context; results in item order.

    At most `threads` items are in flight; on Ctrl-C nothing new starts, the items in flight finish (their LM
    attempts cut after a short grace, `ppoga_dspy.lm.guard.stop_waiting`, so a trickling server cannot hold
    the stop), and KeyboardInterrupt is raised again once they have.
    """
    items = list(items)
    results: list[Any] = [None] * len(items)
    width = max(1, threads)
    pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="ppoga")
    pending: dict[Future, int] = {}
    queue = iter(enumerate(items))
    try:
        while True:
            while len(pending) < width:
                nxt = next(queue, None)
                if nxt is None:
                    break
                index, item = nxt
                context = contextvars.copy_context()
                pending[pool.submit(context.run, fn, item)] = index
            if not pending:
                break
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                results[pending.pop(future)] = future.result()
    except KeyboardInterrupt:
        from ppoga_dspy.lm.guard import resume_waiting, stop_waiting

        stop_waiting()
        try:
            wait(pending)
        finally:
            resume_waiting()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results


def score_program(program: Callable[..., Any], examples: Iterable[Any], *, threads: int = 1) -> dict[str, Any]:
    """Summary of `program` on examples, in memory (no run file): what compile and tune compare."""

    return summarize(parallel_map(lambda example: answer_one(program, example), examples, threads=threads))


def _progress(total: int, initial: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, disable=not enabled, desc="questions", unit="q", dynamic_ncols=True)


# -- summaries ------------------------------------------------------------------------------------


def _mean(values: list[float]) -> float:
    return float(statistics.fmean(values)) if values else 0.0


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def grounding_split(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Hits@1 of the questions whose first answer names a graph entity (or a value) and of those answered from
    the model's own knowledge (`ungrounded`), apart: the two mean different things about the method."""
    groups: dict[str, list[dict[str, Any]]] = {"grounded": [], "ungrounded": []}
    for row in rows:
        answers = row.get("answers") or []
        if answers:
            groups["ungrounded" if answers[0] in (row.get("ungrounded") or []) else "grounded"].append(row)
    return {name: {"n": len(group), "hits@1": _mean([float((r.get("metrics") or {}).get("hits@1", 0))
                                                     for r in group])}
            for name, group in groups.items() if group}


def _count(value: Any) -> int:
    """A row's count field as a whole number (0 when absent or not a count: a row from before the field)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def summarize(rows: list[dict[str, Any]], *, by: tuple[str, ...] = ("type", "level", "hops")) -> dict[str, Any]:
    """Hits@1 (lenient, strict), F1, failures, and per-question cost; rates in 0..1.

    Failed questions count as wrong (they stay in `n`); costs are over all questions.
    """
    n = len(rows)
    metric = defaultdict(list)
    for row in rows:
        for key, value in (row.get("metrics") or {}).items():
            metric[key].append(float(value))
    calls = [float(r.get("call_num") or 0) for r in rows]
    tokens = [float(r.get("total_token") or 0) for r in rows]
    seconds = [float(r.get("time") or 0) for r in rows]
    failed = [r for r in rows if r.get("status") == "failed"]
    summary: dict[str, Any] = {
        "n": n,
        "hits@1": _mean(metric["hits@1"]),
        "hits@1_strict": _mean(metric["hits@1_strict"]),
        "f1": _mean(metric["f1"]),
        "hits@1_pog": _mean(metric["hits@1_pog"]) if metric["hits@1_pog"] else None,  # absent from older runs
        # RoG's "Hit" (any predicted answer right), from the answers and gold every row keeps, old rows included
        "hit_rog": _mean([float(hit_rog(r.get("answers") or [], r.get("gold") or [])) for r in rows]),
        "failed": len(failed),
        "errors_by_kind": dict(Counter(r.get("error_kind") or "unknown" for r in failed)),
        "lm_calls_mean": _mean(calls),
        "lm_calls_median": _median(calls),
        "tokens_mean": _mean(tokens),
        "tokens_median": _median(tokens),
        "input_tokens_mean": _mean([float(r.get("input_token") or 0) for r in rows]),
        # prompt tokens the engine computed and the ones it took from its cache (the embedded KV prefix cache)
        "input_tokens_computed_mean": _mean([float((r.get("input_token") or 0) - (r.get("cached_input_token") or 0))
                                            for r in rows]),
        "input_tokens_reused_mean": _mean([float(r.get("cached_input_token") or 0) for r in rows]),
        "output_tokens_mean": _mean([float(r.get("output_token") or 0) for r in rows]),
        "seconds_mean": _mean(seconds),
        "seconds_median": _median(seconds),
        "kg_queries_mean": _mean([float((r.get("costs") or {}).get("kg_queries") or 0) for r in rows]),
    }
    summary["grounding"] = grounding_split(rows)
    choices = [choice_counts(r) for r in rows]
    summary["choice_calls"] = sum(c["calls"] for c in choices)
    summary["non_candidate_choices"] = sum(c["non_candidate"] for c in choices)
    summary["choice_fallbacks"] = sum(c["fallbacks"] for c in choices)
    summary["unusable_replies"] = sum(_count(r.get("unusable_replies")) for r in rows)
    summary["by"] = {}
    for key in by:  # per type / level / hops, the way metrics.breakdown groups them; unset values are left out
        groups = {str(value): scores for value, scores in breakdown(rows, key).items() if value not in (None, "")}
        if groups:
            summary["by"][key] = groups
    return summary


# Per-question costs shown as mean (and median): label, summary key prefix, formats.
_PER_QUESTION = (
    ("LM calls", "lm_calls", "{:.2f}", "{:.1f}"),
    ("tokens", "tokens", "{:.0f}", "{:.0f}"),
    ("prompt tokens computed", "input_tokens_computed", "{:.0f}", None),
    ("prompt tokens reused (cache)", "input_tokens_reused", "{:.0f}", None),
    ("seconds", "seconds", "{:.2f}", "{:.2f}"),
    ("KG queries", "kg_queries", "{:.1f}", None),
)


def summary_table(summaries: dict[str, dict[str, Any]]):
    """A rich table of one or more run summaries, side by side."""
    from rich.table import Table

    from ppoga_dspy.text import markup_safe

    table = Table(title="PPoGA evaluation", show_lines=False)
    table.add_column("metric")
    for name in summaries:  # run file names are outside text: never read as markup
        table.add_column(markup_safe(name), justify="right")
    rows = [
        ("questions", "n", "{:.0f}"),
        ("Hits@1 (lenient)", "hits@1", "{:.3f}"),
        ("Hits@1 (strict)", "hits@1_strict", "{:.3f}"),
        ("Hits@1 (PoG's rule)", "hits@1_pog", "{:.3f}"),
        ("Hit (RoG's rule: any answer)", "hit_rog", "{:.3f}"),
        ("answer F1", "f1", "{:.3f}"),
        ("failed", "failed", "{:.0f}"),
    ]
    for what, key, mean_fmt, median_fmt in _PER_QUESTION:
        rows.append((f"{what} / q (mean)", f"{key}_mean", mean_fmt))
        if median_fmt:
            rows.append((f"{what} / q (median)", f"{key}_median", median_fmt))
    rows += [("choice calls (total)", "choice_calls", "{:.0f}"),
             ("non-candidate choices (total)", "non_candidate_choices", "{:.0f}"),
             ("choice fallbacks (total)", "choice_fallbacks", "{:.0f}"),
             ("unusable LM replies (total)", "unusable_replies", "{:.0f}")]
    if any("startup_seconds" in s for s in summaries.values()):
        rows.append(("start-up seconds (once, not per q)", "startup_seconds", "{:.1f}"))
    for label, key, fmt in rows:
        table.add_row(label, *["-" if s.get(key, 0) is None else fmt.format(s.get(key, 0))
                               for s in summaries.values()])
    for key in ("type", "level", "hops"):
        names = sorted({name for s in summaries.values() for name in s.get("by", {}).get(key, {})})
        for name in names:
            cells = []
            for s in summaries.values():
                group = s.get("by", {}).get(key, {}).get(name)
                cells.append(f"{group['hits@1']:.3f} (n={group['n']})" if group else "-")
            table.add_row(markup_safe(f"Hits@1 {key}={name}"), *cells)
    for name in ("grounded", "ungrounded"):  # answers on the graph and answers from the model's own knowledge
        groups = [s.get("grounding", {}).get(name) for s in summaries.values()]
        if any(groups):
            table.add_row(f"Hits@1 {name} answers",
                          *[f"{g['hits@1']:.3f} (n={g['n']})" if g else "-" for g in groups])
    for s in summaries.values():
        if s.get("errors_by_kind"):
            table.caption = "errors: " + "; ".join(
                markup_safe(f"{name}: {', '.join(f'{k}={v}' for k, v in s['errors_by_kind'].items())}")
                for name, s in summaries.items() if s.get("errors_by_kind")
            )
            break
    return table
