"""Run files: reading them (one row per question, whatever the file holds), one writer at a time, provenance.

A run file is JSONL, one row per finished question, appended as each question ends. This module
owns the rules that keep such a file honest when several things can go wrong at once:

- **One row per question id when read.** A file can hold several rows for one id (an older version
  let two writers append at once; `--retry-failed` appends a new row for a failed question). The
  *last* row of an id wins: it is the newest attempt, so a retried question replaces its failure.
  Rows keep the order in which their id first appeared. `read_run` applies this; `read_rows` does not.
- **One writer per run file.** `run_lock(path)` takes `PATH.lock` with `fcntl.flock` (the kernel frees it
  when the holder dies, so a stale lock from a killed process is simply taken over) and writes the
  holder's pid into it; a second writer gets `RunLocked` at once, naming that pid.
- **Paths checked before any work.** `check_output_path` resolves links (the lock guards the real file, and a
  link is never replaced by a file), refuses a directory, a device or FIFO, an input file given as the output,
  and a file or folder that cannot be written, before a question's LM calls are paid. A run file is read
  only when it is a regular file (a character device would be read forever).
- **Damage named by line.** A line that is not JSON, not an object, has no string id, or holds bad UTF-8 is
  one `EvaluationError` naming `PATH:LINE`; only a last line cut by a crash (no newline) is ignored.
- **Provenance per row.** Each row records the LM spec and a fingerprint of the program (prompts,
  demos, thresholds); resuming a file with another LM or program is refused (`RunMismatch`), because
  its summary would silently average two different systems.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from ppoga_dspy.errors import ConfigError, DataError


class EvaluationError(DataError):
    """A run file cannot be read or written; the message names the file and what to do."""


class RunLocked(ConfigError):
    """Another process is writing this run file; wait for it or choose another --out."""


class RunMismatch(ConfigError):
    """The run file holds rows from another LM or program; resuming would mix two systems in one summary."""


# -- reading --------------------------------------------------------------------------------------


def check_run_file(path: Path) -> bool:
    """True when a run file exists and is a regular file (a link is followed); False when absent; else DataError."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise EvaluationError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise EvaluationError(f"{path} is a directory, not a run file; name a .jsonl file")
    if not stat.S_ISREG(mode):
        raise EvaluationError(f"{path} is not a regular file (a device, FIFO or socket); a run file is a .jsonl file")
    return True


def _row(path: Path, number: int, raw: bytes, *, last: bool, require_id: bool = True) -> dict[str, Any] | None:
    """One line as a row; None for a blank line or a crash-cut last line; EvaluationError naming the line."""
    try:
        text = raw.decode("utf-8")
        if not text.strip():
            return None
        row = json.loads(text)
    except UnicodeDecodeError:
        if last:  # a cut inside a multi-byte character
            return None
        raise EvaluationError(f"{path}:{number} holds bytes that are not UTF-8; is this a ppoga run file?") from None
    except (json.JSONDecodeError, RecursionError):
        if last:
            return None
        raise EvaluationError(f"{path}:{number} is not JSON; is this a ppoga run file?") from None
    if not isinstance(row, dict):
        raise EvaluationError(f"{path}:{number} is JSON but not an object (a row is {{\"id\": ..., ...}}); "
                              "is this a ppoga run file?")
    if (require_id or "id" in row) and not isinstance(row.get("id"), str):
        raise EvaluationError(f"{path}:{number} has no string \"id\" (found {type(row.get('id')).__name__}); "
                              "is this a ppoga run file?")
    from ppoga_dspy.text import clean_tree

    return clean_tree(row)


def read_rows(path: Path, *, require_id: bool = True) -> list[dict[str, Any]]:
    """Every row of a run file as written (duplicates included); a truncated last line is ignored.

    `require_id=False` reads JSONL whose rows carry no id (PoG's result files); an id, when present, is a string."""
    return [row for _, row in numbered_rows(path, require_id=require_id)]


def numbered_rows(path: Path, *, require_id: bool = True) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) for every row of a run file, read one line at a time (a file of any size streams)."""
    for number, _, row in located_rows(path, require_id=require_id):
        yield number, row


def located_rows(path: Path, *, require_id: bool = True) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(line number, byte offset of the line, row) for every row, streamed: the offset lets a reader that kept
    only a row's aggregates read the whole row again later (`row_at`) instead of holding it."""
    path = Path(path)
    if not check_run_file(path):
        return
    with path.open("rb") as handle:
        offset = 0
        for number, raw in enumerate(handle, 1):
            start, offset = offset, offset + len(raw)
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a BOM an editor added is not part of the row
                raw = raw[3:]
            row = _row(path, number, raw, last=not raw.endswith(b"\n"), require_id=require_id)
            if row is not None:
                yield number, start, row


def row_at(handle: BinaryIO, path: Path, number: int, offset: int) -> dict[str, Any]:
    """The row of line `number`, read again at its byte `offset` through an open `handle` of `path`.

    The file may have changed since it was first read (a run resumed meanwhile): a line that is no longer a row
    there is an EvaluationError naming `PATH:LINE`, never a wrong row read silently."""
    handle.seek(offset)
    raw = handle.readline()
    if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    row = _row(path, number, raw, last=False)
    if row is None:
        raise EvaluationError(f"{path}:{number} is no longer a row (the file changed while the report was written); "
                              "run the report again")
    return row


def checked_rows(path: Path) -> Iterator[tuple[int, dict[str, Any], str | None]]:
    """(line number, row, damage) per row: `damage` is None for a sound row, else one line naming `PATH:LINE`
    and the field a reader could not use (`row_check.damage`)."""
    for number, _, row, problem in located_checked_rows(path):
        yield number, row, problem


def located_checked_rows(path: Path) -> Iterator[tuple[int, int, dict[str, Any], str | None]]:
    """`checked_rows` with each line's byte offset (see `located_rows`)."""
    from ppoga_dspy.evaluation.row_check import damage, describe

    for number, offset, row in located_rows(path):
        found = damage(row)
        yield number, offset, row, describe(path, number, found) if found else None


def read_run_checked(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The sound rows of a run file, one per id (the last sound one wins), and one line per damaged row."""
    rows, damaged = [], []
    for _, row, problem in checked_rows(path):
        if problem:
            damaged.append(problem)
        else:
            rows.append(row)
    return latest_rows(rows), damaged


def row_line(record: dict[str, Any]) -> str:
    """A row as one JSONL line; outside text that cannot be written as UTF-8 is made safe rather than lost."""
    line = json.dumps(record, ensure_ascii=False, default=str)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        from ppoga_dspy.text import clean_tree

        line = json.dumps(clean_tree(record), ensure_ascii=False, default=str)
    return line + "\n"


def latest_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per question id: the last one written wins, in the order ids first appeared."""
    by_id: dict[Any, dict[str, Any]] = {}
    for row in rows:
        by_id[row.get("id")] = row  # a dict keeps a key where it was first inserted
    return list(by_id.values())


def read_run(path: Path) -> list[dict[str, Any]]:
    """The finished questions of a run file, one row per id (the last written wins; see the module doc)."""
    return latest_rows(read_rows(path))


def repair_tail(path: Path) -> None:
    """Cut a half-written last line so that appended lines start on a line of their own."""
    path = Path(path)
    if not check_run_file(path) or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    cut = data.rfind(b"\n") + 1
    with path.open("r+b") as handle:
        handle.truncate(cut)


def compact(path: Path) -> int:
    """Rewrite the file with one row per id (atomically: a temporary file, then rename); rows dropped."""
    path = Path(path)
    rows = read_rows(path)
    kept = latest_rows(rows)
    if len(kept) == len(rows):
        return 0
    temporary = path.with_name(path.name + ".compact")
    with temporary.open("w", encoding="utf-8") as handle:
        for row in kept:
            handle.write(row_line(row))
    os.replace(temporary, path)
    return len(rows) - len(kept)


# -- output paths ---------------------------------------------------------------------------------


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def check_output_path(path: Path, *, flag: str = "--out", inputs: tuple[Path, ...] = (),
                      lock: bool = False) -> Path:
    """The real path an output file will be written at, checked before any work (ConfigError, one line, if not).

    Links are resolved (so a lock guards the file itself and a link is never replaced); a directory, device,
    FIFO or socket is refused, as is a file that is also an input (`inputs`, e.g. the dataset: writing rows
    into it would destroy it) or that cannot be written (tried: opened for appending, a new file removed
    again); with `lock`, the lock file beside it is checked the same way.
    """
    given = Path(path).expanduser()
    real = given.resolve()
    shown = f"{flag} {given}" + (f" (-> {real})" if real != given.absolute() else "")
    for source in inputs:
        if source is not None and _same_file(real, Path(source)):
            raise ConfigError(f"{shown} is an input file of this command; write to another file")
    if real.exists():
        mode = real.stat().st_mode
        if stat.S_ISDIR(mode):
            raise ConfigError(f"{shown} is a directory; name a file in it")
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{shown} is not a regular file (a device, FIFO or socket); name a regular file")
    parent = real.parent
    if parent.exists() and not parent.is_dir():
        raise ConfigError(f"{shown}: {parent} is not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot create the folder {parent} ({exc.strerror or exc})") from None
    if lock:
        lock_file = lock_path(real)
        if lock_file.exists() and not lock_file.is_file():
            raise ConfigError(f"{shown}: its lock {lock_file} exists and is not a regular file; remove it")
    existed = real.exists()
    try:
        with real.open("ab"):
            pass
    except OSError as exc:
        raise ConfigError(f"{shown} cannot be written ({exc.strerror or exc}); choose another path") from None
    if not existed:
        real.unlink(missing_ok=True)
    return real


# -- one writer -----------------------------------------------------------------------------------


def lock_path(path: Path) -> Path:
    """`RUN.jsonl` -> `RUN.jsonl.lock`, beside the run file."""
    path = Path(path)
    return path.with_name(path.name + ".lock")


def _holder(lock: Path) -> str:
    try:
        return lock.read_text(encoding="utf-8").strip() or "unknown"
    except OSError:
        return "unknown"


# Locks this process holds, by resolved run-file path, with their nesting depth: the CLI takes the lock
# before it opens the KG and loads models (so a second writer exits at once), and `run_evaluation`
# takes it again; the inner take is free.
_held: dict[Path, int] = {}
_held_guard = threading.Lock()


@contextmanager
def run_lock(path: Path) -> Iterator[Path]:
    """Hold `PATH.lock` while writing `path`; raise RunLocked at once if another process holds it.

    The lock is an `fcntl.flock` on the lock file, so it dies with its holder: a lock file left by a
    killed process is not locked and is taken over. The file holds the holder's pid, for the message.
    Re-entrant within a process.
    """
    path = Path(path).resolve()  # through links: two names of one file share one lock
    lock = lock_path(path)
    key = lock
    with _held_guard:
        if key in _held:
            _held[key] += 1
            nested = True
        else:
            nested = False
    if nested:
        try:
            yield lock
        finally:
            with _held_guard:
                _held[key] -= 1
        return
    with _exclusive(path, lock):
        with _held_guard:
            _held[key] = 1
        try:
            yield lock
        finally:
            with _held_guard:
                del _held[key]


@contextmanager
def _exclusive(path: Path, lock: Path) -> Iterator[None]:
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot create the folder {lock.parent} ({exc.strerror or exc})") from None
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot take the lock {lock} ({exc.strerror or exc}); remove it if it is "
                              "not a file, or write to another --out") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunLocked(
                f"{path} is being written by another ppoga process (pid {_holder(lock)}, lock {lock}); "
                "wait for it to finish, or write to another file with --out"
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:  # else the holder removed the file between our open and flock: lock the new one
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        try:
            os.unlink(lock)
        except FileNotFoundError:
            pass
        os.close(fd)


# -- provenance -----------------------------------------------------------------------------------


def program_fingerprint(program: Any) -> str:
    """A short hash of what decides the program's behaviour: each predictor's prompt and demos, thresholds, stage mode.

    The predictors' LMs are left out (the LM spec is recorded on its own), so the same compiled
    program reads the same with any backend.
    """
    state: dict[str, Any] = {}
    dump = getattr(program, "dump_state", None)
    if callable(dump):
        state = dump()
        state.pop("ppoga", None)  # PPoGA's own section (method/program.py STATE_KEY): thresholds and stages below
        for entry in state.values():
            if isinstance(entry, dict):
                entry.pop("lm", None)
    thresholds = getattr(program, "thresholds", None)
    data = {"state": state, "thresholds": thresholds.to_dict() if hasattr(thresholds, "to_dict") else thresholds,
            "stages": str(getattr(program, "stages", "paper"))}
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def check_provenance(path: Path, rows: list[dict[str, Any]], provenance: dict[str, Any]) -> None:
    """Refuse to add rows of another LM, program, dataset, split or seed to a file; rows that record none (older
    files) pass."""
    for key, flag in (("lm", "--lm"), ("program", "--program/--set"), ("dataset", "--dataset"), ("split", "--split"),
                      ("seed", "--seed")):
        wanted = provenance.get(key)
        found = sorted({str(row[key]) for row in rows if row.get(key) not in (None, "")})
        other = [value for value in found if value != str(wanted)]
        if wanted is not None and other:
            raise RunMismatch(
                f"{path} holds rows from {key} {other[0]!r}, and this run uses {key} {wanted!r}; resume it with the "
                f"same {flag}, or start a new run file with another --out"
            )
