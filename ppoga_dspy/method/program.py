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
from ppoga_dspy.method.executor import Executor, Observation
from ppoga_dspy.method.memory import Memory, StepCycle, StrategicMemory
from ppoga_dspy.method.planner import Planner
from ppoga_dspy.method.pruning import Ranker
from ppoga_dspy.method.question_run import LMCallError, QuestionRun
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.method.tools import KGTools

log = logging.getLogger(__name__)

ROLES = ("planner", "executor")


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
    ) -> None:
        super().__init__()
        self.planner = Planner()
        self.executor = Executor(ranker=ranker)
        self.kg = kg
        self.thresholds = thresholds or Thresholds()
        self.role_lms = dict(role_lms or {})

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
        run = QuestionRun(memory=memory, thresholds=self.thresholds, tools=None, role_lms=self.role_lms)
        run.tools = KGTools(self.kg, run.costs, memory)
        status, error_kind, error = "ok", None, None
        answers: list[str] = []
        answer_ids: list[str | None] = []
        reasoning = ""
        try:
            answers, answer_ids, reasoning = self._solve(run, question, topic_entities)
        except KGError as exc:
            status, error_kind, error = "failed", "kg", f"{type(exc).__name__}: {exc}"
        except LMCallError as exc:
            status, error_kind, error = "failed", "lm", str(exc)
        except Exception as exc:  # a bug must not stop an evaluation; it is recorded with its type
            log.exception("PPoGA failed on %r", question)
            status, error_kind, error = "failed", "internal", f"{type(exc).__name__}: {exc}"
        if error:
            run.note("failed", kind=error_kind, error=error)
        run.costs.seconds = time.perf_counter() - started
        chains = _answer_chains(memory, answer_ids)
        return dspy.Prediction(
            answer=answers[0] if answers else "",
            answers=answers,
            answer_ids=answer_ids,
            reasoning=reasoning,
            reasoning_chains=[[t.to_dict() for t in chain] for chain in chains],
            status=status,
            error_kind=error_kind,
            error=error,
            trace=[e.to_dict() for e in memory.trace],
            memory=memory.to_dict(),
            costs=run.costs.to_dict(),
        )

    # -- the step cycle -------------------------------------------------------------------------

    def _solve(self, run: QuestionRun, question: str, topic_entities) -> tuple[list[str], list[str | None], str]:
        from ppoga_dspy.method.linking import resolve_topics

        th = self.thresholds
        memory = run.memory
        strategic = memory.strategic
        topics = resolve_topics(run.tools, question, topic_entities)
        strategic.topic_entities = topics
        memory.knowledge.add_entities(topics)
        run.note("topics", entities=[t.to_dict() for t in topics])
        topic_names = [t.label for t in topics]
        strategic.plan = self.planner.make_plan(run, question, topic_names)
        frontier: list[Entity] = list(topics)
        chains: dict[str, list[Triple]] = {t.id: [] for t in topics}
        index = 0
        cycles = 0
        while index < len(strategic.plan) and cycles < th.max_steps:
            cycles += 1
            step = strategic.plan[index]
            step.status = "in progress"
            cycle = StepCycle(index=index, objective=step.objective, attempt=step.attempts)
            memory.current = cycle
            if th.use_prediction:
                cycle.prediction = self.planner.predict(run, question, step.objective)
            observation = self.executor.explore(
                run, question=question, objective=step.objective, frontier=frontier, chains=chains
            )
            cycle.observation = observation.text()
            cycle.triples = observation.triples
            cycle.frontier = observation.frontier
            cycle.paths = observation.paths
            cycle.thought, cycle.missing = self.planner.reflect(
                run, question, step.objective, cycle.prediction, cycle.observation
            )
            decision, reason = self.planner.decide(
                run, question, strategic.plan_text(), step.objective, cycle.observation, cycle.thought,
                found_something=not observation.empty,
            )
            decision = self._enforce(run, decision, step.attempts, last=index == len(strategic.plan) - 1,
                                     observation=observation)
            cycle.decision, cycle.reason = decision, reason
            memory.history.append(cycle)
            if decision == "proceed" or decision == "finish":
                step.status = "completed"
                if observation.frontier:
                    frontier = observation.frontier
                    chains.update(observation.chains)
                    memory.knowledge.reasoning_chains.extend(observation.chains.values())
                if decision == "finish":
                    break
                index += 1
            elif decision == "correct_path":
                step.attempts += 1
                step.status = "failed"
                memory.knowledge.record_failure(observation.paths)
                run.note("path_correction", step=index, attempt=step.attempts,
                         avoid=[list(p) for p in observation.paths])
            elif decision == "replan":
                step.status = "failed"
                strategic.archived_plans.append(strategic.plan)
                strategic.replan_count += 1
                memory.knowledge.record_failure(observation.paths)
                failed_text = strategic.plan_text()
                strategic.plan = self.planner.make_new_plan(run, question, topic_names, failed_text)
                run.note("plan_correction", replan=strategic.replan_count, plan=[s.objective for s in strategic.plan])
                frontier, index = list(topics), 0
                chains = {t.id: [] for t in topics}
        if cycles >= th.max_steps and index < len(strategic.plan):
            run.note("max_steps", cycles=cycles)
        return self._answer(run, question, frontier)

    def _enforce(self, run: QuestionRun, decision: str, attempts: int, *, last: bool, observation: Observation) -> str:
        """Apply caps and ablation switches to the model's decision; note every change in the trace."""
        th = self.thresholds
        strategic = run.memory.strategic
        original = decision
        can_retry = th.use_path_correction and attempts < th.max_path_corrections
        can_replan = th.use_plan_correction and strategic.replan_count < th.max_replans
        if decision == "correct_path" and not can_retry:
            decision = "replan" if can_replan else ("proceed" if not observation.empty else "finish")
        if decision == "replan" and not can_replan:
            decision = "correct_path" if can_retry else ("proceed" if not observation.empty else "finish")
        if decision == "proceed" and last:
            decision = "finish"
        if decision != original:
            run.note("decision_changed", model=original, applied=decision,
                     attempts=attempts, replans=strategic.replan_count)
        return decision

    def _answer(
        self, run: QuestionRun, question: str, frontier: list[Entity]
    ) -> tuple[list[str], list[str | None], str]:
        knowledge = run.memory.knowledge
        evidence = knowledge.evidence(self.thresholds.evidence_limit)
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
    for entity in entities:
        if same_name(entity.label, answer):
            return entity.id
    return None


def _answer_chains(memory: Memory, answer_ids: list[str | None]) -> list[list[Triple]]:
    wanted = {a for a in answer_ids if a}
    chains = [c for c in memory.knowledge.reasoning_chains if c and {c[-1].head.id, c[-1].tail.id} & wanted]
    return chains or memory.knowledge.reasoning_chains[-3:]
