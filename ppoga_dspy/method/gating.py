"""Gated choices: the Executor decides without an LM call when the candidates leave nothing to ask.

With one candidate there is nothing to choose. With `Thresholds.gate_margin` set, an embedding
ranking whose best candidate beats the second by more than the margin is taken as decisive and the
best candidate is used. Either way the call saved is counted (`Costs.gated`, so reports show calls
saved) and the trace notes "<stage>.gated" with the reason; the margin is off by default, so paper
reproduction asks the model at every real choice. With `Thresholds.follow_named_relations`, a step whose
objective names menu relations verbatim ("follow relation written_by") follows them without SelectRelations:
the Planner has already chosen, and a tiny Executor model only gets it wrong.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from functools import lru_cache

from ppoga_dspy.method.memory import REVERSE
from ppoga_dspy.method.question_run import QuestionRun
from ppoga_dspy.method.vocabulary import Stage


def only_one(run: QuestionRun, stage: Stage, chosen: str, **where: str) -> None:
    """Record a choice with a single candidate (no call was needed)."""
    run.costs.add_gated(stage)
    run.note(f"{stage}.gated", reason="one candidate", chosen=chosen, **where)


def beats_margin(run: QuestionRun, scores: list[float]) -> bool:
    """Whether the ranking (`scores` best first) leads by more than `gate_margin` (nothing recorded)."""
    margin = run.thresholds.gate_margin
    return margin is not None and len(scores) >= 2 and scores[0] - scores[1] > margin


def decisive(run: QuestionRun, stage: Stage, scores: list[float], chosen: str, **where: str) -> bool:
    """Whether the ranking (`scores` best first) settles the choice by `gate_margin`; recorded when it does."""
    if not beats_margin(run, scores):
        return False
    run.costs.add_gated(stage)
    run.note(f"{stage}.gated", reason="margin", chosen=chosen, margin=round(scores[0] - scores[1], 4), **where)
    return True


#: A relation's name as a plan writes it: an identifier with `_` or `.` inside ("written_by",
#: "people.person.place_of_birth"), "(reverse)" after it for the other direction.
_NAME = re.compile(r"(?<![\w.])([A-Za-z]\w+(?:[._]\w+)+)(\s*\(reverse\))?")
#: How many letters a written name may have added or dropped against a menu key and still name it
#: ("released_year" for "release_year", "in_languages"). A letter replaced is another name ("acted_on" is not
#: "acted_in", `date_of_birth` is not `place_of_birth`), however long the shared prefix.
CLOSE_EDITS = 2
#: Names shorter than this must be written exactly.
CLOSE_MIN_LENGTH = 8


def relation_names(text: str) -> list[str]:
    """The relation keys `text` writes, in menu form ("written_by", "written_by (reverse)")."""
    return [name + (REVERSE if reverse else "") for name, reverse in _NAME.findall(text)]


#: What a path correction appends to a step's objective for the Executor ("; still missing: ..."): Think's words,
#: not the Planner's step, so they never name a relation for a gate or a way back (method/cycle.py writes it).
RETRY_NOTE = "; still missing: "
#: What the Executor appends to a retried step's objective: the paths that failed, which name relations the step
#: must not be read as naming (method/executor.py writes it).
AVOID_NOTE = " (tried before and failed, avoid: "


def step_words(objective: str) -> str:
    """The step's own objective, without what a retry appended (`RETRY_NOTE`, `AVOID_NOTE`)."""
    return objective.split(AVOID_NOTE, 1)[0].split(RETRY_NOTE, 1)[0]


@lru_cache(maxsize=4096)
def _whole_name(key: str) -> re.Pattern[str]:
    """`key` written as a whole name: not inside a longer one (`P17` is not named by "P1705", `spouse` not by
    "people.person.spouse_s"), and a forward key not followed by "(reverse)"."""
    base = key.removesuffix(REVERSE)
    tail = r"\s*\(reverse\)" if key.endswith(REVERSE) else r"(?!\s*\(reverse\))"
    return re.compile(rf"(?<![\w.])(?<!\w\.){re.escape(base)}(?!\w|\.\w){tail}")


def names_verbatim(key: str, text: str) -> bool:
    """Whether `text` writes the relation `key` as it is, as a whole name, in the same direction. Any shape of name
    counts (`written_by`, `people.person.spouse_s`, `P26`, `birthPlace`, `spouse`): the key comes from the graph."""
    return bool(_whole_name(key).search(text))


def names_relation(key: str, text: str) -> bool:
    """Whether `text` names the relation `key`: verbatim, or as a name a letter or two off in the same direction
    (a small model's "released_year")."""
    return names_verbatim(key, text) or any(close_names(key, name) for name in relation_names(text))


def _added_or_dropped(a: str, b: str) -> int | None:
    """Letters added to or dropped from `a` to make `b` (difflib's opcodes), or None when a letter is replaced."""
    ops = [(tag, i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b).get_opcodes()
           if tag != "equal"]
    if any(tag == "replace" for tag, _, _ in ops):
        return None
    return sum(max(n, m) for _, n, m in ops)


def close_names(key: str, name: str) -> bool:
    """Whether two relation keys name the same relation, at most `CLOSE_EDITS` letters added or dropped, the
    directions the same."""
    if key.endswith(REVERSE) != name.endswith(REVERSE):
        return False
    key, name = key.removesuffix(REVERSE), name.removesuffix(REVERSE)
    if key == name:
        return True
    edits = _added_or_dropped(key, name) if min(len(key), len(name)) >= CLOSE_MIN_LENGTH else None
    return edits is not None and edits <= CLOSE_EDITS


def named_positions(run: QuestionRun, objective: str, keys: list[str]) -> list[int] | None:
    """The menu positions of the relations the step's objective names (`follow_named_relations`) when the names
    settle the choice: at least one and no more than `relations_per_step`; else None. Nothing is recorded, so the
    menus shown one call ahead can leave out what the step will settle by name (relation_pairs.open_menus)."""
    if not run.thresholds.follow_named_relations:
        return None
    objective = step_words(objective)  # what a retry appended (Think's words, the failed paths) is not the step's
    found = [i for i, key in enumerate(keys) if names_verbatim(key, objective)] or [
        i for i, key in enumerate(keys) if names_relation(key, objective)]  # a name a letter off only if none is exact
    if not found or len(found) > run.thresholds.relations_per_step:
        return None
    return found


def named(run: QuestionRun, stage: Stage, objective: str, keys: list[str], **where: str) -> list[int] | None:
    """`named_positions`, recorded when the names settle the choice; None: the model is asked. The same rule in
    both stage modes (SelectRelations per entity, SelectRelationPairs per menu)."""
    found = named_positions(run, objective, keys)
    if found is None:
        return None
    run.costs.add_gated(stage)
    run.note(f"{stage}.gated", reason="named by the step", chosen=[keys[i] for i in found], **where)
    return found
