"""Deterministic slices of a benchmark (`ppoga eval --shard I/N`) and the merge of their run files.

Which questions a shard holds: question q is in shard I of N when
`int(sha1(example_id(q))[:16], 16) % N == I - 1`. A stable hash of the question's id, not
contiguous index ranges, because
- membership depends on the question alone, not on the order of the file or on how many
  questions the others got: `--limit`, a reordered file or a grown dataset move no question to
  another shard, so a shard's run file stays resumable;
- benchmark files are often sorted (by hop count, type, template), and index ranges would hand
  one machine all the hard questions, so the shards' wall times and partial results would differ
  for reasons that have nothing to do with the machines;
- every machine computes its slice alone, with no coordinator and no shared state.
The cost is that shard sizes are only about equal (binomial, e.g. 35 demo questions into 3 shards
give 11/13/11).

Sharding applies after `--split`, `--seed` and `--limit`, so every shard of one benchmark must get
the same values for those. Each run line records `{"shard": {"index": I, "count": N, "of": T}}`
(T: questions in the unsharded selection), so `ppoga report` recognises the files of one sharded
run, checks that they are complete and disjoint, and summarizes their union, which is the same
summary as an unsharded run's (`summarize` does not depend on row order), timings aside.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ppoga_dspy.errors import ConfigError
from ppoga_dspy.evaluation.evaluate import EvaluationError, example_id

SHARD_KEY = "shard"


@dataclass(frozen=True)
class Shard:
    """Shard `index` (1-based) of `count`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`I/N` with 1 <= I <= N, e.g. `2/4`."""
        try:
            index_text, count_text = text.split("/")
            shard = cls(int(index_text), int(count_text))
        except ValueError:
            raise ConfigError(f"--shard wants I/N (e.g. 1/4), got {text!r}") from None
        if shard.count < 1 or not 1 <= shard.index <= shard.count:
            raise ConfigError(f"--shard {text}: I must be between 1 and N, and N at least 1")
        return shard

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, question_id: str) -> bool:
        digest = hashlib.sha1(question_id.encode("utf-8")).hexdigest()
        return int(digest[:16], 16) % self.count == self.index - 1

    def select(self, examples: list) -> list:
        """This shard's examples, in their original order."""
        return [example for example in examples if self.holds(example_id(example))]

    def record(self, total: int) -> dict[str, Any]:
        """What each run line of this shard carries."""
        return {SHARD_KEY: {"index": self.index, "count": self.count, "of": total}}


def shard_info(rows: list[dict[str, Any]]) -> tuple[int, int, int] | None:
    """(index, count, of) when every row of a run file carries the same shard record, else None."""
    seen = {tuple((row.get(SHARD_KEY) or {}).get(k) for k in ("index", "count", "of")) for row in rows}
    if len(seen) != 1:
        return None
    info = next(iter(seen))
    return info if None not in info else None  # type: ignore[return-value]


def are_shards_of_one_run(runs: dict[str, list[dict[str, Any]]]) -> bool:
    """True when there are several files, each one shard of the same N and T, no index twice."""
    infos = [shard_info(rows) for rows in runs.values()]
    if len(runs) < 2 or any(info is None for info in infos):
        return False
    return len({info[1:] for info in infos}) == 1 and len({info[0] for info in infos}) == len(infos)


@dataclass
class Merged:
    rows: list[dict[str, Any]]
    name: str
    missing_shards: list[int]
    complete: bool


def merge_runs(runs: dict[str, list[dict[str, Any]]]) -> Merged:
    """The union of several run files' rows; a question in two files is an error (shards never overlap)."""
    owner: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    for path, file_rows in runs.items():
        for row in file_rows:
            qid = str(row.get("id"))
            if qid in owner:
                raise EvaluationError(f"question {qid} is in both {owner[qid]} and {path}: these are not disjoint "
                                      "shards (run each with the same --split/--seed/--limit and its own --shard)")
            owner[qid] = path
            rows.append(row)
    missing: list[int] = []
    complete = True
    infos = [shard_info(r) for r in runs.values()]
    if all(info is not None for info in infos) and infos:
        count, total = infos[0][1], infos[0][2]
        missing = sorted(set(range(1, count + 1)) - {info[0] for info in infos})
        complete = not missing and len(rows) == total
    name = " + ".join(runs)
    return Merged(rows=rows, name=f"merged({name})", missing_shards=missing, complete=complete)
