"""Datasets whose questions each come with their own graph (NSM's and RoG's subgraph releases): which graph a run
opens, and the stand-in KG of a run whose questions open theirs one at a time.

Two ways to run such a dataset, chosen with `--kg`:

- `per-question`: each question on its own graph, built when the question runs and dropped after (as GraftNet,
  NSM and RoG run them). Memory stays bounded by one question's graph, whatever the split's size: the default of
  `rog:`. The run's KG is `QuestionGraphs`, which answers no query itself; `evaluation.answer_one` sees it and
  runs the question on `open_for(example)`.
- `union`: every question on the union of the graphs of the files it came from, imported once into a store
  under the KG cache: the default of `nsm:` (a release's own vocabulary makes the union consistent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ppoga_dspy.kg.base import KGUnavailableError
from ppoga_dspy.kg.graph import SparqlGraph

MODES = ("per-question", "union")
#: the spec formats whose questions carry a graph, and the mode each runs in without `--kg`
DEFAULT_MODE = {"nsm": "union", "rog": "per-question"}


def own_graph_mode(dataset_spec: str | None, kg: str | None) -> str | None:
    """`per-question` or `union` for a dataset with per-question graphs (`--kg` naming one, or the default), else
    None (the KG is what `--kg` names)."""
    if not dataset_spec or ":" not in dataset_spec:
        return None
    fmt = dataset_spec.partition(":")[0].strip().lower()
    if fmt not in DEFAULT_MODE:
        return None
    if kg is None:
        return DEFAULT_MODE[fmt]
    mode = kg.strip().lower()
    return mode if mode in MODES else None


class _Unanswered:
    """The engine of `QuestionGraphs`: any query is a bug (a caller that bypassed `open_for`), told as such."""

    kind = "embedded"
    can_scan_labels = False

    def __init__(self, name: str) -> None:
        self.name = name

    def select(self, query: str):
        raise KGUnavailableError(
            f"{self.name}: each question runs on its own graph, opened by `ppoga eval` (evaluation.answer_one); "
            "to query one graph for every question pass --kg union")

    def count_triples(self) -> int:
        return 0

    def close(self) -> None:
        return None


class QuestionGraphs(SparqlGraph):
    """The KG of a run whose questions each open their own graph (`per_question` marks it for the evaluator)."""

    per_question = True

    def __init__(self, fmt: str, source: str, **options: Any) -> None:
        from ppoga_dspy.kg.dialects import get_dialect

        super().__init__(_Unanswered(f"each question's own graph ({fmt}:{source})"),
                         get_dialect("freebase", ontology=options.get("ontology")))
        self.fmt, self.options = fmt, options

    def open_for(self, example: Any) -> SparqlGraph:
        """The example's own graph, in memory; the caller closes it (`with`) when the question ends."""
        if self.fmt == "rog":
            from ppoga_dspy.datasets.rog import question_kg

            return question_kg(example, **self.options)
        from ppoga_dspy.datasets.nsm import kg_for

        return kg_for(example, **self.options)


def open_own_graph(dataset_spec: str, mode: str, examples: list | None, **options: Any):
    """The KG of a run of a per-question-graph dataset in `mode` (see the module docstring)."""
    from ppoga_dspy.kg import open_kg

    fmt, _, path = dataset_spec.partition(":")
    fmt = fmt.strip().lower()
    if mode == "per-question":
        return QuestionGraphs(fmt, path.strip(), **options)
    if fmt == "rog":
        from ppoga_dspy.datasets.rog import files_of, union_store

        if not examples:
            from ppoga_dspy.datasets.loaders import load_dataset

            examples = load_dataset(dataset_spec, split="all")
        return open_kg(str(union_store(files_of(examples))), dialect="freebase", **options)
    from ppoga_dspy.datasets.nsm import union_store as nsm_union

    return open_kg(str(nsm_union(Path(path.strip()))), dialect="freebase", **options)
