"""The scripted noisy planner (`--lm oracle/noisy:P`): the gold path followed with seeded mistakes at rate P.

The perfect planner never errs, so it cannot show what path and plan correction recover; this one
errs per decision and judges observations honestly, seeded per question and decision so that threads
and ablation switches do not change which mistakes a question gets.
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
from collections import Counter
from typing import Any

from ppoga_dspy.scripted import fused_handlers as fused
from ppoga_dspy.scripted import texts
from ppoga_dspy.scripted.engine import Handler, ScriptedEngine, scripted_lm
from ppoga_dspy.scripted.gold_path import FOLLOW, REVERSE, golds_from_examples, label_of, plan_steps, walk_directions

_HOP = re.compile(r"\(hop (\d+)\)")
_SELECTED = re.compile(r"^\s*selected\b[^:]*:\s*(.*)$", re.I | re.M)
_EMPTY = ("Nothing was found", "No entity")


def _names(text: str) -> set[str]:
    return {part.strip().casefold() for part in text.split(";") if part.strip()}


def _selected(observation: str) -> set[str] | None:
    """Names on the observation's `Selected: a; b` line (None when it has none)."""
    found = _SELECTED.findall(observation)
    return set().union(*(_names(line) for line in found)) if found else None


def _mentions(text: str, names: set[str]) -> bool:
    """Whether `text` names one of `names` as a whole triple element (not as part of a longer name)."""
    folded = text.casefold()
    return any(re.search(rf"(?:^|[(,;\[:]\s*){re.escape(n)}\s*(?:[),;\]]|$)", folded, re.M) for n in names if n)


class NoisyPlanner:
    """Handlers of an honest planner that knows the gold path and still makes mistakes, at rate `p`.

    Each *decision* errs with probability `p`: a relation choice picks another candidate, an entity
    choice picks a candidate off the gold path. Judging an observation (Think, Evaluate) looks at it as
    a careful model would: it sees whether the step's selected entities are the gold path's entities
    at that hop, and is itself wrong with probability `p / 3`. Off the path, it asks for path
    correction when the step it started from was on the path (a retry can help), and for plan
    correction when the step started off the path (an earlier step was wrong, a retry of this one
    cannot help) or when this step has failed three times under the current plan. Caps and ablation
    switches are the program's business (`PPoGA._enforce`): the planner asks the same whatever is on.

    Every draw is seeded by (seed, question, decision kind, hop, entity, how many times this
    question's run has faced that decision), never by global call order, so threads and ablation
    switches do not change which mistakes a question gets; a Decompose call starts a question's run
    afresh. Plans and answers are not noised: plans are the gold path with one step per semantic hop
    ("follow relation r (hop i)", through a mediator "... and read through to r2 (hop i+1)"), and
    Answer names the gold answers when the evidence holds the last gold fact, else the last fact's
    tail (what a model reading a wrong chain would answer).
    `stats` counts decisions and the errors drawn, per kind.
    """

    def __init__(self, golds: dict[str, dict[str, Any]], p: float, *, seed: int = 0, kg: Any = None) -> None:
        self.golds = golds
        self.kg = kg
        self._sets: dict[str, list[set[str]]] = {}
        self.p = float(p)
        self.seed = int(seed)
        self.stats: Counter[str] = Counter()
        self._seen: dict[str, Counter[tuple]] = {}
        self._failures: dict[str, Counter[int]] = {}
        self._lock = threading.Lock()

    # -- seeded draws ---------------------------------------------------------------------------

    def _rng(self, question: str, kind: str, hop: int | None, extra: str = "", *,
             counted_as: str | None = None, peek: bool = False) -> random.Random:
        """The draw for the n-th time this question's run faces this decision (`counted_as` keeps a
        separate count under the same seed: Think and Evaluate judge one observation alike); `peek`
        gives the next draw without facing the decision (the next call without it gives the same)."""
        with self._lock:
            seen = self._seen.setdefault(question, Counter())
            key = (counted_as or kind, hop, extra)
            occurrence = seen[key]
            if not peek:
                seen[key] += 1
        text = "\x1f".join((str(self.seed), question, kind, str(hop), extra, str(occurrence)))
        return random.Random(int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big"))

    def _errs(self, rng: random.Random, rate: float, kind: str, *, counted: bool = True) -> bool:
        wrong = rng.random() < rate
        if counted:
            with self._lock:
                self.stats[kind] += 1
                self.stats[f"{kind}_wrong"] += int(wrong)
        return wrong

    # -- what the planner knows -----------------------------------------------------------------

    def gold(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return self.golds.get(str(inputs.get("question", "")).strip(),
                              {"relations": [], "entities": [], "answers": [], "hops": []})

    def hop(self, inputs: dict[str, Any]) -> int | None:
        """0-based index of the gold relation this step follows, from the step text."""
        step = str(inputs.get("step", ""))
        tagged = _HOP.search(step)
        relations = self.gold(inputs)["relations"]
        if tagged and 1 <= int(tagged.group(1)) <= len(relations):
            return int(tagged.group(1)) - 1
        wanted = FOLLOW.search(step)
        if wanted and wanted.group(1) in relations:
            return relations.index(wanted.group(1))
        return None

    def first_hop(self, inputs: dict[str, Any]) -> int | None:
        """0-based index of the step's first gold relation (before `hop` when the step reads through a mediator)."""
        hop = self.hop(inputs)
        wanted = FOLLOW.search(str(inputs.get("step", "")))
        relations = self.gold(inputs)["relations"]
        if hop is None or not wanted:
            return hop
        earlier = [i for i in range(hop, -1, -1) if relations[i] == wanted.group(1)]
        return earlier[0] if earlier else hop

    def hop_names(self, gold: dict[str, Any], hop: int | None) -> set[str]:
        """Names (case-folded) of the entities that are right after `hop`: from the graph when there is one."""
        sets = self._path_sets(gold)
        if sets and hop is not None and hop < len(sets) and sets[hop]:
            return sets[hop]
        hops = gold.get("hops") or []
        if hop is not None and hop < len(hops):
            return {n.casefold() for n in hops[hop]}
        return {n.casefold() for n in gold["entities"]}

    def _path_sets(self, gold: dict[str, Any]) -> list[set[str]]:
        """Per hop, every entity reached from the topic by the gold relations that still leads to a gold answer.

        A question like "name a club that has a player from England" has many right players at hop 1,
        not only the one its gold path names; a careful model accepts any of them, and so does this
        judge. Needs the KG (else []); one branch only (conjunctions fall back to the path text).
        """
        relations = gold["relations"]
        if self.kg is None or not relations or gold.get("branches", 1) != 1 or not gold.get("topics"):
            return []
        key = "\x1f".join(gold["topics"] + relations)
        with self._lock:
            if key in self._sets:
                return self._sets[key]
        from ppoga_dspy.kg.base import KGError

        answers = {a.casefold() for a in gold["answers"]}
        layers: list[dict[str, tuple[str, set[str]]]] = []  # hop -> entity id -> (label, successor ids)
        frontier = {t: t for t in gold["topics"]}
        try:
            for relation in relations:
                layer: dict[str, tuple[str, set[str]]] = {}
                name, directions = walk_directions(relation)
                for direction in directions:
                    for source in list(frontier)[:2000]:
                        for entity in self.kg.neighbors(source, name, direction, 10_000):
                            layer.setdefault(entity.id, (entity.label, set()))[1].add(source)
                    if layer:
                        break
                layers.append(layer)
                frontier = {e: label for e, (label, _) in layer.items()}
        except KGError:
            return []
        right: list[set[str]] = [set() for _ in relations]
        right[-1] = {e for e, (label, _) in layers[-1].items() if {e.casefold(), label.casefold()} & answers}
        for hop in range(len(relations) - 1, 0, -1):
            right[hop - 1] = {src for e in right[hop] for src in layers[hop][e][1]}
        sets = [{n.casefold() for e in ids for n in (e, layers[hop][e][0])} for hop, ids in enumerate(right)]
        with self._lock:
            self._sets[key] = sets
        return sets

    # -- handlers -------------------------------------------------------------------------------

    def decompose(self, inputs: dict[str, Any]) -> dict[str, Any]:
        question = str(inputs.get("question", "")).strip()
        replanning = "new_steps" in inputs.get("_outputs", [])
        with self._lock:
            if not replanning:  # a new run of this question: its decisions are faced afresh
                self._seen.pop(question, None)
            self._failures.pop(question, None)
        steps = plan_steps(self.gold(inputs), tagged=True)
        return {"new_steps" if replanning else "steps": steps}

    def relation_choice(self, inputs: dict[str, Any], peek: bool = False) -> tuple[list[str], bool]:
        """The relation chosen for one entity's menu, and whether the choice read the menu's order (a wrong pick
        among the others, or the oracle's fallback); `peek` draws without facing the decision (nothing counted)."""
        gold = self.gold(inputs)
        hop = self.first_hop(inputs)
        candidates = [str(c) for c in inputs.get("candidates") or []]
        relation = gold["relations"][hop] if hop is not None else None
        wanted = relation if relation in candidates else f"{relation} (reverse)"
        if relation is None or wanted not in candidates:  # nothing right to choose: pick as the oracle does
            on_path = [c for c in candidates if c in gold["relations"]]
            return on_path[:1] or candidates[:1], len(on_path) != 1
        others = [c for c in candidates if c != wanted]
        rng = self._rng(str(inputs.get("question", "")).strip(), "relation", hop, str(inputs.get("entity", "")),
                        peek=peek)
        if others and self._errs(rng, self.p, "relation", counted=not peek):
            return [rng.choice(others)], True
        return [wanted], False

    def select_relations(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {"relations": self.relation_choice(inputs)[0]}

    def select_entities(self, inputs: dict[str, Any]) -> dict[str, Any]:
        gold = self.gold(inputs)
        hop = self.hop(inputs)
        lines = [str(line) for line in inputs.get("candidates") or []]
        labels = [label_of(line) for line in lines]
        names = self.hop_names(gold, hop)
        right = [label for label in labels if label.casefold() in names]
        if not right:
            everywhere = {n.casefold() for n in gold["entities"]}
            right = [label for label in labels if label.casefold() in everywhere]
        wrong = [label for label in labels if label not in right]
        if right and wrong:
            rng = self._rng(str(inputs.get("question", "")).strip(), "entity", hop)
            if self._errs(rng, self.p, "entity"):  # the rationale says what the planner believed of its pick
                chosen = [rng.choice(wrong)]
                return {"entities": chosen, "rationale": texts.rationale(inputs, chosen)}
        chosen = right or labels[:1]
        return {"entities": chosen, "rationale": texts.rationale(inputs, chosen)}

    def judge(self, inputs: dict[str, Any], stage: str) -> tuple[str, str]:
        """(verdict, why): verdict "on_path", "retry" (this step went wrong) or "replan" (an earlier one did)."""
        question = str(inputs.get("question", "")).strip()
        gold = self.gold(inputs)
        hop = self.hop(inputs)
        observation = str(inputs.get("observation", ""))
        names = self.hop_names(gold, hop)
        selected = _selected(observation)
        if selected is None:
            on_path = not observation.startswith(_EMPTY) and _mentions(observation, names)
        else:
            on_path = bool(selected & names)
        rng = self._rng(question, "judge", hop, counted_as=f"judge.{stage}")
        if self._errs(rng, self.p / 3, f"judge.{stage}"):
            on_path = not on_path
        if on_path:
            return "on_path", "the step reached the entity it asks for"
        first = self.first_hop(inputs)
        started_on_path = (
            first in (None, 0) or observation.startswith(_EMPTY)
            or _mentions(observation, self.hop_names(gold, first - 1))
        )
        if not started_on_path:
            return "replan", "the step started from entities off the path: an earlier step went wrong"
        return "retry", "the step did not reach the entity it asks for"

    def think(self, inputs: dict[str, Any]) -> dict[str, Any]:
        verdict, _ = self.judge(inputs, "think")
        # both names of Think's output field (`reflection`, renamed `thought` on method-core): only the
        # signature's own fields are written into the reply. The text says what the planner believes,
        # right or (at rate p / 3) wrong.
        met = verdict == "on_path"
        text = texts.thought(inputs, met=met, off_path=verdict == "replan")
        return {"reflection": text, "thought": text, "missing": texts.missing(inputs, met=met)}

    def evaluate(self, inputs: dict[str, Any]) -> dict[str, Any]:
        verdict, _ = self.judge(inputs, "evaluate")
        hop = self.hop(inputs)
        if verdict == "on_path":
            last = hop is not None and hop == len(self.gold(inputs)["relations"]) - 1
            decision = "finish" if last else "proceed"
            return {"decision": decision, "reason": texts.reason(inputs, decision)}
        question = str(inputs.get("question", "")).strip()
        with self._lock:
            failures = self._failures.setdefault(question, Counter())
            failures[hop if hop is not None else -1] += 1
            repeated = failures[hop if hop is not None else -1] >= 3
        if verdict == "replan" or repeated:
            why = "off_path" if verdict == "replan" else "keeps_failing"
            return {"decision": "replan", "reason": texts.reason(inputs, "replan", why=why)}
        return {"decision": "correct_path", "reason": texts.reason(inputs, "correct_path", why="not_asked")}

    def found(self, inputs: dict[str, Any], evidence: list[str]) -> list[str]:
        """The gold answers the evidence names in a fact of the last gold relation."""
        gold = self.gold(inputs)
        # the evidence writes facts as (subject, relation, object): a hop the gold path writes backwards
        # ("directed_by (reverse)") stands in them under its bare name
        last = gold["relations"][-1].removesuffix(REVERSE) if gold["relations"] else None
        facts = [line for line in evidence if last is None or last in line]
        return [a for a in gold["answers"] if any(_mentions(line, {a.casefold()}) for line in facts)]

    def answer(self, inputs: dict[str, Any]) -> dict[str, Any]:
        evidence = [str(e) for e in inputs.get("evidence") or []]
        found = self.found(inputs, evidence)
        if not found and evidence:
            found = [evidence[-1].rstrip(")").rsplit(", ", 1)[-1]]
        reasoning = texts.answer_reasoning(evidence, found, str(inputs.get("question", "")))
        return {"answers": found, "reasoning": reasoning}

    @staticmethod
    def predict(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"prediction": texts.prediction(str(inputs.get("step", "")))}

    def think_evaluate(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Think's and Evaluate's judgements, drawn exactly as the two separate calls draw them (one judge
        draw per observation, shared through `counted_as`, and the same stats); on proceeding the next step
        predicted and its relations chosen with the draws its SelectRelationPairs call would make (drawn only
        then: a retry or a replan faces that choice later, as in paper mode); on finishing, the answers the facts
        hold (none otherwise: the program then asks Answer)."""
        thought = self.think(inputs)
        judged = self.evaluate(inputs)
        decision = judged["decision"]
        finishing = decision == "finish" or (decision == "proceed" and not fused.next_step(inputs))
        proceeding = decision == "proceed"
        return {"thought": thought["thought"], "missing": thought["missing"], **judged,
                "next_prediction": fused.predicted_next(self.predict, inputs) if proceeding else "",
                "answers": self.found(inputs, fused.fact_lines(inputs)) if finishing else [],
                "next_relations": fused.next_pairs(self.select_relations, inputs) if proceeding else []}

    def handlers(self) -> dict[str, Handler]:
        return {
            "Decompose": self.decompose,
            "Replan": self.decompose,
            "PredictOutcome": self.predict,
            "Think": self.think,
            "Evaluate": self.evaluate,
            "Answer": self.answer,
            "SelectRelations": self.select_relations,
            "SelectEntities": self.select_entities,
            "DecomposePredict": fused.decompose_predicting(self.decompose, self.predict, self.relation_choice),
            "ThinkEvaluate": self.think_evaluate,
            "SelectRelationPairs": fused.pairs_by_entity(self.select_relations),
        }


def noisy_lm(examples: list, p: float, *, seed: int = 0, kg: Any = None, **kwargs: Any):
    """The noisy scripted planner for these examples (its `NoisyPlanner` is `lm.engine.planner`).

    With `kg`, it judges entities by whether they lead to a gold answer along the gold relations.
    """
    planner = NoisyPlanner(golds_from_examples(examples, kg=kg), p, seed=seed, kg=kg)
    engine = ScriptedEngine(planner.handlers())
    engine.planner = planner
    return scripted_lm(engine, f"oracle-noisy-{p:g}", **kwargs)
