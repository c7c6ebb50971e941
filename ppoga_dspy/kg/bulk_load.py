"""`ppoga kg load` for KGs of any size: input read in chunks, a progress bar, and a resume after a kill.

Why chunks: a Freebase dump is 400 GB of N-Triples; a load takes hours, and ToG's and PoG's users report loads with
no sign of progress and no way to tell whether one finished. Every input becomes N-Triples chunks of about
`chunk_bytes` (N-Triples and its .gz cut at line ends; IRN and MetaQA KBs converted; a Turtle or N-Quads file is one
chunk, since it cannot be cut at any line). Each chunk is loaded and committed (oxigraph: flush; Virtuoso:
checkpoint), then recorded in the folder's `ppoga-load.json`. A rerun skips the chunks recorded there. A chunk
loaded but not recorded (a kill in between) is loaded again: both engines store a set of triples, so it adds no
duplicate, and the count after a resumed load equals that of an uninterrupted one.

`Sink` is what an engine offers: `load(chunk)` then `commit()`. `OxigraphSink` is here; the Virtuoso one is in
kg/virtuoso_db.py.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ppoga_dspy.kg.base import KGLoadError

STATE_FILE = "ppoga-load.json"
DEFAULT_CHUNK_BYTES = 64 * 2**20


@dataclass
class Chunk:
    """N-Triples text of one part of a source file; `position` is how far into the file (its bytes on disk) it ends."""

    index: int
    text: bytes
    triples: int
    position: int


def _kind(path: Path, fmt: str | None) -> str:
    from ppoga_dspy.kg.importers import detect_format

    plain = path.with_suffix("") if path.suffix == ".gz" else path
    return detect_format(plain if fmt is None else path, fmt)


def chunks(path: Path, *, fmt: str | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[Chunk]:
    """The file as N-Triples chunks, deterministic for a given file and `chunk_bytes` (so a resume can skip)."""
    kind = _kind(path, fmt)
    size = path.stat().st_size
    if kind in ("irn", "pipe"):
        yield from _delimited_chunks(path, kind, chunk_bytes, size)
    elif kind == "nt":
        yield from _ntriples_chunks(path, chunk_bytes)
    else:  # Turtle / N-Quads: prefixes and graphs forbid cutting at an arbitrary line; one chunk, parsed whole
        yield Chunk(0, b"", -1, size)


def _ntriples_chunks(path: Path, chunk_bytes: int) -> Iterator[Chunk]:
    raw = path.open("rb")
    stream = gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw
    try:
        reader = io.BufferedReader(stream, 1 << 20) if path.suffix == ".gz" else stream
        index, lines, triples, taken = 0, [], 0, 0
        for line in reader:
            lines.append(line)
            taken += len(line)
            stripped = line.strip()
            if stripped and not stripped.startswith(b"#"):
                triples += 1
            if taken >= chunk_bytes:
                yield Chunk(index, b"".join(lines), triples, raw.tell())
                index, lines, triples, taken = index + 1, [], 0, 0
        if lines:
            yield Chunk(index, b"".join(lines), triples, raw.tell())
    finally:
        raw.close()


def _delimited_chunks(path: Path, kind: str, chunk_bytes: int, size: int) -> Iterator[Chunk]:
    """IRN / MetaQA lines as N-Triples; the position is estimated from the facts converted so far."""
    from ppoga_dspy.kg.importers import irn_ntriples
    from ppoga_dspy.kg.pipe_kb import pipe_ntriples

    with path.open("rb") as handle:
        total = sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b"")) or 1
    lines = irn_ntriples(path, set()) if kind == "irn" else pipe_ntriples(path, set())
    index, part, triples, taken, facts = 0, [], 0, 0, 0
    for line in lines:
        data = line.encode("utf-8")
        part.append(data)
        taken += len(data)
        triples += 1
        facts += line.endswith("> .\n")  # a fact line (labels end with a literal)
        if taken >= chunk_bytes:
            yield Chunk(index, b"".join(part), triples, min(size, size * facts // total))
            index, part, triples, taken = index + 1, [], 0, 0
    if part:
        yield Chunk(index, b"".join(part), triples, size)


class Sink(Protocol):
    """An engine a load writes to."""

    def load(self, chunk: Chunk, source: Path, kind: str) -> None: ...

    def commit(self) -> None: ...


class OxigraphSink:
    """A persisted pyoxigraph store directory (pyoxigraph's bulk loader; `flush` makes a chunk durable)."""

    def __init__(self, root: Path) -> None:
        import pyoxigraph as ox

        try:
            self.store = ox.Store(str(root))
        except OSError as exc:
            raise KGLoadError(f"cannot open {root} as a store for writing: {exc} (is a server or another process "
                              "using it?)") from exc

    def load(self, chunk: Chunk, source: Path, kind: str) -> None:
        import pyoxigraph as ox

        from ppoga_dspy.kg.importers import _rdf_format

        try:
            if chunk.triples >= 0:
                self.store.bulk_load(chunk.text, ox.RdfFormat.N_TRIPLES)
            elif source.suffix == ".gz":  # pyoxigraph reads no gzip: a compressed Turtle file is read whole
                with gzip.open(source, "rb") as handle:
                    self.store.bulk_load(handle.read(), _rdf_format(kind), base_iri=source.resolve().as_uri())
            else:
                self.store.bulk_load(path=str(source), format=_rdf_format(kind), base_iri=source.resolve().as_uri())
        except SyntaxError as exc:
            raise KGLoadError(f"{source} is not valid {kind} ({exc}); fix the file or pass the right --format") from exc

    def commit(self) -> None:
        self.store.flush()

    def count(self) -> int:
        return len(self.store)

    def close(self) -> None:
        del self.store


# --------------------------------------------------------------------------- resume state


def _identity(path: Path) -> dict:
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


class LoadState:
    """`ppoga-load.json`: per source file, the chunks loaded and committed; written atomically after each chunk."""

    def __init__(self, root: Path, *, engine: str, dialect: str, chunk_bytes: int) -> None:
        self.path = root / STATE_FILE
        data = json.loads(self.path.read_text(encoding="utf-8")) if self.path.is_file() else {}
        if data and data.get("engine") != engine:
            raise KGLoadError(f"{root} was loaded with --engine {data.get('engine')}; load into it with that engine, "
                              "or choose another --store folder")
        if data and data.get("dialect") != dialect:
            raise KGLoadError(f"{root} holds a {data.get('dialect')!r} KG; cannot add {dialect!r} files to it "
                              "(use another --store folder)")
        self.data = data or {"engine": engine, "dialect": dialect, "chunk_bytes": chunk_bytes, "files": {}}
        self.chunk_bytes = int(self.data["chunk_bytes"])  # a resume cuts the files as the first run did

    def entry(self, source: Path) -> dict:
        key = str(source.resolve())
        entry = self.data["files"].get(key)
        if entry is None or {k: entry.get(k) for k in ("size", "mtime_ns")} != _identity(source):
            entry = {**_identity(source), "chunks": 0, "done": False, "position": 0, "triples": 0}
            self.data["files"][key] = entry  # new, or changed since: loaded again from the start
        return entry

    def save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)


def load_with_progress(sink: Sink, sources: list[Path], state: LoadState, *, fmt: str | None = None,
                       progress: bool = True, label: str = "loading") -> dict:
    """Load the sources' chunks not yet recorded in `state`, committing and recording each; a rich progress bar
    shows bytes read of all sources, triples, their rates and the time left. Returns what was done."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    total = sum(p.stat().st_size for p in sources)
    entries = [state.entry(p) for p in sources]
    state.save()
    done_bytes = sum(e["size"] if e["done"] else e["position"] for e in entries)
    started, loaded, skipped = time.monotonic(), 0, 0
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TextColumn("{task.fields[triples]:,} triples ({task.fields[rate]:,.0f}/s)"), TimeRemainingColumn())
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task(label, total=total, completed=done_bytes, triples=0, rate=0.0)
        for source, entry in zip(sources, entries, strict=True):
            if entry["done"]:
                skipped += 1
                continue
            kind = _kind(source, fmt)
            base = done_bytes - entry["position"]
            for chunk in chunks(source, fmt=fmt, chunk_bytes=state.chunk_bytes):
                if chunk.index < entry["chunks"]:
                    continue  # loaded and committed by an earlier run
                sink.load(chunk, source, kind)
                sink.commit()
                entry.update(chunks=chunk.index + 1, position=chunk.position,
                             triples=entry["triples"] + max(chunk.triples, 0))
                state.save()
                loaded += max(chunk.triples, 0)
                seconds = max(time.monotonic() - started, 1e-6)
                bar.update(task, completed=base + chunk.position, triples=loaded, rate=loaded / seconds)
            entry.update(done=True, position=entry["size"])
            state.save()
            done_bytes = base + entry["size"]
            bar.update(task, completed=done_bytes)
    return {"files_skipped": skipped, "triples_read": loaded, "seconds": round(time.monotonic() - started, 2)}


def _write_meta(root: Path, *, dialect: str, state: LoadState, triples: int, **extra: object) -> dict:
    from ppoga_dspy.kg.store import META_FILE, META_VERSION

    meta = {"format_version": META_VERSION, "dialect": dialect, "sources": list(state.data["files"]),
            "triples": triples, **extra}
    (root / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


def _check_folder(root: Path, dialect: str, own: tuple[str, ...]) -> None:
    """A new or empty folder, or one an earlier load of ours made (then of the same dialect)."""
    from ppoga_dspy.kg.store import META_FILE, read_meta

    if not root.exists() or not any(root.iterdir()):
        return
    if (root / META_FILE).is_file() and read_meta(root).get("dialect") not in (None, dialect):
        raise KGLoadError(f"{root} holds a {read_meta(root).get('dialect')!r} KG; cannot add {dialect!r} files to it "
                          "(use another --store folder)")
    if not any((root / name).exists() for name in (META_FILE, STATE_FILE, *own)):
        raise KGLoadError(f"{root} exists and is not empty; choose a new or empty --store folder")


def load_store_dir(paths: list[Path], root: Path, *, dialect: str, fmt: str | None = None,
                   chunk_bytes: int = DEFAULT_CHUNK_BYTES, progress: bool = True) -> dict:
    """Load files into the embedded engine's store folder `root` (created, resumed, or added to); its metadata."""
    root = Path(root)
    _check_folder(root, dialect, ())
    root.mkdir(parents=True, exist_ok=True)
    state = LoadState(root, engine="oxigraph", dialect=dialect, chunk_bytes=chunk_bytes)
    sink = OxigraphSink(root)
    try:
        report = load_with_progress(sink, [Path(p) for p in paths], state, fmt=fmt, progress=progress)
        triples = sink.count()
    finally:
        sink.close()
    return {**_write_meta(root, dialect=dialect, state=state, triples=triples), **report}


def load_virtuoso_dir(paths: list[Path], root: Path, *, dialect: str, fmt: str | None = None,
                      chunk_bytes: int = DEFAULT_CHUNK_BYTES, progress: bool = True, memory_gb: float | None = None,
                      say=print) -> dict:
    """Load files into the Virtuoso database folder `root` (kg/virtuoso_db.py); its metadata, with the loader's
    error list checked (KGLoadError naming each file Virtuoso could not parse)."""
    from ppoga_dspy.kg.virtuoso_db import DB_FILE, INI_FILE, STAGING, MemorySettings, VirtuosoSink, start_database

    root = Path(root).resolve()
    _check_folder(root, dialect, (DB_FILE, INI_FILE, STAGING))
    root.mkdir(parents=True, exist_ok=True)
    memory = MemorySettings.for_machine(memory_gb)
    say(memory.describe())
    state = LoadState(root, engine="virtuoso", dialect=dialect, chunk_bytes=chunk_bytes)
    sources = [Path(p).resolve() for p in paths]
    with start_database(root, memory=memory, dirs=[p.parent for p in sources], tied=True) as handle:
        sink = VirtuosoSink(handle, root)
        report = load_with_progress(sink, sources, state, fmt=fmt, progress=progress)
        errors = sink.errors()
        triples = sink.count()
        if errors:
            raise KGLoadError("Virtuoso's loader could not read: " + "; ".join(errors) + ". Fix the file(s) and run "
                              "`ppoga kg load` again: only changed or unloaded files are loaded")
    return {**_write_meta(root, dialect=dialect, state=state, triples=triples, engine="virtuoso",
                          memory_gb=memory.given_gb), **report}
