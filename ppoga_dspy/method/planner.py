"""The Planner: holds the planner predictors and turns their replies into validated values.

Each method calls one predictor through `QuestionRun.call` and always returns something usable:
when the reply is malformed or empty the method falls back to a safe default (a one-step plan, an
empty prediction, a decision derived from the observation) and the trace says so. The step loop
itself lives in `program.py`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import dspy

from ppoga_dspy.method.choices import same_name
from ppoga_dspy.method.memory import OBSERVATION_FACTS, CarriedRelations, PlanStepState
from ppoga_dspy.method.question_run import QuestionRun
from ppoga_dspy.method.relation_pairs import Menu, menu_lines
from ppoga_dspy.method.vocabulary import Decision, Role, Stage, StepAction
from ppoga_dspy.signatures import (
    Answer,
    Decompose,
    DecomposePredict,
    Evaluate,
    PredictOutcome,
    Replan,
    Think,
    ThinkEvaluate,
)


def _steps(raw: object, limit: int) -> list[PlanStepState]:
    steps: list[PlanStepState] = []
    for item in raw or []:
        if isinstance(item, str):
            item = {"objective": item}
        data = item if isinstance(item, dict) else getattr(item, "__dict__", {})
        objective = data.get("objective")
        if objective and str(objective).strip():
            steps.append(PlanStepState(objective=str(objective).strip(),
                                       expected_outcome=str(data.get("expected_outcome") or "").strip(),
                                       action=step_action(data.get("action"))))
    return steps[:limit]


def step_action(raw: object) -> str:
    """The step's action as a StepAction value; anything unknown (or missing) is a plain exploration."""
    text = str(raw or "").strip().lower()
    return text if text in {a.value for a in StepAction} else StepAction.EXPLORE.value


_LITERAL = re.compile(
    r"^(?:yes|no|true|false|none|-?\d[\d,]*(?:\.\d+)?(?:\s*%|\s+\w+)?|\d{1,4}(?:[-/.]\d{1,2}){1,2}|"
    r"\d{1,2}\s+\w+\s+\d{3,4}|\w+\s+\d{1,2},?\s+\d{3,4})$",
    re.IGNORECASE,
)


def is_literal(answer: str) -> bool:
    """A value rather than a name: a count, a number with a unit, a date, yes/no ("3", "1998-07-12", "yes")."""
    return bool(_LITERAL.match(answer.strip()))


def memory_text(run: QuestionRun, *, answering: bool = False) -> str:
    """The plan with each step's status and outcome, then the chains and failures: what Think reads."""
    strategic = run.memory.strategic
    return f"Plan:\n{strategic.plan_text()}\nKnown:\n{known_text(run, answering=answering)}"


def known_text(run: QuestionRun, *, answering: bool = False) -> str:
    """What a judgement of the current step reads from the knowledge memory: the reasoning chains (earlier
    steps' selected facts), the current step's facts its observation text does not show, and the failures,
    never the facts the same prompt shows as its observation. Earlier steps' unselected facts are counted in
    one line, unless the call may write the answer (`answering`, the fused ThinkEvaluate), which reads
    them as Answer does (a set-valued answer often lies among them)."""
    facts = run.memory.current.triples if run.memory.current else []
    return run.memory.knowledge.summary(run.thresholds.evidence_tokens, current=facts,
                                        shown=facts[:OBSERVATION_FACTS], rest=answering)


#: Answer's evidence when no entity of the question was linked: not a fact, so nothing constrains the answer.
NO_TOPIC = "No entity of the question was found on the knowledge graph: answer from your own knowledge."


def answer_context(run: QuestionRun) -> list[str]:
    """What Answer reads beside the facts: the plan with each step's status and outcome, and what Think concluded
    on each step that was kept (a memory step's result is its conclusion). Lines that are not facts, written
    first: the facts stay last, and choices among the evidence's names read only the facts."""
    lines = [f"Plan step {i + 1}: {step.text()}" for i, step in enumerate(run.memory.strategic.plan)]
    concluded: dict[int, str] = {}
    for cycle in run.memory.history:  # the last kept try of each step of the current plan
        if cycle.thought and cycle.decision in (Decision.PROCEED, Decision.FINISH):
            concluded[cycle.index] = cycle.thought
    lines += [f"Concluded at step {i + 1}: {text}" for i, text in sorted(concluded.items())]
    return lines


def answer_list(raw: object) -> list[str]:
    """A reply's answers as clean names ("a" or ["a", " ", "b"] -> ["a", "b"])."""
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list | tuple):
        return []
    return [str(a).strip() for a in raw if str(a).strip()]


@dataclass
class Judgement:
    """One fused Think + Evaluate reply: the thought, the decision, and what it wrote ahead.

    `next_prediction` is the next step's prediction (used when the step proceeds); `answers` the
    answer (used when the question finishes on the model's own proceed/finish).
    """

    thought: str
    missing: str
    decision: Decision
    reason: str
    next_prediction: str = ""
    answers: list[str] = field(default_factory=list)
    salvaged: bool = False
    next_relations: CarriedRelations | None = None  # the next step's relations, chosen from the menus shown ahead


@dataclass(frozen=True)
class Menus:
    """The relation menus a fused call is shown one step ahead (`Executor.menus_ahead`), as its `candidates`."""

    menus: tuple[Menu, ...] = ()

    @property
    def lines(self) -> list[str]:
        return menu_lines(list(self.menus))

    def carry(self, reply: object) -> CarriedRelations | None:
        """What the reply chose from these menus, to be checked where the step runs; None when no menu was shown or
        the reply chose nothing (the step then asks SelectRelationPairs)."""
        pairs = answer_list(reply)
        if not self.menus or not pairs:
            return None
        return CarriedRelations(pairs=pairs, entities=[m.entity.id for m in self.menus])


class Planner(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.decompose = dspy.Predict(Decompose)
        self.predict_outcome = dspy.Predict(PredictOutcome)
        self.think = dspy.Predict(Think)
        self.evaluate = dspy.Predict(Evaluate)
        self.replan = dspy.Predict(Replan)
        self.answer = dspy.Predict(Answer)
        # `--stages fused`: the calls above that read the same inputs, merged
        self.decompose_predict = dspy.Predict(DecomposePredict)
        self.think_evaluate = dspy.Predict(ThinkEvaluate)

    def forward(self, **kwargs):  # pragma: no cover - the program calls the methods below
        raise NotImplementedError("Planner is driven by PPoGA")

    def make_plan(self, run: QuestionRun, question: str, topics: list[str],
                  menus: Callable[[], Menus] | None = None) -> list[PlanStepState]:
        """The plan; in fused mode (prediction on) its first step carries the prediction made in the same call, and
        the relations it chose from the topic entities' menus (`menus` builds them: `Executor.menus_ahead`)."""
        fused = run.fused and run.thresholds.use_prediction
        if fused:
            ahead = menus() if menus is not None else Menus()
            prediction = run.call(Stage.DECOMPOSE_PREDICT, Role.PLANNER, self.decompose_predict, question=question,
                                  topic_entities=topics, candidates=ahead.lines)
        else:
            prediction = run.call(Stage.DECOMPOSE, Role.PLANNER, self.decompose, question=question,
                                  topic_entities=topics)
        steps = _steps(getattr(prediction, "steps", None), run.thresholds.max_depth)
        if not steps:
            run.note("decompose.fallback", reason="no usable plan; using a single step")
            return [PlanStepState(objective=f"Find the answer to: {question}")]
        if fused:
            steps[0].prediction = str(getattr(prediction, "first_prediction", "") or "").strip()
            steps[0].relations = ahead.carry(getattr(prediction, "first_relations", None))
        return steps

    def make_new_plan(
        self, run: QuestionRun, question: str, topics: list[str], failed_plan: str
    ) -> list[PlanStepState]:
        knowledge = run.memory.knowledge.summary(run.thresholds.evidence_tokens)
        prediction = run.call(
            Stage.REPLAN, Role.PLANNER, self.replan,
            question=question, topic_entities=topics, failed_plan=failed_plan, knowledge=knowledge,
        )
        steps = _steps(getattr(prediction, "new_steps", None), run.thresholds.max_depth)
        if not steps:
            run.note("replan.fallback", reason="no usable new plan; retrying the question as one step")
            steps = [PlanStepState(objective=f"Find the answer to: {question}")]
        return steps

    def predict(self, run: QuestionRun, question: str, objective: str) -> str:
        prediction = run.call(
            Stage.PREDICT, Role.PLANNER, self.predict_outcome,
            question=question, step=objective,
            knowledge=run.memory.knowledge.summary(run.thresholds.evidence_tokens),
        )
        return str(getattr(prediction, "prediction", "") or "")

    def think_over(self, run: QuestionRun, question: str, objective: str, prediction: str, observation: str):
        result = run.call(
            Stage.THINK, Role.PLANNER, self.think,
            question=question, step=objective, prediction=prediction or "(no prediction)", observation=observation,
            memory=memory_text(run),
        )
        return str(getattr(result, "thought", "") or ""), str(getattr(result, "missing", "") or "")

    def decide(
        self, run: QuestionRun, question: str, plan: str, objective: str, observation: str, thought: str,
        found_something: bool,
    ) -> tuple[Decision, str]:
        result = run.call(
            Stage.EVALUATE, Role.PLANNER, self.evaluate,
            question=question, plan=plan, step=objective, observation=observation, thought=thought,
            memory=known_text(run),
        )
        return _decision(run, result, found_something, Stage.EVALUATE)

    def think_and_decide(
        self, run: QuestionRun, question: str, objective: str, prediction: str, observation: str, next_step: str,
        found_something: bool, caps: str = "", ahead: Menus | None = None,
    ) -> Judgement:
        """`--stages fused`: Think and Evaluate in one call, which also predicts the next step (and chooses its
        relations from the menus `ahead`) or answers; `caps` (the retries and replans left) follows the plan in
        its memory, as Evaluate reads it."""
        ahead = ahead or Menus()
        memory = memory_text(run, answering=True)
        if caps:
            memory = memory.replace("\nKnown:\n", f"\n{caps}\nKnown:\n", 1)
        result = run.call(
            Stage.THINK_EVALUATE, Role.PLANNER, self.think_evaluate,
            question=question, step=objective, prediction=prediction or "(no prediction)", observation=observation,
            memory=memory, next_step=next_step or "none", candidates=ahead.lines,
        )
        decision, reason = _decision(run, result, found_something, Stage.THINK_EVALUATE)
        return Judgement(  # no `missing`: a retry reads the thought, in both stage modes (cycle.correct_path)
            thought=str(getattr(result, "thought", "") or ""), missing="",
            decision=decision, reason=reason, next_prediction=str(getattr(result, "next_prediction", "") or "").strip(),
            answers=answer_list(getattr(result, "answers", None)), salvaged=bool(getattr(result, "_salvaged", False)),
            next_relations=ahead.carry(getattr(result, "next_relations", None)),
        )

    def accept_answers(self, run: QuestionRun, judged: Judgement) -> tuple[list[str], str] | None:
        """A finishing fused evaluation's answer, when it holds as Answer's would; else None (Answer is asked)."""
        answers = grounded(run, judged.answers, judged.salvaged, early=True)
        run.note("answer.written_by_evaluate" if answers else "answer.written_rejected", answers=judged.answers)
        return (answers, f"{judged.thought} {judged.reason}".strip()) if answers else None

    def answer_unlinked(self, run: QuestionRun, question: str) -> tuple[list[str], str] | None:
        """No entity of the question is on the graph: one Answer call from the model's own knowledge (no plan, no
        exploration: there is nothing to start from), its answers kept and marked ungrounded."""
        run.note("topics.none", question=question)
        return self.write_answer(run, question, [NO_TOPIC])

    def write_answer(self, run: QuestionRun, question: str, evidence: list[str]) -> tuple[list[str], str] | None:
        result = run.call(Stage.ANSWER, Role.PLANNER, self.answer, question=question, evidence=evidence)
        if result is None:
            return None
        answers = grounded(run, answer_list(getattr(result, "answers", None)), getattr(result, "_salvaged", False))
        return None if answers is None else (answers, str(getattr(result, "reasoning", "") or ""))


def grounded(run: QuestionRun, answers: list[str], salvaged: bool, *, early: bool = False) -> list[str] | None:
    """The answers that count, or None when none is left (the caller falls back).

    PPoGA answers from the evidence and, as PoG and ToG do, from the model's own knowledge: an answer
    counts where it names an entity found on the graph or is a value no graph entity names (a count, a
    date, yes/no). Among answers that include such ones, the others are dropped; when the model names
    nothing on the graph at all, the evidence held no answer and its own answers are kept (the program
    marks them ungrounded). A salvaged reply is always held to the graph.

    An `early` answer (a fused evaluation's, written with the step's judgement) counts only where the facts
    found name it, values included, and nothing is kept ungrounded: Answer is asked instead. A small model
    copies its demos, and a demo's years ("1963, 1954, 1937") passed as values no entity names.
    """
    if not (run.thresholds.ground_answers or salvaged):
        return answers
    topics = {t.id for t in run.memory.strategic.topic_entities}
    known = [e.label for e in run.memory.knowledge.entities.values() if e.id not in topics]
    on_graph = [a for a in answers if any(same_name(a, k) for k in known) or (is_literal(a) and not early)]
    if not on_graph and answers and not early and run.thresholds.answer_from_knowledge and not salvaged:
        run.note("answer.ungrounded_kept", answers=answers)
        return answers
    return on_graph or None


def _decision(run: QuestionRun, result: object, found_something: bool, stage: Stage) -> tuple[Decision, str]:
    """The reply's decision and reason; an unusable decision falls back to one derived from the observation."""
    word = str(getattr(result, "decision", "") or "").strip().lower()
    if word not in set(Decision):
        decision = Decision.PROCEED if found_something else Decision.CORRECT_PATH
        run.note(f"{stage}.fallback", decision=decision)
        return decision, "fallback: the model's decision was unusable"
    return Decision(word), str(getattr(result, "reason", "") or "")
