"""A KB file imported once into a persisted store under the user cache, then opened in about a second.

MetaQA's 130k-triple KB (plus labels) takes tens of seconds to parse and index; every evaluation
run, test and benchmark row would pay that again. `cached_store_dir(path)` keys a store directory by
the file's identity (resolved path, size, modification time, and the importer's version) under
`$PPOGA_KG_CACHE` (default `$XDG_CACHE_HOME/ppoga-dspy/kg`, i.e. `~/.cache/ppoga-dspy/kg`;
`PPOGA_KG_CACHE=off` turns it off and the file is loaded in memory each time). A changed file gets a
new key, so a stale store is never opened.

Concurrent first loads cannot corrupt the store: each builds into its own temporary folder and
renames it into place; a rename that finds the store already there (another process won) discards
its own copy. A crashed build leaves only a `.tmp-*` folder, which a later build ignores.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from ppoga_dspy.kg.base import KGLoadError
from ppoga_dspy.user_cache import cache_folder

CACHE_ENV = "PPOGA_KG_CACHE"
# Bump when the importer writes different triples for the same file: old stores are then not reused.
IMPORT_VERSION = 1


def cache_root() -> Path | None:
    """The folder that holds cached stores, or None when `PPOGA_KG_CACHE=off`."""
    return cache_folder(CACHE_ENV, "kg")


def store_key(path: Path, dialect: str) -> str:
    """`NAME-DIGEST`: the file's name, and a digest of its resolved path, size, mtime, dialect and importer version."""
    resolved = path.resolve()
    stat = resolved.stat()
    identity = f"{resolved}\x1f{stat.st_size}\x1f{stat.st_mtime_ns}\x1f{dialect}\x1f{IMPORT_VERSION}"
    digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in resolved.name)[:60]
    return f"{safe}-{digest}"


def cached_store_dir(path: str | Path, *, dialect: str, fmt: str | None = None) -> Path | None:
    """The store directory holding `path` (imported now if it is not cached yet), or None when caching is off."""
    from ppoga_dspy.kg.store import create_store_dir, is_store_dir

    root = cache_root()
    if root is None:
        return None
    source = Path(path)
    if not source.is_file():
        raise KGLoadError(f"no such KG file: {source}")
    final = root / store_key(source, dialect)
    if is_store_dir(final):
        return final
    try:
        root.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=root))
    except OSError as exc:
        raise KGLoadError(f"cannot write the KG cache {root}: {exc}; set {CACHE_ENV}=off or another folder") from exc
    try:
        create_store_dir([source], building, dialect=dialect, fmt=fmt)
        try:
            os.rename(building, final)
        except OSError:
            if not is_store_dir(final):  # not a lost race: a real failure
                raise
    finally:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)
    return final
