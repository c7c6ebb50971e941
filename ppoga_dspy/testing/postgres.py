"""A throwaway PostgreSQL server on loopback, for tests and benchmarks of shared Optuna studies.

Where the server comes from: the `pgserver` wheel (PyPI, in the `test` and `postgres` extras)
ships a relocatable PostgreSQL 16 build under `pgserver/pginstall/bin`; we use only its binaries,
not its Python API, because that API, run as root, adds a system user with `useradd` and widens
the permissions of every folder above the virtualenv. `PPOGA_POSTGRES_BIN` (a folder holding
`initdb` and `postgres`) or a system PostgreSQL (`pg_config --bindir`, /usr/lib/postgresql/*/bin)
work too.

Root: PostgreSQL refuses to run as root, and CI runs as root. Then the server runs as `nobody`
(its uid/gid are passed to `subprocess.Popen(user=, group=)`, no setpriv or su needed), its data
folder is a fresh folder in the system temp dir owned by `nobody`, and when the binaries sit below
a folder `nobody` cannot enter (e.g. a venv under /root), the install tree is copied once into a
world-readable folder in the temp dir. Nothing outside the temp dir changes.

The server listens on 127.0.0.1 only, on a free port, with trust authentication and no Unix
socket, fsync off (test data, speed over durability). `start_postgres()` returns a handle whose
`url` SQLAlchemy/Optuna take as is; `with` stops the server and deletes its data.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ppoga_dspy.errors import PPoGAError

#: The unprivileged account the server runs as when we are root (present on every Debian/Ubuntu image).
UNPRIVILEGED_USER = "nobody"


class PostgresUnavailable(PPoGAError):
    """No PostgreSQL binaries on this machine; the message says how to get them."""


class PostgresStartError(PPoGAError):
    """The binaries exist but the server did not come up; the message holds the end of its log."""


def postgres_bin_dir() -> Path | None:
    """The folder with `initdb` and `postgres`: $PPOGA_POSTGRES_BIN, the pgserver wheel, or a system install."""
    candidates: list[Path] = []
    if os.environ.get("PPOGA_POSTGRES_BIN"):
        candidates.append(Path(os.environ["PPOGA_POSTGRES_BIN"]))
    spec = importlib.util.find_spec("pgserver")
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(loc) / "pginstall" / "bin" for loc in spec.submodule_search_locations]
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            candidates.append(Path(subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                                  check=True, timeout=10).stdout.strip()))
        except (subprocess.SubprocessError, OSError):
            pass
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "postgres").is_file():
            return folder
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _enterable_by_others(path: Path) -> bool:
    """True when every folder from / down to `path` lets other users through (o+x)."""
    path = path.resolve()
    for folder in [path, *path.parents]:
        if not folder.stat().st_mode & 0o001:
            return False
    return True


def _stage_for_user(bin_dir: Path) -> Path:
    """`bin_dir`'s install tree where `nobody` can run it: in place if reachable, else one copy in the temp dir."""
    root = bin_dir.resolve().parent
    if _enterable_by_others(root):
        return bin_dir
    version = subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True, text=True,
                             check=True, timeout=30).stdout.split()[-1]
    staged = Path(tempfile.gettempdir()) / f"ppoga-postgres-{version}-{os.stat(root).st_ino}"
    if not (staged / ".complete").exists():
        # The wheel's binaries find libpq through RPATH $ORIGIN/../../../pgserver.libs: keep that layout.
        partial = Path(tempfile.mkdtemp(prefix="ppoga-postgres-partial-"))
        shutil.copytree(root, partial / "install" / root.parent.name / root.name, symlinks=True)
        for libs in root.parent.parent.glob("*.libs"):
            shutil.copytree(libs, partial / "install" / libs.name, symlinks=True)
        for folder in [partial, *(partial / "install").rglob("*")]:
            if folder.is_dir():
                os.chmod(folder, 0o755)
        shutil.rmtree(staged, ignore_errors=True)
        try:
            os.rename(partial / "install", staged)
        except OSError:  # another process staged it first
            shutil.rmtree(partial, ignore_errors=True)
        (staged / ".complete").touch()
        shutil.rmtree(partial, ignore_errors=True)
    return staged / root.parent.name / root.name / "bin"


@dataclass
class PostgresServer:
    """A running server: `url` for SQLAlchemy/Optuna, `stop()` (or `with`) ends it and removes its data."""

    url: str
    port: int
    data_dir: Path
    process: subprocess.Popen
    bin_dir: Path
    log_path: Path
    _user: dict = field(default_factory=dict, repr=False)

    def database_url(self, name: str) -> str:
        """The URL of database `name`, created on first use (one database per test keeps studies apart)."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                             autocommit=True) as connection:
            if connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                connection.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(2)  # SIGINT: PostgreSQL's "fast" shutdown
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_postgres(*, timeout: float = 60.0) -> PostgresServer:
    """initdb a fresh cluster in the temp dir and start `postgres` on a free loopback port; wait until it accepts."""
    found = postgres_bin_dir()
    if found is None:
        raise PostgresUnavailable(
            "no PostgreSQL binaries found: `pip install -e .[test]` (or `.[postgres]`) installs the pgserver wheel; "
            "or set PPOGA_POSTGRES_BIN to a folder with initdb and postgres")
    as_root = os.geteuid() == 0
    user: dict = {}
    bin_dir = found
    base = Path(tempfile.mkdtemp(prefix="ppoga-pg-"))
    data_dir = base / "data"
    log_path = base / "postgres.log"
    if as_root:
        try:
            account = pwd.getpwnam(UNPRIVILEGED_USER)
        except KeyError:
            raise PostgresUnavailable(f"PostgreSQL refuses to run as root and this machine has no "
                                      f"{UNPRIVILEGED_USER!r} user to run it as: run as a normal user") from None
        user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        bin_dir = _stage_for_user(found)
        os.chmod(base, 0o755)
        os.chown(base, account.pw_uid, account.pw_gid)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LC_ALL": "C", "LANG": "C", "TZ": "UTC", "HOME": str(base)}

    def run(*argv: str) -> None:
        done = subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=timeout, **user)
        if done.returncode != 0:
            shutil.rmtree(base, ignore_errors=True)
            raise PostgresStartError(f"{Path(argv[0]).name} failed ({done.returncode}): "
                                     f"{(done.stderr or done.stdout).strip()[-2000:]}")

    run(str(bin_dir / "initdb"), "-D", str(data_dir), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
        "--locale=C", "--no-sync")
    port = _free_port()
    log = open(log_path, "wb")  # noqa: SIM115 - the server writes to it for its whole life
    if as_root:
        os.chown(log_path, user["user"], user["group"])
    process = subprocess.Popen(
        [str(bin_dir / "postgres"), "-D", str(data_dir), "-h", "127.0.0.1", "-p", str(port), "-k", "",
         "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
         "-c", "max_connections=200", "-c", "shared_buffers=32MB"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, **user)
    log.close()
    server = PostgresServer(url=f"postgresql://postgres@127.0.0.1:{port}/postgres", port=port, data_dir=data_dir,
                            process=process, bin_dir=bin_dir, log_path=log_path, _user=user)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            server.stop()
            raise PostgresStartError(f"PostgreSQL did not accept connections on 127.0.0.1:{port} "
                                     f"(exit {process.returncode}); its log ends: {tail}")
        ready = subprocess.run([str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                                "-q"], env=env, timeout=30)
        if ready.returncode == 0:
            return server
        time.sleep(0.2)


def _require_postgres() -> None:
    """Skip (a developer's machine without the test extra) or fail (CI, where it must be installed)."""
    import pytest

    missing = []
    if importlib.util.find_spec("psycopg") is None:
        missing.append("the psycopg driver")
    if postgres_bin_dir() is None:
        missing.append("PostgreSQL binaries")
    if not missing:
        return
    reason = f"{' and '.join(missing)} not installed: `pip install -e .[test]` brings pgserver and psycopg[binary]"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the PostgreSQL tests but {reason}", pytrace=False)
    pytest.skip(reason)


def _postgres_fixture():
    import pytest

    @pytest.fixture(scope="session")
    def postgres_server():
        """A PostgreSQL server on loopback for the whole session (seconds to start); stopped and deleted after."""
        _require_postgres()
        with start_postgres() as server:
            yield server

    return postgres_server


#: pytest fixture: import it into a conftest.py (`from ppoga_dspy.testing.postgres import postgres_server`).
postgres_server = _postgres_fixture()
