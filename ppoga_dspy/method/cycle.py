"""The step cycle as explicit states and rules: Predict -> Act -> Observe -> Think -> Evaluate -> apply.

A question is a loop over plan steps. Each pass is one *cycle* (bounded by `max_steps`): the Planner
predicts the step's outcome, the Executor acts on the graph, the Planner thinks about the observation
and decides. The decision then passes the *rules* below (caps and ablation switches, in order), and
the applied decision moves the state: proceed to the next step, retry the step (path correction),
replace the plan (plan correction), or finish.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice

from ppoga_dspy.kg.base import Entity, Triple
from ppoga_dspy.method.executor import Observation
from ppoga_dspy.method.gating import RETRY_NOTE, names_relation, relation_names, step_words
from ppoga_dspy.method.memory import REVERSE, PlanStepState, StepCycle
from ppoga_dspy.method.named_relations import bridges, followed, named_on, refocus
from ppoga_dspy.method.planner import Menus
from ppoga_dspy.method.question_run import QuestionRun
from ppoga_dspy.method.vocabulary import Decision, StepAction


@dataclass(frozen=True)
class Allowance:
    """What the caps and switches still allow at the end of one step cycle."""

    can_retry: bool  # path correction is on and this step has retries left
    can_replan: bool  # plan correction is on and replans are left
    last_step: bool  # the step is the plan's last
    found_something: bool  # the step reached at least one entity
    mismatch: bool = False  # the step followed none of the relations its objective names (`correct_named_mismatch`)

    def carry_on(self) -> Decision:
        """What a step does when no correction is left: keep what it found, or stop with what there is."""
        return Decision.PROCEED if self.found_something else Decision.FINISH


Rule = Callable[[Decision, Allowance], Decision | None]

#: How an observation opens the line that says the step followed none of the relations it names (`check_named`).
MISMATCH = "Mismatch: the step names"


def no_finish_on_a_mismatch(decision: Decision, allow: Allowance) -> Decision | None:
    """A step that followed another relation than the one it names has not done what it asks: the walk does not end
    on it while the step may be retried (a step that proceeds leaves the next step to go back to what leads on)."""
    ends = decision is Decision.FINISH or (decision is Decision.PROCEED and allow.last_step)
    if allow.mismatch and ends and allow.can_retry:
        return Decision.CORRECT_PATH
    return None


def no_proceed_on_nothing(decision: Decision, allow: Allowance) -> Decision | None:
    """A step that reached no entity has not done what it asks: proceeding would run the next step from the frontier
    before it (entities of the wrong kind), so it is retried while it may be, from the earlier candidates
    (`correct_path` backtracks). Finishing on what is known stays the model's call."""
    if decision is Decision.PROCEED and not allow.found_something and allow.can_retry:
        return Decision.CORRECT_PATH
    return None


def no_retry_left(decision: Decision, allow: Allowance) -> Decision | None:
    """A path correction without retries left becomes a plan correction, else carries on."""
    if decision is Decision.CORRECT_PATH and not allow.can_retry:
        return Decision.REPLAN if allow.can_replan else allow.carry_on()
    return None


def no_replan_left(decision: Decision, allow: Allowance) -> Decision | None:
    """A plan correction without replans left becomes a path correction, else carries on."""
    if decision is Decision.REPLAN and not allow.can_replan:
        return Decision.CORRECT_PATH if allow.can_retry else allow.carry_on()
    return None


def last_step_finishes(decision: Decision, allow: Allowance) -> Decision | None:
    """Proceeding past the plan's last step means answering."""
    if decision is Decision.PROCEED and allow.last_step:
        return Decision.FINISH
    return None


#: Applied in this order, each to the result of the one before.
RULES: tuple[Rule, ...] = (no_finish_on_a_mismatch, no_proceed_on_nothing, no_retry_left, no_replan_left,
                          last_step_finishes)


def apply_rules(decision: Decision, allow: Allowance) -> Decision:
    for rule in RULES:
        decision = rule(decision, allow) or decision
    return decision


@dataclass
class Walk:
    """Where the question stands on the graph: the frontier and each frontier entity's chain from a topic."""

    frontier: list[Entity]
    chains: dict[str, list[Triple]] = field(default_factory=dict)
    # per completed step, the candidates it did not select (entities, chains): where backtracking resumes
    earlier: list[tuple[list[Entity], dict[str, list[Triple]]]] = field(default_factory=list)

    @classmethod
    def start(cls, topics: list[Entity]) -> Walk:
        return cls(frontier=list(topics), chains={t.id: [] for t in topics})

    def reached_chains(self) -> dict[str, list[Triple]]:
        """The last step's unselected candidates (those backtracking has not taken yet), id -> chain."""
        if not self.earlier:
            return {}
        entities, chains = self.earlier[-1]
        return {e.id: chains[e.id] for e in entities}

    def backtrack(self, width: int) -> list[Entity]:
        """Resume from the last step's other candidates (PoG's backtracking); [] when none are left."""
        while self.earlier:
            taken = self.earlier[-1][0][:width]
            if taken:
                self.take(taken)
                return taken
            self.earlier.pop()
        return []

    def take(self, entities: list[Entity]) -> None:
        """Make these of the last step's other candidates the frontier, in place of what that step kept."""
        rest, chains = self.earlier[-1]
        ids = {e.id for e in entities}
        self.earlier[-1] = ([e for e in rest if e.id not in ids], chains)
        self.frontier = list(entities)
        self.chains.update({e.id: chains[e.id] for e in entities})


def found(entities: list[Entity]) -> str:
    """A completed step's outcome as the plan text shows it to the Planner."""
    return "found " + ", ".join(e.label for e in entities)


@dataclass
class CycleState:
    """The loop's position: the step being worked on, the cycles spent, whether the question is done."""

    index: int = 0
    cycles: int = 0
    done: bool = False


class StepLoop:
    """Runs the step cycles of one question; `program.PPoGA` builds it with its Planner and Executor."""

    def __init__(self, planner, executor, run: QuestionRun, question: str, topics: list[Entity]) -> None:
        self.planner, self.executor, self.run = planner, executor, run
        self.question, self.topics = question, topics
        self.topic_names = [t.label for t in topics]
        self.walk = Walk.start(topics)
        self.state = CycleState()
        self.written: tuple[list[str], str] | None = None  # fused: the answer the finishing evaluation wrote
        self.bridged: set[int] = set()  # the plan steps already done again past a bridge (named_relations.py), by id

    @property
    def plan(self) -> list[PlanStepState]:
        return self.run.memory.strategic.plan

    def go(self) -> Walk:
        """Cycle until the plan is done, the Planner finishes, or `max_steps` is spent."""
        limit = self.run.thresholds.max_steps
        while not self.state.done and self.state.index < len(self.plan) and self.state.cycles < limit:
            self.state.cycles += 1
            cycle, observation = self.one_cycle(self.plan[self.state.index])
            self.apply(cycle, observation)
        if self.state.cycles >= limit and not self.state.done and self.state.index < len(self.plan):
            self.run.note("max_steps", cycles=self.state.cycles)
        return self.walk

    def one_cycle(self, step: PlanStepState) -> tuple[StepCycle, Observation]:
        """Predict -> Act -> Observe -> Think -> Evaluate for one step; the decision after the rules."""
        run, th, memory = self.run, self.run.thresholds, self.run.memory
        step.status = "in progress"
        cycle = StepCycle(index=self.state.index, objective=step.objective, attempt=step.attempts)
        memory.current = cycle
        if th.use_prediction:
            cycle.prediction = self.prediction_for(step)
        observation = self.act(step)
        self.check_named(step, observation)
        cycle.observation = observation.text()
        cycle.triples, cycle.frontier, cycle.paths = observation.triples, observation.frontier, observation.paths
        cycle.rationale = observation.rationale
        if run.fused:
            self.judge_fused(cycle, observation, step.attempts)
        else:
            cycle.thought, cycle.missing = self.planner.think_over(
                run, self.question, step.objective, cycle.prediction, cycle.observation
            )
            decision, cycle.reason = self.planner.decide(
                run, self.question, f"{memory.strategic.plan_text()}\n{self.corrections_left(step.attempts)}",
                step.objective, cycle.observation, cycle.thought, found_something=not observation.empty,
            )
            cycle.decision = self.enforce(decision, step.attempts, found_something=not observation.empty,
                                          mismatch=observation.mismatch)
        memory.history.append(cycle)
        return cycle, observation

    def corrections_left(self, attempts: int) -> str:
        """What Evaluate is told of its caps: a decision the rules would turn into another is better not made."""
        th, strategic = self.run.thresholds, self.run.memory.strategic
        retries = max(0, th.max_path_corrections - attempts) if th.use_path_correction else 0
        replans = max(0, th.max_replans - strategic.replan_count) if th.use_plan_correction else 0
        return f"(retries of this step left: {retries}; replans left: {replans})"

    def prediction_for(self, step: PlanStepState) -> str:
        """The step's prediction: the one made ahead in fused mode (first try only), else a Predict call."""
        carried, step.prediction = (step.prediction if step.attempts == 0 else ""), ""
        if carried:
            self.run.note("predict.carried", step=self.state.index, prediction=carried)
            return carried
        return self.planner.predict(self.run, self.question, step.objective)

    def judge_fused(self, cycle: StepCycle, observation: Observation, attempts: int) -> None:
        """Think + Evaluate in one call; what it wrote ahead goes to the next step (proceed: its prediction and its
        relations, chosen from the menus built ahead) or to the answer (finish)."""
        found = not observation.empty
        following = self.plan[self.state.index + 1] if self.state.index + 1 < len(self.plan) else None
        judged = self.planner.think_and_decide(
            self.run, self.question, cycle.objective, cycle.prediction, cycle.observation,
            following.objective if following else "", found_something=found, caps=self.corrections_left(attempts),
            ahead=self.menus_ahead(following, observation),
        )
        cycle.thought, cycle.missing, cycle.reason = judged.thought, judged.missing, judged.reason
        cycle.decision = applied = self.enforce(judged.decision, attempts, found_something=found,
                                                mismatch=observation.mismatch)
        if applied is Decision.PROCEED and following is not None:
            following.relations = judged.next_relations
            if self.run.thresholds.use_prediction:
                following.prediction = judged.next_prediction
        met = judged.decision in (Decision.PROCEED, Decision.FINISH)  # the model judged the evidence complete
        if applied is Decision.FINISH and met and judged.answers:
            self.written = self.planner.accept_answers(self.run, judged)

    def menus_ahead(self, following: PlanStepState | None, observation: Observation) -> Menus:
        """The next step's relation menus, shown to the fused evaluation so that it can choose there if it proceeds:
        for an exploring next step, from the frontier proceeding would set. Built before the decision is known, so a
        decision other than proceed leaves them unused (their KG queries spent)."""
        if following is None or following.action != StepAction.EXPLORE or not observation.frontier:
            return Menus()
        return Menus(tuple(self.executor.menus_ahead(
            self.run, question=self.question, objective=following.objective, frontier=observation.frontier,
            chains={**self.walk.chains, **observation.chains}, step=self.state.index + 1)))

    def act(self, step: PlanStepState) -> Observation:
        """The step's action: explore the graph, intersect two branches, or (a memory step) no graph action. A
        relation choice carried from the call before is offered on the first try only (as the prediction is)."""
        carried, step.relations = (step.relations if step.attempts == 0 else None), None
        if step.action == StepAction.MEMORY:
            return self.recall()
        if step.action == StepAction.EXPLORE:
            if self.run.thresholds.correct_named_mismatch and self.crossed_already(step.objective):
                return self.already_crossed(step)
            self.refocus(step)
        frontier, within, chains = self.walk.frontier, None, self.walk.chains
        if step.action == StepAction.INTERSECT:
            frontier, within = self.intersect_sources()
            if within is not None:  # the earlier branch's unselected candidates count too, with their chains
                chains = {**self.walk.reached_chains(), **self.walk.chains}
        return self.executor.explore(
            self.run, question=self.question, objective=self.exploration_objective(step), frontier=frontier,
            chains=chains, step=self.state.index, intersect=step.action == StepAction.INTERSECT,
            within=within, carried=carried,
        )

    def refocus(self, step: PlanStepState) -> None:
        """`back_to_named_relation`: when no frontier entity has a relation the step names, the last step's other
        candidates that have it become the frontier (named_relations.py)."""
        if not self.run.thresholds.back_to_named_relation or not self.walk.earlier:  # none before the first step
            return
        taken = refocus(self.run, self.walk.frontier, self.walk.earlier[-1][0], step.objective)
        if taken:
            self.run.note("named_relation.back", step=self.state.index, left=[e.id for e in self.walk.frontier],
                          frontier=[e.to_dict() for e in taken])
            self.walk.take(taken)
            self.plan[self.state.index - 1].outcome = found(taken)

    def check_named(self, step: PlanStepState, observation: Observation) -> None:
        """`correct_named_mismatch`: a step whose objective names relations and that followed none of them says so
        in its observation, so that Think and Evaluate judge it. When the graph offers the named relation (the
        step's entities have it and another was chosen, or the step before reached other candidates that have it)
        the mismatch can be corrected and the rules retry it; when no entity the walk reached has it, the observation
        says that too, and nothing is retried for it (a retry could only fail again). A bridge (what the step reached
        has the named relation) is left to `carry_bridge`."""
        th = self.run.thresholds
        if not th.correct_named_mismatch or step.action != StepAction.EXPLORE or not observation.paths:
            return
        names = relation_names(step_words(step.objective))
        if not names or followed(observation.paths, step.objective) or self.crossed_already(step.objective):
            return
        if bridges(self.run, step.objective, observation.paths, self.walk.frontier, observation.frontier):
            return
        taken = sorted({relation for _, relation, _ in observation.paths})
        pool = self.walk.earlier[-1][0] if self.walk.earlier else []
        # a few entities that have the named relation are enough to say so (the scan stops there)
        nearby = (*self.walk.frontier[: th.frontier_limit], *pool[: th.prune_threshold])
        offered = list(islice((e for e in nearby if named_on(self.run, e, step.objective)), 3))
        observation.mismatch = bool(offered)
        if offered:
            observation.notes.append(f"{MISMATCH} {', '.join(names)}, but it followed {', '.join(taken)}; "
                                     f"{', '.join(e.label for e in offered)} has it.")
        else:
            observation.notes.append(f"The step names {', '.join(names)}, which no entity the walk reached has; "
                                     f"it followed {', '.join(taken)} instead.")
        self.run.note("named_relation.mismatch", step=self.state.index, named=names, followed=taken,
                      correctable=bool(offered))

    def crossed_already(self, objective: str) -> bool:
        """Whether the walk reached its frontier through a mediator by a relation the objective names: a step before
        read through along it (`spouse_s` then `marriage.spouse`), so a step naming it has nothing left to follow. A
        relation walked as a hop of its own (a spouse's spouse) is a new hop each time."""
        arrived = [chain[-1].relation + ("" if chain[-1].tail.id == e.id else REVERSE)
                   for e in self.walk.frontier if (chain := self.walk.chains.get(e.id))
                   and (chain[-1].head.is_mediator or chain[-1].tail.is_mediator)]  # read through, not walked
        words = step_words(objective)  # the direction as crossed: going back along it ("(reverse)") is a new hop
        return any(names_relation(key, words) for key in arrived)

    def already_crossed(self, step: PlanStepState) -> Observation:
        """A step naming the relation the walk arrived by (read through a mediator by the step before) has nothing
        left to follow: its entities stand, and Think and Evaluate are told why (no KG query, no Executor call)."""
        names = relation_names(step_words(step.objective))
        self.run.note("named_relation.crossed", step=self.state.index, named=names)
        known = self.run.memory.knowledge.evidence(self.run.thresholds.evidence_tokens)
        return Observation(frontier=list(self.walk.frontier), chains=dict(self.walk.chains),
                           notes=[f"No graph action: the step before already crossed {', '.join(names)} "
                                  "(read through a mediator) to these entities."] + known)

    def recall(self) -> Observation:
        """A memory step (compare, count, pick): the Planner reads what is known; the Executor is not called."""
        known = self.run.memory.knowledge.evidence(self.run.thresholds.evidence_tokens)
        self.run.note("memory_step", facts=len(known))
        return Observation(frontier=list(self.walk.frontier), chains=dict(self.walk.chains),
                           notes=["No graph action: this step is answered from what is already known."] + known)

    def intersect_sources(self) -> tuple[list[Entity], set[str] | None]:
        """Where a conjunction step explores from, and the set its result must stay within.

        On the first step every topic entity is a branch (the result is reached from all of them). Later,
        the topics no chain has started from yet are the new branch, and the result must be among what the
        last step reached ("the players of club X" who also "play as forward"): its selected entities and the
        candidates it did not select, since a conjunction must not lose what the entity cap cut.
        """
        if [e.id for e in self.walk.frontier] == [t.id for t in self.topics]:
            return list(self.topics), None
        started = {c[0].head.id for c in self.walk.chains.values() if c} | {
            c[0].tail.id for c in self.walk.chains.values() if c}
        fresh = [t for t in self.topics if t.id not in started and t.id not in {e.id for e in self.walk.frontier}]
        if not fresh:
            return self.walk.frontier, None
        return fresh, {e.id for e in self.walk.frontier} | set(self.walk.reached_chains())

    @staticmethod
    def exploration_objective(step: PlanStepState) -> str:
        """The step's objective; on a retry, Think's thought on the last try shapes where the Executor looks."""
        if step.attempts and step.missing and step.missing.strip().lower() not in ("nothing", "none", ""):
            return f"{step.objective}{RETRY_NOTE}{step.missing}"
        return step.objective

    def enforce(self, decision: Decision, attempts: int, *, found_something: bool, mismatch: bool = False) -> Decision:
        """The model's decision after the caps and ablation switches; every change is noted in the trace."""
        th, strategic = self.run.thresholds, self.run.memory.strategic
        allow = Allowance(
            can_retry=th.use_path_correction and attempts < th.max_path_corrections,
            can_replan=th.use_plan_correction and strategic.replan_count < th.max_replans,
            last_step=self.state.index == len(strategic.plan) - 1,
            found_something=found_something,
            mismatch=mismatch,
        )
        applied = apply_rules(decision, allow)
        if applied != decision:
            self.run.note("decision_changed", model=decision, applied=applied,
                          attempts=attempts, replans=strategic.replan_count)
        return applied

    def apply(self, cycle: StepCycle, observation: Observation) -> None:
        step = self.plan[self.state.index]
        decision = Decision(cycle.decision)
        if decision in (Decision.PROCEED, Decision.FINISH):
            finish = decision is Decision.FINISH and not self.carry_bridge(step, cycle, observation)  # only a finish
            self.proceed(step, observation, finish=finish)
        elif decision is Decision.CORRECT_PATH and self.carry_bridge(step, cycle, observation):
            self.proceed(step, observation, finish=False)  # the graph's correction: on past the skipped hop
        elif decision is Decision.CORRECT_PATH:
            self.correct_path(step, observation)
        else:
            self.correct_plan(step, observation)

    def proceed(self, step: PlanStepState, observation: Observation, *, finish: bool) -> None:
        step.status = "completed"
        step.outcome = found(observation.frontier) if observation.frontier else ""
        if observation.frontier:
            self.walk.frontier = observation.frontier
            self.walk.chains.update(observation.chains)
            self.walk.earlier.append((observation.other_entities, observation.others))
            self.run.memory.knowledge.reasoning_chains.extend(observation.chains.values())
        if finish:
            self.state.done = True
        else:
            self.state.index += 1

    def carry_bridge(self, step: PlanStepState, cycle: StepCycle, observation: Observation) -> bool:
        """`back_to_named_relation`, for a step that would finish or be retried: one whose frontier had none of the
        relations it names, and whose entities have one, was a bridge over a hop the plan skipped; the same objective
        is put after it (once, within `max_depth`) and the walk goes on there (a retry from the same frontier could
        only fail again). Called before `proceed`, while the walk's frontier is still the step's own."""
        th = self.run.thresholds
        if (not th.back_to_named_relation or step.action != StepAction.EXPLORE or id(step) in self.bridged
                or len(self.plan) >= th.max_depth):
            return False
        names = bridges(self.run, step.objective, cycle.paths, self.walk.frontier, observation.frontier)
        if not names:
            return False
        again = PlanStepState(objective=step.objective, expected_outcome=step.expected_outcome, action=step.action)
        self.bridged.update({id(step), id(again)})
        self.plan.insert(self.state.index + 1, again)
        self.run.note("named_relation.again", step=self.state.index, named=names, decision=cycle.decision,
                      followed=[list(p) for p in cycle.paths])
        cycle.decision = Decision.PROCEED
        self.written = None  # fused: an answer written at the bridge is not the walk's end
        return True

    def correct_path(self, step: PlanStepState, observation: Observation) -> None:
        """Path correction: the same step again, avoiding what failed (`Observation.failed_parts`): the entity
        choice, or the paths that reached nothing, not a relation that only led to a wrong pick."""
        step.attempts += 1
        step.status = "failed"
        step.outcome = self._why_failed()
        # the thought, in both stage modes (fused writes no `missing`): what the step reached against what was expected
        step.missing = self.run.memory.current.thought if self.run.memory.current else ""
        knowledge = self.run.memory.knowledge
        chose_before = bool(knowledge.failed_entities.get(self.state.index))
        paths, entities = observation.failed_parts(earlier_choices=chose_before)
        knowledge.record_failure(self.state.index, paths, self._why_failed(), entities=entities)
        self.run.note("path_correction", step=self.state.index, attempt=step.attempts,
                      avoid=[list(p) for p in paths], avoid_entities=entities)
        if observation.empty and self.state.index > 0:  # nothing reached: resume from an earlier frontier
            resumed = self.walk.backtrack(self.run.thresholds.entities_per_step)
            if resumed:
                self.run.note("backtrack", step=self.state.index, frontier=[e.to_dict() for e in resumed])
                self.plan[self.state.index - 1].outcome = found(resumed)

    def _why_failed(self) -> str:
        cycle = self.run.memory.current
        return (cycle.reason or cycle.thought) if cycle else ""

    def correct_plan(self, step: PlanStepState, observation: Observation) -> None:
        """Plan correction: archive the plan, ask for a new one, start again from the topic entities."""
        strategic = self.run.memory.strategic
        step.status = "failed"
        strategic.archived_plans.append(strategic.plan)
        strategic.replan_count += 1
        knowledge = self.run.memory.knowledge
        knowledge.record_failure(self.state.index, observation.paths, self._why_failed())
        knowledge.new_plan()
        failed_text = strategic.plan_text()
        strategic.plan = self.planner.make_new_plan(self.run, self.question, self.topic_names, failed_text)
        self.run.note("plan_correction", replan=strategic.replan_count, plan=[s.objective for s in strategic.plan])
        self.walk = Walk.start(self.topics)
        self.state.index = 0
