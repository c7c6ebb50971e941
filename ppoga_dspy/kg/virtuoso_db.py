"""A Virtuoso database folder that outlives the process: `ppoga kg load --engine virtuoso` and `ppoga kg serve`.

Why: PoG and ToG ask users to put Freebase in Virtuoso by hand; their trackers are full of loads with no progress,
memory settings guessed, and loads that may or may not have finished. Here one folder holds the database
(`virtuoso.db`), the settings this module writes (`ppoga-virtuoso.ini`, rewritten at each start with fresh loopback
ports and memory sized from the machine's RAM), the load's resume state (kg/bulk_load.py) and `ppoga-kg.json`
(dialect, triples, sources) once a load has finished. A folder with a `virtuoso.db` made elsewhere (the pre-built
Freebase databases of the ToG/PoG setup notes) is served as it is, with its triples in whatever graphs it has.

Loads go through Virtuoso's own bulk loader (ld_add, rdf_loader_run) one chunk at a time, each followed by a
checkpoint: a kill loses at most the chunk in flight, which the rerun loads again (RDF_QUAD is a set: no
duplicates). The loader records a parse error in DB.DBA.LOAD_LIST instead of failing; that list is read at the end.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ppoga_dspy.kg.bulk_load import Chunk
from ppoga_dspy.kg.servers import (
    _HIDE_SYSTEM_GRAPHS,
    _SETUP_HINT,
    VIRTUOSO_GRAPH,
    ServerError,
    ServerHandle,
    _await_endpoint,
    _free_port,
    _sql_str,
    _tail,
    _virtuoso_env,
    virtuoso_home,
    write_virtuoso_ini,
)

INI_FILE = "ppoga-virtuoso.ini"
DB_FILE = "virtuoso.db"
STAGING = "staging"
_PAGE = 8192  # Virtuoso's buffer page
_ISQL_TIMEOUT = 24 * 3600.0


@dataclass(frozen=True)
class MemorySettings:
    """Virtuoso's buffer pool: NumberOfBuffers pages of 8 KB, MaxDirtyBuffers 3/4 of them (its own guide's ratio)."""

    machine_gb: float
    given_gb: float
    buffers: int
    dirty: int

    @classmethod
    def for_machine(cls, gb: float | None = None) -> MemorySettings:
        """`gb` for Virtuoso, else half the machine's RAM (the guide says two thirds of a dedicated machine's)."""
        machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        given = gb if gb is not None else machine / 2
        if given <= 0:
            raise ServerError(f"--memory {gb}: give Virtuoso a positive number of GB")
        buffers = max(2000, int(given * 2**30 / _PAGE * 0.85))  # the rest: its hash tables and query memory
        return cls(round(machine, 1), round(given, 2), buffers, buffers * 3 // 4)

    def describe(self) -> str:
        return (f"Virtuoso memory: NumberOfBuffers={self.buffers} MaxDirtyBuffers={self.dirty} "
                f"({self.given_gb:g} GB of this machine's {self.machine_gb:g} GB; --memory GB to change)")


def _write_ini(db: Path, *, isql_port: int, http_port: int, memory: MemorySettings, dirs: list[Path]) -> Path:
    """The launcher's virtuoso.ini with buffers and query memory sized from the machine (`MemorySettings`)."""
    return write_virtuoso_ini(db, isql_port, http_port, sorted(set(dirs)), buffers=memory.buffers,
                              dirty=memory.dirty, query_mem_mb=max(200, int(memory.given_gb * 1024 * 0.1)),
                              db_file=DB_FILE, ini_name=INI_FILE)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the loader dies (a kill -9 of `ppoga kg load` leaves no server)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _clear_stale_lock(db: Path) -> None:
    """Remove virtuoso.lck when the process it names is gone (a killed run); refuse when it still runs."""
    lock = db / "virtuoso.lck"
    if not lock.is_file():
        return
    text = lock.read_text(encoding="utf-8", errors="replace").strip()
    pid = int(text) if text.isdigit() else None
    if pid is not None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            pid = None
        except PermissionError:
            pass
    if pid is not None:
        raise ServerError(f"{db} is in use by Virtuoso process {pid} (virtuoso.lck); stop it first")
    lock.unlink()


def start_database(db: Path, *, memory: MemorySettings, port: int | None = None, dirs: list[Path] = (),
                   timeout: float = 300.0, tied: bool = False) -> ServerHandle:
    """Virtuoso on the database folder `db` (created when empty), on loopback; `tied`: dies with this process."""
    home = virtuoso_home()
    if home is None:
        raise ServerError(f"Virtuoso binaries not found; {_SETUP_HINT}")
    db = db.resolve()
    db.mkdir(parents=True, exist_ok=True)
    _clear_stale_lock(db)
    isql_port, http_port = _free_port(), port or _free_port()
    ini = _write_ini(db, isql_port=isql_port, http_port=http_port, memory=memory, dirs=list(dirs))
    log_path = db / "ppoga-server.log"
    command = [str(home / "usr" / "bin" / "virtuoso-t"), "+configfile", str(ini), "+foreground"]
    since = log_path.stat().st_size if log_path.exists() else 0
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=_virtuoso_env(home), cwd=db, start_new_session=True,
                                   preexec_fn=_die_with_parent if tied else None)
    handle = ServerHandle(url=f"http://127.0.0.1:{http_port}/sparql", kind="virtuoso", process=process,
                          ports=[isql_port, http_port], workdir=db, log_path=log_path)
    _await_endpoint(handle, time.monotonic() + timeout, retry_bind=False, since=since)
    return handle


def isql(handle: ServerHandle, script: str, *, timeout: float = _ISQL_TIMEOUT) -> str:
    """Run SQL through Virtuoso's isql on the handle's port; its output, or ServerError on an error."""
    home = virtuoso_home()
    assert home is not None
    command = [str(home / "usr" / "bin" / "isql-vt"), f"127.0.0.1:{handle.ports[0]}", "dba", "dba", "VERBOSE=OFF",
               "BANNER=OFF", "PROMPT=OFF", "ECHO=OFF", "ERRORS=stdout", f"exec={script}"]
    try:
        result = subprocess.run(command, env=_virtuoso_env(home), capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ServerError(f"Virtuoso's isql did not finish within {timeout:.0f} s; log {handle.log_path}") from exc
    output = result.stdout.decode("utf-8", "replace") + result.stderr.decode("utf-8", "replace")
    if result.returncode != 0 or "*** Error" in output:
        raise ServerError(f"Virtuoso's isql failed (exit {result.returncode}):\n{output[-3000:]}\nserver log "
                          f"{handle.log_path}:\n{_tail(handle.log_path)}")
    return output


def _marked(output: str, marker: str) -> list[str]:
    return [line.rstrip()[len(marker) + 1:] for line in output.splitlines() if line.startswith(marker + "|")]


class VirtuosoSink:
    """Chunks written to the database folder's staging area and bulk-loaded, one checkpoint per chunk."""

    def __init__(self, handle: ServerHandle, db: Path) -> None:
        self.handle, self.staging = handle, db / STAGING
        self.staging.mkdir(exist_ok=True)
        if not (db / ".system-graphs-hidden").exists():  # once per database: /sparql sees only loaded triples
            isql(handle, f"{_HIDE_SYSTEM_GRAPHS} checkpoint;")
            (db / ".system-graphs-hidden").touch()

    def load(self, chunk: Chunk, source: Path, kind: str) -> None:
        if chunk.triples >= 0:
            target = self.staging / f"{source.name}.{chunk.index:06d}.nt"
            target.write_bytes(chunk.text)
        else:
            target = source.resolve()  # Turtle / N-Quads (.gz too): Virtuoso's loader reads the file itself
        name = _sql_str(str(target))
        isql(self.handle, f"delete from DB.DBA.LOAD_LIST where ll_file = {name}; "
                          f"ld_add({name}, {_sql_str(VIRTUOSO_GRAPH)}); rdf_loader_run();")
        self._loaded = target

    def commit(self) -> None:
        isql(self.handle, "checkpoint;")
        if self._loaded.parent == self.staging:
            self._loaded.unlink(missing_ok=True)

    def errors(self) -> list[str]:
        """DB.DBA.LOAD_LIST's errors (Virtuoso records a parse error there and carries on)."""
        out = isql(self.handle, "select concat('PPOGA_ERR|', ll_file, '|', ll_error) from DB.DBA.LOAD_LIST "
                                "where ll_error is not null;")
        return _marked(out, "PPOGA_ERR")

    def count(self) -> int:
        out = isql(self.handle, "select concat('PPOGA_COUNT|', cast(count(*) as varchar)) from DB.DBA.RDF_QUAD "
                                f"where G = iri_to_id({_sql_str(VIRTUOSO_GRAPH)});")
        found = _marked(out, "PPOGA_COUNT")
        return int(found[0]) if found else 0


def database_meta(db: Path) -> dict:
    from ppoga_dspy.kg.store import META_FILE

    path = db / META_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def is_database(db: Path) -> bool:
    return (db / DB_FILE).is_file()
