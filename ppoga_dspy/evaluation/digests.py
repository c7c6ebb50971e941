"""A run row's digest: the small part of a row that summaries and comparisons read, kept instead of the row.

A row as `eval` writes it is mostly reasoning (`trace`, `memory`, `reasoning_chains`: about 8 KB of a demo row),
and `ppoga report` over 50,000 rows held all of them (2 GB). A summary needs only ids, metrics, costs, status and
the metadata it groups by, plus a few counts read off the trace. `read_run_digests` streams a run file and keeps,
per question, a digest: the fields in `DIGEST_FIELDS` (costs and metadata cut to their plain values) and a
`RowDigest` under `DIGEST_KEY` with the trace-derived counts and where the whole row is in the file, so a page that
shows one question's reasoning reads that row again (`RowFetcher`) instead of holding every row.

A digest is a plain dict, so `summarize`, `breakdown`, `compare_runs` and `merge_runs` read it as they read a row;
the few functions that read the trace (`evaluate.choice_counts`, the report's correction counts) take the counts
from the `RowDigest`. The marker is a Python object, never JSON, so a run file cannot forge one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

#: The row fields a digest keeps: what summaries, comparisons, shard merges and the report's table read.
DIGEST_FIELDS = ("id", "question", "answers", "gold", "ungrounded", "metrics", "call_num", "input_token",
                 "cached_input_token", "output_token", "total_token", "time", "unusable_replies", "status",
                 "error_kind", "lm", "program", "dataset", "split", "seed", "kg", "shard", "source", "hops",
                 "type", "level")
#: Metadata keys kept whatever their value (the breakdowns' keys); other metadata is kept when it is a plain value.
GROUP_KEYS = ("type", "level", "hops")
#: Where a digest keeps its `RowDigest`.
DIGEST_KEY = "_digest"

#: The Executor's choice stages, and the note it writes when a choice named no candidate (method/executor.py).
CHOICE_STAGES = ("select_relations", "select_entities")

#: Trace-derived values a reader adds to each digest before the trace is dropped: row -> {name: value}.
Derive = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(slots=True)
class RowDigest:
    """What a digest knows beyond the kept fields: counts read off the trace, and where its whole row lies."""

    choices: dict[str, int]
    derived: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    number: int = 0
    offset: int = 0


def digest_of(row: dict[str, Any]) -> RowDigest | None:
    """The row's `RowDigest` when it is a digest; None for a whole row."""
    found = row.get(DIGEST_KEY)
    return found if isinstance(found, RowDigest) else None


def choice_counts(row: dict[str, Any]) -> dict[str, int]:
    """One question's choices from its trace: choice calls made, names that were no candidate, fallbacks taken.

    `non_candidate` counts the names a model chose that matched no offered candidate (`invalid` of the
    Executor's `*.fallback` notes); `fallbacks` counts the choices the Executor replaced by the
    best-ranked candidate (a non-candidate name, an unparseable reply, or none chosen). With the
    embedded engine's decode-time constraints on, `non_candidate` is 0 by construction. Here, beside the
    digest, because a digest counts them before its trace is dropped (`evaluate.summarize` reads them).
    """
    if (found := digest_of(row)) is not None:
        return dict(found.choices)
    counts = {"calls": 0, "non_candidate": 0, "fallbacks": 0}
    for event in row.get("trace") or []:
        stage = str(event.get("stage", "")) if isinstance(event, dict) else ""
        if stage in CHOICE_STAGES and not str(event.get("error") or "").startswith("no model"):
            counts["calls"] += 1
        elif stage.endswith(".fallback") and stage.split(".", 1)[0] in CHOICE_STAGES:
            counts["fallbacks"] += 1
            counts["non_candidate"] += len((event.get("outputs") or {}).get("invalid") or [])
    return counts


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _shared(value: Any) -> Any:
    """A short text as one shared object: each row's JSON makes its own copy of `oracle/gold-path`, `ok`, `demo`
    and every key, which over 50,000 digests is most of their memory."""
    return sys.intern(value) if isinstance(value, str) and len(value) <= 64 else value


def digest(row: dict[str, Any], *, path: Path | None = None, number: int = 0, offset: int = 0,
           derive: Iterable[Derive] = ()) -> dict[str, Any]:
    """The digest of a sound row (`row_check.damage` found nothing): the kept fields and a `RowDigest`."""
    kept = {name: _shared(row[name]) for name in DIGEST_FIELDS if name in row}
    for name in ("metrics", "costs", "metadata"):  # mappings of plain values (a breakdown key whatever its value)
        if isinstance(row.get(name), dict):
            kept[name] = {sys.intern(k): _shared(v) for k, v in row[name].items() if k in GROUP_KEYS or _plain(v)}
    derived: dict[str, Any] = {}
    for function in derive:
        derived.update(function(row))
    kept[DIGEST_KEY] = RowDigest(choices=choice_counts(row), derived=derived, path=path, number=number, offset=offset)
    return kept


def read_run_digests(path: Path, *, derive: Iterable[Derive] = ()) -> tuple[list[dict[str, Any]], list[str]]:
    """The digests of a run file's sound rows, one per id (the last sound row wins, in the order ids first
    appeared, as `runs.read_run_checked`), and one line per damaged row; the file is read one row at a time."""
    from ppoga_dspy.evaluation.runs import located_checked_rows

    derive = tuple(derive)
    by_id: dict[Any, dict[str, Any]] = {}
    damaged: list[str] = []
    for number, offset, row, problem in located_checked_rows(path):
        if problem:
            damaged.append(problem)
            continue
        by_id[row.get("id")] = digest(row, path=Path(path), number=number, offset=offset, derive=derive)
    return list(by_id.values()), damaged


class RowFetcher:
    """The whole row behind a digest, read again from its run file (one open handle per file); a whole row is
    given back as it is. Used as a context manager, so the handles are closed."""

    def __init__(self) -> None:
        self._handles: dict[Path, BinaryIO] = {}

    def __enter__(self) -> RowFetcher:
        return self

    def __exit__(self, *_: object) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()

    def full(self, row: dict[str, Any]) -> dict[str, Any]:
        """The whole row: read again at the digest's place, or `row` itself when it is no digest."""
        from ppoga_dspy.evaluation.runs import row_at

        found = digest_of(row)
        if found is None or found.path is None:
            return row
        handle = self._handles.get(found.path)
        if handle is None:
            handle = self._handles[found.path] = found.path.open("rb")
        return row_at(handle, found.path, found.number, found.offset)
