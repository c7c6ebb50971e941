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

from ppoga_dspy.kg.base import Direction, Entity, KGError, KnowledgeGraph, Triple
from ppoga_dspy.kg.names import normalize_name
from ppoga_dspy.method.choices import same_name
from ppoga_dspy.method.cycle import StepLoop
from ppoga_dspy.method.executor import Executor
from ppoga_dspy.method.memory import Memory, StepCycle, StrategicMemory
from ppoga_dspy.method.named_relations import named_from
from ppoga_dspy.method.planner import Menus, Planner, answer_context
from ppoga_dspy.method.pruning import Ranker
from ppoga_dspy.method.question_run import LMCallError, QuestionRun
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.method.tools import KGTools
from ppoga_dspy.method.vocabulary import Decision, StageMode, StepAction

log = logging.getLogger(__name__)

#: The key of PPoGA's own section in `dump_state()`, beside the predictors' states (DSPy ignores unknown keys).
STATE_KEY = "ppoga"
STATE_FORMAT = "ppoga-dspy/program-state/1"


class PPoGA(dspy.Module):
    """Predictive Plan-on-Graph with Action over one KnowledgeGraph.

    `role_lms` binds an LM per role ("planner", "executor"), a `dspy.LM` or a model string; a role without one
    uses the LM of the surrounding `dspy.context`/`dspy.configure`. The KG is not a parameter of the compiled program:
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
        from ppoga_dspy.lm.factory import as_lm

        self.role_lms = {role: as_lm(lm, what=f"role_lms[{role!r}]") for role, lm in (role_lms or {}).items()}
        self.stages = StageMode(stages)  # paper: one call per paper stage; fused: calls sharing inputs merged

    def __deepcopy__(self, memo: dict) -> PPoGA:
        import copy

        clone = PPoGA.__new__(PPoGA)
        for key, value in self.__dict__.items():
            shared = key in ("kg", "role_lms")  # a KG connection and LM engines are shared, never copied
            clone.__dict__[key] = value if shared else copy.deepcopy(value, memo)
        return clone

    # -- state: what `program.save` / `load`, DSPy's optimizers and the artifact carry ----------------------

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        """The predictors' states (as `dspy.Module`), plus the program's own section under `STATE_KEY`: the
        thresholds, the stage mode and the nearest-neighbour pool. DSPy's `save` writes only `dump_state`, so
        without this section a tuned program saved and loaded by any DSPy tool came back with the paper's
        thresholds, the paper stages and plain predictors."""
        from ppoga_dspy.method.knn_demos import pool_of

        state = super().dump_state(json_mode=json_mode)
        pool = pool_of(self)
        state[STATE_KEY] = {"format": STATE_FORMAT, "thresholds": self.thresholds.to_dict(),
                            "stages": str(StageMode(self.stages)), "knn": pool.to_dict() if pool is not None else None}
        return state

    def load_state(self, state: dict[str, Any], *, allow_unsafe_lm_state: bool = False) -> PPoGA:
        """Load what `dump_state` wrote, all or nothing: the program's section is checked first, DSPy rehearses
        the predictors on a copy, and only then is anything changed. A state without the section (a plain
        DSPy state) loads the predictors and keeps this program's thresholds, stages and pool."""
        from ppoga_dspy.errors import ArtifactError
        from ppoga_dspy.method.knn_demos import DemoPool, install_pool, uninstall_pool

        own = state.get(STATE_KEY)
        predictors = {name: self._fields_by_name(name, value) for name, value in state.items() if name != STATE_KEY}
        if own is None:
            super().load_state(predictors, allow_unsafe_lm_state=allow_unsafe_lm_state)
            return self
        if not isinstance(own, dict) or own.get("format") != STATE_FORMAT:
            found = own.get("format") if isinstance(own, dict) else type(own).__name__
            raise ArtifactError(f"the program state's {STATE_KEY!r} section has format {found!r}, expected "
                                f"{STATE_FORMAT!r}; save it again with this ppoga-dspy version")
        try:
            thresholds = Thresholds.from_dict(own.get("thresholds"))
            stages = StageMode(own.get("stages") or StageMode.PAPER)
        except ValueError as exc:
            raise ArtifactError(f"the program state's thresholds or stage mode are invalid: {exc}") from exc
        pool = DemoPool.from_dict(own["knn"]) if own.get("knn") else None
        super().load_state(predictors, allow_unsafe_lm_state=allow_unsafe_lm_state)
        if pool is not None:
            install_pool(self, pool)
        else:
            uninstall_pool(self)
        self.thresholds, self.stages = thresholds, stages
        return self

    def _fields_by_name(self, name: str, saved: Any) -> Any:
        """A predictor's saved state with its signature's fields matched to this program's by name (their prefix).

        DSPy loads a signature's fields by position, inputs first: a field added to a signature since the state was
        saved (the fused calls' `candidates` input) would shift every later field onto its neighbour's description.
        A state with as many fields as the signature loads as DSPy loads it."""
        predictor = dict(self.named_predictors()).get(name)
        fields = (saved.get("signature") or {}).get("fields") if isinstance(saved, dict) else None
        if predictor is None or not isinstance(fields, list) or len(fields) == len(predictor.signature.fields):
            return saved
        by_prefix = {f.get("prefix"): f for f in fields if isinstance(f, dict)}
        aligned = [by_prefix.get(info.json_schema_extra["prefix"]) or {
            "prefix": info.json_schema_extra["prefix"], "description": info.json_schema_extra["desc"]}
            for info in predictor.signature.fields.values()]
        return {**saved, "signature": {**saved["signature"], "fields": aligned}}

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (`save(..., save_program=True)`, `dspy.load`) without the KG connection and the role LMs: both
        are bound at run time (`with_kg`, `role_lms`), as an artifact never bakes them in either."""
        return {**super().__getstate__(), "kg": None, "role_lms": {}}

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
        if failure is None and run.tools.all_failed():  # fallbacks over a graph that answered nothing: not "ok"
            answers, answer_ids, reasoning, failure = [], [], "", run.tools.all_failed()
        if failure is None and run.no_usable_reply():  # fallbacks where the LM gave nothing usable: not "ok"
            answers, answer_ids, reasoning, failure = [], [], "", run.no_usable_reply()
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
            unusable_replies=run.unusable_replies,
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
            log.error("PPoGA failed on %r: %s: %s", question, type(exc).__name__, exc,
                      exc_info=log.isEnabledFor(logging.DEBUG))  # the traceback with --debug only
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
        memory.strategic.plan = self.planner.make_plan(run, question, [t.label for t in topics],
                                                       menus=lambda: self._topic_menus(run, question, topics))
        loop = StepLoop(self.planner, self.executor, run, question, topics)
        walk = loop.go()
        return self._answer(run, question, walk.frontier, loop.written)

    def _topic_menus(self, run: QuestionRun, question: str, topics: list[Entity]) -> Menus:
        """`--stages fused`: the first step's relation menus, for the plan call to choose from (its objective is not
        written yet, so they are ranked by the question; the step checks the choice against its own menus)."""
        return Menus(tuple(self.executor.menus_ahead(run, question=question, objective="", frontier=topics,
                                                     chains={t.id: [] for t in topics}, step=0)))

    def _answer(
        self, run: QuestionRun, question: str, frontier: list[Entity], prewritten: tuple[list[str], str] | None = None
    ) -> tuple[list[str], list[str | None], str]:
        knowledge = run.memory.knowledge
        written = prewritten  # fused mode: written by the evaluation that finished (already grounded)
        if written is None:
            context = answer_context(run) if self.thresholds.answer_reads_plan else []
            evidence = context + knowledge.evidence(self.thresholds.evidence_tokens)
            written = self.planner.write_answer(run, question, evidence)
        if written is None or not written[0]:
            fallback = [e.label for e in frontier if e.id not in {t.id for t in run.memory.strategic.topic_entities}]
            run.note("answer.fallback", answers=fallback)
            return fallback, [e.id for e in frontier if e.label in fallback], "fallback: the last step's entities"
        answers, reasoning = written
        if (self.thresholds.answer_at_walk_end and not _picked_from_memory(run)
                and (redirected := _past_the_stops(run, answers, frontier))):
            run.note("answer.walk_end", answers=answers, applied=redirected)
            answers = redirected
        # an answer naming a graph entity reads as the graph names it ("Leolo" is the film "Léolo"): the scores and
        # the user see the entity, not the model's spelling of it; two spellings of one entity answer it once
        linked = [_answer_entity(knowledge.entities.values(), a) for a in answers]
        named = list(dict.fromkeys((e.label, e.id) if e else (a, None) for a, e in zip(answers, linked, strict=True)))
        return [a for a, _ in named], [i for _, i in named], reasoning

    def with_kg(self, kg: KnowledgeGraph) -> PPoGA:
        """A copy of this (compiled) program that runs on another KG."""
        clone = self.deepcopy()
        clone.kg = kg
        return clone


def _past_the_stops(run: QuestionRun, answers: list[str], frontier: list[Entity]) -> list[str] | None:
    """The answers without the stops on the way, or None when none was named.

    A stop is the question's topic entity or an entity the walk reached and moved on from: an earlier step's (kept
    or not, as Answer reads both in the facts) or what the last graph step explored from and did not also reach
    (`_arrivals`: a country the club leads back to is where the walk ended). The plan's own walk says
    the answer lies past it, when the plan speaks of this graph (`_plan_names_this_graph`); else only the topics are
    stops. Answers naming stops are dropped; when every answer names one, the last step's
    entities (less the topics) answer instead. None also when the walk ended nowhere new.
    """
    topics = {normalize_name(t.label) for t in run.memory.strategic.topic_entities} - {""}
    ends = [e.label for e in frontier if normalize_name(e.label) not in topics]
    if not ends or not answers:
        return None
    walked = _walked(run.memory.history)
    arrived = {normalize_name(name) for name in ends}  # where the walk ended: the last graph step's entities
    if walked:
        arrived |= {normalize_name(x.label) for x in _arrivals(walked[-1])}
    earlier = {normalize_name(e.label) for cycle in walked for e in cycle.frontier} | {
        normalize_name(x.label) for cycle in walked for t in cycle.triples for x in (t.head, t.tail)}
    passed = earlier - arrived - {""}  # names compared as `same_name` does: an empty name matches none
    if (passed - topics) & {normalize_name(a) for a in answers} and not _plan_names_this_graph(run, walked):
        run.note("answer.walk_end.unnamed", answers=answers)  # the plan does not say the walk went far enough
        passed = set()
    stops = topics | passed
    kept = [a for a in answers if normalize_name(a) not in stops]
    if len(kept) == len(answers):
        return None
    return kept or ends


def _plan_names_this_graph(run: QuestionRun, walked: list[StepCycle]) -> bool:
    """Whether a step of the walk names a relation that an entity it set out from has, either way (`named_on`).

    Only such a plan says how far the walk must go, so only then does `_past_the_stops` overrule Answer for an
    entity the walk passed (a topic is never an answer, whatever the plan). A plan
    copied from another graph's demos ("follow relation film.film.directed_by" for a footballer) has a film
    question's length, not this question's: its last step may walk past the answer (from the player's country on
    to its other players), and Answer's own reading of the facts stands. Costs KG relation lists (memoised per
    question), never an LM call. A walk with no graph step names nothing and claims nothing: True."""
    if not walked:
        return True
    entities = run.memory.knowledge.entities
    return any(named_from(run, [entities[i] for i in dict.fromkeys(path[0] for path in cycle.paths) if i in entities],
                          cycle.objective) for cycle in walked)


def _arrivals(cycle: StepCycle) -> list[Entity]:
    """The entities a graph step reached: the far end of each fact from the entity it was followed from, and any end
    of a fact that is not where the step set out (a mediator's read-through). An entity the step set out from
    counts when another of its entities reaches it (the club's country, reached from the club, is where the walk
    arrived even though it was also a stop): the step did not move on from it."""
    sources, followed = {path[0] for path in cycle.paths}, set(cycle.paths)
    reached: list[Entity] = []
    for t in cycle.triples:
        reached += [x for x in (t.head, t.tail) if x.id not in sources]
        if (t.head.id, t.relation, Direction.OUT.value) in followed and t.tail.id != t.head.id:
            reached.append(t.tail)
        if (t.tail.id, t.relation, Direction.IN.value) in followed and t.tail.id != t.head.id:
            reached.append(t.head)
    return reached


def _picked_from_memory(run: QuestionRun) -> bool:
    """Whether the walk ended on a memory step (compare, count, pick): its answer is what it picked from what is
    known, a topic entity included ("which of A and B is older"), not a stop on the way."""
    plan, history = run.memory.strategic.plan, run.memory.history
    if not history or not 0 <= history[-1].index < len(plan):
        return False
    return plan[history[-1].index].action == StepAction.MEMORY


def _walked(history: list[StepCycle]) -> list[StepCycle]:
    """The cycles of the current plan that kept what they reached, the last one a graph step (it has facts)."""
    walked: list[StepCycle] = []
    for cycle in history:
        if cycle.decision == Decision.REPLAN:
            walked = []  # a new plan walks again from the topics
        elif cycle.decision in (Decision.PROCEED, Decision.FINISH):
            walked.append(cycle)
    while walked and not walked[-1].triples:  # a memory step reads what is known: it reached nothing itself
        walked.pop()
    return walked


def _answer_entity(entities, answer: str) -> Entity | None:
    """The graph entity an answer names; never a mediator (a CVT is a node of an n-ary fact, not an answer)."""
    for entity in entities:
        if not entity.is_mediator and same_name(entity.label, answer):
            return entity
    return None


def _answer_chains(memory: Memory, answer_ids: list[str | None]) -> list[list[Triple]]:
    wanted = {a for a in answer_ids if a}
    chains = [c for c in memory.knowledge.reasoning_chains if c and {c[-1].head.id, c[-1].tail.id} & wanted]
    return chains or memory.knowledge.reasoning_chains[-3:]
