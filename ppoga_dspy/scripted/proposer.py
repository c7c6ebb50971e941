"""A scripted prompt writer: the offline stand-in for MIPROv2's prompt model and GEPA's reflection LM.

`ppoga compile --optimizer mipro|gepa` with scripted students (`oracle/gold-path`, `oracle/noisy:P`)
needs an LM that answers what those optimizers ask, which the scripted planners cannot: MIPROv2
asks for a program description, module descriptions, dataset observations and proposed
instructions (DSPy signatures); GEPA sends a raw prompt with the current instruction and examples
with feedback, and reads the new instruction from a ``` block.

The answers are built only from what the request holds, deterministically, never from gold data
or knowledge of a benchmark: a proposed instruction is the basic instruction plus the tip MIPROv2
chose; a reflection is the current instruction plus the distinct feedback sentences of the failed
examples shown (GEPA's metric feedback names the stage that went wrong, see
`optimizers/compile.py:stage_feedback`). So it exercises the optimizers' whole control flow and
writes instructions that really change, without pretending to be a model.

`--prompt-lm oracle/proposer` / `--reflection-lm oracle/proposer` selects it.
"""

from __future__ import annotations

import re
from typing import Any

from ppoga_dspy.scripted.engine import ScriptedEngine, format_reply, parse_request, scripted_lm

#: The spec of the scripted prompt writer (`--prompt-lm`, `--reflection-lm`).
PROPOSER_LM = "oracle/proposer"

_GEPA_MARK = "Your task is to write a new instruction for the assistant."
_FENCE = re.compile(r"```\n?(.*?)\n?```", re.S)
_FEEDBACK = re.compile(r"^#+ Feedback\n(.*?)(?=\n#+ |\n# Example|\Z)", re.S | re.M)
_CODE_NAMES = re.compile(r"self\.(\w+)\s*=\s*(\w+)\(")
#: At most this many lessons are appended per reflection: an instruction that grows without bound helps no one.
MAX_LESSONS = 3


def revise(current: str, feedbacks: list[str]) -> str:
    """The current instruction, then the distinct lessons of the non-correct feedback (at most MAX_LESSONS)."""
    lessons: list[str] = []
    for block in feedbacks:
        text = " ".join(str(block).split())
        if text and not text.startswith("Correct") and text not in lessons and text not in current:
            lessons.append(text)
    if not lessons:
        return current
    lines = "\n".join(f"- {lesson}" for lesson in lessons[:MAX_LESSONS])
    return f"{current}\n\nLessons from failed examples:\n{lines}"


def reflect(prompt: str) -> str:
    """GEPA's raw reflection prompt (`InstructionProposalSignature`): the revision in a ``` block."""
    fenced = _FENCE.search(prompt)
    current = fenced.group(1).strip() if fenced else ""
    return f"```\n{revise(current, _FEEDBACK.findall(prompt))}\n```"


def _feedbacks(examples: Any) -> list[str]:
    """The feedback texts of DSPy's reflection input (a list of {Inputs, Generated Outputs, Feedback}, or text)."""
    if isinstance(examples, list):
        return [str(e.get("Feedback", "")) for e in examples if isinstance(e, dict)]
    return re.findall(r"Feedback\W*(.*?)(?=\n\S*Inputs|\Z)", str(examples), re.S)


def _reflect_signature(inputs: dict[str, Any]) -> dict[str, Any]:
    """DSPy's GEPA instruction proposer (a signature: current_instruction, examples_with_feedback)."""
    current = str(inputs.get("current_instruction", "")).strip()
    revised = revise(current, _feedbacks(inputs.get("examples_with_feedback")))
    return {name: revised for name in inputs["_outputs"]}  # new_instruction, or improved_instruction


def _shorten(inputs: dict[str, Any]) -> dict[str, Any]:
    limit = re.search(r"\d+", str(inputs.get("length_limit", "")))
    text = str(inputs.get("instruction", ""))
    return {"shortened_instruction": text[: int(limit.group())] if limit else text}


def _describe_program(inputs: dict[str, Any]) -> dict[str, Any]:
    parts = [f"{name} ({kind})" for name, kind in _CODE_NAMES.findall(str(inputs.get("program_code", "")))]
    where = f" built from {', '.join(dict.fromkeys(parts))}" if parts else ""
    return {"program_description": f"A multi-stage DSPy program{where}; each predictor is one stage of it."}


def _describe_module(inputs: dict[str, Any]) -> dict[str, Any]:
    module = " ".join(str(inputs.get("module", "")).split())[:200]
    return {"module_description": f"This stage is {module or 'one predictor'}; its outputs feed the next stage."}


def _propose(inputs: dict[str, Any]) -> dict[str, Any]:
    """MIPROv2's instruction: the basic instruction, with the tip it drew (the tip is what varies the candidates)."""
    basic = str(inputs.get("basic_instruction", "")).strip()
    tip = str(inputs.get("tip", "")).strip()
    demos = str(inputs.get("task_demos", "")).strip()
    extra = [tip] if tip else []
    if demos and "No task demos" not in demos:
        extra.append("Write each output field in the format the examples show.")
    return {"proposed_instruction": " ".join([basic, *extra]).strip()}


def _observe(inputs: dict[str, Any]) -> dict[str, Any]:
    if inputs.get("prior_observations"):
        return {"observations": "COMPLETE"}
    shown = str(inputs.get("examples", ""))
    fields = sorted(set(re.findall(r"(\w+):", shown)))[:8]
    return {"observations": f"Each example holds the fields {', '.join(fields) or 'shown'}."}


def _summarize(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"summary": " ".join(str(inputs.get("observations", "")).split())[:300]}


class ProposerEngine(ScriptedEngine):
    """The scripted engine with handlers for MIPROv2's proposal signatures and GEPA's raw reflection prompt."""

    def __init__(self) -> None:
        super().__init__({"program_description": _describe_program, "module_description": _describe_module,
                          "proposed_instruction": _propose, "observations": _observe, "summary": _summarize,
                          "new_instruction": _reflect_signature, "improved_instruction": _reflect_signature,
                          "shortened_instruction": _shorten})
        for name in self.handlers:
            self.register_outputs(name, {name})

    def answer(self, system: str, user: str, demos: int = 0) -> str:
        if _GEPA_MARK in user:
            with self._lock:
                self.calls["reflection"] += 1
                self.requests.append(("reflection", {"prompt": user}))
            return reflect(user)
        outputs, _, _ = parse_request(system, user)
        if not outputs:  # any other raw prompt: nothing to propose from
            return format_reply({}, [], False)
        return super().answer(system, user, demos)


def proposer_lm(**kwargs: Any):
    """The scripted prompt writer as a `dspy.LM` (uncached: every proposal reaches the script)."""
    return scripted_lm(ProposerEngine(), "oracle-proposer", **kwargs)
