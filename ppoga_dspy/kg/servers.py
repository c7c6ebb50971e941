"""Real SPARQL 1.1 servers on loopback (oxigraph serve, Virtuoso 7.2), started from RDF files.

Why: the KG contract tests and `benchmarks/kg_bench.py` must exercise the remote engine against
the servers people actually run (ToG and PoG query Freebase in Virtuoso), not only the embedded
store. Each `start_*` call loads N-Triples / N-Quads / Turtle / TriG files into a fresh store under
`workdir`, starts the server in its own process group bound to 127.0.0.1 on free ports, waits until
it answers a query, and returns a `ServerHandle` whose `url` is the SPARQL protocol endpoint.
Every query sees all loaded triples whatever graph they sit in, and nothing else (oxigraph:
`--union-default-graph`; Virtuoso: a query without FROM already ranges over all graphs, and its
own system graphs, about 2,500 triples, are made private so /sparql does not see them; both
checked by the tests).

Virtuoso comes from Debian's packages unpacked by `scripts/setup_virtuoso.sh` (no system
install); `virtuoso_home()` finds it.

Differences between the engines, measured against pyoxigraph on the same file (the KG layer
must normalise these; tests/kg_servers/test_servers.py pins them):

* **xsd:string is a separate term in Virtuoso.** A literal written `"x"^^xsd:string` comes back
  as a `typed-literal` with datatype xsd:string, while oxigraph (RDF 1.1) returns the plain
  literal `"x"`. Worse, in Virtuoso the pattern `?s ?p "x"` does NOT match a stored
  `"x"^^xsd:string`, and `"x"^^xsd:string` does not match a stored plain `"x"`. Normalise results
  by dropping the xsd:string datatype, and match literals by `FILTER(STR(?o) = "x")` (or write
  data without explicit xsd:string) when the query must run on both.
* **Language tags are lower-cased** by both servers (`"Hallo"@de-CH` comes back `de-ch`);
  patterns match case-insensitively. Compare tags case-insensitively.
* **`DATATYPE()` of a language-tagged literal** is unbound in Virtuoso (SPARQL 1.1 says
  rdf:langString); do not rely on it.
* **Blank nodes** come back as `nodeID://b10000` from Virtuoso and as random hex ids from
  oxigraph; neither is stable across stores.
* **Non-ASCII and percent-encoded IRIs** are stored verbatim by both: `<.../S%C3%A3o>` and
  `<.../São>` are different IRIs everywhere, and Virtuoso's JSON escapes non-ASCII as `\\uXXXX`
  (surrogate pairs for astral characters), which any JSON parser decodes to the same text.
* **Row order** of `ORDER BY` over mixed term kinds differs (Virtuoso puts plain literals
  before language-tagged ones); sort client-side when comparing.
* **ASK is answered as a SELECT** by Virtuoso 7.2 (Debian build), in JSON and XML alike:
  `{"head": {"vars": ["__ASK_RETVAL"]}, "results": {"bindings": [...]}}` with one row whose value
  is `"1"`^^xsd:integer for true and no row for false, instead of `{"boolean": true}`.
  SPARQLWrapper's result then has no "boolean" key; read both shapes, or use `SELECT ... LIMIT 1`.
* **System graph names leak** through exactly one query shape: `SELECT DISTINCT ?g WHERE { GRAPH ?g
  { ?s ?p ?o } }` (a shortcut over Virtuoso's graph index) lists the hidden system graphs too, though
  none of their triples; `GROUP BY ?g` or any pattern over triples does not. List graphs with
  GROUP BY if you need them.
* **Typed literals are stored as native values.** xsd:boolean comes back as `"1"`/`"0"` (datatype
  kept) and matches the number 1; xsd:double is printed with about 6 significant digits
  (`1.2345678901234567` -> `1.23457`, `1e0` -> `1.0`); an xsd:integer beyond 64 bits comes back as
  xsd:decimal; numerically equal literals of different datatypes on the same subject and predicate
  (`"01"^^xsd:integer`, `"1e0"^^xsd:double`, `true`) collapse into ONE triple. Integers and decimals
  are canonicalised (`01` -> `1`, `1.50` -> `1.5`) by both servers alike.
* **Load errors**: Virtuoso's bulk loader does not fail the call on a parse error; it records it
  in DB.DBA.LOAD_LIST, which `start_virtuoso` checks and turns into a `ServerError`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from ppoga_dspy.kg.base import KGError

__all__ = ["ServerError", "ServerHandle", "start_oxigraph", "start_virtuoso", "virtuoso_home"]

#: File suffixes both servers load, by extension.
RDF_SUFFIXES = (".nt", ".nq", ".ttl", ".trig")
#: The graph Virtuoso loads triples (and the default-graph lines of quad files) into.
VIRTUOSO_GRAPH = "urn:ppoga:kg"
_REPO_ROOT = Path(__file__).resolve().parents[2]
_SETUP_HINT = "run `scripts/setup_virtuoso.sh` (or set PPOGA_VIRTUOSO_HOME to a folder it filled)"
_LOG_TAIL_CHARS = 3000
_STOP_GRACE_S = 10.0
_BIND_ATTEMPTS = 3


class ServerError(KGError):
    """A SPARQL server could not be set up, started or loaded; the message says what and where to look."""


class ServerHandle:
    """A running server: `url` is its SPARQL 1.1 query endpoint. Use as a context manager.

    `stop()` kills the whole process group, waits for it, and waits until the ports are free; it
    is idempotent and also runs at interpreter exit for any handle still alive.
    """

    def __init__(
        self,
        *,
        url: str,
        kind: str,
        process: subprocess.Popen,
        ports: Sequence[int],
        workdir: Path,
        log_path: Path,
        cleanup: Sequence[Path] = (),
    ) -> None:
        self.url = url
        self.kind = kind
        self.process = process
        self.ports = tuple(ports)
        self.workdir = workdir
        self.log_path = log_path
        self._cleanup = tuple(cleanup)
        self._lock = threading.Lock()
        self._stopped = False
        self._answered = False  # set once the endpoint answered: only then are the ports surely ours
        _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def port(self) -> int:
        """The HTTP port the SPARQL endpoint listens on."""
        return urllib.parse.urlsplit(self.url).port or 80

    @property
    def running(self) -> bool:
        return not self._stopped and self.process.poll() is None

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            _kill_group(self.process)
            if self._answered:
                _wait_ports_free(self.ports, timeout=_STOP_GRACE_S)
            for path in self._cleanup:
                shutil.rmtree(path, ignore_errors=True)
            _LIVE.discard(self)

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"ServerHandle(kind={self.kind!r}, url={self.url!r}, pid={self.pid}, {state})"


_LIVE: set[ServerHandle] = set()


@atexit.register
def _stop_all() -> None:
    """Safety net: never leave a server behind when the interpreter exits."""
    for handle in list(_LIVE):
        with contextlib.suppress(Exception):
            handle.stop()


# --------------------------------------------------------------------------- oxigraph


def oxigraph_binary() -> Path | None:
    """The `oxigraph` CLI shipped by the PyPI `oxigraph` wheel: beside this interpreter, else on PATH."""
    beside = Path(sys.executable).parent / "oxigraph"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("oxigraph")
    return Path(found) if found else None


def start_oxigraph(files: list[Path], workdir: Path, *, timeout: float = 60.0) -> ServerHandle:
    """Load `files` into a fresh oxigraph store under `workdir` and serve it read-only on loopback.

    The endpoint is `http://127.0.0.1:PORT/query`, with the union of all graphs as default graph.
    """
    files = _check_files(files)
    binary = oxigraph_binary()
    if binary is None:
        raise ServerError(
            "the `oxigraph` binary was not found; install the `oxigraph` PyPI package (pip install oxigraph)"
        )
    root = _fresh_dir(workdir, "oxigraph-")
    store = root / "store"
    load_log = root / "load.log"
    with load_log.open("wb") as log:
        try:
            result = subprocess.run(
                [str(binary), "load", "--location", str(store), "--file", *map(str, files)],
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=max(timeout, 1.0),
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ServerError(
                f"oxigraph did not finish loading {_names(files)} within {timeout:.0f} s; log {load_log}; "
                "raise `timeout` for big files"
            ) from exc
    if result.returncode != 0:
        raise ServerError(
            f"oxigraph could not load {_names(files)} (exit {result.returncode}); log {load_log}:\n"
            f"{_tail(load_log)}\nFix or convert the file (N-Triples, N-Quads, Turtle, TriG) and retry."
        )
    log_path = root / "server.log"
    deadline = time.monotonic() + timeout
    for attempt in range(1, _BIND_ATTEMPTS + 1):
        port = _free_port()
        command = [
            str(binary), "serve-read-only", "--location", str(store),
            "--bind", f"127.0.0.1:{port}", "--union-default-graph",
        ]  # fmt: skip
        since = log_path.stat().st_size if log_path.exists() else 0
        process = _spawn(command, log_path, env=None)
        url = f"http://127.0.0.1:{port}/query"
        handle = ServerHandle(url=url, kind="oxigraph", process=process, ports=[port], workdir=root, log_path=log_path)
        if _await_endpoint(handle, deadline, retry_bind=attempt < _BIND_ATTEMPTS, since=since):
            return handle
    raise AssertionError("unreachable: _await_endpoint raises on its last attempt")


# --------------------------------------------------------------------------- Virtuoso


def virtuoso_home() -> Path | None:
    """Where `scripts/setup_virtuoso.sh` unpacked Virtuoso: $PPOGA_VIRTUOSO_HOME, else <repo>/.tools/virtuoso.

    None when that folder has no `usr/bin/virtuoso-t` (Virtuoso tests then skip).
    """
    configured = os.environ.get("PPOGA_VIRTUOSO_HOME")
    home = Path(configured).expanduser() if configured else _REPO_ROOT / ".tools" / "virtuoso"
    return home if (home / "usr" / "bin" / "virtuoso-t").is_file() else None


def start_virtuoso(
    files: list[Path], workdir: Path, *, timeout: float = 120.0, home: Path | None = None
) -> ServerHandle:
    """Start Virtuoso 7 on loopback with a fresh database under `workdir` and bulk-load `files`.

    Triple files and the default-graph lines of quad files go into the graph `VIRTUOSO_GRAPH`;
    quads keep their own graph. Queries without FROM see all of them. The endpoint is
    `http://127.0.0.1:PORT/sparql`. The dba password stays the default because both ports bind
    127.0.0.1 only.
    """
    files = _check_files(files)
    home = home or virtuoso_home()
    if home is None or not (home / "usr" / "bin" / "virtuoso-t").is_file():
        where = home or _REPO_ROOT / ".tools" / "virtuoso"
        raise ServerError(f"Virtuoso binaries not found under {where}; {_SETUP_HINT}")
    env = _virtuoso_env(home)
    root = _fresh_dir(workdir, "virtuoso-")
    log_path = root / "server.log"
    deadline = time.monotonic() + timeout
    handle: ServerHandle | None = None
    for attempt in range(1, _BIND_ATTEMPTS + 1):
        db = root / f"db{attempt}"
        db.mkdir()
        isql_port, http_port = _free_port(), _free_port()
        ini = write_virtuoso_ini(db, isql_port, http_port, sorted({f.parent for f in files}))
        command = [str(home / "usr" / "bin" / "virtuoso-t"), "+configfile", str(ini), "+foreground"]
        since = log_path.stat().st_size if log_path.exists() else 0
        process = _spawn(command, log_path, env=env, cwd=db)
        handle = ServerHandle(
            url=f"http://127.0.0.1:{http_port}/sparql",
            kind="virtuoso",
            process=process,
            ports=[isql_port, http_port],
            workdir=root,
            log_path=log_path,
            cleanup=[db],
        )
        if _await_endpoint(handle, deadline, retry_bind=attempt < _BIND_ATTEMPTS, since=since):
            break
    assert handle is not None
    try:
        _virtuoso_bulk_load(home, env, handle, files, deadline)
        if _file_has_triples(files) and not _ask(handle.url, "ASK { ?s ?p ?o }"):
            raise ServerError(f"Virtuoso loaded {_names(files)} without error but answers no triple; log {log_path}")
    except BaseException:
        handle.stop()
        raise
    return handle


def _virtuoso_env(home: Path) -> dict[str, str]:
    """The environment with the unpacked libraries (libminizip, libpcre, ...) first on LD_LIBRARY_PATH."""
    dirs = [
        str(d) for pattern in ("usr/lib/*-linux-gnu", "lib/*-linux-gnu", "usr/lib", "lib") for d in home.glob(pattern)
    ]
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(dirs + [p for p in [env.get("LD_LIBRARY_PATH", "")] if p])
    return env


def write_virtuoso_ini(db: Path, isql_port: int, http_port: int, data_dirs: list[Path], *, buffers: int = 20000,
                       dirty: int = 15000, query_mem_mb: int = 500, db_file: str = "virtuoso.db",
                       ini_name: str = "virtuoso.ini") -> Path:
    """A minimal virtuoso.ini: loopback ports, database in `db`; small buffers by default (about 160 MB), a bulk
    load's sized from the machine's memory (`kg/virtuoso_db.py`)."""
    allowed = [str(db)] + [str(d) for d in data_dirs]
    bad = [d for d in allowed if "," in d]
    if bad:
        raise ServerError(f"Virtuoso cannot read from folders whose path contains a comma: {bad}; move the files")
    text = f"""\
[Database]
DatabaseFile = {db}/{db_file}
ErrorLogFile = {db}/virtuoso.log
LockFile = {db}/virtuoso.lck
TransactionFile = {db}/virtuoso.trx
xa_persistent_file = {db}/virtuoso.pxa
ErrorLogLevel = 7
FileExtend = 200
MaxCheckpointRemap = {max(2000, buffers // 4)}
Striping = 0
TempStorage = TempDatabase

[TempDatabase]
DatabaseFile = {db}/virtuoso-temp.db
TransactionFile = {db}/virtuoso-temp.trx
MaxCheckpointRemap = 2000
Striping = 0

[Parameters]
ServerPort = 127.0.0.1:{isql_port}
ServerThreads = 10
CheckpointInterval = 0
NumberOfBuffers = {buffers}
MaxDirtyBuffers = {dirty}
CheckpointSyncMode = 0
UnremoveableFiles = 0
DirsAllowed = {", ".join(allowed)}
MaxQueryMem = {query_mem_mb}M
VADInstallDir = {db}/vad

[HTTPServer]
ServerPort = 127.0.0.1:{http_port}
ServerRoot = {db}/www
ServerThreads = 4
MaxKeepAlives = 10
KeepAliveTimeout = 10
EnabledDavVSP = 0

[SPARQL]
ResultSetMaxRows = 1000000
MaxQueryCostEstimationTime = 0
MaxQueryExecutionTime = 0
"""
    ini = db / ini_name
    ini.write_text(text, encoding="utf-8")
    return ini


_PRIVATE_GROUP = "http://www.openlinksw.com/schemas/virtrdf#PrivateGraphs"
#: Graphs a fresh Virtuoso database already holds (about 2,500 triples of its own schema, LDP and
#: URIQA metadata). A query without FROM would see them too, so they become private graphs that
#: the /sparql endpoint's user may not read, while every other graph stays world-readable.
_SYSTEM_GRAPHS = (
    "http://www.openlinksw.com/schemas/virtrdf#",
    "http://www.w3.org/ns/ldp#",
    "http://localuriqaserver/sparql",
)
_HIDE_SYSTEM_GRAPHS = " ".join(
    [f"DB.DBA.RDF_GRAPH_GROUP_CREATE ('{_PRIVATE_GROUP}', 1);"]
    + [f"DB.DBA.RDF_GRAPH_GROUP_INS ('{_PRIVATE_GROUP}', '{graph}');" for graph in _SYSTEM_GRAPHS]
    + ["DB.DBA.RDF_DEFAULT_USER_PERMS_SET ('nobody', 0, 1);", "DB.DBA.RDF_DEFAULT_USER_PERMS_SET ('nobody', 1, 0);"]
)


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _virtuoso_bulk_load(
    home: Path, env: dict[str, str], handle: ServerHandle, files: list[Path], deadline: float
) -> None:
    """ld_add each file, rdf_loader_run, checkpoint; then turn LOAD_LIST errors into a ServerError."""
    adds = " ".join(f"ld_add({_sql_str(str(f))}, {_sql_str(VIRTUOSO_GRAPH)});" for f in files)
    report = (
        "select concat('PPOGA_LOAD|', cast(ll_state as varchar), '|', ll_file, '|', coalesce(ll_error, ''))"
        " from DB.DBA.LOAD_LIST;"
    )
    script = f"{_HIDE_SYSTEM_GRAPHS} {adds} rdf_loader_run(); checkpoint; {report}"
    isql = home / "usr" / "bin" / "isql-vt"
    command = [
        str(isql), f"127.0.0.1:{handle.ports[0]}", "dba", "dba",
        "VERBOSE=OFF", "BANNER=OFF", "PROMPT=OFF", "ECHO=OFF", "ERRORS=stdout", f"exec={script}",
    ]  # fmt: skip
    isql_log = handle.workdir / "isql.log"
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ServerError(f"Virtuoso started but no time was left to load {_names(files)}; raise `timeout`")
    try:
        result = subprocess.run(command, env=env, capture_output=True, timeout=remaining, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ServerError(
            f"Virtuoso bulk load of {_names(files)} did not finish within the timeout; log {handle.log_path}; "
            "raise `timeout` for big files"
        ) from exc
    output = result.stdout.decode("utf-8", "replace") + result.stderr.decode("utf-8", "replace")
    isql_log.write_text(output, encoding="utf-8")
    if result.returncode != 0 or "*** Error" in output:
        raise ServerError(
            f"Virtuoso's isql failed while bulk-loading {_names(files)} (exit {result.returncode}); "
            f"isql output {isql_log}:\n{output[-_LOG_TAIL_CHARS:]}\n"
            f"server log {handle.log_path}:\n{_tail(handle.log_path)}"
        )
    states: dict[str, tuple[str, str]] = {}
    for line in output.splitlines():
        if line.startswith("PPOGA_LOAD|"):
            _, state, name, error = (line.rstrip().split("|", 3) + ["", "", ""])[:4]
            states[name] = (state, error)
    problems = []
    for f in files:
        state, error = states.get(str(f), ("missing", ""))
        if state != "2" or error:
            problems.append(f"{f}: {error or f'not loaded (loader state {state})'}")
    if problems:
        raise ServerError(
            "Virtuoso could not load: "
            + "; ".join(problems)
            + f". Fix the file(s) and retry; isql output {isql_log}, server log {handle.log_path}"
        )


def _file_has_triples(files: list[Path]) -> bool:
    """Whether any file has a line that is not blank or a comment (an empty file loads fine but answers nothing)."""
    for f in files:
        with f.open("rb") as stream:
            for raw in stream:
                line = raw.strip()
                if line and not line.startswith(b"#") and not line.lower().startswith((b"@prefix", b"prefix")):
                    return True
    return False


# --------------------------------------------------------------------------- shared plumbing


def _check_files(files: Sequence[Path]) -> list[Path]:
    if not files:
        raise ServerError("no RDF file given; pass at least one .nt, .nq, .ttl or .trig file")
    checked = []
    for f in map(Path, files):
        f = f.expanduser().resolve()
        if not f.is_file():
            raise ServerError(f"RDF file not found: {f}; check the path (files are loaded in place, not copied)")
        if f.suffix.lower() not in RDF_SUFFIXES:
            raise ServerError(f"cannot load {f}: unknown RDF suffix {f.suffix!r}; use one of {', '.join(RDF_SUFFIXES)}")
        checked.append(f)
    return checked


def _names(files: Sequence[Path]) -> str:
    return ", ".join(str(f) for f in files)


def _fresh_dir(workdir: Path, prefix: str) -> Path:
    """A new folder under `workdir`, so a stale store or lock file of a killed run can never be reused."""
    workdir = Path(workdir).expanduser().resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=workdir))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_ports_free(ports: Sequence[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(_port_open(p) for p in ports) and time.monotonic() < deadline:
        time.sleep(0.1)


def _spawn(
    command: list[str], log_path: Path, *, env: dict[str, str] | None, cwd: Path | None = None
) -> subprocess.Popen:
    """Start `command` in a new session (its own process group), appending stdout and stderr to `log_path`."""
    with log_path.open("ab") as log:
        log.write(f"\n$ {' '.join(command)}\n".encode())
        log.flush()
        try:
            return subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=cwd, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise ServerError(f"could not run {command[0]}: {exc}") from exc


def _kill_group(process: subprocess.Popen) -> None:
    """SIGTERM the process group, then SIGKILL what is left after a grace period, and reap the leader."""
    for sig, wait in ((signal.SIGTERM, _STOP_GRACE_S), (signal.SIGKILL, _STOP_GRACE_S)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; make sure no child of its group survives it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        return


def _tail(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log written)"
    return text[-_LOG_TAIL_CHARS:].strip() or "(log is empty)"


_BIND_FAILURES = ("address already in use", "address in use", "failed to start listening", "cannot bind")


def _await_endpoint(handle: ServerHandle, deadline: float, *, retry_bind: bool, since: int = 0) -> bool:
    """Wait until the endpoint answers `ASK {}`. False (server stopped) if it lost a port race and may retry.

    `since` is where this attempt's output starts in the log, so an earlier attempt's port clash
    is not mistaken for this one's.
    """
    while True:
        code = handle.process.poll()
        if code is not None:
            tail = _tail(handle.log_path)
            handle.stop()
            own = handle.log_path.read_bytes()[since:].decode("utf-8", "replace").lower()
            if retry_bind and any(marker in own for marker in _BIND_FAILURES):
                return False
            raise ServerError(
                f"{handle.kind} exited with code {code} before answering at {handle.url}; "
                f"log {handle.log_path}:\n{tail}"
            )
        # A short probe timeout: whoever else may hold the port (a lost race) might accept and never answer.
        if _ask(handle.url, "ASK {}", timeout=1.0) is not None:
            handle._answered = True
            return True
        if time.monotonic() > deadline:
            tail = _tail(handle.log_path)
            handle.stop()
            raise ServerError(
                f"{handle.kind} did not answer at {handle.url} within the timeout; log {handle.log_path}:\n{tail}\n"
                "Raise `timeout` on a slow machine, or read the log for the cause."
            )
        time.sleep(0.2)


def _ask(url: str, query: str, *, timeout: float = 30.0) -> bool | None:
    """POST an ASK query; its boolean, or None when the server does not (yet) answer properly."""
    data = urllib.parse.urlencode({"query": query}).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Accept": "application/sparql-results+json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            result = json.loads(response.read().decode("utf-8"))
        if "boolean" in result:
            return bool(result["boolean"])
        # Virtuoso 7.2 answers ASK as a SELECT of __ASK_RETVAL: one row "1" for true, no row for false.
        rows = result["results"]["bindings"]
        return any(row.get("__ASK_RETVAL", {}).get("value") not in (None, "0", "false") for row in rows)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
