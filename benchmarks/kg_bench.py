"""KG look-ups per second: embedded store vs served endpoints, cold vs cached, 1 vs 8 threads.

Usage:
    python benchmarks/kg_bench.py [--kb PATH] [--ops N] [--no-virtuoso]

The KB defaults to the largest IRN KB (by fact count) under ../shared/data. The workload is the
same for every configuration: N look-ups alternating `relations(entity, OUT)` and
`neighbors(entity, relation, OUT)` over (entity, relation) pairs taken from the KB in a seeded
random order. "cold" runs with the query cache disabled (cache_size=0, every call reaches the
engine); "cached" times a second pass after a warm-up pass over the same workload. Prints a table.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _data import add_data_option, data_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
IRN_KBS = ["wc2014/WC2014.txt", "pathquestion/PQL3-KB.txt", "pathquestion/PQL2-KB.txt", "pathquestion/3H-kb.txt",
           "pathquestion/2H-kb.txt"]


def largest_kb(data: Path) -> Path:
    present = [data / p for p in IRN_KBS if (data / p).is_file()]
    if not present:
        sys.exit(f"kg_bench.py: no IRN KB found under {data}; pass --kb PATH or --data DIR")
    return max(present, key=lambda p: sum(1 for line in p.open(encoding="utf-8") if line.strip()))


def workload(kb: Path, ops: int, seed: int = 0) -> list[tuple[str, str]]:
    """(entity, relation) pairs from the KB, seeded shuffle, repeated up to `ops`."""
    from ppoga_dspy.kg.dialects import pql_relation

    pairs = sorted(
        {(s, pql_relation(r)) for s, r, _ in (line.rstrip("\n").split("\t") for line in kb.open(encoding="utf-8"))}
    )
    rng = random.Random(seed)
    rng.shuffle(pairs)
    return [pairs[i % len(pairs)] for i in range(ops)]


def run(kg, pairs: list[tuple[str, str]], threads: int) -> float:
    """Seconds to run the workload on `threads` threads."""

    def one(i: int) -> None:
        entity, relation = pairs[i]
        if i % 2:
            kg.neighbors(entity, relation)
        else:
            kg.relations(entity)

    started = time.perf_counter()
    if threads == 1:
        for i in range(len(pairs)):
            one(i)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, range(len(pairs)), chunksize=16))
    return time.perf_counter() - started


def measure(name: str, spec, pairs, rows: list) -> None:
    from ppoga_dspy.kg import open_kg

    for threads in (1, 8):
        cold = open_kg(spec, dialect="irn", cache_size=0)
        seconds = run(cold, pairs, threads)
        rows.append((name, "cold", threads, len(pairs) / seconds, cold.stats().queries))
        cached = open_kg(spec, dialect="irn", cache_size=len(pairs) * 2)
        run(cached, pairs, threads)
        before = cached.stats().queries
        seconds = run(cached, pairs, threads)
        rows.append((name, "cached", threads, len(pairs) / seconds, cached.stats().queries - before))
        print(f"  {name}: {threads} thread(s) done", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", type=Path, default=None, help="IRN KB file (default: the largest in the data folder)")
    add_data_option(parser)
    parser.add_argument("--ops", type=int, default=4000, help="look-ups per configuration (default 4000)")
    parser.add_argument("--no-virtuoso", action="store_true", help="skip Virtuoso even when its binaries exist")
    args = parser.parse_args()

    from ppoga_dspy.kg import servers
    from ppoga_dspy.kg.importers import export_ntriples

    kb = args.kb or largest_kb(data_dir(args.data))
    pairs = workload(kb, args.ops)
    rows: list = []
    print(f"KB {kb} ({len(set(pairs))} distinct entity/relation pairs), {args.ops} look-ups per row", file=sys.stderr)
    measure("embedded (memory)", [kb], pairs, rows)
    with tempfile.TemporaryDirectory(prefix="kg-bench-") as tmp:
        nt = Path(tmp) / "kb.nt"
        export_ntriples([kb], nt)
        with servers.start_oxigraph([nt], Path(tmp)) as handle:
            measure("oxigraph serve", handle.url, pairs, rows)
        if args.no_virtuoso:
            pass
        elif servers.virtuoso_home() is None:
            print("  Virtuoso skipped: binaries absent (run scripts/setup_virtuoso.sh)", file=sys.stderr)
        else:
            with servers.start_virtuoso([nt], Path(tmp)) as handle:
                measure("Virtuoso 7.2", handle.url, pairs, rows)

    print(f"\nKG look-ups per second on {kb.name} ({args.ops} calls: relations/neighbors alternating)\n")
    print(f"{'engine':<20} {'cache':<7} {'threads':>7} {'look-ups/s':>12} {'engine queries':>15}")
    print("-" * 65)
    for name, cache, threads, rate, queries in rows:
        print(f"{name:<20} {cache:<7} {threads:>7} {rate:>12,.0f} {queries:>15,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
