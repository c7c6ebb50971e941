"""RoG's WebQSP / CWQ subgraph release (`rmanluo/RoG-webqsp`, `rmanluo/RoG-cwq`) -> examples and KGs.

The files most WebQSP/CWQ methods now read (RoG, GNN-RAG, SubgraphRAG, GCR): one row per question with `id`,
`question`, `answer` (names), `q_entity` and `a_entity` (names) and `graph`, a list of `[head, relation, tail]`
strings in which an entity is its label and an unnamed (mediator) node its mid (`m.0abc`, `g.11b6`). A PATH is
a parquet file, a folder of them (the HF hub layout `data/test-00000-of-00002.parquet`, the split chosen by file
name), or a `datasets` Arrow cache folder (`...-test.arrow`, `.../test/data-00000-of-00001.arrow`).

Why by row group: the CWQ test split holds 1.2 GB of graph. The loader reads only the small columns, so an
evaluation starts in seconds; a question's graph is read from its row group (64 rows decoded at a time, the reader
kept where it stopped, as questions run in file order) when the question runs, loaded into an in-memory store, and
dropped after.

The graph is read in the Freebase dialect: a label becomes a Freebase-shaped id (`rog.<slug>.<digest>`, the same
for the same label in every question, so the union of all graphs is consistent) with the label as its
`type.object.name`; a mid stays an unnamed node, which the dialect reads through as a mediator.
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppoga_dspy.datasets.examples import DatasetError, DatasetSpecError
from ppoga_dspy.kg.dialects import FREEBASE_NS
from ppoga_dspy.kg.terms import escape_string

#: the split a file belongs to, read from the words of its path (`train-0000-of-0002`, `ro_g-cwq-validation`)
SPLIT_WORDS = {"train": ("train",), "dev": ("validation", "valid", "dev", "val"), "test": ("test",)}
GRAPH_BATCH_ROWS = 64
QUESTION_COLUMNS = ("id", "question", "answer", "q_entity", "a_entity")
_MID = re.compile(r"[mg]\.[A-Za-z0-9_]+")
_RELATION = re.compile(r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)+")
_NAME = FREEBASE_NS + "type.object.name"


def entity_id(label: str) -> str:
    """A label's id in the Freebase dialect: a mid as it is (an unnamed node), else `rog.<slug>.<digest>`.

    Why a digest: labels hold any character and two differ only in punctuation ("St. Louis", "St Louis"); the
    slug keeps ids readable in traces, the digest keeps them apart."""
    if _MID.fullmatch(label):
        return label
    ascii_text = unicodedata.normalize("NFKD", label).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^A-Za-z0-9]+", "_", ascii_text).strip("_")[:40] or "x"
    return f"rog.{slug}.{hashlib.sha1(label.encode('utf-8')).hexdigest()[:10]}"


def is_named(label: str) -> bool:
    return not _MID.fullmatch(label)


# --------------------------------------------------------------------------- files and splits


def split_of(path: Path) -> str | None:
    """train / dev / test by the words of the file's path, or None when it names none."""
    words = set(re.split(r"[^a-z]+", str(path).lower()))
    found = [split for split, names in SPLIT_WORDS.items() if words & set(names)]
    return found[0] if len(found) == 1 else None


def data_files(path: Path, split: str | None) -> list[Path]:
    """The parquet or Arrow files of PATH for `split` (None or "all": every file), in name order."""
    if path.is_file():
        if path.suffix not in (".parquet", ".arrow"):
            raise DatasetError(f"{path} is not a parquet or Arrow file; rog: reads RoG's parquet files, a folder "
                               "of them, or a `datasets` Arrow cache folder")
        named = split_of(path.relative_to(path.parent))
        if split not in (None, "all") and named not in (None, split):
            raise DatasetSpecError(f"--split {split}: {path.name} holds the {named} split; pass that file's "
                                   "folder to choose a split, or drop --split")
        return [path]
    if not path.is_dir():
        raise DatasetError(f"rog dataset not found: tried {path.resolve()} (a parquet file or a folder of them)")
    files = sorted(p for p in path.rglob("*") if p.suffix in (".parquet", ".arrow") and p.is_file()
                   and not p.name.startswith("cache-"))  # `datasets` writes cache-*.arrow for its map() results
    if not files:
        raise DatasetError(f"{path} holds no .parquet or .arrow file; point rog: at RoG's data folder or the "
                           "`datasets` cache folder of rmanluo/RoG-webqsp or rmanluo/RoG-cwq")
    by_split: dict[str | None, list[Path]] = {}
    for file in files:
        by_split.setdefault(split_of(file.relative_to(path)), []).append(file)
    if split in (None, "all"):
        if split is None and len([s for s in by_split if s]) > 1:
            raise DatasetSpecError(f"{path} holds the splits {', '.join(sorted(s for s in by_split if s))}; "
                                   "choose one with --split train|dev|test (or --split all)")
        return files
    chosen = by_split.get(split)
    if not chosen:
        have = ", ".join(sorted(s for s in by_split if s)) or "none named in the file names"
        raise DatasetSpecError(f"{path} has no {split} file (files named {split}-*, or validation-* for dev); "
                               f"splits found: {have}")
    return chosen


class RowGroups:
    """One data file read a row group at a time: parquet row groups, or the record batches of an Arrow file.

    The last group's graph column is kept (questions run in file order), under a lock: evaluation threads share it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._kept: list | None = None  # [group, first row of the batch, batch, the group's batch iterator]
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            try:
                self._parquet = pq.ParquetFile(path)
            except Exception as exc:  # pyarrow raises ArrowInvalid and OSError for a file that is not parquet
                raise DatasetError(f"{path} does not read as a parquet file: {exc}") from exc
            self.count = self._parquet.num_row_groups
            names = self._parquet.schema_arrow.names
        else:
            self._parquet = None
            batches = list(self._arrow_batches())
            self.count = len(batches)
            names = batches[0].schema.names if batches else list(QUESTION_COLUMNS) + ["graph"]
        missing = [c for c in (*QUESTION_COLUMNS, "graph") if c not in names]
        if missing:
            raise DatasetError(f"{path} lacks the column(s) {', '.join(missing)} of RoG's schema (id, question, "
                               "answer, q_entity, a_entity, graph)")

    def _arrow_batches(self) -> Iterator[Any]:
        """Record batches of a `datasets` Arrow file (the IPC stream format; the file format read too), memory-mapped:
        reading batch i costs no copy of the batches before it."""
        import pyarrow as pa

        source = pa.memory_map(str(self.path))
        try:
            reader = pa.ipc.open_file(source)
            yield from (reader.get_batch(i) for i in range(reader.num_record_batches))
        except pa.ArrowInvalid:
            source.seek(0)
            try:
                yield from pa.ipc.open_stream(source)
            except pa.ArrowInvalid as exc:
                raise DatasetError(f"{self.path} does not read as an Arrow file: {exc}") from exc

    def read(self, group: int, columns: tuple[str, ...]) -> Any:
        """A pyarrow Table of `columns` of row group `group`."""
        import pyarrow as pa

        if self._parquet is not None:
            return self._parquet.read_row_group(group, columns=list(columns))
        for i, batch in enumerate(self._arrow_batches()):
            if i == group:
                return pa.Table.from_batches([batch.select(list(columns))])
        raise DatasetError(f"{self.path} has no row group {group}; the file changed since it was read")

    def graph(self, group: int, row: int) -> list[list[str]]:
        """The `graph` of one row, as Python lists (only that row is converted).

        A parquet group is decoded GRAPH_BATCH_ROWS rows at a time, the reader kept where it stopped: questions
        run in file order, so each batch is decoded once and only one batch's graphs are in memory (a group of
        1,000 CWQ rows holds 340 MB of graph). An Arrow file is memory-mapped: its batches cost no decoding."""
        with self._lock:
            kept = self._kept
            if kept is None or kept[0] != group or row < kept[1]:
                self._kept = kept = None  # drop the old batch before reading the next
                batches = self._batches(group)
                kept = [group, 0, next(batches), batches]
            while row >= kept[1] + len(kept[2]):
                kept[1] += len(kept[2])
                kept[2] = next(kept[3], None)
                if kept[2] is None:
                    raise DatasetError(f"{self.path} has no row {row} in row group {group}; the file changed since "
                                       "it was read")
            self._kept = kept
            return kept[2].column(0)[row - kept[1]].as_py() or []

    def _batches(self, group: int) -> Iterator[Any]:
        if self._parquet is not None:
            return iter(self._parquet.iter_batches(batch_size=GRAPH_BATCH_ROWS, row_groups=[group],
                                                   columns=["graph"], use_threads=False))
        return iter(self.read(group, ("graph",)).to_batches())


_OPEN: dict[str, RowGroups] = {}
_OPEN_LOCK = threading.Lock()


def row_groups(path: Path) -> RowGroups:
    """The one RowGroups of a file in this process (so its kept group is shared by the questions that read it)."""
    key = str(path.resolve())
    with _OPEN_LOCK:
        if key not in _OPEN:
            _OPEN[key] = RowGroups(path)
        return _OPEN[key]


# --------------------------------------------------------------------------- questions


def _texts(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value if v is not None and str(v).strip()]


def load_rog(path: Path, split: str | None = None) -> list:
    """One example per row: topic entities from `q_entity`, answers from `answer` then `a_entity` (ids kept).

    Only the question columns are read; `metadata["graph_source"]` says where the row's graph is."""
    from ppoga_dspy.datasets.examples import make_example

    examples = []
    for file in data_files(path, split):
        groups = row_groups(file)
        for group in range(groups.count):
            table = groups.read(group, QUESTION_COLUMNS).to_pylist()
            for row_number, row in enumerate(table):
                topics = {entity_id(name): name for name in _texts(row.get("q_entity"))}
                answer_names, entities = _texts(row.get("answer")), _texts(row.get("a_entity"))
                answers = list(dict.fromkeys(answer_names + [e for e in entities if is_named(e)]))
                examples.append(make_example(
                    id=str(row.get("id") or f"{file.stem}-{group}-{row_number}"), question=str(row["question"]),
                    topic_entities=topics, answers=answers, answer_ids=[entity_id(e) for e in entities],
                    dataset="rog", source=file.name, answer_groups=[[a] for a in answers],
                    graph_source={"format": "rog", "path": str(file.resolve()), "group": group, "row": row_number},
                ))
    return examples


# --------------------------------------------------------------------------- graphs


def _node(label: str) -> str:
    return f"<{FREEBASE_NS}{entity_id(label)}>"


def graph_ntriples(graph: list[list[str]]) -> Iterator[str]:
    """N-Triples of one RoG graph: each edge under ns:, then one type.object.name per named node.

    An edge whose relation is not a Freebase relation name, or that is not a triple, is skipped (as the NSM
    reader skips them): the dialect could not query it."""
    named: dict[str, None] = {}
    for edge in graph:
        if len(edge) != 3 or not all(isinstance(x, str) and x for x in edge):
            continue
        head, relation, tail = edge
        if not _RELATION.fullmatch(relation):
            continue
        yield f"{_node(head)} <{FREEBASE_NS}{relation}> {_node(tail)} .\n"
        for label in (head, tail):
            if is_named(label):
                named[label] = None
    for label in named:
        yield f'{_node(label)} <{_NAME}> "{escape_string(label)}"@en .\n'


@dataclass(frozen=True)
class GraphSource:
    """Where one question's graph is: file, row group, row in the group."""

    path: Path
    group: int
    row: int

    @classmethod
    def of(cls, example: Any) -> GraphSource:
        meta = dict(getattr(example, "metadata", {}) or {})
        source = meta.get("graph_source") or {}
        if source.get("format") != "rog":
            raise DatasetError(f"question {getattr(example, 'id', '?')!r} was not read by the rog: loader; it has "
                               "no RoG graph")
        return cls(Path(source["path"]), int(source["group"]), int(source["row"]))

    def graph(self) -> list[list[str]]:
        return row_groups(self.path).graph(self.group, self.row)


def question_kg(example: Any, **options: Any):
    """One question's graph as an in-memory store in the Freebase dialect; close it (or leave `with`) to drop it."""
    import pyoxigraph as ox

    from ppoga_dspy.kg.dialects import get_dialect
    from ppoga_dspy.kg.graph import SparqlGraph
    from ppoga_dspy.kg.store import EmbeddedStore

    source = GraphSource.of(example)
    store = ox.Store()
    store.load("".join(graph_ntriples(source.graph())).encode("utf-8"), ox.RdfFormat.N_TRIPLES)
    engine = EmbeddedStore(store, name=f"{source.path.name}#{source.group}.{source.row}",
                           timeout=options.get("timeout", 30.0))
    return SparqlGraph(engine, get_dialect("freebase", ontology=options.get("ontology")))


def union_ntriples_file(files: list[Path], out: Path) -> Path:
    """Every graph of the files, streamed one row group at a time into one .nt file (a triple in two graphs is
    the store's to merge: RDF is a set); returns `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for file in files:
            groups = row_groups(file)
            for group in range(groups.count):
                for graph in groups.read(group, ("graph",)).column("graph"):
                    handle.writelines(graph_ntriples(graph.as_py() or []))
    tmp.replace(out)
    return out


def union_store(files: list[Path]) -> Path:
    """The union of the files' graphs as a store directory under the KG cache (built once; with the cache off,
    the .nt file in a temporary folder, loaded in memory)."""
    import tempfile

    from ppoga_dspy.kg.persistent import cache_root, cached_store_dir, store_key

    files = sorted({Path(f).resolve() for f in files})
    root = cache_root()
    folder = root / "rog" if root is not None else Path(tempfile.mkdtemp(prefix="ppoga-rog-"))
    key = hashlib.sha256("\x1f".join(store_key(f, "rog") for f in files).encode()).hexdigest()[:16]
    nt = folder / f"{files[0].stem[:40]}-{len(files)}-{key}.nt"
    if not nt.is_file():
        union_ntriples_file(files, nt)
    return cached_store_dir(nt, dialect="freebase", fmt="nt") or nt


def files_of(examples: list) -> list[Path]:
    """The data files the examples' graphs are in."""
    return sorted({GraphSource.of(e).path for e in examples})
