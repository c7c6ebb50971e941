"""The state of one question's run, and the one place predictors are called.

`PPoGA` is shared by every thread of an evaluation, so nothing per-question lives on the module:
it lives here, in a `QuestionRun` handed down to the Planner and Executor. `QuestionRun.call` is
the only caller of predictors: it binds the role's LM, counts calls and tokens, records the stage in
the trace, and turns a malformed reply into a salvaged prediction (content in the wrong shape,
marked `_salvaged`) or a recorded failure (`None`), so one bad reply degrades one step. An LM
that cannot be reached at all is not a bad reply: it raises `LMCallError`, which fails the
question with its reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ppoga_dspy.errors import LMError
from ppoga_dspy.method.costs import Costs
from ppoga_dspy.method.memory import Memory, TraceEvent
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.method.vocabulary import Role, Stage, StageMode


class LMCallError(LMError):
    """The language model could not be called (server down, bad key, quota); check the LM settings."""


def jsonable(value: Any) -> Any:
    """Trace values as plain JSON: pydantic models dumped, enums as their words, other objects as text."""
    if isinstance(value, str):
        return str(value)  # a StrEnum (Decision.FINISH) becomes "finish", not a member whose repr leaks into output
    if value is None or isinstance(value, int | float | bool):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return str(value)


def adapter_for(lm: Any) -> Any:
    """The adapter every predictor runs with: the compact ChatAdapter (`lm/adapter.py`), each field stated once;
    for a remote LM whose backend constrains decoding, the structured adapter that sends each call's schema.

    An in-process model (`local/...`) gets it without the JSON fallback: re-asking it in JSON after a
    parse failure costs a whole second generation and rarely helps a tiny model.
    """
    from ppoga_dspy.lm.adapter import compact_adapter

    form = getattr(lm, "structured_form", None)  # a hosted/served model with constrained decoding (lm/structured.py)
    if isinstance(form, str):
        from ppoga_dspy.lm.structured import structured_adapter

        return structured_adapter(form)
    local = lm is not None and str(getattr(lm, "model", "")).startswith("local/")
    return compact_adapter(json_fallback=not local)


@dataclass
class QuestionRun:
    """Everything one question's run owns: memory and trace, costs, limits, KG tools, role LMs, stage mode."""

    memory: Memory
    thresholds: Thresholds
    tools: Any  # ppoga_dspy.method.tools.KGTools (kept untyped here to avoid an import cycle)
    role_lms: dict[str, Any] = field(default_factory=dict)
    costs: Costs = field(default_factory=Costs)
    stages: StageMode = StageMode.PAPER  # `fused`: calls that read the same inputs are merged (see program.py)
    lm_calls: int = 0  # predictor calls that asked an LM (not `--lm none`)
    unusable_replies: int = 0  # of those, the ones whose reply could not be used (empty, unparseable, no choices)
    _muted: bool = field(default=False, repr=False)

    def no_usable_reply(self) -> tuple[str, str] | None:
        """("lm", why) when this question asked the LM and not one reply could be used: its answer came from
        fallbacks alone, so the question fails with kind "lm" (as `KGTools.all_failed` does for the graph)."""
        if self.lm_calls and self.unusable_replies == self.lm_calls:
            return "lm", (f"no LM call of this question gave a usable reply ({self.lm_calls} calls, every reply empty "
                          "or unparseable); check that the server answers with text in `choices[0].message.content`")
        return None

    @property
    def fused(self) -> bool:
        return self.stages == StageMode.FUSED

    @contextmanager
    def muted(self) -> Iterator[None]:
        """Notes are not written inside (KG queries and LM calls still are): for work done ahead whose own notes
        would be read as the step's (a relation menu built one call early, `Executor.menus_ahead`)."""
        before, self._muted = self._muted, True
        try:
            yield
        finally:
            self._muted = before

    def call(self, stage: Stage, role: Role, predictor: Any, **inputs: Any) -> Any | None:
        """Run one predictor; the prediction, or None when the model's reply could not be used."""
        import dspy

        from ppoga_dspy.lm.guard import reply_scope  # caches a reply only once it parsed; notes cut replies

        event = TraceEvent(stage=stage, inputs=jsonable(inputs))
        if getattr(self.role_lms.get(role), "no_model", False) is True:  # `--lm none` (lm/no_model.py)
            event.error = "no model (--lm none)"  # no call: the program's fallbacks act
            self.memory.record(event)
            return None
        started = time.perf_counter()
        prediction = None
        with self._bound(role), dspy.track_usage() as tracker, reply_scope() as replies:
            try:
                prediction = self._validated(event, stage, role, predictor, inputs)
                self.lm_calls += 1
                self.unusable_replies += prediction is None
                if event.error is None:
                    replies.commit()  # only a reply that parsed is cached (see lm/guard.py)
            finally:
                self._meter(event, stage, role, tracker, started, prediction, replies.truncations)
        return prediction

    def _bound(self, role: Role):
        """The context that binds the role's LM (when it has one) and the program's adapter."""
        import dspy

        lm = self.role_lms.get(role)
        bound = {"lm": lm} if lm is not None else {}
        return dspy.context(**bound, adapter=adapter_for(lm))

    @staticmethod
    def _validated(event: TraceEvent, stage: Stage, role: Role, predictor: Any, inputs: dict[str, Any]) -> Any | None:
        """Reply validation and fallback: a parse failure is salvaged or None; an LM failure raises."""
        from dspy.utils.exceptions import AdapterParseError

        try:
            return predictor(**inputs)
        except AdapterParseError as exc:
            event.error = f"{type(exc).__name__}: {_first_line(exc)}"
            return _salvaged(exc, predictor)
        except ValueError as exc:
            event.error = f"{type(exc).__name__}: {_first_line(exc)}"
            if not _from_reply_parsing(exc):  # our own error (e.g. a damaged demo pool), not the model's mistake:
                raise  # a fallback would hide it behind an 'ok' question; the question fails as 'internal'
            return None
        except Exception as exc:  # the LM itself failed: not a bad reply, the question cannot go on
            event.error = f"{type(exc).__name__}: {_first_line(exc)}"
            raise LMCallError(f"the {role} LM failed during {stage}: {_first_line(exc)}") from exc

    def _meter(
        self, event: TraceEvent, stage: Stage, role: Role, tracker: Any, started: float, prediction: Any,
        truncations: Any = None,
    ) -> None:
        """Count the call's requests and tokens, and record it in the trace (with replies cut to the cap)."""
        entries = [entry for entries in tracker.usage_data.values() for entry in entries]
        self.costs.add_lm(stage, role, entries)
        event.seconds = round(time.perf_counter() - started, 4)
        if prediction is not None:
            event.outputs = jsonable(dict(prediction.items()))
            if getattr(prediction, "_salvaged", False):
                event.outputs["_salvaged"] = True
        if truncations:  # replies cut to the reply cap before parsing (see lm/guard.py)
            event.outputs = {**(event.outputs or {}), "_reply_truncated": truncations}
        self.memory.record(event)

    def note(self, stage: str, **outputs: Any) -> None:
        """Record a decision or correction that is not an LM call."""
        if self._muted:
            return
        self.memory.record(TraceEvent(stage=stage, outputs=jsonable(outputs)))


def _salvaged(exc: Any, predictor: Any) -> Any | None:
    """A prediction read leniently from the unparseable reply (see `ppoga_dspy.method.replies`), or None."""
    import dspy

    from ppoga_dspy.method.replies import salvage

    values = salvage(getattr(exc, "lm_response", ""), predictor.signature)
    if values is None:
        return None
    prediction = dspy.Prediction(**values)
    prediction._salvaged = True
    return prediction


def _from_reply_parsing(exc: BaseException) -> bool:
    """True when the error was raised while an adapter parsed a reply (a model's mistake a fallback may cover)."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name.startswith("parse") or "adapter" in code.co_filename.rsplit("/", 2)[-1]:
            return True
        tb = tb.tb_next
    return False


def _first_line(exc: BaseException) -> str:
    """An error's first line as it is stored (trace, run file) and printed: outside text, secrets redacted."""
    from ppoga_dspy.text import for_terminal

    text = for_terminal(str(exc)).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
