"""The Executor: acts on the graph for one plan step and returns a structured observation.

Path exploration, as in the paper: from the frontier (topic entities, or what the last step found)
explore relations -> choose relations (model) -> explore entities -> prune by embedding similarity
when there are more candidates than `prune_threshold` -> choose entities (model, with a rationale).
Relations are ranked by embedding similarity before the model sees them and a choice is accepted
only when it names a real candidate; otherwise the best-ranked candidate is used, and the trace
records the fallback. Paths that failed earlier (path correction) are excluded, and so is the entity
a step came from (the way back leads on to siblings, never home).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import dspy

from ppoga_dspy.kg.base import Direction, Entity, KGError, KGUnavailableError, Relation, Triple
from ppoga_dspy.method import gating
from ppoga_dspy.method.choices import match_choices
from ppoga_dspy.method.memory import OBSERVATION_FACTS, CarriedRelations, grouped_facts, relation_key
from ppoga_dspy.method.named_relations import leading_on
from ppoga_dspy.method.pruning import EmbeddingRanker, Ranker, prune, rank, ranked
from ppoga_dspy.method.question_run import QuestionRun
from ppoga_dspy.method.relation_pairs import Menu, choose_pairs, open_menus, settled
from ppoga_dspy.method.vocabulary import Role, Stage
from ppoga_dspy.signatures import SelectEntities, SelectRelationPairs, SelectRelations
from ppoga_dspy.signatures.executor import ENTITY_LINE_MARK

#: The most neighbours one KG query returns (kg/graph.py's limit); `neighbor_limit` + 1 is asked to see a cut.
MAX_NEIGHBORS = 10_000


@dataclass
class Candidate:
    """An entity found in this step, with the fact that reached it and where it came from.

    `via` is set when the fact led to a mediator (CVT) node and the step read through it: `triple`
    reaches the mediator, `via` is the mediator's fact that reaches `entity`. One semantic hop
    (film -> performance -> actor) is then one step, and the mediator is never the frontier.
    """

    entity: Entity
    triple: Triple
    source: Entity
    via: Triple | None = None

    @property
    def triples(self) -> list[Triple]:
        """The facts from `source` to `entity`: one, or two through a mediator."""
        return [self.triple] if self.via is None else [self.triple, self.via]

    def line(self) -> str:
        """The candidate with the whole fact that reached it: the text pruning and gating rank."""
        through = f" -> {self.via.relation}" if self.via is not None else ""
        return f"{self.entity.describe()}{ENTITY_LINE_MARK}{self.triple.text()}{through}"

    def prompt_line(self) -> str:
        """The candidate as SelectEntities reads it: `entity  <- (source, relation)`, the entity not written twice.

        A wide step lists seventy candidates; writing each one's whole fact repeated its name. A relation
        followed from the other end is marked "(reverse)", as in SelectRelations' menu. A candidate read
        through a mediator keeps the whole fact (`line`): the mediator's own facts are what tells it apart.
        """
        if self.via is not None:
            return self.line()
        backwards = self.triple.tail.id == self.source.id and self.triple.head.id != self.source.id
        reverse = " (reverse)" if backwards else ""
        return f"{self.entity.describe()}{ENTITY_LINE_MARK}({self.source.describe()}, {self.triple.relation}{reverse})"


def read_through(candidate: Candidate) -> list[Candidate]:
    """A candidate, or for a mediator the entities beyond it, each with the two facts that reach it."""
    mediator = candidate.entity
    if not mediator.is_mediator:
        return [candidate]
    return [Candidate(inner, candidate.triple, candidate.source, Triple(mediator, relation, inner))
            for relation, inner in mediator.facts]


@dataclass
class Observation:
    """What one step's action found: the facts, the new frontier and the paths walked."""

    triples: list[Triple] = field(default_factory=list)
    frontier: list[Entity] = field(default_factory=list)
    chains: dict[str, list[Triple]] = field(default_factory=dict)  # frontier entity id -> chain from a topic
    paths: list[tuple[str, str, str]] = field(default_factory=list)  # (entity id, relation id, direction)
    notes: list[str] = field(default_factory=list)
    rationale: str = ""  # why the Executor selected the frontier (the paper's "with a rationale")
    others: dict[str, list[Triple]] = field(default_factory=dict)  # unselected entity id -> its chain (backtracking)
    other_entities: list[Entity] = field(default_factory=list)
    chose: bool = False  # the frontier was chosen among more candidates than it keeps (an entity choice was made)
    mismatch: bool = False  # it followed none of the relations its step names (method/cycle.py `check_named`)
    reached: dict[tuple[str, str, str], int] = field(default_factory=dict)  # path -> entities it reached

    def failed_parts(self, earlier_choices: bool) -> tuple[list[tuple[str, str, str]], list[str]]:
        """What path correction records when this step failed: the paths to avoid and the entities judged wrong.

        Only what failed is banned. When an entity choice was made, the choice is what failed: its entities are
        banned and the relation stays open, so a retry may take it to other entities (unless an entity choice
        of this step failed before: then the relation goes too). A branch that reached something is not banned
        for a sibling branch that reached nothing (an intersect's branches are judged apart); when every path
        reached something and no choice was made, the paths themselves failed."""
        if self.chose and not earlier_choices and not self.mismatch:  # a mismatch: the relation itself failed
            return [], [e.id for e in self.frontier]
        empty = [p for p in self.paths if not self.reached.get(p)]
        return (empty or list(self.paths)), []

    @property
    def empty(self) -> bool:
        return not self.frontier

    def text(self, limit: int = OBSERVATION_FACTS) -> str:
        lines = grouped_facts(self.triples[:limit])
        if len(self.triples) > limit:
            lines.append(f"... and {len(self.triples) - limit} more facts")
        if self.frontier:
            lines.append("Selected: " + "; ".join(e.describe() for e in self.frontier))
        if self.chose and self.rationale:  # the entity choice's reason, for Think and Evaluate to judge
            lines.append(f"Why these: {self.rationale}")
        lines.extend(self.notes)
        return "\n".join(lines) if lines else "Nothing was found on the graph for this step."


class Executor(dspy.Module):
    """Holds the Executor's two predictors; `explore` runs one step's action for one question."""

    def __init__(self, ranker: Ranker | None = None) -> None:
        super().__init__()
        self.select_relations = dspy.Predict(SelectRelations)
        self.select_entities = dspy.Predict(SelectEntities)
        self.select_relation_pairs = dspy.Predict(SelectRelationPairs)  # `--stages fused`
        self.ranker: Ranker = ranker or EmbeddingRanker()

    def __deepcopy__(self, memo: dict) -> Executor:
        # Optimizers deep-copy programs; the embedding model is shared, the predictors are copied.
        import copy

        clone = Executor.__new__(Executor)
        for key, value in self.__dict__.items():
            clone.__dict__[key] = value if key == "ranker" else copy.deepcopy(value, memo)
        return clone

    def forward(self, **kwargs):  # pragma: no cover - the program calls explore()
        raise NotImplementedError("Executor is driven by PPoGA through explore()")

    def explore(
        self,
        run: QuestionRun,
        *,
        question: str,
        objective: str,
        frontier: list[Entity],
        chains: dict[str, list[Triple]],
        step: int = 0,
        intersect: bool = False,
        within: set[str] | None = None,
        carried: CarriedRelations | None = None,
    ) -> Observation:
        """One step's action; `step` keys the failed paths this try must avoid (path correction).

        `intersect` (a conjunction step) keeps only the entities reached from every frontier entity that
        reached any, and, with `within`, only those among `within` (the current frontier's ids). `carried`
        (fused stages) is the relation choice made ahead by the call before, used where it holds.
        """
        query = f"{question} {objective}"  # ranking reads the objective alone; the model also reads what to avoid
        avoid = run.memory.knowledge.avoid_text(step)
        objective = f"{objective}{gating.AVOID_NOTE}{avoid})" if avoid else objective
        observation = Observation()
        candidates = self._gather(run, question, objective, frontier, query, observation, step, chains,
                                  prune=not intersect, carried=carried)
        if intersect and candidates:  # prune after intersecting: a constraint must not lose what pruning cut
            candidates = self._prune(_intersection(run, candidates, within, observation), query,
                                     run.thresholds.prune_threshold)
        banned = run.memory.knowledge.failed_entities.get(step, set())
        if banned and (kept := [c for c in candidates if c.entity.id not in banned]) != candidates:
            run.note("path_correction.excluded_entities", step=step, excluded=len(candidates) - len(kept))
            candidates = kept
        if not candidates:  # said first, whatever notes explain it: a reader must see the step found nothing
            if not any(note.startswith("No entity") for note in observation.notes):
                observation.notes.insert(0, "No entity was reached from the frontier in this step.")
            return observation
        if intersect:
            selected = candidates  # every branch's fact about each entity kept (the frontier holds each once)
            found = len({c.entity.id for c in candidates})
            observation.rationale = f"the {found} entities that satisfy every constraint (intersection)"
        else:
            selected = self._choose_entities(run, question, objective, candidates, query, observation)
        self._record(run, observation, candidates, selected, chains, query, intersect=intersect)
        return observation

    def _gather(
        self, run: QuestionRun, question: str, objective: str, frontier: list[Entity], query: str,
        observation: Observation, step: int, chains: dict[str, list[Triple]], *, prune: bool = True,
        carried: CarriedRelations | None = None,
    ) -> list[Candidate]:
        """Explore relations, let the model choose, fetch the entities they reach, prune each (entity, relation) group.

        Pruning is per group, as the paper states it: a relation with more than `prune_threshold` candidates
        keeps its most similar ones, and never crowds out a small group of another relation.
        """
        menus = leading_on(run, self._menus(run, frontier, chains, query, observation, step), objective)
        if run.fused:  # one SelectRelationPairs call for every entity the rules leave open (none when carried)
            pairs = choose_pairs(run, self.select_relation_pairs, question=question, objective=objective, menus=menus,
                                 carried=carried)
        else:  # one SelectRelations call per entity, as the paper asks
            pairs = [(menu.entity, relation) for menu in menus
                     for relation in self._choose_relations(run, question, objective, menu)]
        candidates: list[Candidate] = []
        for entity, relation in pairs:
            group = self._follow(run, entity, relation, observation, came_from(entity, chains.get(entity.id)))
            candidates.extend(self._pruned(run, entity, relation, group, query, prune))
        return candidates

    def _menus(self, run: QuestionRun, frontier: list[Entity], chains: dict[str, list[Triple]], query: str,
               observation: Observation, step: int) -> list[Menu]:
        """The relation menu of each frontier entity (within `frontier_limit`) that has relations left."""
        menus = []
        for entity in frontier[: run.thresholds.frontier_limit]:
            arrived_by = (chains.get(entity.id) or [None])[-1]
            menu = self.relation_menu(run, entity, query, step=step, arrived_by=arrived_by, observation=observation)
            if menu is not None:
                menus.append(menu)
        return menus

    def menus_ahead(self, run: QuestionRun, *, question: str, objective: str, frontier: list[Entity],
                    chains: dict[str, list[Triple]], step: int) -> list[Menu]:
        """`--stages fused`: the menus step `step` would put to SelectRelationPairs from `frontier`, built one call
        early so that the call before it can choose there (relation_pairs.py). The same menu code, ranking and
        width as `explore`; its KG queries are made and counted (again when the step runs), its notes are not
        written (the step writes its own). An empty `objective` (the plan is not written yet) ranks by the
        question alone."""
        query = f"{question} {objective}" if objective else question
        with run.muted():
            menus = self._menus(run, frontier, chains, query, Observation(), step)
            menus = open_menus(run, leading_on(run, menus, objective), objective)
        run.note("relations.ahead", step=step, entities=[m.entity.id for m in menus],
                 candidates=sum(len(m.shown) for m in menus))
        return menus

    def _pruned(self, run: QuestionRun, entity: Entity, relation: Relation, group: list[Candidate], query: str,
                prune: bool) -> list[Candidate]:
        """One (entity, relation) group after pruning; the trace records its size before and after and what is kept
        (a traced fact for the measurement of each cut, evaluation/instruments.py)."""
        kept = self._prune(group, query, run.thresholds.prune_threshold) if prune else group
        run.note("entities.pruned", entity=entity.id, relation=relation_key(relation), before=len(group),
                 after=len(kept), kept=[c.entity.id for c in kept])
        return kept

    def _follow(
        self, run: QuestionRun, entity: Entity, relation: Relation, observation: Observation,
        home: Home | None = None,
    ) -> list[Candidate]:
        """The entities one (entity, relation, direction) reaches; a failed query is a note, not a crash.

        `home` holds where the step came from (see `came_from`): what it reaches back over the fact the step came
        by is never a candidate, so the relation a step arrived by leads on to the siblings ("who starred with
        X": X -> film -> co-actors), not back home. The entity itself is never its own candidate either."""
        path = (entity.id, relation.id, relation.direction.value)
        observation.paths.append(path)
        run.memory.knowledge.mark_explored(entity.id, relation)
        limit = run.thresholds.neighbor_limit
        try:
            found = run.tools.neighbors(entity.id, relation.id, relation.direction, min(limit + 1, MAX_NEIGHBORS))
            if len(found) > limit or len(found) >= MAX_NEIGHBORS:  # a cut remains: count the whole group, say so
                limit = min(limit, len(found))
                found = found[:limit]
                total = run.tools.count_neighbors(entity.id, relation.id, relation.direction)
                run.note("neighbors.cut", entity=entity.id, relation=relation_key(relation), ranked=limit,
                         of=total if total is not None else f"more than {limit}")
                observation.notes.append(f"{entity.label} -{relation_key(relation)}: only {limit} of "
                                         f"{total or 'more'} entities reached were ranked (neighbor_limit)")
        except KGUnavailableError:
            raise
        except KGError as exc:
            observation.notes.append(f"Query failed for {entity.label} -{relation.id}: {exc}")
            return []
        out = relation.direction is Direction.OUT
        reached = [Candidate(other, Triple(entity, relation.id, other) if out else Triple(other, relation.id, entity),
                             entity) for other in found]
        through = [beyond for candidate in reached for beyond in read_through(candidate)]
        if len(through) != len(reached) or any(c.via for c in through):
            run.note("mediators.read_through", entity=entity.id, relation=relation.id,
                     mediators=sum(c.entity.is_mediator for c in reached), reached=len(through))
        home = home or Home()
        away = [c for c in through if c.entity.id != entity.id and not home.leads_back(c)]
        if len(away) < len(through):
            run.note("way_back.home", entity=entity.id, relation=relation_key(relation),
                     home=sorted(home.entities), dropped=len(through) - len(away))
        observation.reached[path] = len(away)
        return away

    def _record(
        self, run: QuestionRun, observation: Observation, candidates: list[Candidate], selected: list[Candidate],
        chains: dict[str, list[Triple]], query: str = "", *, intersect: bool = False,
    ) -> None:
        """The observation's facts (selected first), the new frontier and its chains, into knowledge memory.

        The candidates not selected are kept for backtracking ranked as pruning ranks them (by similarity to the
        question and step), so a resumed walk takes the next best, not the next in the graph's id order."""
        ordered = selected + [c for c in candidates if c not in selected]
        for candidate in ordered[: run.thresholds.evidence_limit]:
            observation.triples.extend(t for t in candidate.triples if t not in observation.triples)
        for candidate in selected:
            if candidate.entity.id not in {e.id for e in observation.frontier}:
                observation.frontier.append(candidate.entity)
                observation.chains[candidate.entity.id] = chains.get(candidate.source.id, []) + candidate.triples
                if intersect:  # a conjunction's result keeps the earlier branch's chain to it as well
                    chain = observation.chains[candidate.entity.id]
                    chain[:0] = [t for t in chains.get(candidate.entity.id, []) if t not in chain]
            else:  # reached again from another branch (a conjunction): its chain holds both branches' facts
                chain = observation.chains[candidate.entity.id]
                chain.extend(t for t in chains.get(candidate.source.id, []) + candidate.triples if t not in chain)
        chosen = {e.id for e in observation.frontier}
        unselected = [c for c in candidates if c.entity.id not in chosen]
        if len(unselected) > 1:
            unselected = [unselected[i] for i in rank(self.ranker, query, [c.line() for c in unselected])]
        for candidate in unselected:  # what a later step may backtrack to when its exploration finds nothing
            if candidate.entity.id not in observation.others:
                observation.other_entities.append(candidate.entity)
                observation.others[candidate.entity.id] = chains.get(candidate.source.id, []) + candidate.triples
        run.memory.knowledge.add_triples(observation.triples)

    def _candidate_relations(
        self, run: QuestionRun, entity: Entity, observation: Observation, step: int, arrived_by: Triple | None = None
    ) -> list[Relation]:
        """The entity's relations minus this step's failed paths and those that lead only home (Freebase's paired
        reverse predicates: `relations_back`); the arriving relation stays, as it leads on to siblings."""
        relations: list[Relation] = []
        for direction in (Direction.OUT, Direction.IN):
            try:
                relations.extend(run.tools.relations(entity.id, direction))
            except KGUnavailableError:
                raise
            except KGError as exc:
                observation.notes.append(f"Relations of {entity.label} could not be read: {exc}")
        knowledge = run.memory.knowledge
        origin = _origin(entity, arrived_by)
        if origin is not None and len(relations) > 1:
            try:
                paired = set(run.tools.relations_back(entity.id, origin.id))
            except KGUnavailableError:
                raise
            except KGError:
                paired = set()  # only a filter: without it the menu is PoG's
            if paired and len(paired) < len(relations):
                relations = [r for r in relations if r not in paired]
                run.note("way_back.excluded", entity=entity.id, origin=origin.id,
                         relations=sorted(relation_key(r) for r in paired))
            back = Relation(arrived_by.relation, Direction.IN if arrived_by.tail.id == entity.id else Direction.OUT)
            if back in relations and len(relations) > 1 and self._leads_only_home(run, entity, back):
                relations = [r for r in relations if r != back]
                run.note("way_back.dead_end", entity=entity.id, origin=origin.id, relation=relation_key(back))
        kept = [r for r in relations if not knowledge.is_failed(step, entity.id, r)]
        if len(kept) < len(relations):
            run.note("path_correction.excluded", entity=entity.id, excluded=len(relations) - len(kept))
        return kept

    @staticmethod
    def _leads_only_home(run: QuestionRun, entity: Entity, back: Relation) -> bool:
        """The relation the step arrived by reaches nothing but the entity it came from (a spouse's spouse, a
        child's one parent): offering it would only give the model a choice that can lead nowhere. It stays on
        the menu where it leads on to siblings (a film's other actors), and where the KG cannot count."""
        try:
            count = run.tools.count_neighbors(entity.id, back.id, back.direction)
        except KGUnavailableError:
            raise
        except KGError:
            return False
        return count is not None and count <= 1

    def relation_menu(
        self, run: QuestionRun, entity: Entity, query: str, *, step: int = 0, arrived_by: Triple | None = None,
        observation: Observation | None = None,
    ) -> Menu | None:
        """The relations the model is shown at `entity` in either stage mode (None: it has none): its relations
        less the way home and this step's failed paths, ranked by similarity to `query` (question + step), the
        best `relation_candidates` kept. One function, so what measures the menu's width
        (benchmarks/cut_sizes_bench.py) measures the menu the program shows."""
        relations = self._candidate_relations(run, entity, observation or Observation(), step, arrived_by)
        return self._menu(run, entity, relations, query) if relations else None

    def _choose_relations(self, run: QuestionRun, question: str, objective: str, menu: Menu) -> list[Relation]:
        th = run.thresholds
        entity, shown = menu.entity, menu.shown
        gated = settled(run, menu, Stage.SELECT_RELATIONS, objective)  # one candidate, a margin, or named
        if gated is not None:
            return gated
        shown_names = menu.keys
        prediction = run.call(
            Stage.SELECT_RELATIONS, Role.EXECUTOR, self.select_relations,
            question=question, step=objective, entity=entity.describe(), candidates=shown_names,
        )
        matched = match_choices(getattr(prediction, "relations", None), shown_names)
        chosen = [shown[i] for i in matched.indices][: th.relations_per_step]
        if matched.invalid or not chosen:
            run.note("select_relations.fallback", invalid=matched.invalid, used=shown_names[0] if not chosen else None)
        return chosen or shown[:1]

    def _menu(self, run: QuestionRun, entity: Entity, relations: list[Relation], query: str) -> Menu:
        """The entity's relations ranked by similarity to question + step, the best `relation_candidates` kept."""
        names = [relation_key(r) for r in relations]
        order, scores = ranked(self.ranker, query, names)
        keep = run.thresholds.relation_candidates
        if len(order) > keep:
            run.note("select_relations.ranked", entity=entity.id, shown=keep, of=len(relations))
        run.note("relations.menu", entity=entity.id, of=len(relations), shown=[names[i] for i in order[:keep]])
        return Menu(entity, [relations[i] for i in order[:keep]], scores[:keep])

    def _prune(self, candidates: list[Candidate], query: str, keep: int) -> list[Candidate]:
        if len(candidates) <= keep:
            return candidates
        kept = prune(self.ranker, query, [c.line() for c in candidates], keep)
        return [candidates[i] for i in kept]

    def _choose_entities(
        self, run: QuestionRun, question: str, objective: str, candidates: list[Candidate], query: str,
        observation: Observation,
    ) -> list[Candidate]:
        th = run.thresholds
        if len(candidates) <= th.entities_per_step:
            observation.rationale = f"all {len(candidates)} entities reached are kept (at most {th.entities_per_step})"
            return list(candidates)
        observation.chose = True
        lines = [c.line() for c in candidates]
        if th.gate_margin is not None:  # a decisive embedding ranking settles the choice without a call
            order, scores = ranked(self.ranker, query, lines)
            if gating.decisive(run, Stage.SELECT_ENTITIES, scores, lines[order[0]]):
                observation.rationale = "gated: the candidate most similar to the question and step, by a margin"
                return [candidates[order[0]]]
        shown = [c.prompt_line() for c in candidates]
        # the cap is said, not silent: a model that lists ten entities should know only the first few are kept
        prediction = run.call(
            Stage.SELECT_ENTITIES, Role.EXECUTOR, self.select_entities,
            question=question, step=f"{objective} (choose at most {th.entities_per_step})", candidates=shown,
        )
        matched = match_choices(
            getattr(prediction, "entities", None), shown, aliases=[c.entity.describe() for c in candidates]
        )
        chosen = [candidates[i] for i in matched.indices][: th.entities_per_step]
        observation.rationale = str(getattr(prediction, "rationale", "") or "")
        if matched.invalid or not chosen:
            run.note("select_entities.fallback", invalid=matched.invalid)
        if not chosen:
            order = rank(self.ranker, query, lines)
            chosen = [candidates[i] for i in order[: th.entities_per_step]]
            observation.rationale = "fallback: the candidates most similar to the question and step"
        return chosen


def _intersection(
    run: QuestionRun, candidates: list[Candidate], within: set[str] | None, observation: Observation
) -> list[Candidate]:
    """The candidates whose entity every source reached (and that lie `within`, when given): a conjunction."""
    reached: dict[str, set[str]] = {}
    for candidate in candidates:
        reached.setdefault(candidate.source.id, set()).add(candidate.entity.id)
    common = set.intersection(*reached.values())
    if within is not None:
        common &= within
    kept = [c for c in candidates if c.entity.id in common]
    run.note("intersect", sources=len(reached), reached=sum(map(len, reached.values())), kept=len(common))
    if not kept:
        observation.notes.append("No entity satisfies every constraint of this step (the intersection is empty).")
    return kept


def _origin(entity: Entity, arrived_by: Triple | None) -> Entity | None:
    """The node at the other end of the fact that reached `entity` (None at a topic, or for a literal)."""
    if arrived_by is None:
        return None
    if arrived_by.tail.id == entity.id:
        other = arrived_by.head
    elif arrived_by.head.id == entity.id:
        other = arrived_by.tail
    else:
        return None
    return None if other.literal else other


@dataclass(frozen=True)
class Home:
    """Where the step that reached an entity came from: the entities behind it and the facts it came by."""

    entities: frozenset[str] = frozenset()
    facts: frozenset[tuple[str, str, str]] = frozenset()

    def leads_back(self, candidate: Candidate) -> bool:
        """A candidate reached back over the very fact the step came by (not another fact to the same entity:
        PathQuestion's "the gender of the father of X's daughter" walks back to X over `parents`, a fact of its
        own, and that is the question's path)."""
        return candidate.entity.id in self.entities and _fact(candidate.triple) in self.facts


def _fact(triple: Triple) -> tuple[str, str, str]:
    return triple.head.id, triple.relation, triple.tail.id


def came_from(entity: Entity, chain: list[Triple] | None) -> Home:
    """Where the step that reached `entity` came from: the other end of its last fact, and when that is a
    mediator (CVT) read through, the entity before the mediator too, with those facts.

    PoG drops the relation a step arrived by. On Freebase that relation mostly leads home, but on most graphs
    it also leads to the siblings ("who starred with X" is X -> film -> the film's other actors, over the same
    relation twice), so the method drops the way home, not the relation."""
    if not chain:
        return Home()
    home: set[str] = set()
    facts: set[tuple[str, str, str]] = set()
    node = entity
    for triple in reversed(chain[-2:]):
        other = _origin(node, triple)
        if other is None:
            break
        home.add(other.id)
        facts.add(_fact(triple))
        if not other.is_mediator:
            break
        node = other
    return Home(frozenset(home), frozenset(facts))
