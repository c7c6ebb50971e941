"""A scripted DSPy engine: answers each request by *which signature* it is and *what inputs* it holds.

Tests and cost benchmarks need a model whose replies are known, but replies keyed by call order break
as soon as the program changes its order (a retry, an ablation). This engine parses the request the
way a model reads it: the output field names in the system message identify the signature, and the
`[[ ## field ## ]]` sections of the last user message give the inputs. A handler per signature then
returns the outputs (a dict, formatted the way the adapter expects) or a raw string (to test
malformed replies). Token counts are estimated (4 characters per token) so cost figures are real
numbers of the prompts the program builds.

Two scripted planners are built on it: `oracle/gold-path` (perfect: the cost floor of the method and
control-flow tests) and `oracle/noisy:P` (`NoisyPlanner`: the gold path followed with seeded mistakes
at rate P and judged honestly, the instrument that shows what path and plan correction recover).
`scripted_lm_for_spec(spec, examples, seed=)` builds either from its `--lm` spec.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from ppoga_dspy.errors import PPoGAError

Handler = Callable[[dict[str, Any]], "dict[str, Any] | str"]

_OUTPUTS = re.compile(r"Your output fields are:\n(.*?)(?:\n[A-Z]|\Z)", re.S)
_FIELD = re.compile(r"^\d+\. `(\w+)`", re.M)
_SECTION = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with|\Z)", re.S)

# Output field sets of the program's signatures -> the signature's name.
SIGNATURE_OUTPUTS: dict[frozenset[str], str] = {
    frozenset({"steps"}): "Decompose",
    frozenset({"prediction"}): "PredictOutcome",
    frozenset({"thought", "missing"}): "Think",
    frozenset({"decision", "reason"}): "Evaluate",
    frozenset({"new_steps"}): "Replan",
    frozenset({"answers", "reasoning"}): "Answer",
    frozenset({"relations"}): "SelectRelations",
    frozenset({"entities", "rationale"}): "SelectEntities",
    # `--stages fused`
    frozenset({"steps", "first_prediction"}): "DecomposePredict",
    frozenset({"thought", "missing", "decision", "reason", "next_prediction", "answers"}): "ThinkEvaluate",
    frozenset({"pairs"}): "SelectRelationPairs",
}


class ScriptError(PPoGAError):
    """The scripted engine got a request it has no handler for: add one, or pass `default=`."""


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") or "" for part in content)


def parse_request(system: str, user: str) -> tuple[list[str], dict[str, Any], bool]:
    """Output field names, input values (JSON decoded when they are JSON) and whether JSON is expected."""
    match = _OUTPUTS.search(system)
    outputs = _FIELD.findall(match.group(1)) if match else []
    inputs: dict[str, Any] = {}
    for name, raw in _SECTION.findall(user):
        value = raw.strip()
        try:
            inputs[name] = json.loads(value)
        except (json.JSONDecodeError, ValueError):
            inputs[name] = value
    wants_json = "Respond with a JSON object" in user
    return outputs, inputs, wants_json


def format_reply(outputs: dict[str, Any], order: list[str], wants_json: bool) -> str:
    if wants_json:
        return json.dumps({k: outputs[k] for k in order if k in outputs})
    parts = []
    for name in order:
        if name not in outputs:
            continue
        value = outputs[name]
        text = value if isinstance(value, str) else json.dumps(value)
        parts.append(f"[[ ## {name} ## ]]\n{text}")
    parts.append("[[ ## completed ## ]]")
    return "\n\n".join(parts)


class ScriptedEngine:
    """A DSPy engine (`complete(request) -> Response`) driven by per-signature handlers.

    `handlers` maps a signature name (see `SIGNATURE_OUTPUTS`, or any name you register with
    `register_outputs`) to a function of the inputs. `default` answers anything else (optimizers
    run their own signatures). `calls` counts requests per signature; `requests` keeps them.
    """

    supports_response_schema = False

    def __init__(self, handlers: dict[str, Handler] | None = None, *, default: Handler | None = None) -> None:
        self.handlers = dict(handlers or {})
        self.default = default
        self.signature_outputs = dict(SIGNATURE_OUTPUTS)
        self.calls: Counter[str] = Counter()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict) -> ScriptedEngine:
        return self

    def register_outputs(self, name: str, outputs: set[str]) -> None:
        self.signature_outputs[frozenset(outputs)] = name

    def answer(self, system: str, user: str, demos: int = 0) -> str:
        """The reply text; handlers see the inputs plus `_outputs`, `_signature` and `_demos` (demo turns)."""
        outputs, inputs, wants_json = parse_request(system, user)
        name = self.signature_outputs.get(frozenset(outputs), "+".join(outputs) or "?")
        with self._lock:
            self.calls[name] += 1
            self.requests.append((name, inputs))
        handler = self.handlers.get(name, self.default)
        if handler is None:
            raise ScriptError(f"no scripted handler for signature {name} (outputs {outputs})")
        reply = handler(dict(inputs, _outputs=outputs, _signature=name, _demos=demos))
        if isinstance(reply, str):
            return reply
        return format_reply(reply, outputs, wants_json)

    def complete(self, request):
        from dspy.lm15 import Message, Response, TextPart, Usage

        system = _text(request.system)
        users = [m for m in request.messages if m.role == "user"]
        user = users[-1].text if users else ""
        demos = sum(1 for m in request.messages if m.role == "assistant")
        reply = self.answer(system, user or "", demos)
        prompt_chars = len(system) + sum(len(m.text or "") for m in request.messages)
        usage = Usage(input_tokens=prompt_chars // 4, output_tokens=max(1, len(reply) // 4))
        usage = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                      total_tokens=usage.input_tokens + usage.output_tokens)
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(reply)]),
                        finish_reason="stop", usage=usage)

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


def scripted_lm(engine: ScriptedEngine, name: str = "scripted", **kwargs: Any):
    """A `dspy.LM` around a scripted engine, uncached so that every call reaches the script."""
    import dspy

    kwargs.setdefault("cache", False)
    kwargs.setdefault("temperature", 0.0)
    kwargs.setdefault("max_tokens", 1000)
    return dspy.LM(f"local/{name}", engine=engine, **kwargs)


# -- fused signatures (`--stages fused`): each handler makes exactly the separate calls' decisions ---


def fact_lines(inputs: dict[str, Any]) -> list[str]:
    """The facts a fused ThinkEvaluate call reads: the observation's, then memory's "Known:" section."""
    known = str(inputs.get("memory", "")).partition("\nKnown:\n")[2]
    return [line for line in (str(inputs.get("observation", "")) + "\n" + known).splitlines() if line.strip()]


def next_step(inputs: dict[str, Any]) -> str:
    """The next step's objective a fused call was given ('' after the last step)."""
    text = str(inputs.get("next_step", "") or "").strip()
    return "" if text.casefold() in ("none", "") else text


def decompose_predicting(decompose: Handler, predict: Handler) -> Handler:
    """DecomposePredict as the Decompose handler, then the PredictOutcome handler on the plan's first step."""

    def handler(inputs: dict[str, Any]) -> dict[str, Any]:
        steps = decompose(inputs)["steps"]
        first = predict({**inputs, "step": steps[0]["objective"]})["prediction"] if steps else ""
        return {"steps": steps, "first_prediction": first}

    return handler


def pairs_by_entity(select_relations: Handler) -> Handler:
    """SelectRelationPairs as one SelectRelations call per entity (same inputs, same draws), paired back."""

    def handler(inputs: dict[str, Any]) -> dict[str, Any]:
        menus: dict[str, list[str]] = {}
        for line in inputs.get("candidates") or []:
            entity, _, relation = str(line).rpartition(": ")
            menus.setdefault(entity, []).append(relation)
        pairs = []
        for entity, relations in menus.items():
            chosen = select_relations({**inputs, "entity": entity, "candidates": relations})["relations"]
            pairs.extend(f"{entity}: {relation}" for relation in chosen)
        return {"pairs": pairs}

    return handler


def _predicted(predict: Handler, inputs: dict[str, Any]) -> str:
    return predict({**inputs, "step": next_step(inputs)})["prediction"] if next_step(inputs) else ""


# -- a perfect planner that follows gold paths (cost floor of the method, control-flow tests) ------

_FOLLOW = re.compile(r"follow relation ([^\s]+)")


def _label_of(line: str) -> str:
    return line.split("  <- ", 1)[0].strip()


_THROUGH = re.compile(r"read through to ([^\s]+)")


def _through_wanted(step: str, lines: list[str]) -> list[str]:
    """The candidates a step that reads through a mediator asks for: those reached by its second relation."""
    wanted = _THROUGH.search(step)
    kept = [line for line in lines if wanted and line.endswith(f"-> {wanted.group(1)}")]
    return kept or lines


def plan_steps(gold: dict[str, Any], *, tagged: bool = False) -> list[dict[str, str]]:
    """The plan a gold-path planner writes: one step per semantic hop (see `semantic_steps`).

    A step through a mediator names both relations ("follow relation r1 and read through to r2");
    a conjunction of one-hop branches (WC-C) is one `intersect` step naming each branch's relation.
    `tagged` adds "(hop N)", N the 1-based index of the step's last relation.
    """
    relations = gold["relations"] or ["unknown"]
    branches = gold.get("paths") or []
    if len(branches) > 1 and all(len(branch) == 1 for branch in branches):  # a conjunction of one-hop branches
        text = "follow relation " + " and relation ".join(relations) + ", keep the entities reached by all"
        return [{"objective": text + (f" (hop {len(relations)})" if tagged else ""),
                 "expected_outcome": "the entities that satisfy every constraint", "action": "intersect"}]
    groups = gold.get("steps") or [[i] for i in range(len(relations))]
    steps = []
    for group in groups:
        names = [relations[i] for i in group]
        text = f"follow relation {names[0]}" + "".join(f" and read through to {r}" for r in names[1:])
        steps.append({"objective": text + (f" (hop {group[-1] + 1})" if tagged else ""),
                      "expected_outcome": "an entity"})
    return steps


def gold_path_handlers(golds: dict[str, dict[str, Any]]) -> dict[str, Handler]:
    """Handlers of a planner that knows each question's gold path and still reads the graph.

    `golds` maps question text -> {"relations": [r1, r2, ...], "entities": [names on the path, answer
    included], "answers": [...]}. Every reply is a function of the request's inputs: the plan names
    one relation per step ("follow relation r"), relation choice copies the step's relation when it
    is a candidate, entity choice keeps candidates on the gold path, and the answer names the gold
    answers that the evidence really contains (else the last fact's tail): it reaches the answer only
    if the program walks the graph correctly.
    """

    def gold(inputs: dict[str, Any]) -> dict[str, Any]:
        return golds.get(str(inputs.get("question", "")).strip(), {"relations": [], "entities": [], "answers": []})

    def decompose(inputs: dict[str, Any]) -> dict[str, Any]:
        steps = plan_steps(gold(inputs))
        return {"new_steps" if "new_steps" in inputs.get("_outputs", []) else "steps": steps}

    def select_relations(inputs: dict[str, Any]) -> dict[str, Any]:
        wanted = _FOLLOW.search(str(inputs.get("step", "")))
        candidates = list(inputs.get("candidates") or [])
        if wanted and wanted.group(1) in candidates:
            return {"relations": [wanted.group(1)]}
        on_path = [c for c in candidates if c in gold(inputs)["relations"]]  # another branch of the question
        return {"relations": on_path[:1] or candidates[:1]}

    def select_entities(inputs: dict[str, Any]) -> dict[str, Any]:
        names = {n.casefold() for n in gold(inputs)["entities"]}
        lines = _through_wanted(str(inputs.get("step", "")), list(inputs.get("candidates") or []))
        chosen = [_label_of(line) for line in lines if _label_of(line).casefold() in names]
        if not chosen and lines:
            chosen = [_label_of(lines[0])]
        return {"entities": chosen, "rationale": "on the gold path"}

    def evaluate(inputs: dict[str, Any]) -> dict[str, Any]:
        failed = str(inputs.get("observation", "")).startswith(("Nothing was found", "No entity"))
        return {"decision": "correct_path" if failed else "proceed", "reason": "scripted"}

    def found(inputs: dict[str, Any], evidence: list[str]) -> list[str]:
        text = "\n".join(evidence).casefold()
        return [a for a in gold(inputs)["answers"] if a.casefold() in text]

    def answer(inputs: dict[str, Any]) -> dict[str, Any]:
        evidence = [str(e) for e in inputs.get("evidence") or []]
        answers = found(inputs, evidence)
        if not answers and evidence:
            answers = [evidence[-1].rstrip(")").rsplit(", ", 1)[-1]]
        return {"answers": answers, "reasoning": "read from the evidence"}

    def predict(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"prediction": f"the step will {inputs.get('step', '')}"}

    def think_evaluate(inputs: dict[str, Any]) -> dict[str, Any]:
        """Think's and Evaluate's replies; the next step predicted on proceeding, the answer after the last step
        (only answers the facts hold: otherwise none, and the program asks Answer as paper mode does)."""
        judged = {"thought": "compared", "missing": "nothing", **evaluate(inputs)}
        proceeding = judged["decision"] == "proceed"
        answers = found(inputs, fact_lines(inputs)) if proceeding and not next_step(inputs) else []
        return {**judged, "next_prediction": _predicted(predict, inputs) if proceeding else "", "answers": answers}

    return {
        "Decompose": decompose,
        "Replan": decompose,
        "PredictOutcome": predict,
        "Think": lambda i: {"thought": "compared", "missing": "nothing"},
        "Evaluate": evaluate,
        "Answer": answer,
        "SelectRelations": select_relations,
        "SelectEntities": select_entities,
        "DecomposePredict": decompose_predicting(decompose, predict),
        "ThinkEvaluate": think_evaluate,
        "SelectRelationPairs": pairs_by_entity(select_relations),
    }


def golds_from_examples(examples, *, kg: Any = None) -> dict[str, dict[str, Any]]:
    """Gold-path facts of loaded examples (see `ppoga_dspy.experiments.datasets`), keyed by question text.

    Relations come from `metadata["paths"]` (branches in order); entities on the path from the IRN
    gold-path text when there is one (`a#r1#b#r2#c`), plus the answers. `hops[i]` names the entities
    that relation `i` reaches (answers at the last hop), where the path text gives one per relation.
    `steps` groups the relations into the steps a planner writes: one per *semantic* hop, so a
    relation that reaches only mediator (CVT) nodes shares its step with the next (see `semantic_steps`;
    without `kg`, one step per relation).
    """
    golds: dict[str, dict[str, Any]] = {}
    for example in examples:
        metadata = dict(getattr(example, "metadata", {}) or {})
        relations = [r for branch in metadata.get("paths") or [metadata.get("path") or []] for r in branch]
        entities: list[str] = []
        group = metadata.get("group")
        if isinstance(group, str) and "#" in group:
            for branch in group.split("*"):
                parts = [p for p in branch.split("#<end>#")[0].split("#") if p]
                entities.extend(parts[2::2])
        answers = list(getattr(example, "answers", []) or [])
        hops = [[name] for name in entities] if len(entities) == len(relations) else []
        if hops:  # the last hop reaches the answer: every accepted answer name counts there
            hops[-1] = list(dict.fromkeys(hops[-1] + answers))
        golds[example.question.strip()] = {"relations": relations, "entities": entities + answers, "answers": answers,
                                           "hops": hops, "topics": list(dict(getattr(example, "topic_entities", {})
                                                                             or {})),
                                           "branches": len(metadata.get("paths") or [relations]),
                                           "paths": [list(b) for b in metadata.get("paths") or [relations]]}
        gold = golds[example.question.strip()]
        gold["steps"] = semantic_steps(kg, gold) if kg is not None else [[i] for i in range(len(relations))]
    return golds


def semantic_steps(kg: Any, gold: dict[str, Any]) -> list[list[int]]:
    """The gold relations (by index) grouped one group per semantic hop, read off the graph.

    A planner asked "who played the Joker in The Dark Knight" writes one step ("find the actor"), not
    one per KG edge: film -> performance -> actor crosses a mediator node. Walking the gold path on
    `kg`, a relation whose reached nodes are all mediators joins the next relation's step. Only for
    one-branch paths (conjunctions keep one step per relation); a KG error keeps one per relation.
    """
    from ppoga_dspy.kg.base import Direction, KGError

    relations, topics = gold["relations"], gold.get("topics") or []
    single = [[i] for i in range(len(relations))]
    if not relations or not topics or gold.get("branches", 1) != 1:
        return single
    steps: list[list[int]] = []
    frontier, through = list(topics), False  # through: the last relation reached only mediators
    try:
        for i, relation in enumerate(relations):
            reached = []
            for direction in (Direction.OUT, Direction.IN):
                reached = [e for source in frontier[:50] for e in kg.neighbors(source, relation, direction, 500)]
                if reached:
                    break
            if through:
                steps[-1].append(i)
            else:
                steps.append([i])
            through = bool(reached) and all(e.is_mediator for e in reached)
            frontier = [e.id for e in reached]
    except KGError:
        return single
    return steps


#: The `--lm` spec of the scripted perfect planner that follows each question's gold path.
ORACLE_LM = "oracle/gold-path"


def oracle_lm(examples: list, *, kg: Any = None, **kwargs: Any):
    """The scripted perfect planner for these examples: one definition for eval, compile's teacher and tune.

    With `kg` it plans one step per semantic hop (through mediators); without, one step per relation.
    """
    handlers = gold_path_handlers(golds_from_examples(examples, kg=kg))
    return scripted_lm(ScriptedEngine(handlers), "oracle-gold-path", **kwargs)


# -- a noisy planner: the gold path, followed with independent, seeded mistakes --------------------

#: `--lm oracle/noisy:P`: the gold-path planner that errs with probability P per decision.
NOISY_LM_PREFIX = "oracle/noisy:"

_HOP = re.compile(r"\(hop (\d+)\)")
_SELECTED = re.compile(r"^\s*selected\b[^:]*:\s*(.*)$", re.I | re.M)
_EMPTY = ("Nothing was found", "No entity")


def noise_rate(spec: str | None) -> float | None:
    """P of an `oracle/noisy:P` spec, None for any other spec; a malformed P is a ConfigError.

    >>> noise_rate("oracle/noisy:0.2"), noise_rate("oracle/gold-path"), noise_rate("openai/gpt-4o")
    (0.2, None, None)
    """
    if not spec or not str(spec).startswith(NOISY_LM_PREFIX):
        return None
    from ppoga_dspy.errors import ConfigError

    text = str(spec)[len(NOISY_LM_PREFIX):]
    try:
        rate = float(text)
    except ValueError:
        raise ConfigError(f"--lm {spec}: P must be a number in [0, 1], e.g. oracle/noisy:0.2") from None
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(f"--lm {spec}: P must be in [0, 1], e.g. oracle/noisy:0.2")
    return rate


def is_scripted_spec(spec: str | None) -> bool:
    """True for the scripted planners that follow gold paths (`oracle/gold-path`, `oracle/noisy:P`)."""
    return spec == ORACLE_LM or noise_rate(spec) is not None


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
             counted_as: str | None = None) -> random.Random:
        """The draw for the n-th time this question's run faces this decision (`counted_as` keeps a
        separate count under the same seed: Think and Evaluate judge one observation alike)."""
        with self._lock:
            seen = self._seen.setdefault(question, Counter())
            key = (counted_as or kind, hop, extra)
            occurrence = seen[key]
            seen[key] += 1
        text = "\x1f".join((str(self.seed), question, kind, str(hop), extra, str(occurrence)))
        return random.Random(int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big"))

    def _errs(self, rng: random.Random, rate: float, kind: str) -> bool:
        wrong = rng.random() < rate
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
        wanted = _FOLLOW.search(step)
        if wanted and wanted.group(1) in relations:
            return relations.index(wanted.group(1))
        return None

    def first_hop(self, inputs: dict[str, Any]) -> int | None:
        """0-based index of the step's first gold relation (before `hop` when the step reads through a mediator)."""
        hop = self.hop(inputs)
        wanted = _FOLLOW.search(str(inputs.get("step", "")))
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
        from ppoga_dspy.kg.base import Direction, KGError

        answers = {a.casefold() for a in gold["answers"]}
        layers: list[dict[str, tuple[str, set[str]]]] = []  # hop -> entity id -> (label, successor ids)
        frontier = {t: t for t in gold["topics"]}
        try:
            for relation in relations:
                layer: dict[str, tuple[str, set[str]]] = {}
                for direction in (Direction.OUT, Direction.IN):
                    for source in list(frontier)[:2000]:
                        for entity in self.kg.neighbors(source, relation, direction, 10_000):
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

    def select_relations(self, inputs: dict[str, Any]) -> dict[str, Any]:
        gold = self.gold(inputs)
        hop = self.first_hop(inputs)
        candidates = [str(c) for c in inputs.get("candidates") or []]
        relation = gold["relations"][hop] if hop is not None else None
        wanted = relation if relation in candidates else f"{relation} (reverse)"
        if relation is None or wanted not in candidates:  # nothing right to choose: pick as the oracle does
            on_path = [c for c in candidates if c in gold["relations"]]
            return {"relations": on_path[:1] or candidates[:1]}
        others = [c for c in candidates if c != wanted]
        rng = self._rng(str(inputs.get("question", "")).strip(), "relation", hop, str(inputs.get("entity", "")))
        if others and self._errs(rng, self.p, "relation"):
            return {"relations": [rng.choice(others)]}
        return {"relations": [wanted]}

    def select_entities(self, inputs: dict[str, Any]) -> dict[str, Any]:
        gold = self.gold(inputs)
        hop = self.hop(inputs)
        lines = [str(line) for line in inputs.get("candidates") or []]
        labels = [_label_of(line) for line in lines]
        names = self.hop_names(gold, hop)
        right = [label for label in labels if label.casefold() in names]
        if not right:
            everywhere = {n.casefold() for n in gold["entities"]}
            right = [label for label in labels if label.casefold() in everywhere]
        wrong = [label for label in labels if label not in right]
        if right and wrong:
            rng = self._rng(str(inputs.get("question", "")).strip(), "entity", hop)
            if self._errs(rng, self.p, "entity"):
                return {"entities": [rng.choice(wrong)], "rationale": "looks like what the step asks for"}
        return {"entities": right or labels[:1], "rationale": "on the path the step asks for"}

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
        verdict, why = self.judge(inputs, "think")
        # both names of Think's output field (`reflection`, renamed `thought` on method-core): only the
        # signature's own fields are written into the reply
        if verdict == "on_path":
            text = f"the observation meets the objective: {why}"
            return {"reflection": text, "thought": text, "missing": "nothing"}
        text = f"the observation does not meet the objective: {why}"
        return {"reflection": text, "thought": text,
                "missing": f"the entity that the step '{inputs.get('step', '')}' asks for"}

    def evaluate(self, inputs: dict[str, Any]) -> dict[str, Any]:
        verdict, why = self.judge(inputs, "evaluate")
        hop = self.hop(inputs)
        if verdict == "on_path":
            last = hop is not None and hop == len(self.gold(inputs)["relations"]) - 1
            return {"decision": "finish" if last else "proceed", "reason": why}
        question = str(inputs.get("question", "")).strip()
        with self._lock:
            failures = self._failures.setdefault(question, Counter())
            failures[hop if hop is not None else -1] += 1
            repeated = failures[hop if hop is not None else -1] >= 3
        if verdict == "replan" or repeated:
            return {"decision": "replan", "reason": why if verdict == "replan" else "the step keeps failing"}
        return {"decision": "correct_path", "reason": why}

    def found(self, inputs: dict[str, Any], evidence: list[str]) -> list[str]:
        """The gold answers the evidence names in a fact of the last gold relation."""
        gold = self.gold(inputs)
        last = gold["relations"][-1] if gold["relations"] else None
        facts = [line for line in evidence if last is None or last in line]
        return [a for a in gold["answers"] if any(_mentions(line, {a.casefold()}) for line in facts)]

    def answer(self, inputs: dict[str, Any]) -> dict[str, Any]:
        evidence = [str(e) for e in inputs.get("evidence") or []]
        found = self.found(inputs, evidence)
        if not found and evidence:
            found = [evidence[-1].rstrip(")").rsplit(", ", 1)[-1]]
        return {"answers": found, "reasoning": "read from the chain of facts"}

    @staticmethod
    def predict(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"prediction": f"the step will {inputs.get('step', '')}"}

    def think_evaluate(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Think's and Evaluate's judgements, drawn exactly as the two separate calls draw them (one judge
        draw per observation, shared through `counted_as`, and the same stats); the next step predicted on
        proceeding; on finishing, the answers the facts hold (none otherwise: the program then asks Answer)."""
        thought = self.think(inputs)
        judged = self.evaluate(inputs)
        decision = judged["decision"]
        finishing = decision == "finish" or (decision == "proceed" and not next_step(inputs))
        return {"thought": thought["thought"], "missing": thought["missing"], **judged,
                "next_prediction": _predicted(self.predict, inputs) if decision == "proceed" else "",
                "answers": self.found(inputs, fact_lines(inputs)) if finishing else []}

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
            "DecomposePredict": decompose_predicting(self.decompose, self.predict),
            "ThinkEvaluate": self.think_evaluate,
            "SelectRelationPairs": pairs_by_entity(self.select_relations),
        }


def noisy_lm(examples: list, p: float, *, seed: int = 0, kg: Any = None, **kwargs: Any):
    """The noisy scripted planner for these examples (its `NoisyPlanner` is `lm.engine.planner`).

    With `kg`, it judges entities by whether they lead to a gold answer along the gold relations.
    """
    planner = NoisyPlanner(golds_from_examples(examples, kg=kg), p, seed=seed, kg=kg)
    engine = ScriptedEngine(planner.handlers())
    engine.planner = planner
    return scripted_lm(engine, f"oracle-noisy-{p:g}", **kwargs)


def scripted_lm_for_spec(spec: str, examples: list | None, *, seed: int = 0, kg: Any = None, **kwargs: Any):
    """The scripted planner a spec names (`oracle/gold-path`, `oracle/noisy:P`): one place for eval, compile, tune.

    Both follow the examples' gold paths, so they need the questions they will be asked.
    """
    from ppoga_dspy.errors import ConfigError

    rate = noise_rate(spec)
    if spec != ORACLE_LM and rate is None:
        raise ConfigError(f"--lm {spec} is not a scripted planner; use {ORACLE_LM} or {NOISY_LM_PREFIX}P")
    if not examples:
        raise ConfigError(f"--lm {spec} follows gold paths and needs a dataset (use it with eval, compile or tune)")
    if rate is None:
        return oracle_lm(examples, kg=kg, **kwargs)
    return noisy_lm(examples, rate, seed=seed, kg=kg, **kwargs)
