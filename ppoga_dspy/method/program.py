"""PPoGA as a DSPy module: plan, then for each step predict -> act -> observe -> think -> evaluate.

Evaluation decides: proceed to the next step; **path correction** (retry the step, excluding the
paths that failed); **plan correction** (archive the plan and replan, capped by `max_replans`); or
finish and answer from the knowledge gathered. Every loop is bounded by `Thresholds`, and the
ablation switches remove exactly their stage's calls. `forward` never raises for a model's reply or
a graph error: the prediction's `status` is "failed" with `error_kind` and `error` instead, and the
trace shows where it happened.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import dspy

from ppoga_dspy.kg.base import Entity, KGError, KnowledgeGraph, Triple
from ppoga_dspy.method.choices import same_name
from ppoga_dspy.method.cycle import StepLoop
from ppoga_dspy.method.executor import Executor
from ppoga_dspy.method.memory import Memory, StrategicMemory
from ppoga_dspy.method.planner import Planner, answer_context
from ppoga_dspy.method.pruning import Ranker
from ppoga_dspy.method.question_run import LMCallError, QuestionRun
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.method.tools import KGTools
from ppoga_dspy.method.vocabulary import StageMode

log = logging.getLogger(__name__)

class PPoGA(dspy.Module):
    """Predictive Plan-on-Graph with Action over one KnowledgeGraph.

    `role_lms` binds an LM per role ("planner", "executor"); a role without one uses the LM of the
    surrounding `dspy.context`/`dspy.configure`. The KG is not a parameter of the compiled program:
    the same compiled prompts run on any KG with `with_kg`.
    """

    def __init__(
        self,
        kg: KnowledgeGraph | None = None,
        *,
        thresholds: Thresholds | None = None,
        role_lms: dict[str, Any] | None = None,
        ranker: Ranker | None = None,
        stages: StageMode | str = StageMode.PAPER,
    ) -> None:
        super().__init__()
        self.planner = Planner()
        self.executor = Executor(ranker=ranker)
        self.kg = kg
        self.thresholds = thresholds or Thresholds()
        self.role_lms = dict(role_lms or {})
        self.stages = StageMode(stages)  # paper: one call per paper stage; fused: calls sharing inputs merged

    def __deepcopy__(self, memo: dict) -> PPoGA:
        import copy

        clone = PPoGA.__new__(PPoGA)
        for key, value in self.__dict__.items():
            shared = key in ("kg", "role_lms")  # a KG connection and LM engines are shared, never copied
            clone.__dict__[key] = value if shared else copy.deepcopy(value, memo)
        return clone

    def forward(self, question: str, topic_entities: dict[str, str] | list[str] | str | None = None) -> dspy.Prediction:
        if self.kg is None:
            from ppoga_dspy.errors import ConfigError

            raise ConfigError("PPoGA has no knowledge graph: pass kg=ppoga_dspy.kg.open_kg(PATH_OR_URL).")
        started = time.perf_counter()
        memory = Memory(StrategicMemory(question=question))
        run = QuestionRun(memory=memory, thresholds=self.thresholds, tools=None, role_lms=self.role_lms,
                          stages=StageMode(self.stages))
        run.tools = KGTools(self.kg, run.costs, memory)
        answers, answer_ids, reasoning, failure = self._guarded(run, question, topic_entities)
        status, error_kind, error = ("failed", *failure) if failure else ("ok", None, None)
        if error:
            run.note("failed", kind=error_kind, error=error)
        run.costs.seconds = time.perf_counter() - started
        chains = _answer_chains(memory, answer_ids)
        ungrounded = [a for a, i in zip(answers, answer_ids, strict=False) if i is None]
        return dspy.Prediction(
            answer=answers[0] if answers else "",
            answers=answers,
            answer_ids=answer_ids,
            ungrounded=ungrounded,  # answers that name no KG entity (values such as counts, dates, yes/no)
            reasoning=reasoning,
            reasoning_chains=[[t.to_dict() for t in chain] for chain in chains],
            status=status,
            error_kind=error_kind,
            error=error,
            trace=[e.to_dict() for e in memory.trace],
            memory=memory.to_dict(),
            costs=run.costs.to_dict(),
        )

    def _guarded(self, run: QuestionRun, question: str, topic_entities):
        """`_solve` with every failure turned into (kind, message): a question fails alone, with its reason."""
        try:
            return (*self._solve(run, question, topic_entities), None)
        except KGError as exc:
            failure = ("kg", f"{type(exc).__name__}: {exc}")
        except LMCallError as exc:
            failure = ("lm", str(exc))
        except Exception as exc:  # a bug must not stop an evaluation; it is recorded with its type
            log.exception("PPoGA failed on %r", question)
            failure = ("internal", f"{type(exc).__name__}: {exc}")
        return [], [], "", failure

    # -- the step cycle (see cycle.py) ----------------------------------------------------------

    def _solve(self, run: QuestionRun, question: str, topic_entities) -> tuple[list[str], list[str | None], str]:
        from ppoga_dspy.method.linking import resolve_topics

        memory = run.memory
        topics = resolve_topics(run.tools, question, topic_entities)
        memory.strategic.topic_entities = topics
        memory.knowledge.add_entities(topics)
        run.note("topics", entities=[t.to_dict() for t in topics])
        if not topics:  # nothing to explore from: the model's own knowledge, in one call
            written = self.planner.answer_unlinked(run, question)
            if written is None:
                return [], [], "no entity of the question is on the graph, and the model gave no answer"
            return self._answer(run, question, [], written)
        memory.strategic.plan = self.planner.make_plan(run, question, [t.label for t in topics])
        loop = StepLoop(self.planner, self.executor, run, question, topics)
        walk = loop.go()
        return self._answer(run, question, walk.frontier, loop.written)

    def _answer(
        self, run: QuestionRun, question: str, frontier: list[Entity], prewritten: tuple[list[str], str] | None = None
    ) -> tuple[list[str], list[str | None], str]:
        knowledge = run.memory.knowledge
        written = prewritten  # fused mode: written by the evaluation that finished (already grounded)
        if written is None:
            evidence = answer_context(run) + knowledge.evidence(self.thresholds.evidence_tokens)
            written = self.planner.write_answer(run, question, evidence)
        if written is None or not written[0]:
            fallback = [e.label for e in frontier if e.id not in {t.id for t in run.memory.strategic.topic_entities}]
            run.note("answer.fallback", answers=fallback)
            return fallback, [e.id for e in frontier if e.label in fallback], "fallback: the last step's entities"
        answers, reasoning = written
        ids = [_link_answer(knowledge.entities.values(), a) for a in answers]
        return answers, ids, reasoning

    def with_kg(self, kg: KnowledgeGraph) -> PPoGA:
        """A copy of this (compiled) program that runs on another KG."""
        clone = self.deepcopy()
        clone.kg = kg
        return clone


def _link_answer(entities, answer: str) -> str | None:
    """The graph entity an answer names; never a mediator (a CVT is a node of an n-ary fact, not an answer)."""
    for entity in entities:
        if not entity.is_mediator and same_name(entity.label, answer):
            return entity.id
    return None


def _answer_chains(memory: Memory, answer_ids: list[str | None]) -> list[list[Triple]]:
    wanted = {a for a in answer_ids if a}
    chains = [c for c in memory.knowledge.reasoning_chains if c and {c[-1].head.id, c[-1].tail.id} & wanted]
    return chains or memory.knowledge.reasoning_chains[-3:]
