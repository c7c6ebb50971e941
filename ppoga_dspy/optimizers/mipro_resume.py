"""MIPROv2 trials that survive a killed compile: each evaluated candidate's score is kept in its run folder.

DSPy 3.4's MIPROv2 creates its Optuna study in memory inside `_optimize_prompt_parameters`, so the study
cannot be given a storage. It need not be: a rerun with the same flags replays everything before the
study (the teacher's bootstrapped demo sets, the prompt LM's instruction proposals: scripted, or answered
by DSPy's own LM cache), and the seeded TPE sampler suggests the same trials when it is told the same
scores. What costs the time is evaluating each trial's candidate program on the selection questions.
`ScoreStore` keeps those scores in `LOG_DIR/mipro_scores.jsonl`, one line per evaluation, keyed by the
candidate's fingerprint (every predictor's instructions and demos, the thresholds and the stage mode:
`program_fingerprint`) and by the questions it was scored on. `ResumableMIPROv2` hands MIPROv2 an
evaluator that reads the store first, so a rerun spends nothing on finished trials and goes on from the
first unfinished one; a larger `--trials` extends a finished run the same way.

Keyed by content, a kept score is never given to another candidate: if a proposal comes out different
on the rerun (an LM without a cache), its candidates are simply evaluated. A score measured while a
question failed (an LM or KG outage, `status` "failed") is not kept, so the rerun measures it again.
The file's first line records the provenance (LM, prompt LM, teacher, dataset, split, seed, search
flags); a rerun with other values is refused in one line, by the rule a tuning study uses.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from pathlib import Path
from typing import Any

import dspy

from ppoga_dspy.errors import ConfigError
from ppoga_dspy.optimizers.study import provenance_conflict, questions_digest

log = logging.getLogger(__name__)

SCORES_FILE = "mipro_scores.jsonl"
FORMAT = "ppoga-mipro-scores/1"


class CompileMismatch(ConfigError):
    """The run folder holds MIPROv2 scores of other work; resuming would mix two searches."""


class ScoreStore:
    """The scores of evaluated candidates, read at open and appended (flushed and synced) as each is measured."""

    def __init__(self, folder: Path, provenance: dict[str, Any] | None = None) -> None:
        self.path = Path(folder) / SCORES_FILE
        self.provenance = dict(provenance or {})
        self.scores: dict[tuple[str, str], float] = {}
        self.answered = 0  # evaluations answered from the store during this run
        self.measured = 0  # evaluations run (and kept) during this run
        self._open()

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists() or self.path.stat().st_size == 0:
            self._append({"format": FORMAT, "provenance": self.provenance})
            return
        raw = self.path.read_bytes()
        if not raw.endswith(b"\n"):  # killed mid-line: drop the torn last line so the next append starts clean
            raw = raw[: raw.rfind(b"\n") + 1]
            with self.path.open("r+b") as handle:
                handle.truncate(len(raw))
        lines = raw.decode("utf-8").splitlines()
        header = _parse(lines[0]) if lines else None
        if not header or header.get("format") != FORMAT:
            raise ConfigError(f"{self.path} is not a MIPROv2 score file of this version; move it away or pass "
                              "another --log-dir")
        conflict = provenance_conflict(header.get("provenance") or {}, self.provenance)
        if conflict is not None:
            key, found, wanted = conflict
            raise CompileMismatch(f"{self.path.parent} holds MIPROv2 trials made with {key} {found!r}, and this run "
                                  f"uses {key} {wanted!r}; resume it with the same flags, or pass another --log-dir")
        for line in lines[1:]:
            entry = _parse(line)
            if entry and isinstance(entry.get("score"), int | float):
                self.scores[(str(entry.get("candidate")), str(entry.get("questions")))] = float(entry["score"])

    def get(self, candidate: str, questions: str) -> float | None:
        return self.scores.get((candidate, questions))

    def put(self, candidate: str, questions: str, score: float) -> None:
        self.scores[(candidate, questions)] = float(score)
        self._append({"candidate": candidate, "questions": questions, "score": float(score)})

    def _append(self, entry: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, sort_keys=True, default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def summary(self) -> dict[str, Any]:
        return {"scores_file": str(self.path), "evaluations_resumed": self.answered,
                "evaluations_run": self.measured}


def _parse(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class StoredEvaluate:
    """MIPROv2's evaluator with the store in front: a candidate already scored on these questions is not run."""

    def __init__(self, evaluate: Any, store: ScoreStore) -> None:
        self.evaluate = evaluate
        self.store = store

    def __call__(self, program: Any, devset: list | None = None, **kwargs: Any) -> Any:
        from dspy.evaluate.evaluate import EvaluationResult

        from ppoga_dspy.evaluation.evaluate import program_fingerprint

        questions = questions_digest(devset if devset is not None else self.evaluate.devset)
        candidate = program_fingerprint(program)
        kept = self.store.get(candidate, questions)
        if kept is not None:
            self.store.answered += 1
            log.info("MIPROv2: candidate %s on %s answered from %s", candidate, questions, self.store.path)
            return EvaluationResult(score=kept, results=[])
        result = self.evaluate(program, devset=devset, **kwargs)
        failed = [pred for _, pred, _ in result.results if getattr(pred, "status", None) != "ok"]
        if failed:
            log.info("MIPROv2: %d questions failed; the score of candidate %s is not kept", len(failed), candidate)
        else:
            self.store.put(candidate, questions, result.score)
            self.store.measured += 1
        return result


class ResumableMIPROv2(dspy.MIPROv2):
    """MIPROv2 whose trial evaluations go through a `ScoreStore` (see the module's docstring)."""

    def __init__(self, *args: Any, store: ScoreStore, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.store = store
        parameters = inspect.signature(dspy.MIPROv2._optimize_prompt_parameters).parameters
        if "evaluate" not in parameters:  # the one private hook this relies on; a DSPy that changed it is named
            raise ConfigError(f"this DSPy ({dspy.__version__}) MIPROv2 takes no evaluator in "
                              "_optimize_prompt_parameters, so its trials cannot be resumed; install dspy 3.4")

    def _optimize_prompt_parameters(self, *args: Any, **kwargs: Any) -> Any:
        bound = inspect.signature(super()._optimize_prompt_parameters).bind(*args, **kwargs)
        bound.arguments["evaluate"] = StoredEvaluate(bound.arguments["evaluate"], self.store)
        return super()._optimize_prompt_parameters(*bound.args, **bound.kwargs)
