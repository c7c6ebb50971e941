"""Demos that travel to another graph: the knn pool's free text without its own graph's relation names.

A small model copies its demos. On the KG it was compiled on, a demo's "follow relation film.film.directed_by" is
the right thing to copy; on another KG it is a film question's plan in a footballer's question, and its name leads
nowhere (issue 38: the shipped demo-KG artifact wrote film relations into 24 of 24 WC-P2 plans). What transfers is
the shape of the plan: how many steps a question of this kind takes, and that each step follows the relation the
question asks about. So on a KG the pool holds no question of (`Artifact.apply`), every free-text field of every
demo (plan objectives, expected outcomes, predictions, thoughts, reasons, plan and memory lines) says "the relation
the question asks about" where it named one of the pool's relations, and "the entity the question asks for" where
it named the entity a relation leads to. The rest stays as the teacher wrote it: the facts `(head, relation, tail)`
a demo read (its graph's own, as its menus and choices are: the student's choices are constrained to this KG's
candidates), the entities, the answers.
"""

from __future__ import annotations

import re
from typing import Any

from ppoga_dspy.kg.names import relation_phrase
from ppoga_dspy.method.memory import REVERSE

#: Demo fields that hold the demo graph's menus, choices and facts, copied as they are.
KEPT_FIELDS = frozenset({"candidates", "relations", "pairs", "first_relations", "next_relations", "entities",
                         "answers", "topic_entities", "question"})
#: Fields that list plan steps (objects with `objective` and `expected_outcome`).
PLAN_FIELDS = ("steps", "new_steps")
FIRST = "follow the relation the question asks about"
NEXT = "follow the next relation the question asks about"
RELATION = "the relation"
ASKED = "the entity the question asks for"
_NUMBERED = re.compile(r"\s*(?:Plan step )?(\d+)[.:]\s")


def pool_relations(records: dict[str, list[tuple[int, dict[str, Any]]]]) -> set[str]:
    """The relations a pool's demos show in their menus and choices (`entity: relation` pairs read as the relation;
    an entity menu, whose lines say `  <- ` where they came from, is no relation menu)."""
    found: set[str] = set()
    for stage in records.values():
        for _, record in stage:
            for name in ("candidates", "relations", "pairs", "first_relations", "next_relations"):
                values = record.get(name)
                if isinstance(values, list) and not any("  <- " in str(v) for v in values):
                    found |= {menu_relation(str(v)) for v in values}
    return {r for r in found if r}


def menu_relation(line: str) -> str:
    """A menu line's relation: "entity: rel (reverse)" and "rel (reverse)" -> "rel"."""
    line = line.split("  <- ")[0]
    if ": " in line:
        line = line.rsplit(": ", 1)[1]
    return line.removesuffix(REVERSE).strip()


def _is_fact(line: str) -> bool:
    """Whether the line states a fact as observations and evidence write them: `(head, relation, tail)`."""
    line = line.strip()
    return line.startswith("(") and line.endswith(")") and line.count(", ") >= 2


class GraphNames:
    """Rewrites a pool's free text without the relation names of its graph (see the module docstring)."""

    def __init__(self, relations: set[str]) -> None:
        keys = sorted(relations, key=len, reverse=True)  # the longest name first: `a.b_c` before `b_c`
        name = "|".join(re.escape(k) for k in keys) or r"(?!)"
        whole = rf"(?<![\w.])(?:{name})(?!\w|\.\w)(?:\s*\(reverse\))?"
        phrases = sorted({relation_phrase(k) for k in keys}, key=len, reverse=True)
        quoted = "|".join(re.escape(p) for p in phrases) or r"(?!)"
        self._follow = re.compile(rf"follow relation {whole}")
        self._joined = re.compile(rf" (?:and relation|and read through to) {whole}")
        self._name = re.compile(whole)
        self._linked = re.compile(rf"the entit(?:y|ies) linked as '(?:{quoted})'(?: and '(?:{quoted})')*")
        self._quoted = re.compile(rf"the '(?:{quoted})' entit(y|ies)")

    def text(self, text: str, *, first: bool = True) -> str:
        """`text` with every line that is not a fact rewritten; `first`: a plan objective of the plan's first step."""
        lines = text.split("\n")
        return "\n".join(line if _is_fact(line) else self._line(line, first) for line in lines)

    def _line(self, line: str, first: bool) -> str:
        numbered = _NUMBERED.match(line)  # a plan line ("2. follow relation ...", "Plan step 2: ...")
        if numbered:
            first = numbered.group(1) == "1"
        line = self._joined.sub("", line)
        line = self._follow.sub(FIRST if first else NEXT, line)
        line = self._linked.sub(ASKED, line)
        line = self._quoted.sub(lambda m: "the entit" + m.group(1), line)
        return self._name.sub(RELATION, line)

    def value(self, value: Any, *, first: bool = True) -> Any:
        """A field's value rewritten: text, and the text inside lists and objects."""
        if isinstance(value, str):
            return self.text(value, first=first)
        if isinstance(value, list):
            return [self.value(v, first=first) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v, first=first) for k, v in value.items()}
        return value

    def record(self, record: dict[str, Any], *, position: int | None) -> dict[str, Any]:
        """One demo record rewritten. `position`: which plan step the record's `step` is (0 the first; None when
        unknown, read as the first), so the demo says "the next relation" where its plan did."""
        out: dict[str, Any] = {}
        for name, value in record.items():
            if name in KEPT_FIELDS:
                out[name] = value
            elif name in PLAN_FIELDS and isinstance(value, list):
                out[name] = [self.value(step, first=i == 0) for i, step in enumerate(value)]
            else:
                out[name] = self.value(value, first=not position)
        return out


def without_graph_names(records: dict[str, list[tuple[int, dict[str, Any]]]]
                        ) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """A pool's records with its graph's relation names out of their free text (a new dict; the pool is unchanged).
    A record's `step` is placed in its question's plan by the question's own plan record."""
    names = GraphNames(pool_relations(records))
    plans: dict[int, list[str]] = {}
    for stage_name, stage in records.items():
        if stage_name.rsplit(".", 1)[-1] in ("decompose", "decompose_predict"):
            for index, record in stage:
                steps = record.get("steps")
                if isinstance(steps, list):
                    plans.setdefault(index, [str(s.get("objective", "")) for s in steps if isinstance(s, dict)])

    def position(index: int, record: dict[str, Any]) -> int | None:
        step = str(record.get("step") or "")
        plan = plans.get(index, [])
        return plan.index(step) if step in plan else None

    return {stage_name: [(index, names.record(record, position=position(index, record))) for index, record in stage]
            for stage_name, stage in records.items()}
