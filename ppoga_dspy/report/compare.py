"""Runs compared on the questions they share: differences with paired intervals, McNemar, questions won and lost.

Two runs are comparable only question by question: a run on 30 questions and one on 51 have different
means even with the same system. So every comparison is made on the ids *all* runs answered, in the
first run's order, and says so loudly when the runs' questions differ (`Coverage.warning`). Each later run
is compared with the first (the baseline): for each metric the mean on the shared questions, the
difference and its paired bootstrap interval (`stats.paired_bootstrap`); for Hits@1 also McNemar's
exact test; and the questions it won (right where the baseline was wrong) and lost. Provenance rows (LM,
program fingerprint, dataset, split, seed, KG) say what each run was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ppoga_dspy.report.stats import McNemar, PairedDifference, mcnemar_exact, paired_bootstrap

#: (label, how a row gives the value, number format): the quantities compared, per question.
COMPARED: tuple[tuple[str, Callable[[dict[str, Any]], float], str], ...] = (
    ("Hits@1", lambda r: float((r.get("metrics") or {}).get("hits@1", 0) or 0), "{:+.3f}"),
    ("Hits@1 (strict)", lambda r: float((r.get("metrics") or {}).get("hits@1_strict", 0) or 0), "{:+.3f}"),
    ("F1", lambda r: float((r.get("metrics") or {}).get("f1", 0) or 0), "{:+.3f}"),
    ("LM calls / q", lambda r: float(r.get("call_num") or 0), "{:+.2f}"),
    ("tokens / q", lambda r: float(r.get("total_token") or 0), "{:+.0f}"),
    ("seconds / q", lambda r: float(r.get("time") or 0), "{:+.2f}"),
)
#: Provenance shown per run: label, row key (metadata used when the row has none).
PROVENANCE = (("LM", "lm"), ("program", "program"), ("dataset", "dataset"), ("split", "split"), ("seed", "seed"),
              ("KG", "kg"))


@dataclass
class Coverage:
    """Which question ids each run holds, and those all runs share (in the first run's order)."""

    ids: dict[str, list[str]]
    shared: list[str]

    @property
    def equal(self) -> bool:
        return all(len(ids) == len(self.shared) for ids in self.ids.values())

    def only(self, name: str) -> list[str]:
        """The ids of run `name` that some other run lacks."""
        shared = set(self.shared)
        return [i for i in self.ids[name] if i not in shared]

    @property
    def warning(self) -> str | None:
        """One line when the runs cover different questions, else None."""
        if self.equal:
            return None
        sizes = ", ".join(f"{name}: {len(ids)}" for name, ids in self.ids.items())
        return (f"the runs cover different questions ({sizes}); they are compared on the {len(self.shared)} "
                "questions they share")


@dataclass
class PairComparison:
    """A run against the baseline on the shared questions."""

    baseline: str
    other: str
    differences: dict[str, PairedDifference]
    mcnemar: McNemar
    won: list[str] = field(default_factory=list)  # ids right in `other`, wrong in the baseline
    lost: list[str] = field(default_factory=list)  # ids right in the baseline, wrong in `other`


@dataclass
class Comparison:
    names: list[str]
    coverage: Coverage
    pairs: list[PairComparison]
    provenance: dict[str, dict[str, str]]
    questions: dict[str, str]  # id -> question text, for the lists of won and lost questions


def _id(row: dict[str, Any]) -> str:
    return str(row.get("id"))


def provenance_of(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Each provenance field's value(s) across a run's rows ("-" when no row records it)."""
    out = {}
    for label, key in PROVENANCE:
        values = []
        for row in rows:
            value = row.get(key)
            if value in (None, "") and key == "dataset":
                value = (row.get("metadata") or {}).get("dataset")
            if value not in (None, "") and str(value) not in values:
                values.append(str(value))
        out[label] = " | ".join(values[:3]) + (f" (+{len(values) - 3} more)" if len(values) > 3 else "") or "-"
    return out


def compare_runs(runs: dict[str, list[dict[str, Any]]], *, resamples: int = 10_000, seed: int = 0) -> Comparison:
    """Compare every run with the first on the questions all of them answered (see the module doc)."""
    names = list(runs)
    if len(names) < 2:
        raise ValueError("a comparison needs two runs or more")
    by_id = {name: {_id(r): r for r in rows} for name, rows in runs.items()}
    ids = {name: list(by_id[name]) for name in names}
    common = set.intersection(*(set(v) for v in ids.values()))
    shared = [i for i in ids[names[0]] if i in common]
    baseline = by_id[names[0]]
    pairs = []
    for name in names[1:]:
        other = by_id[name]
        differences = {}
        for label, value, _ in COMPARED:
            a = [value(baseline[i]) for i in shared]
            b = [value(other[i]) for i in shared]
            differences[label] = paired_bootstrap(a, b, resamples=resamples, seed=seed)
        hit_a = [int(bool((baseline[i].get("metrics") or {}).get("hits@1"))) for i in shared]
        hit_b = [int(bool((other[i].get("metrics") or {}).get("hits@1"))) for i in shared]
        pairs.append(PairComparison(
            baseline=names[0], other=name, differences=differences, mcnemar=mcnemar_exact(hit_a, hit_b),
            won=[i for i, x, y in zip(shared, hit_a, hit_b, strict=True) if y and not x],
            lost=[i for i, x, y in zip(shared, hit_a, hit_b, strict=True) if x and not y],
        ))
    questions = {i: str(row.get("question", "")) for rows in by_id.values() for i, row in rows.items()}
    return Comparison(names=names, coverage=Coverage(ids=ids, shared=shared), pairs=pairs,
                      provenance={name: provenance_of(rows) for name, rows in runs.items()}, questions=questions)


def comparison_tables(comparison: Comparison, *, listed: int = 20) -> list[Any]:
    """Rich renderables for the terminal: provenance, each run against the baseline, questions won and lost."""
    from rich.table import Table

    out: list[Any] = []
    provenance = Table(title="provenance")
    provenance.add_column("")
    for name in comparison.names:
        provenance.add_column(name, overflow="fold")
    provenance.add_row("questions", *[str(len(comparison.coverage.ids[n])) for n in comparison.names])
    for label, _ in PROVENANCE:
        provenance.add_row(label, *[comparison.provenance[n][label] for n in comparison.names])
    out.append(provenance)
    for pair in comparison.pairs:
        n = len(comparison.coverage.shared)
        table = Table(title=f"{pair.other} vs {pair.baseline} on {n} shared questions "
                            "(difference = second - first, 95% paired bootstrap interval)")
        for column in ("metric", pair.baseline, pair.other, "difference", "95% interval"):
            table.add_column(column, justify="left" if column == "metric" else "right")
        for label, _, fmt in COMPARED:
            d = pair.differences[label]
            plain = fmt.replace("+", "")
            interval = f"[{fmt.format(d.low)}, {fmt.format(d.high)}]" + (" *" if d.excludes_zero else "")
            table.add_row(label, plain.format(d.mean_a), plain.format(d.mean_b), fmt.format(d.difference), interval)
        m = pair.mcnemar
        table.caption = (f"Hits@1: McNemar exact p = {m.p_value:.4g} ({m.b_only} questions right only in "
                         f"{pair.other}, {m.a_only} right only in {pair.baseline}); * interval excludes 0")
        out.append(table)
        for what, ids in (("won", pair.won), ("lost", pair.lost)):
            listing = Table(title=f"{pair.other} {what} {len(ids)} question(s) against {pair.baseline}"
                                  + (f" (first {listed})" if len(ids) > listed else ""), show_header=False)
            listing.add_column("id")
            listing.add_column("question", overflow="fold")
            for i in ids[:listed]:
                listing.add_row(i, comparison.questions.get(i, ""))
            if ids:
                out.append(listing)
    return out


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    """The comparison as plain JSON (for `ppoga report --json` and the HTML report)."""
    from dataclasses import asdict

    return {
        "runs": comparison.names,
        "questions": {name: len(ids) for name, ids in comparison.coverage.ids.items()},
        "shared": len(comparison.coverage.shared),
        "warning": comparison.coverage.warning,
        "only": {name: comparison.coverage.only(name) for name in comparison.names},
        "provenance": comparison.provenance,
        "pairs": [{"baseline": p.baseline, "other": p.other,
                   "differences": {k: asdict(v) for k, v in p.differences.items()},
                   "mcnemar": asdict(p.mcnemar), "won": p.won, "lost": p.lost} for p in comparison.pairs],
    }
