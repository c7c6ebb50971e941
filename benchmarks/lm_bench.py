"""Speed of the embedded model, old engine against new, on real prompts recorded from program runs.

Issue 12: the embedded Gemma 3 270M cost about 14 s per program call on 2 loaded cores. This
benchmark replays a fixed set of chats that the program really sent to the engine (every stage:
decompose, predict, select relations / entities, think, evaluate, replan, answer; recorded from demo
and WC-P2 *train* questions, so the held-out test split stays unseen) through both engines, one
prompt at a time, old and new interleaved in the same process (the machine is shared and noisy:
only same-run ratios mean anything), and prints per-call median / p90 seconds, prefill and decode
tokens per second, and whether the replies are identical and still parse.

    python benchmarks/lm_bench.py                          # replay benchmarks/lm_prompts.json
    python benchmarks/lm_bench.py --ask                    # also: warm `ppoga ask`, old vs new, time + peak RSS
    python benchmarks/lm_bench.py --ask --cold             # also: cold `ppoga ask` (empty model cache)
    python benchmarks/lm_bench.py --skip-replay --cold     # only the `ppoga ask` table
    python benchmarks/lm_bench.py --skip-replay --cold --engines new   # cold ask, then 5 warm (median), new only
    python benchmarks/lm_bench.py record --data ../shared/data   # re-record the fixture (slow)
    python benchmarks/lm_bench.py questions --n 50               # WC-P2 test, 50 questions, old vs new engine
    python benchmarks/lm_bench.py questions --engines old --pin 1 &   # the two engines side by side,
    python benchmarks/lm_bench.py questions --engines new --pin 0     # one core each; then --report

`questions` runs the whole program (`ppoga eval`, default artifact, DSPy cache off) on the WC-P2 test
split with each engine into a resumable run file per engine, then prints Hits@1, calls and seconds
per question for each and the new/old ratio. The old engine takes about a minute per question on one
core, so the two are best run side by side, each pinned to a core of its own (`--pin`), which also
gives both the same conditions.

The data folder (`record` and `questions` read it) comes from --data, $PPOGA_DATA, or ../shared/data
beside the repository.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).resolve().parent / "lm_prompts.json"
DEFAULT_DATA = REPO.parent / "shared" / "data"

#: Output fields of each program stage (ppoga_dspy/signatures): how a recorded chat is labelled.
STAGE_OF_FIELDS = {
    ("steps",): "decompose",
    ("prediction",): "predict",
    ("relations",): "select_relations",
    ("entities", "rationale"): "select_entities",
    ("reflection", "missing"): "think",
    ("decision", "reason"): "evaluate",
    ("new_steps",): "replan",
    ("answers", "reasoning"): "answer",
}

#: What `record` runs (each through `ppoga eval`, embedded model, DSPy cache off): small, every stage.
RECORD_RUNS = [
    ["--dataset", "demo", "--limit", "3"],
    ["--dataset", "wc2014:{data}/wc2014/WC-P2.txt", "--split", "train", "--limit", "3"],
]

ASK_QUESTION = "Where was the director of Inception born?"


def data_folder(given: Path | None) -> Path:
    """--data, else $PPOGA_DATA, else ../shared/data beside the repository; exits with a clear message if absent."""
    folder = given or (Path(os.environ["PPOGA_DATA"]) if os.environ.get("PPOGA_DATA") else DEFAULT_DATA)
    if not folder.is_dir():
        sys.exit(f"lm_bench: no benchmark data folder at {folder}; pass --data DIR or set PPOGA_DATA")
    return folder


def stage_of(chat: Sequence[dict[str, str]]) -> str:
    from ppoga_dspy.inference.guided import adapter_output_fields

    fields = tuple(adapter_output_fields(chat))
    return STAGE_OF_FIELDS.get(fields, "+".join(fields) or "free")


# --------------------------------------------------------------------------------------------------
# Recording


def record(args: argparse.Namespace) -> int:
    """Run the program on a few questions and save every chat the engine received as the fixture."""
    data = data_folder(args.data)
    recorded: list[dict[str, Any]] = []
    from ppoga_dspy.lm import embedded

    original = embedded.EmbeddedEngine.generate

    def recording(self: Any, chat: Sequence[dict[str, str]], **options: Any) -> Any:
        reply = original(self, chat, **options)
        recorded.append(
            {
                "stage": stage_of(chat),
                "chat": [dict(m) for m in chat],
                "options": {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()},
            }
        )
        return reply

    embedded.EmbeddedEngine.generate = recording  # type: ignore[method-assign]
    os.environ["PPOGA_EMBEDDED_LEGACY"] = "1"  # the fixture comes from the engine the issue measured
    os.environ["PPOGA_LM_CACHE"] = "false"  # DSPy's cache would hide repeated prompts from the engine
    from ppoga_dspy.cli import main as cli

    with tempfile.TemporaryDirectory() as tmp:
        for n, run in enumerate(RECORD_RUNS):
            argv = ["eval", *[a.format(data=data) for a in run], "--out", f"{tmp}/{n}.jsonl", "--no-progress"]
            print("lm_bench record: ppoga", " ".join(argv), file=sys.stderr)
            cli(argv)
    recorded.extend(replan_prompts(recorded))
    args.fixture.write_text(json.dumps({"prompts": recorded}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(
        f"lm_bench record: {len(recorded)} prompts, stages {dict(Counter(r['stage'] for r in recorded))}, "
        f"written to {args.fixture}",
        file=sys.stderr,
    )
    return 0


def _sections(text: str) -> dict[str, str]:
    pattern = r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\[\[ ## |\n\nRespond with|\Z)"
    return {k: v.strip() for k, v in re.findall(pattern, text, re.S)}


def replan_prompts(recorded: list[dict[str, Any]], limit: int = 2) -> list[dict[str, Any]]:
    """Replan chats for the fixture, made with the program's own Replan predictor from recorded states.

    The tiny model almost never decides `replan`, so runs rarely record one. These chats are what
    `Planner.make_new_plan` would send after a recorded evaluate call: its question and plan (as the
    failed plan), the observation as knowledge, the topic entities of that question's decompose call.
    """
    import dspy

    from ppoga_dspy.signatures.planner import Replan

    topics = {}
    for prompt in recorded:
        if prompt["stage"] == "decompose":
            found = _sections(prompt["chat"][-1]["content"])
            try:
                topics[found.get("question", "")] = json.loads(found.get("topic_entities", "[]"))
            except ValueError:
                topics[found.get("question", "")] = []
    made: list[dict[str, Any]] = []
    seen: set[str] = set()
    for prompt in recorded:
        found = _sections(prompt["chat"][-1]["content"]) if prompt["stage"] == "evaluate" else {}
        question = found.get("question", "")
        if not question or question in seen or len(made) >= limit:
            continue
        seen.add(question)
        inputs = {
            "question": question,
            "topic_entities": topics.get(question, []),
            "failed_plan": found.get("plan", "").replace("[in progress]", "[failed]"),
            "knowledge": found.get("observation", ""),
        }
        chat = dspy.ChatAdapter().format(dspy.Predict(Replan).signature, demos=[], inputs=inputs)
        made.append({"stage": "replan", "chat": [dict(m) for m in chat], "options": dict(prompt["options"])})
    return made


# --------------------------------------------------------------------------------------------------
# Replaying


@dataclass
class ForwardTimer:
    """Times the model's forward passes: multi-token ones are prefill, one-token ones decode steps.

    Hooked on the model itself, so it measures the legacy `generate` path and the new loop alike.
    """

    prefill_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_tokens: int = 0
    decode_seconds: float = 0.0
    _started: float = 0.0
    _length: int = 0

    def attach(self, model: Any) -> None:
        model.register_forward_pre_hook(self._pre, with_kwargs=True)
        model.register_forward_hook(self._post, with_kwargs=True)

    def _pre(self, module: Any, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self._length = int(ids.shape[-1]) if ids is not None else 0
        self._started = time.perf_counter()

    def _post(self, module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        seconds = time.perf_counter() - self._started
        if self._length > 1:
            self.prefill_tokens += self._length
            self.prefill_seconds += seconds
        else:
            self.decode_tokens += 1
            self.decode_seconds += seconds


@dataclass
class EngineRun:
    """What one engine did over the fixture."""

    label: str
    seconds: list[float] = field(default_factory=list)
    replies: list[Any] = field(default_factory=list)
    timer: ForwardTimer = field(default_factory=ForwardTimer)
    prompt_tokens: int = 0


_TYPE_HINT = re.compile(r"`\[\[ ## (\w+) ## \]\]`(?: \(must be formatted as a valid Python ([^)]*\)?)\))?")


def reply_parses(chat: Sequence[dict[str, str]], text: str) -> bool:
    """Whether every field the adapter asked for is present, non-empty and, if typed, a valid literal.

    A light version of what ChatAdapter + the field types check (the fixture keeps no signature).
    """
    from ppoga_dspy.inference.constraints import REMINDER

    last_user = next((m["content"] for m in reversed(chat) if m["role"] == "user"), "")
    found = REMINDER.search(last_user)
    if not found:
        return bool(text.strip())
    sections = dict(re.findall(r"\[\[ ## (\w+) ## \]\]\n?(.*?)(?=\[\[ ## \w+ ## \]\]|\Z)", text, re.S))
    for name, type_hint in _TYPE_HINT.findall(found.group(1)):
        value = sections.get(name, "").strip()
        if not value:
            return False
        if type_hint and not type_hint.startswith("str"):
            try:
                json.loads(value)
            except ValueError:
                try:
                    ast.literal_eval(value)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    return False
    return "[[ ## completed ## ]]" in text


def replay(prompts: list[dict[str, Any]], engines: dict[str, Any], repeat: int) -> dict[str, EngineRun]:
    runs = {label: EngineRun(label) for label in engines}
    for label, engine in engines.items():
        runs[label].timer.attach(engine.loaded().model)
        engine.generate([{"role": "user", "content": "Warm up."}], max_tokens=2)  # first-call set-up off the clock
        runs[label].timer.__init__()  # type: ignore[misc]
    order = list(engines)
    for r in range(repeat):
        for i, prompt in enumerate(prompts):
            # Interleaved, alternating who goes first: drifting machine load hits both engines alike.
            for label in order if (i + r) % 2 == 0 else order[::-1]:
                started = time.perf_counter()
                reply = engines[label].generate(prompt["chat"], **prompt["options"])
                runs[label].seconds.append(time.perf_counter() - started)
                if r == 0:
                    runs[label].replies.append(reply)
                    runs[label].prompt_tokens += reply.prompt_tokens
            print(
                f"  {i + 1}/{len(prompts)} {prompt['stage']:<17}"
                + "  ".join(f"{label} {runs[label].seconds[-1]:6.2f}s" for label in order),
                file=sys.stderr,
            )
    return runs


def p90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def print_table(prompts: list[dict[str, Any]], runs: dict[str, EngineRun], baseline: str) -> None:
    base = runs[baseline]
    print(f"{len(prompts)} prompts ({dict(Counter(p['stage'] for p in prompts))})")
    print(
        f"{'engine':<22}{'median s':>9}{'p90 s':>8}{'total s':>9}{'x median':>9}{'x total':>8}"
        f"{'prefill tok':>12}{'prefill t/s':>12}{'decode tok':>11}{'decode t/s':>11}{'parse':>7}{'same':>6}"
    )
    for label, run in runs.items():
        t = run.timer
        same = sum(a == b for a, b in zip(run.replies, base.replies, strict=True))
        parses = sum(reply_parses(p["chat"], g.text) for p, g in zip(prompts, run.replies, strict=True))
        print(
            f"{label:<22}{statistics.median(run.seconds):9.2f}{p90(run.seconds):8.2f}{sum(run.seconds):9.1f}"
            f"{statistics.median(base.seconds) / statistics.median(run.seconds):9.2f}"
            f"{sum(base.seconds) / sum(run.seconds):8.2f}"
            f"{t.prefill_tokens:12d}{t.prefill_tokens / max(t.prefill_seconds, 1e-9):12.0f}"
            f"{t.decode_tokens:11d}{t.decode_tokens / max(t.decode_seconds, 1e-9):11.1f}"
            f"{parses:>4}/{len(prompts):<2}{same:>4}/{len(prompts)}"
        )
    by_stage: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    n = len(prompts)
    for label, run in runs.items():
        for i, seconds in enumerate(run.seconds):
            by_stage[prompts[i % n]["stage"]][label].append(seconds)
    print(
        "median s per call by stage: "
        + "; ".join(
            f"{stage} " + "/".join(f"{statistics.median(v[label]):.2f}" for label in runs)
            for stage, v in sorted(by_stage.items())
        )
        + f"  ({'/'.join(runs)})"
    )


# --------------------------------------------------------------------------------------------------
# `ppoga ask`, end to end, in a fresh process


def time_ask(legacy: bool, model_cache: str | None) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit status) of one `ppoga ask` in a child process."""
    # DSPy's cache off: a reply cached by the other engine would otherwise cost nothing here.
    env = dict(os.environ, PPOGA_EMBEDDED_LEGACY="1" if legacy else "0", PPOGA_LM_CACHE="false", PYTHONPATH=str(REPO))
    if model_cache is not None:
        env["PPOGA_MODEL_CACHE"] = model_cache
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "ppoga_dspy.cli", "ask", ASK_QUESTION],
        env=env,
        cwd=tempfile.gettempdir(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, stderr = child.communicate()
    seconds = time.perf_counter() - started
    # RUSAGE_CHILDREN is the peak over finished children: ask_table runs each ask in a process of
    # its own (`ask-once`), so this is that one ask's peak RSS.
    import resource

    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if child.returncode:
        print(stderr.decode(errors="replace")[-2000:], file=sys.stderr)
    return seconds, peak, child.returncode


def ask_in_child(args: argparse.Namespace) -> int:
    """`lm_bench ask-once`: one timed `ppoga ask` as our only child, so RUSAGE_CHILDREN is its own peak."""
    seconds, peak, status = time_ask(args.legacy, args.model_cache)
    print(json.dumps({"seconds": seconds, "peak_rss_mib": peak, "status": status}))
    return 0


def ask_table(cold: bool, engines: str = "both", warm_runs: int = 5) -> None:
    """Warm (and cold) `ppoga ask`, new vs old engine, each in its own grandchild process.

    With `cold`, each engine gets a fresh temporary model cache: its first ask converts the GGUF (cold),
    the next `warm_runs` load what that ask cached (warm: the converted weights, the decoder marks and
    the prompt heads, i.e. each predictor's system message, none of the question). Without, the asks use
    the real model cache. One ask on this machine varies by a second or two, so the median is printed.
    """

    def once(legacy: bool, cache: str | None) -> dict[str, Any]:
        argv = (
            [sys.executable, __file__, "ask-once"]
            + (["--legacy"] if legacy else [])
            + (["--model-cache", cache] if cache else [])
        )
        out = subprocess.run(argv, capture_output=True, text=True, check=False)
        try:
            return json.loads(out.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            print(out.stderr[-2000:], file=sys.stderr)
            return {"seconds": float("nan"), "peak_rss_mib": float("nan"), "status": -1}

    def show(kind: str, legacy: bool, row: dict[str, Any]) -> None:
        label = f"{kind} {'old' if legacy else 'new'}"
        print(f"{label:<10}{row['seconds']:9.1f}{row['peak_rss_mib']:14.0f}{row['status']:>6}", flush=True)

    chosen = {"new": [False], "old": [True], "both": [False, True]}[engines]
    print(f"`ppoga ask {ASK_QUESTION!r}` (fresh process each, DSPy cache off; cold = empty model cache), "
          f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}")
    print(f"{'run':<10}{'seconds':>9}{'peak RSS MiB':>14}{'exit':>6}", flush=True)
    # Printed as they finish (a loaded machine can take minutes per cold ask).
    for legacy in chosen:
        with tempfile.TemporaryDirectory() as scratch:
            cache = scratch if cold else None
            if cold:
                show("cold", legacy, once(legacy, cache))
            warm = [once(legacy, cache) for _ in range(warm_runs)]
            for row in warm:
                show("warm", legacy, row)
        if len(warm) > 1:
            show("median", legacy, {key: statistics.median(row[key] for row in warm)
                                    for key in ("seconds", "peak_rss_mib", "status")})


# --------------------------------------------------------------------------------------------------
# Whole questions: the program on WC-P2 test, old engine against new


QUESTIONS_DATASET = "wc2014:{data}/wc2014/WC-P2.txt"
#: Engine runs of `questions`: the run file's key -> its label. `new-float32` is the fast path computing in fp32.
ENGINE_LABELS = {"old": "old (legacy fp32)", "new": "new", "new-float32": "new, fp32 (PPOGA_EMBEDDED_DTYPE=float32)"}


def questions_run_file(out_dir: Path, engine: str) -> Path:
    return out_dir / f"WC-P2.{engine}.jsonl"


def run_questions(engine: str, data: Path, n: int, out_dir: Path, pin: int | None) -> int:
    """`ppoga eval` of the first `n` WC-P2 test questions with `engine` (resumable: done questions are skipped).

    With `pin`, the child runs on that one CPU with one thread (torch, OpenMP, MKL), so that two engines
    run side by side without taking each other's core.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PPOGA_EMBEDDED_LEGACY="1" if engine == "old" else "0", PYTHONPATH=str(REPO))
    if engine == "new-float32":
        env["PPOGA_EMBEDDED_DTYPE"] = "float32"
    if pin is not None:
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PPOGA_EMBEDDED_THREADS="1")
    argv = [sys.executable, "-m", "ppoga_dspy.cli", "eval", "--dataset", QUESTIONS_DATASET.format(data=data),
            "--split", "test", "--limit", str(n), "--no-cache", "--no-progress",
            "--out", str(questions_run_file(out_dir, engine))]
    pin_to = (lambda: os.sched_setaffinity(0, {pin})) if pin is not None else None
    print(f"lm_bench questions: {engine} engine, {n} WC-P2 test questions"
          + (f", pinned to cpu {pin}" if pin is not None else ""), file=sys.stderr, flush=True)
    return subprocess.run(argv, env=env, cwd=REPO, preexec_fn=pin_to, check=False).returncode


def questions_table(out_dir: Path, n: int) -> None:
    """The per-engine table of the run files in `out_dir` (the first `n` questions of each)."""
    from ppoga_dspy.evaluation.evaluate import summarize
    from ppoga_dspy.evaluation.runs import read_run

    rows = {e: read_run(questions_run_file(out_dir, e))[:n] for e in ENGINE_LABELS
            if questions_run_file(out_dir, e).is_file()}
    if not rows:
        sys.exit(f"lm_bench: no run files in {out_dir}; run `lm_bench.py questions` first")
    summaries = {e: summarize(r) for e, r in rows.items()}
    base = summaries.get("old")
    print(f"WC-P2 test, the program with the default artifact (DSPy cache off); run files in {out_dir}")
    print("| engine | n | Hits@1 | Hits@1 strict | F1 | LM calls/q | s/q mean | s/q median | x s/q vs old |")
    print("|---|---|---|---|---|---|---|---|---|")
    for engine, summary in summaries.items():
        ratio = (f"{base['seconds_mean'] / summary['seconds_mean']:.2f}"
                 if base and summary["seconds_mean"] else "")
        print(f"| {ENGINE_LABELS[engine]} | {summary['n']} | {summary['hits@1']:.3f} | {summary['hits@1_strict']:.3f} "
              f"| {summary['f1']:.3f} | {summary['lm_calls_mean']:.1f} | {summary['seconds_mean']:.1f} "
              f"| {summary['seconds_median']:.1f} | {ratio} |")
    if "old" in rows:
        answers = {e: {r["id"]: r.get("results") for r in rs} for e, rs in rows.items()}
        print()
        for engine in (e for e in rows if e != "old"):
            shared = sorted(set(answers["old"]) & set(answers[engine]))
            same = sum(answers["old"][q] == answers[engine][q] for q in shared)
            label = "both engines" if len(rows) == 2 else f"old and {ENGINE_LABELS[engine]}"
            print(f"same answer from {label} on {same} of {len(shared)} questions")


def questions(args: argparse.Namespace) -> int:
    if not args.report:
        data = data_folder(args.data)
        chosen = ["old", "new"] if args.engines == "both" else [args.engines]  # new-float32: asked by name only
        for engine in chosen:
            status = run_questions(engine, data, args.n, args.out_dir, args.pin)
            if status:
                return status
    questions_table(args.out_dir, args.n)
    return 0


# --------------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    if args.skip_replay:
        ask_table(args.cold, args.engines, args.warm_runs)
        return 0
    if not args.fixture.is_file():
        sys.exit(f"lm_bench: no prompt fixture at {args.fixture}; `python benchmarks/lm_bench.py record` writes it")
    prompts = json.loads(args.fixture.read_text(encoding="utf-8"))["prompts"][: args.limit]
    import torch

    from ppoga_dspy.inference.options import native_bf16_supported, resolve_dtype
    from ppoga_dspy.inference.prompt_heads import HEADS_ENV
    from ppoga_dspy.lm.embedded import EmbeddedEngine

    engines: dict[str, Any] = {"old (legacy fp32)": EmbeddedEngine(legacy=True)}
    for dtype in args.dtypes:
        engines[f"new ({resolve_dtype(dtype)})"] = EmbeddedEngine(legacy=False, dtype=dtype)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, cpu capability "
        f"{torch.backends.cpu.get_cpu_capability()}, native bf16 {native_bf16_supported()}; "
        f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )
    # The replay measures the engine within one process: no prompt heads kept on disk by earlier runs (the
    # `ppoga ask` table below, fresh processes, uses them as a user's machine does).
    with mock.patch.dict(os.environ, {HEADS_ENV: "off"}):
        for engine in engines.values():
            engine.loaded()
    runs = replay(prompts, engines, args.repeat)
    print()
    print_table(prompts, runs, baseline=next(iter(engines)))
    if args.ask:
        print()
        ask_table(args.cold, args.engines, args.warm_runs)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", type=Path, default=FIXTURE, help=f"prompt fixture (default {FIXTURE.name})")
    sub = parser.add_subparsers(dest="command")
    rec = sub.add_parser("record", help="re-record the prompt fixture from program runs (slow)")
    rec.add_argument("--data", type=Path, default=None, help="data folder (default $PPOGA_DATA, ../shared/data)")
    qs = sub.add_parser("questions", help="the program on N WC-P2 test questions, old engine vs new")
    qs.add_argument("--data", type=Path, default=None, help="data folder (default $PPOGA_DATA, ../shared/data)")
    qs.add_argument("--n", type=int, default=50, help="questions (default 50)")
    qs.add_argument("--engines", choices=["new", "old", "both", "new-float32"], default="both",
                    help="new-float32: the fast path in fp32 (PPOGA_EMBEDDED_DTYPE=float32)")
    qs.add_argument("--out-dir", type=Path, default=REPO / "runs" / "lm-bench-questions",
                    help="run files, one per engine (resumed when present)")
    qs.add_argument("--pin", type=int, default=None, metavar="CPU", help="run on this one CPU, one thread")
    qs.add_argument("--report", action="store_true", help="only print the table of the run files")
    once = sub.add_parser("ask-once", help=argparse.SUPPRESS)
    once.add_argument("--legacy", action="store_true")
    once.add_argument("--model-cache", default=None)
    parser.add_argument("--limit", type=int, default=None, help="first N prompts only")
    parser.add_argument("--repeat", type=int, default=1, help="replay the fixture N times (timings only)")
    parser.add_argument("--dtypes", nargs="+", default=["auto"], help="new-engine dtypes (auto bfloat16 float32)")
    parser.add_argument("--ask", action="store_true", help="also time `ppoga ask` end to end (warm) with peak RSS")
    parser.add_argument("--cold", action="store_true", help="with --ask: also cold asks (empty model cache)")
    parser.add_argument("--warm-runs", type=int, default=5, help="warm asks per engine, median printed (default 5)")
    parser.add_argument("--engines", choices=["new", "old", "both"], default="both",
                        help="which engines the `ppoga ask` table runs (default both)")
    parser.add_argument("--skip-replay", action="store_true", help="only the `ppoga ask` table (implies --ask)")
    args = parser.parse_args(argv)
    if args.command == "record":
        return record(args)
    if args.command == "questions":
        return questions(args)
    if args.command == "ask-once":
        return ask_in_child(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
