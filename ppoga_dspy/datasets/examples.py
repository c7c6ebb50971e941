"""The one shape every loader returns, and the seeded splits and draws over it.

Loaders (`loaders.py`, `metaqa.py`, `nsm.py`) build each question through `make_example`, so the text of a
data file passes the incoming-text rule in one place; `split_examples` and `sample_examples` are the only
ways a run picks questions, so a split never leaks a gold-path group between train, dev and test.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

from ppoga_dspy.errors import ConfigError, DataError

SPLITS = ("train", "dev", "test")


class DatasetError(DataError, ValueError):
    """A dataset file is missing or does not parse as its format; the message names the file."""


class DatasetSpecError(ConfigError, DatasetError):
    """A dataset spec, split, limit or fraction is not one the loader accepts; the message lists what is."""


#: The longest question accepted, in characters. Benchmark questions are under 500; a longer one is a file read
#: wrong (a whole document in one field) and would be sent whole to the LM in every prompt of its run.
MAX_QUESTION_CHARS = 4000


def check_question(question: str, where: str) -> None:
    """A question must hold text and be at most `MAX_QUESTION_CHARS` long; `where` names it in the error."""
    if not question.strip():
        raise DatasetError(f"{where} is empty; a question needs text (remove or fill it)")
    if len(question) > MAX_QUESTION_CHARS:
        raise DatasetError(f"{where} is {len(question)} characters long, over the {MAX_QUESTION_CHARS} a question may "
                           "be; it would be sent whole in every prompt (check how the file was written)")


def check_topics(topic_entities: dict[str, str], where: str) -> None:
    """No topic entity may be blank: an empty id or name links to nothing and the whole run would be paid for
    a fallback (31 LM calls and 18 KG queries before a failure)."""
    for key, name in topic_entities.items():
        if not str(key).strip() or (isinstance(name, str) and not name.strip()):
            raise DatasetError(f"{where} has a blank topic entity ({key!r}: {name!r}); name the entity or leave "
                               "topic_entities out to link it from the question")


def make_example(*, id: str, question: str, topic_entities: dict[str, str], answers: Iterable[str],
             answer_ids: Iterable[str] = (), **metadata: Any):
    """Every loader's one exit: the text of a data file passes the incoming-text rule (`ppoga_dspy.text.from_data`:
    valid Unicode, no controls or escapes, no prompt field headers) here, and a blank or overlong question and a
    blank topic entity are refused."""
    import dspy

    from ppoga_dspy.text import clean_tree, from_data

    id, question = from_data(id), from_data(question)
    check_question(question, f"question {id!r}")
    topic_entities = clean_tree(dict(topic_entities), rule=from_data)
    check_topics(topic_entities, f"question {id!r}")
    answers, answer_ids = [from_data(a) for a in answers], [from_data(a) for a in answer_ids]
    meta = {"type": None, "level": None, "hops": None, "path": [], "paths": []} | clean_tree(metadata, rule=from_data)
    if not meta["paths"] and meta["path"]:
        meta["paths"] = [list(meta["path"])]
    meta.setdefault("group", " ".join(question.lower().split()))
    return dspy.Example(
        id=id, question=question.strip(), topic_entities=topic_entities, answers=dedupe(answers),
        answer_ids=dedupe(answer_ids), metadata=meta,
    ).with_inputs("question", "topic_entities")


def dedupe(items: Iterable[str]) -> list[str]:
    """Non-empty strings, first occurrence kept, order kept (the first answer is the best one)."""
    seen: dict[str, None] = {}
    for item in items:
        text = str(item).strip()
        if text and text not in seen:
            seen[text] = None
    return list(seen)


def sample_examples(examples: Sequence[Any], n: int, *, seed: int = 0) -> list:
    """A seeded draw of n examples, kept in file order.

    Benchmark files are often grouped by template (MetaQA's dev files hold one template after another), so the
    first N questions are one kind of question: a draw is what a compile or an evaluation on N questions means.
    One shuffle, its first n: a smaller n takes a subset of a larger one's questions, so a longer run extends a
    shorter one's run file."""
    if n < 0:
        raise DatasetSpecError(f"sample must be >= 0, got {n}")
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    return [examples[i] for i in sorted(order[:n])]


def _group_key(example: Any) -> str:
    meta = getattr(example, "metadata", None) or {}
    group = meta.get("group") if isinstance(meta, dict) else None
    return str(group if group is not None else getattr(example, "id", None) or example.question)


def split_examples(examples: Sequence[Any], *, seed: int = 0,
                   fractions: Sequence[float] = (0.6, 0.2, 0.2)) -> dict[str, list]:
    """Deterministic train/dev/test split that never puts one group (gold path, source question) in two splits.

    Groups are sorted by key (no `hash()`, so the same on every Python run), shuffled with
    `random.Random(seed)`, and filled into train, then dev, then test by example count; each split keeps
    the file order of its examples.
    """
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-6:
        raise DatasetSpecError(f"fractions must be three non-negative numbers summing to 1, got {tuple(fractions)}")
    groups: dict[str, list[int]] = {}
    for index, example in enumerate(examples):
        groups.setdefault(_group_key(example), []).append(index)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    total = len(examples)
    bounds = (fractions[0] * total, (fractions[0] + fractions[1]) * total)
    assigned: dict[int, str] = {}
    filled = 0
    for key in keys:
        members = groups[key]
        middle = filled + len(members) / 2  # a group goes where most of it falls
        name = "train" if middle < bounds[0] else "dev" if middle < bounds[1] else "test"
        for index in members:
            assigned[index] = name
        filled += len(members)
    out: dict[str, list] = {name: [] for name in SPLITS}
    for index, example in enumerate(examples):
        out[assigned[index]].append(example)
    return out
