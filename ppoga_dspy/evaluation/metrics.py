"""Answer metrics: Hits@1 as PoG scores it, a lenient and a strict Hits@1, and set F1 for many answers.

* `hits@1_pog`: PoG's own evaluation rule, reproduced: the *whole answer field* (for PoG's rows the
  part of `results` its script reads, `pog_runs.pog_answer_part`; for our runs the first answer)
  against every gold alias (for CWQ the aliases of `cwq_aname_dict.json`, which the CWQ loader merges
  into `answers`), lower-cased with spaces removed, a hit when one contains the other. This is the
  number the PoG and PPoGA papers report.
* `hits@1`: the same lenient containment on the first *extracted* answer, with `_` read as a space.
* `hits@1_strict`: the first answer equals a gold alias after SQuAD normalisation; no containment.
* `f1`: set F1 of all answers against the gold answers.
* `hit_rog` (`hit_rog`, in summaries): RoG's "Hit", as RoG / GNN-RAG / SubgraphRAG report it: a hit when any gold
  answer, normalised (lower-case, no punctuation or articles), is inside the predicted answers joined by spaces,
  so a list of ten guesses with one right counts. Shown beside Hits@1 so tables do not mix the two.

Strict Hits@1 and F1 are there so a prediction that merely *contains* the answer ("Paris, France and
Lyon") is not mistaken for a precise one. All functions are pure and cheap; nothing here imports dspy.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ppoga_dspy.kg.names import normalize_name

METRICS: tuple[str, ...] = ("hits@1", "hits@1_strict", "f1", "hits@1_pog")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_lenient(text: str) -> str:
    """PoG/ToG's normalisation: lower-case and drop all whitespace; `_` counts as a space (IRN names).

    >>> normalize_lenient("Alan_PULIDO")
    'alanpulido'
    >>> normalize_lenient("  alan pulido ")
    'alanpulido'
    >>> normalize_lenient("The Dark Knight")
    'thedarkknight'
    """
    return "".join(unicodedata.normalize("NFKC", str(text)).replace("_", " ").lower().split())


def hits_at_1_lenient(prediction: str, gold: Iterable[str]) -> bool:
    """True when the prediction equals a gold alias after `normalize_lenient`, or one contains the other.

    This is the rule of PoG's and ToG's evaluation scripts. Empty strings never match, on either
    side (an empty string is contained in everything).

    >>> hits_at_1_lenient("Alan_PULIDO", ["alan pulido"])
    True
    >>> hits_at_1_lenient("Christopher Nolan", ["Nolan"])      # gold inside prediction
    True
    >>> hits_at_1_lenient("Nolan", ["Christopher Nolan"])      # prediction inside gold
    True
    >>> hits_at_1_lenient("", ["Nolan"]), hits_at_1_lenient("Nolan", [""])
    (False, False)
    """
    return _contains_either_way(prediction, gold, normalize_lenient)


def normalize_pog(text: str) -> str:
    """PoG's normalisation, exactly: lower-case and remove the spaces; nothing else (`_` stays).

    >>> normalize_pog(" The Dark Knight ")
    'thedarkknight'
    >>> normalize_pog("Alan_PULIDO")
    'alan_pulido'
    """
    return str(text).strip().replace(" ", "").lower()


def hits_at_1_pog(answer_field: str, gold: Iterable[str]) -> bool:
    """Hits@1 as PoG's evaluation script computes it: the whole answer field against every gold alias.

    After `normalize_pog` on both sides, a hit when they are equal or either contains the other, so a
    long reply that names the answer somewhere counts. One difference from PoG's script: an empty
    answer field is a miss here (in PoG's it is contained in every alias, so it counts as a hit).

    >>> hits_at_1_pog("The answer is {Jamaica}.", ["Jamaica"])        # the whole reply, braces and all
    True
    >>> hits_at_1_pog("{Barack Obama, Joe Biden}", ["Joe Biden"])     # any alias inside the field
    True
    >>> hits_at_1_pog("Obama", ["Barack Obama"])                      # the field inside an alias
    True
    >>> hits_at_1_pog("St. Louis", ["Saint Louis"]), hits_at_1_pog("", ["Jamaica"])
    (False, False)
    """
    return _contains_either_way(answer_field, gold, normalize_pog)


def _contains_either_way(text: str, gold: Iterable[str], normalize: Any) -> bool:
    """PoG/ToG's rule: after `normalize`, equal to a gold alias or either inside the other; empty never hits."""
    field = normalize(text)
    return bool(field) and any(alias and (field in alias or alias in field) for alias in map(normalize, _aliases(gold)))


def normalize_strict(text: str) -> str:
    """SQuAD-style normalisation (DSPy's `EM`) on the project's name normaliser (`kg.names.normalize_name`:
    case, accents, apostrophes, punctuation, `_`), then the articles a/an/the dropped.

    >>> normalize_strict("The_Dark_Knight")
    'dark knight'
    >>> normalize_strict("Washington, D.C.")
    'washington dc'
    >>> normalize_strict("  An   Apple! ")
    'apple'
    """
    return " ".join(_ARTICLES.sub(" ", normalize_name(text)).split())


def hits_at_1_strict(prediction: str, gold: Iterable[str]) -> bool:
    """True when the prediction equals a gold alias after `normalize_strict`; no containment.

    >>> hits_at_1_strict("the dark knight", ["The_Dark_Knight"])
    True
    >>> hits_at_1_strict("Christopher Nolan", ["Nolan"])       # lenient says True
    False
    """
    pred = normalize_strict(prediction)
    return bool(pred) and any(pred == normalize_strict(answer) for answer in _aliases(gold))


def normalize_rog(text: str) -> str:
    """RoG's normalisation (its `evaluate_results.py`): lower-case, punctuation dropped, articles dropped, spaces
    collapsed.

    >>> normalize_rog("The Washington, D.C.!")
    'washington dc'
    """
    text = "".join(ch for ch in str(text).lower() if ch not in string.punctuation)
    return " ".join(_ARTICLES.sub(" ", text).split())


def hit_rog(predictions: Iterable[str] | str, gold: Iterable[str] | str) -> bool:
    """RoG's "Hit": any gold answer inside the predictions joined by spaces, after `normalize_rog`; empty never hits.

    >>> hit_rog(["Lyon", "Paris, France"], ["Paris"])     # any prediction, and containment
    True
    >>> hit_rog(["Paris"], ["Paris, France"]), hit_rog([], ["Paris"])
    (False, False)
    """
    field = normalize_rog(" ".join(_aliases(predictions)))
    return bool(field) and any(alias and alias in field for alias in map(normalize_rog, _aliases(gold)))


def _aliases(gold: Iterable[str] | str) -> list[str]:
    """A lone string is one alias, not a sequence of one-letter aliases."""
    return [gold] if isinstance(gold, str) else [str(a) for a in gold]


def _groups(gold: Iterable[str | Sequence[str]]) -> list[set[str]]:
    """Gold answers as sets of normalised aliases, one set per answer; empty aliases and answers dropped."""
    groups = []
    for answer in gold:
        aliases = [answer] if isinstance(answer, str) else list(answer)
        normalised = {n for n in (normalize_strict(a) for a in aliases) if n}
        if normalised:
            groups.append(normalised)
    return groups


def answer_f1(predictions: Iterable[str] | str, gold: Iterable[str | Sequence[str]] | str) -> float:
    """Set F1 between predicted and gold answers, on `normalize_strict`-ed strings.

    Each gold item is one answer: a string, or a list of that answer's aliases. Precision is the share
    of distinct predictions that match some gold answer; recall is the share of gold answers matched
    by some prediction, so naming one answer by two aliases does not count twice. With no grouping
    available, pass the plain gold list: every string is then its own answer.

    >>> answer_f1(["Titanic", "Avatar"], ["Avatar", "Titanic"])
    1.0
    >>> round(answer_f1(["Titanic"], ["Titanic", "Avatar"]), 3)
    0.667
    >>> answer_f1(["Chris Nolan", "Christopher Nolan"], [["Christopher Nolan", "Chris Nolan"]])
    1.0
    >>> answer_f1([], ["Avatar"]), answer_f1(["Avatar"], [])
    (0.0, 0.0)
    """
    preds = {n for n in (normalize_strict(p) for p in _aliases(predictions)) if n}
    groups = _groups([gold] if isinstance(gold, str) else gold)
    if not preds or not groups:
        return 0.0
    precision = sum(any(p in g for g in groups) for p in preds) / len(preds)
    recall = sum(bool(g & preds) for g in groups) / len(groups)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def predicted_answers(prediction: Any) -> list[str]:
    """The predicted labels, best first, from a `dspy.Prediction`-like object with `.answers`,
    a mapping with `"answers"`, a list of strings, or one string."""
    if prediction is None:
        return []
    if isinstance(prediction, str):
        answers: Any = [prediction]
    elif isinstance(prediction, Mapping):
        answers = prediction.get("answers", [])
    elif hasattr(prediction, "answers"):
        answers = prediction.answers
    else:
        answers = prediction
    if isinstance(answers, str):
        answers = [answers]
    return [str(a) for a in (answers or []) if a is not None and str(a).strip()]


def _field(example: Any, name: str, default: Any = None) -> Any:
    if isinstance(example, Mapping):
        return example.get(name, default)
    return getattr(example, name, default)


def score_prediction(example: Any, prediction: Any, *, answer_field: str | None = None) -> dict[str, float]:
    """`{"hits@1": 0/1, "hits@1_strict": 0/1, "f1": float, "hits@1_pog": 0/1}` for one example.

    Hits@1 looks at the first predicted answer only. F1 uses `metadata["answer_groups"]` (one list of
    aliases per answer) when the loader knows them, otherwise `answers` as the answer set.
    `hits@1_pog` scores `answer_field` (PoG's whole `results` text) when given, else the first answer.

    >>> score_prediction({"answers": ["Jamaica"]}, ["Jamaica"])
    {'hits@1': 1, 'hits@1_strict': 1, 'f1': 1.0, 'hits@1_pog': 1}
    >>> score_prediction({"answers": ["Jamaica"]}, ["Kingston"], answer_field="Kingston, {Jamaica}")
    {'hits@1': 0, 'hits@1_strict': 0, 'f1': 0.0, 'hits@1_pog': 1}
    """
    preds = predicted_answers(prediction)
    gold = list(_field(example, "answers", None) or [])
    metadata = _field(example, "metadata", None) or {}
    groups = metadata.get("answer_groups") if isinstance(metadata, Mapping) else None
    first = preds[0] if preds else ""
    return {
        "hits@1": int(hits_at_1_lenient(first, gold)),
        "hits@1_strict": int(hits_at_1_strict(first, gold)),
        "f1": answer_f1(preds, groups or gold),
        "hits@1_pog": int(hits_at_1_pog(first if answer_field is None else answer_field, gold)),
    }


def dspy_metric(example: Any, pred: Any, trace: Any = None) -> float:
    """Lenient Hits@1 as a DSPy metric `(gold, pred, trace=None)`, for `dspy.Evaluate` and the optimizers."""
    return float(score_prediction(example, pred)["hits@1"])


def breakdown(rows: Iterable[Mapping[str, Any]], key: str) -> dict[Any, dict[str, float]]:
    """Mean of each metric per value of `key` (e.g. `type`, `level`, `hops`), plus the count `n`.

    A row is a mapping holding the metric values (at top level, under `"metrics"` or under `"scores"`) and
    `key` (at top level or under `"metadata"`), as the evaluator writes them. A metric missing from a row counts as 0
    (a failed question scores nothing). Rows without a value for `key` are grouped under None. Groups
    come back sorted by their key's text.
    """
    groups: dict[Any, dict[str, list[float]]] = {}
    for row in rows:
        scores = next((row[k] for k in ("metrics", "scores") if isinstance(row.get(k), Mapping)), row)
        metadata = row.get("metadata") if isinstance(row.get("metadata"), Mapping) else {}
        value = row[key] if key in row else metadata.get(key)
        if isinstance(value, list):
            value = tuple(value)
        values = groups.setdefault(value, {m: [] for m in METRICS})
        for metric in METRICS:
            values[metric].append(float(scores.get(metric, 0.0) or 0.0))
    out = {}
    for value in sorted(groups, key=lambda v: (v is None, str(v))):
        # fsum is exact, so a group's mean does not depend on the rows' order (merged shards = one run)
        n = len(groups[value][METRICS[0]])
        out[value] = {"n": n, **{m: math.fsum(groups[value][m]) / n for m in METRICS}}
    return out


__all__ = [
    "METRICS",
    "answer_f1",
    "breakdown",
    "dspy_metric",
    "hits_at_1_lenient",
    "hits_at_1_pog",
    "hits_at_1_strict",
    "normalize_lenient",
    "normalize_pog",
    "normalize_rog",
    "normalize_strict",
    "predicted_answers",
    "score_prediction",
]
