"""The free text the scripted planners write: predictions, thoughts, reasons, rationales, answer reasoning.

The scripted planners are the teacher that compiled artifacts are bootstrapped from, and a small student
copies its demos nearly word for word; placeholder text ("compared", "scripted") would teach it to write
nothing. So every field here is written as a careful model would write it, from what the step really saw:
the step's relation, the observation's facts and selected entities, the evidence. Never from the gold
answers (a step that has not reached them cannot know them): every function reads only the request's
inputs. Texts stay to one or two short sentences, since demo length is prompt length for the student.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ppoga_dspy.kg.names import relation_phrase

_FOLLOW = re.compile(r"follow relation ([^\s,;]+)")
_ALSO = re.compile(r" and relation ([^\s,;]+)")
_THROUGH = re.compile(r"read through to ([^\s,;]+)")
_SELECTED = re.compile(r"^\s*selected\b[^:]*:\s*(.*)$", re.I | re.M)
_EMPTY = ("Nothing was found", "No entity")
_SHOWN = 3  # names listed before "and N more"


@dataclass(frozen=True)
class Fact:
    """One observation or evidence line `(heads, relation, tails)`, heads and tails split at `; `."""

    heads: list[str]
    relation: str
    tails: list[str]


def _split_top(text: str, sep: str) -> list[str]:
    """`text` split at `sep` outside square brackets (a mediator's `[r: a; r2: b]` stays whole)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        char = text[i]
        depth += (char == "[") - (char == "]")
        if depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i = i + len(sep)
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_fact(line: str) -> Fact | None:
    """The fact a `(h1; h2, relation, t1; t2)` line states; None for any other line."""
    line = line.strip()
    if not (line.startswith("(") and line.endswith(")")):
        return None
    parts = _split_top(line[1:-1], ", ")
    if len(parts) < 3 or " " in parts[1]:
        return None
    heads, relation, tails = parts[0], parts[1], ", ".join(parts[2:])
    return Fact(_split_top(heads, "; "), relation, _split_top(tails, "; "))


def facts_of(lines: list[str] | str) -> list[Fact]:
    """The facts among these lines (a text is split into lines)."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    return [fact for fact in (parse_fact(str(line)) for line in lines) if fact is not None]


def plain(name: str) -> str:
    """A name as a sentence shows it: a mediator `[r: a; r2: b]` as `a, b`."""
    name = name.strip()
    return ", ".join(value for value in _parts(name) if value)


def names(items: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`, `a, b, c and 4 more`: the entities a sentence names."""
    shown = list(dict.fromkeys(plain(i) for i in items if plain(i)))
    if not shown:
        return "nothing"
    if len(shown) > _SHOWN:
        return ", ".join(shown[:_SHOWN]) + f" and {len(shown) - _SHOWN} more"
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def step_relations(step: str) -> list[str]:
    """The relations a step's objective names, in order (`follow relation r1 and read through to r2`)."""
    step = str(step)
    first = _FOLLOW.search(step)
    if not first:
        return []
    return [first.group(1)] + _ALSO.findall(step) + _THROUGH.findall(step)


def is_conjunction(step: str) -> bool:
    return bool(_ALSO.search(str(step)))


def expected_outcome(relations: list[str]) -> str:
    """A plan step's expected outcome: the entity its (last) relation leads to."""
    return f"the entity linked as '{relation_phrase(relations[-1])}'" if relations else "the entity the step names"


def prediction(step: str) -> str:
    """PredictOutcome: the relation(s) to follow and the kind of entity they should reach."""
    relations = step_relations(step)
    if not relations:
        return f"This step should reach the entity it describes: {str(step).strip() or 'none given'}."
    if is_conjunction(step):
        linked = " and ".join(f"'{relation_phrase(r)}'" for r in relations)
        return f"Following {' and '.join(relations)} should reach the entities linked as {linked} at once."
    if len(relations) > 1:
        return (f"Following {relations[0]} through an intermediate node to {relations[-1]} should reach "
                f"the entity linked as '{relation_phrase(relations[-1])}'.")
    return f"Following {relations[0]} should reach the entity linked as '{relation_phrase(relations[0])}'."


def selected(observation: str) -> list[str]:
    """The entities the observation's `Selected:` line keeps ([] when it has none)."""
    found = _SELECTED.findall(str(observation))
    return [part for line in found for part in _split_top(line, "; ")]


def empty(observation: str) -> bool:
    return not str(observation).strip() or str(observation).lstrip().startswith(_EMPTY)


def _mediator(name: str) -> bool:
    return name.strip().startswith("[")


def verb(items: list[str]) -> str:
    """`is` or `are`, as `names(items)` needs."""
    return "are" if len(set(items)) > 1 else "is"


@dataclass(frozen=True)
class Seen:
    """What one observation shows, for the sentences about it."""

    relations: list[str]  # the step's relations
    facts: list[Fact]  # facts from named entities (a mediator's own facts are read through)
    kept: list[str]  # selected entities the step's last relation reached, else all selected, else the tails

    @property
    def phrase(self) -> str:
        return relation_phrase(self.relations[-1]) if self.relations else "asked for"

    @property
    def heads(self) -> str:
        return names(self.facts[0].heads) if self.facts else ""

    @property
    def links(self) -> str:
        """`Inception by film.film.directed_by to Christopher Nolan`: the first fact, named."""
        fact = self.facts[0]
        return f"{names(fact.heads)} by {fact.relation} to {names(self.kept or fact.tails)}"

    def as_predicted(self) -> bool:
        wanted = {relation_phrase(r) for r in self.relations}
        return not wanted or any(relation_phrase(f.relation) in wanted for f in self.facts)


def seen(inputs: dict[str, Any]) -> Seen:
    observation = str(inputs.get("observation", ""))
    every = facts_of(observation)
    facts = [f for f in every if not all(_mediator(h) for h in f.heads)] or every
    relations = step_relations(str(inputs.get("step", "")))
    chosen = selected(observation)
    last = relation_phrase(relations[-1]) if relations else None
    reached = {plain(t) for f in every if relation_phrase(f.relation) == last for t in f.tails}
    kept = [c for c in chosen if plain(c) in reached] or chosen or [t for f in facts[:1] for t in f.tails]
    return Seen(relations, facts, kept)


def later_step(inputs: dict[str, Any]) -> str | None:
    """The plan step after the one in progress ('' when this is the last, None when the inputs do not say)."""
    if "next_step" in inputs:
        text = str(inputs.get("next_step") or "").strip()
        return "" if text.casefold() in ("none", "") else text
    plan = str(inputs.get("plan") or inputs.get("memory") or "")
    lines = [line for line in plan.splitlines() if re.match(r"\s*\d+\. ", line)]
    current = [i for i, line in enumerate(lines) if "[in progress]" in line]
    if not current:
        return None
    if current[0] + 1 >= len(lines):
        return ""
    return re.sub(r"^\s*\d+\. |\s*\(expect:.*$|\s*\[[a-z ]+\].*$", "", lines[current[0] + 1])


def thought(inputs: dict[str, Any], *, met: bool, off_path: bool = False) -> str:
    """Think: the observation's facts compared with the prediction, naming the entities.

    `met` is what the planner believes (the noisy planner may be wrong: the text says what it believed);
    `off_path` says it believes the step started from entities an earlier step got wrong.
    """
    view = seen(inputs)
    if empty(inputs.get("observation", "")) or not view.facts:
        return f"The graph gave no fact for this step, so the predicted '{view.phrase}' entity was not reached."
    if not met and off_path:
        return f"The facts start from {view.heads}, which an earlier step should not have reached."
    if not met:
        return f"The facts link {view.links}, but that is not the '{view.phrase}' entity the step asks for."
    if not view.as_predicted():
        return f"The facts link {view.links}, not by the predicted relation, yet it is what the step asks for."
    return f"The facts link {view.links}, the '{view.phrase}' entity the prediction expected."


def missing(inputs: dict[str, Any], *, met: bool) -> str:
    """Think: what is still missing, after this step (met) or for it (not met)."""
    view = seen(inputs)
    if not met:
        return f"The '{view.phrase}' entity of {view.heads or 'the current entities'}."
    following = later_step(inputs)
    if following:
        return f"Nothing for this step; next, the entity linked as '{relation_phrase(_last(following))}'."
    if following == "":
        return f"Nothing: {names(view.kept)} {verb(view.kept)} what the question asks for."
    return f"Nothing for this step: {names(view.kept)} was reached."


def _last(step: str) -> str:
    relations = step_relations(step)
    return relations[-1] if relations else step


def reason(inputs: dict[str, Any], decision: str, *, why: str = "") -> str:
    """Evaluate: why the decision follows from what the step saw.

    `why` is the planner's belief when it is not the plain reading: `off_path` (an earlier step went
    wrong), `not_asked` (the entity reached is not the one asked for), `keeps_failing`.
    """
    view = seen(inputs)
    reached = names(view.kept)
    if decision in ("proceed", "finish"):
        by = view.relations[-1] if view.relations else (view.facts[0].relation if view.facts else "this step")
        if decision == "finish" or later_step(inputs) == "":
            return f"The step reached {reached} by {by}, so the facts can answer the question."
        return f"The step reached {reached} by {by}, as planned, so the plan goes on from there."
    if why == "keeps_failing":
        return "This step has failed three times under this plan, so the plan must change."
    if decision == "replan" or why == "off_path":
        return f"The step started from {view.heads or 'entities'} off the right path, so the plan must change."
    if empty(inputs.get("observation", "")) or not view.facts:
        return f"Nothing was reached for '{view.phrase}', so the step is tried another way."
    return f"{reached} {verb(view.kept)} not the '{view.phrase}' entity asked for, so the step is tried another way."


def _provenance(line: str) -> tuple[str, str, bool] | None:
    """(head, relation, through a mediator) of a candidate line `label  <- (head, relation[, tail]) [-> r2]`."""
    if "  <- " not in line:
        return None
    source = line.split("  <- ", 1)[1].strip()
    through = ") -> " in source
    source = source.split(") -> ", 1)[0].strip().removeprefix("(").removesuffix(")")
    parts = _split_top(source, ", ")
    return (parts[0], parts[1], through) if len(parts) >= 2 else None


def rationale(inputs: dict[str, Any], chosen: list[str]) -> str:
    """SelectEntities: where the chosen candidates were reached from, and why they fit the step."""
    wanted = {relation_phrase(r) for r in step_relations(str(inputs.get("step", "")))}
    lines = [str(line) for line in inputs.get("candidates") or []]
    if not chosen:
        return "No candidate fits what the step asks for."
    line = next((line for line in lines if line.split("  <- ", 1)[0].strip() == chosen[0]), "")
    source = _provenance(line)
    if source is None:
        return f"{names(chosen)} {verb(chosen)} what the step asks for."
    head, relation, through = source
    via = " through an intermediate node" if through else ""
    fits = "the relation the step follows" if relation_phrase(relation) in wanted else "the closest to the step"
    return f"{names(chosen)} {verb(chosen)} reached from {plain(head)} by {relation}{via}, {fits}."


def _inner(item: str, targets: set[str]) -> tuple[str, str]:
    """(the mediator's relation to the target or '', the target's name) within one head or tail."""
    if _mediator(item):
        for part in _split_top(item.strip()[1:-1], "; "):
            relation, _, name = part.partition(": ")
            if name.casefold() in targets:
                return relation, name
    return "", next((n for n in _parts(item) if n.casefold() in targets), plain(item))


def _step_back(facts: list[Fact], targets: set[str]) -> tuple[Fact, str, str, str] | None:
    """(fact, named entity, relation as read, target) of the first fact that links a named entity to a target.

    Read forward (`(A, r, target)`, or a mediator tail holding it), or backward: through a mediator head that
    holds the target (`([r2: target], r, A)` reads `(A, r (reverse) / r2, target)`), or a fact reached against
    its direction (`(target, r, A)` reads `(A, r (reverse), target)`: co-actors, a director's other films).
    """
    for fact in facts:
        head = next((h for h in fact.heads if not _mediator(h)), None)
        tail = next((t for t in fact.tails if _folded(t) & targets), None)
        if head is not None and tail is not None:
            inner, name = _inner(tail, targets)
            return fact, plain(head), fact.relation + (f" / {inner}" if inner else ""), name
        back = next((h for h in fact.heads if _mediator(h) and _folded(h) & targets), None)
        other = next((t for t in fact.tails if not _mediator(t) and not _folded(t) & targets), None)
        if back is not None and other is not None:
            inner, name = _inner(back, targets)
            return fact, plain(other), f"{fact.relation} (reverse)" + (f" / {inner}" if inner else ""), name
    for fact in facts:  # only then facts read against their direction: a forward reading is the likelier one
        back = next((h for h in fact.heads if not _mediator(h) and _folded(h) & targets), None)
        other = next((t for t in fact.tails if not _mediator(t) and not _folded(t) & targets), None)
        if back is not None and other is not None:
            return fact, plain(other), f"{fact.relation} (reverse)", plain(back)
    return None


def answer_reasoning(evidence: list[str], answers: list[str], question: str = "") -> str:
    """Answer: the chain of facts, from the question's entity to the answers, that the answers are read from."""
    if not answers:
        return "No fact in the evidence names an answer to the question."
    answers = [part for a in answers for part in _split_top(a, "; ")]  # a fact's tails read as one answer
    facts = facts_of(evidence)
    targets, chain, asked = {n.casefold() for a in answers for n in _parts(a)}, [], question.casefold()
    for _ in range(3):  # back from the answers: the fact that reaches them, then the fact reaching its entity
        found = _step_back(facts, targets)
        if found is None:
            break
        fact, entity, relation, name = found
        chain.insert(0, f"({entity}, {relation}, {name})")
        facts = [f for f in facts if f is not fact]
        if entity.casefold() in asked:
            break
        targets = {entity.casefold()}
    if not chain:
        return f"The evidence names {names(answers)} as what the question asks for."
    plural = "answers are" if verb(answers) == "are" else "answer is"
    return f"From {' and '.join(chain)}, the {plural} {names(answers)}."


def _parts(item: str) -> list[str]:
    """The names one head or tail holds: itself, or each value of a mediator's `[r: a; r2: b]`."""
    item = item.strip()
    if item.startswith("[") and item.endswith("]"):
        return [part.partition(": ")[2] or part for part in _split_top(item[1:-1], "; ")]
    return [item]


def _folded(item: str) -> set[str]:
    return {name.casefold() for name in _parts(item)}
