"""`rog:` at the size of RoG's CWQ test split: time to the first answered question and peak RSS.

Usage:
    python benchmarks/rog_scale_bench.py [--rows 3531] [--graph-gb 1.2] [--files 3] [--group-rows 1000]
                                         [--sample 40] [--keep DIR]

Writes a synthetic release in RoG's schema to a temporary folder (`--keep DIR` keeps it there): `--rows` questions
in `--files` parquet files named as on the hub (`data/test-0000N-of-0000F.parquet`), `--group-rows` rows per row
group, and `--graph-gb` GB of graph text (the sum of the head, relation and tail strings). Nodes are labels
("Entity 123456") or mids of unnamed nodes (`m.0...`, a third of them); relations are the CWQ sample's Freebase
relations when ../shared/data is there, else Freebase-shaped names. Each question's topic entity and answer are on
its graph, two hops apart through a mediator.

Then runs `ppoga eval --dataset rog:DIR --split test --lm none` on a seeded draw of `--sample` questions spread
over every file, in a child process, and prints: seconds from the child's start to the first question written to
the run file, seconds per question, and the child's peak RSS (getrusage of the waited child). The issue's targets:
first question within 10 s, peak RSS under 2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _data import BESIDE_REPO, add_data_option

REPO = Path(__file__).resolve().parents[1]


def relation_names(data: Path) -> list[str]:
    sample = data / "cwq-subgraph-sample" / "relations.txt"
    if sample.is_file():
        return [r.strip() for r in sample.read_text(encoding="utf-8").splitlines() if r.strip()]
    return [f"domain{i % 40}.type{i % 97}.property_{i}" for i in range(857)]


def write_release(out: Path, *, rows: int, graph_bytes: float, files: int, group_rows: int,
                  relations: list[str], seed: int = 0) -> dict:
    """The synthetic release (see the module docstring), built with numpy and pyarrow a row group at a time."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    pool_size = 2_000_000
    labels = [f"m.0{i:x}q" if i % 3 == 0 else f"Entity {i}" for i in range(pool_size)]
    pool = pa.array(labels + relations, pa.string())
    label_bytes = sum(map(len, labels)) / pool_size
    rel_bytes = sum(map(len, relations)) / len(relations)
    edges_per_row = int(graph_bytes / rows / (2 * label_bytes + rel_bytes))
    nodes_per_row = max(50, edges_per_row // 4)
    (out / "data").mkdir(parents=True, exist_ok=True)
    per_file = -(-rows // files)
    written, text_bytes, number = 0, 0, 0
    for f in range(files):
        n_file = min(per_file, rows - written)
        path = out / "data" / f"test-{f:05d}-of-{files:05d}.parquet"
        writer = None
        for start in range(0, n_file, group_rows):
            n = min(group_rows, n_file - start)
            sizes = np.maximum(10, rng.normal(edges_per_row, edges_per_row / 4, n)).astype(np.int64)
            flat, q_entity, answer = [], [], []
            for size in sizes:
                nodes = rng.integers(0, pool_size, nodes_per_row)
                nodes[0] = (nodes[0] // 3) * 3 + 1  # a named topic
                nodes[1] = (nodes[1] // 3) * 3  # a mediator (a mid)
                nodes[2] = (nodes[2] // 3) * 3 + 2  # a named answer
                heads = nodes[rng.integers(0, nodes_per_row, size)]
                tails = nodes[rng.integers(0, nodes_per_row, size)]
                rels = pool_size + rng.integers(0, len(relations), size)
                heads[:2], tails[:2] = nodes[[0, 1]], nodes[[1, 2]]  # topic -> mediator -> answer
                flat.append(np.stack([heads, rels, tails], axis=1).reshape(-1))
                q_entity.append([labels[nodes[0]]])
                answer.append([labels[nodes[2]]])
            strings = pool.take(pa.array(np.concatenate(flat)))
            triples = pa.ListArray.from_arrays(pa.array(np.arange(0, len(strings) + 1, 3, dtype=np.int32)), strings)
            graph = pa.ListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)),
                                             triples)
            text_bytes += pa.compute.sum(pa.compute.binary_length(strings)).as_py()
            table = pa.table({
                "id": [f"synthetic-{number + i}" for i in range(n)],
                "question": [f"What is reached from {q[0]} through its mediator? ({number + i})"
                             for i, q in enumerate(q_entity)],
                "answer": answer, "q_entity": q_entity, "a_entity": answer, "graph": graph,
            })
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table, row_group_size=group_rows)
            number += n
            del flat, strings, triples, graph, table
        writer.close()
        written += n_file
    size = sum(p.stat().st_size for p in (out / "data").iterdir())
    return {"rows": rows, "files": files, "group_rows": group_rows, "edges_per_row": edges_per_row,
            "graph_text_gb": round(text_bytes / 1e9, 3), "parquet_gb": round(size / 1e9, 3)}


def run_eval(release: Path, run: Path, sample: int) -> dict:
    """`ppoga eval` in a child process; seconds to the first row of the run file, per question, child peak RSS."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PPOGA_KG_CACHE": "off"}
    cmd = [sys.executable, "-m", "ppoga_dspy.cli", "eval", "--dataset", f"rog:{release}", "--split", "test",
           "--lm", "none", "--sample", str(sample), "--out", str(run), "--no-progress", "--json"]
    started = time.perf_counter()
    child = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = None
    while child.poll() is None:
        if first is None and run.is_file() and run.stat().st_size > 0:
            first = time.perf_counter() - started
        time.sleep(0.05)
    total = time.perf_counter() - started
    out, err = child.communicate()
    if child.returncode not in (0, 7):  # 7: some questions failed (reported below), the run itself finished
        sys.exit(f"rog_scale_bench.py: ppoga eval failed ({child.returncode}):\n{err[-3000:]}")
    if first is None:
        first = total
    summary = json.loads(out.strip().splitlines()[-1])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # kB on Linux
    return {"first_question_s": round(first, 2), "total_s": round(total, 2), "questions": summary["n"],
            "failed": summary["failed"], "seconds_per_question": round(summary["seconds_mean"], 3),
            "peak_rss_gb": round(peak / 1e9, 3), "startup_s": summary.get("startup_seconds")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=3531)
    parser.add_argument("--graph-gb", type=float, default=1.2)
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--group-rows", type=int, default=1000)
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--keep", type=Path, default=None, help="write the release here and keep it")
    add_data_option(parser)
    args = parser.parse_args()
    data = args.data or BESIDE_REPO  # only for the sample's relation names; synthetic ones without it
    with tempfile.TemporaryDirectory(prefix="rog-scale-") as tmp:
        release = args.keep or Path(tmp) / "RoG-synthetic"
        started = time.perf_counter()
        if not (release / "data").is_dir():
            shape = write_release(release, rows=args.rows, graph_bytes=args.graph_gb * 1e9, files=args.files,
                                  group_rows=args.group_rows, relations=relation_names(data))
            shape["written_s"] = round(time.perf_counter() - started, 1)
            print("release:", json.dumps(shape))
        result = run_eval(release, Path(tmp) / "run.jsonl", args.sample)
    print("run:", json.dumps(result))
    print(f"first question answered {result['first_question_s']:.1f} s after start (target < 10 s); "
          f"peak RSS {result['peak_rss_gb']:.2f} GB (target < 2 GB); {result['questions']} questions, "
          f"{result['seconds_per_question']:.2f} s each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
