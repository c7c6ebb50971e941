"""The embedded engine: a pyoxigraph store in this process, in memory or persisted in a directory.

It runs SELECT queries and converts pyoxigraph terms into the neutral rows of terms.py, so the
graph layer treats it exactly like a remote endpoint. Queries see the union of all graphs, so
N-Quads files answer like N-Triples. pyoxigraph has no query timeout of its own; the engine checks
a deadline while it reads the (streamed) solutions and raises KGTimeoutError when it passes.

A store directory made by `ppoga kg load` holds a small JSON file (`ppoga-kg.json`) that records
the dialect and the files loaded, so `open_kg(DIR)` needs no options.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path

from ppoga_dspy.kg.base import KGLoadError, KGQueryError, KGTimeoutError, KGUnavailableError
from ppoga_dspy.kg.terms import Row, Term

META_FILE = "ppoga-kg.json"
META_VERSION = 1
# A find_entities label scan is allowed on stores up to this many triples (it reads every label).
SCAN_LIMIT_TRIPLES = 500_000


def _term(value) -> Term:
    import pyoxigraph as ox

    if isinstance(value, ox.NamedNode):
        return Term("uri", value.value)
    if isinstance(value, ox.Literal):
        return Term("literal", value.value, value.language, value.datatype.value if value.datatype else None)
    if isinstance(value, ox.BlankNode):
        return Term("bnode", value.value)
    return Term("literal", str(value))


class EmbeddedStore:
    """A pyoxigraph `Store` behind the engine interface (select, count_triples, close)."""

    kind = "embedded"

    def __init__(self, store, *, name: str, timeout: float = 30.0, path: Path | None = None) -> None:
        self._store = store
        self.name = name
        self.timeout = timeout
        self.path = path
        self._triples: int | None = None

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def in_memory(cls, paths: Iterable[str | Path], *, fmt: str | None = None, timeout: float = 30.0) -> EmbeddedStore:
        """A fresh in-memory store holding `paths` (N-Triples, Turtle, N-Quads or IRN files)."""
        import pyoxigraph as ox

        from ppoga_dspy.kg.importers import load_files

        paths = [Path(p) for p in paths]
        store = ox.Store()
        load_files(store, paths, fmt=fmt)
        name = ", ".join(p.name for p in paths)
        return cls(store, name=name, timeout=timeout)

    @classmethod
    def open_dir(cls, path: str | Path, *, timeout: float = 30.0) -> EmbeddedStore:
        """A store directory made by `ppoga kg load`, opened read-only."""
        import pyoxigraph as ox

        root = Path(path)
        meta = read_meta(root)
        try:
            store = ox.Store.read_only(str(root))
        except OSError as exc:
            raise KGUnavailableError(
                f"cannot open the store directory {root}: {exc}; is another process writing it? "
                "Re-create it with `ppoga kg load FILE... --store DIR`."
            ) from exc
        engine = cls(store, name=str(root), timeout=timeout, path=root)
        engine._triples = meta.get("triples")
        return engine

    # -- engine interface --------------------------------------------------------------------------
    def select(self, query: str) -> list[Row]:
        """Run a SELECT query over the union of all graphs; rows of neutral Terms."""
        deadline = time.monotonic() + self.timeout if self.timeout else None
        try:
            solutions = self._store.query(query, use_default_graph_as_union=True)
            names = [v.value for v in solutions.variables]
            rows: list[Row] = []
            for i, solution in enumerate(solutions):
                row: Row = {}
                for name in names:
                    value = solution[name]
                    if value is not None:
                        row[name] = _term(value)
                rows.append(row)
                if deadline is not None and i % 1024 == 1023 and time.monotonic() > deadline:
                    raise KGTimeoutError(
                        f"the embedded store {self.name} took longer than {self.timeout:g}s for one query; "
                        "raise --timeout or ask for fewer results (limit)"
                    )
        except SyntaxError as exc:
            raise KGQueryError(f"the embedded store rejected a query ({exc}); this is a bug in a dialect") from exc
        except OSError as exc:
            raise KGUnavailableError(f"the embedded store {self.name} failed while reading: {exc}") from exc
        if deadline is not None and time.monotonic() > deadline:
            raise KGTimeoutError(
                f"the embedded store {self.name} took longer than {self.timeout:g}s for one query; "
                "raise --timeout or ask for fewer results (limit)"
            )
        return rows

    def count_triples(self) -> int:
        """Number of quads in the store (all graphs)."""
        return len(self._store)

    @property
    def can_scan_labels(self) -> bool:
        """True when the store is small enough for find_entities to read every label."""
        if self._triples is None:
            self._triples = self.count_triples()
        return self._triples <= SCAN_LIMIT_TRIPLES

    def close(self) -> None:
        """Drop the store (pyoxigraph closes it when the last reference goes)."""
        self._store = _ClosedStore(self.name)


class _ClosedStore:
    """Stands in for a closed store so a late call fails with a clear message instead of a crash."""

    def __init__(self, name: str) -> None:
        self._name = name

    def query(self, *args, **kwargs):
        raise KGUnavailableError(f"the embedded store {self._name} was closed; open the KG again")

    def __len__(self) -> int:
        raise KGUnavailableError(f"the embedded store {self._name} was closed; open the KG again")


# -- store directories --------------------------------------------------------------------------------


def is_store_dir(path: str | Path) -> bool:
    """True for a directory made by `ppoga kg load` (it holds ppoga-kg.json)."""
    return (Path(path) / META_FILE).is_file()


def read_meta(root: Path) -> dict:
    meta_path = root / META_FILE
    try:
        return json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise KGLoadError(
            f"{root} is not a store made by `ppoga kg load` (no {META_FILE}); create one with "
            f"`ppoga kg load FILE... --store {root}`"
        ) from exc
    except json.JSONDecodeError as exc:
        raise KGLoadError(f"{meta_path} is not valid JSON ({exc}); re-create the store with `ppoga kg load`") from exc


def create_store_dir(paths: Iterable[str | Path], root: str | Path, *, dialect: str, fmt: str | None = None) -> dict:
    """Load files into a persisted store at `root` (created, or appended to when it is ours) and record its dialect.

    Returns the metadata written: dialect, sources, triples.
    """
    import pyoxigraph as ox

    from ppoga_dspy.kg.importers import load_files

    root = Path(root)
    paths = [Path(p) for p in paths]
    sources: list[str] = []
    if root.exists():
        if is_store_dir(root):
            meta = read_meta(root)
            if meta.get("dialect") != dialect:
                raise KGLoadError(
                    f"{root} holds a {meta.get('dialect')!r} KG; cannot add {dialect!r} files to it "
                    "(use another --store directory)"
                )
            sources = list(meta.get("sources", []))
        elif any(root.iterdir()):
            raise KGLoadError(f"{root} exists and is not empty; choose a new or empty --store directory")
    root.mkdir(parents=True, exist_ok=True)
    try:
        store = ox.Store(str(root))
    except OSError as exc:
        raise KGLoadError(
            f"cannot open {root} as a store for writing: {exc} (is a server or another process using it?)"
        ) from exc
    try:
        load_files(store, paths, fmt=fmt, bulk=True)
        store.flush()
        triples = len(store)
    finally:
        del store
    meta = {
        "format_version": META_VERSION,
        "dialect": dialect,
        "sources": sources + [str(p.resolve()) for p in paths],
        "triples": triples,
    }
    (root / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta
