"""Where an Optuna study lives and how several worker processes share it without losing trials.

Storage specs (`ppoga tune --storage`):
- `sqlite:///PATH`, `postgresql://USER@HOST:PORT/DB` or any SQLAlchemy URL: Optuna's `RDBStorage`
  with its heartbeat. Each running trial records a heartbeat every `heartbeat` seconds; a trial
  whose heartbeat is older than the grace period (its worker was killed, or its machine died) is
  marked FAIL by the next worker that starts a trial, and `RetryFailedTrialCallback` enqueues the
  same parameters again, so the study loses no point of its search and finishes on resume.
  PostgreSQL is for many machines; SQLite for one machine.
- `journal:PATH` or a path ending in `.journal`: Optuna's `JournalStorage` over a file (one
  machine, no database; safe for concurrent processes through the file lock). It has no heartbeat,
  so each trial records its worker's host and pid, and `fail_dead_trials` fails the RUNNING trials
  of this host whose process is gone (exact on one machine) and enqueues their retries.

Workers: `ppoga tune --workers N` starts N processes of `ppoga tune` itself (so each opens its own
KG and LMs from the same flags) on the same storage and study; `worker_shares` splits the missing
trials between them, and `MaxTrialsCallback` stops every worker once the study holds enough.
"""

from __future__ import annotations

import inspect
import os
import socket
import warnings
from pathlib import Path
from typing import Any

from ppoga_dspy.errors import ConfigError

#: Seconds between heartbeats of a running trial (RDB storages); the grace period is `GRACE_FACTOR` times it.
DEFAULT_HEARTBEAT = 10
GRACE_FACTOR = 3
#: How often the same parameters are retried after their trial failed (a killed worker, a crash).
MAX_RETRY = 3
WORKER_ATTR = "worker"


def default_storage(out: Path) -> str:
    """A SQLite file beside the artifact: resumable on one machine with no setup."""
    return f"sqlite:///{out.with_suffix('.optuna.db').resolve()}"


def journal_path(spec: str) -> Path | None:
    """The journal file a spec names (`journal:PATH` or `*.journal`), else None."""
    if spec.startswith("journal:"):
        return Path(spec.removeprefix("journal:")).expanduser()
    if "://" not in spec and spec.endswith(".journal"):
        return Path(spec).expanduser()
    return None


def _retry_callback() -> Any:
    """Optuna's callback that enqueues a stale trial's parameters again (renamed in Optuna 4.9)."""
    import optuna

    storages = optuna.storages
    retry = getattr(storages, "RetryHeartbeatStaleTrialCallback", None) or storages.RetryFailedTrialCallback
    return retry(max_retry=MAX_RETRY)


def open_storage(spec: str, *, heartbeat: int = DEFAULT_HEARTBEAT) -> Any:
    """The Optuna storage a spec names, with heartbeat and retry of failed trials where the backend has them."""
    import optuna

    journal = journal_path(spec)
    if journal is not None:
        from optuna.storages.journal import JournalFileBackend

        journal.parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(str(journal)))
    if "://" not in spec:
        raise ConfigError(f"unknown Optuna storage {spec!r}: give sqlite:///PATH, postgresql://USER@HOST:PORT/DB, "
                          "journal:PATH or a PATH.journal")
    if heartbeat < 1:
        raise ConfigError(f"--heartbeat must be at least 1 second, got {heartbeat}")
    if spec.startswith(("postgresql://", "postgres://")):
        # psycopg 3 (the `postgres` extra) whatever SQLAlchemy's default driver for the scheme is
        spec = "postgresql+psycopg://" + spec.split("://", 1)[1]
    engine_kwargs: dict[str, Any] = {}
    sqlite = spec.startswith("sqlite")
    if sqlite:
        # several local workers wait for the write lock; the driver's own BEGIN is off (see _lock_on_begin)
        engine_kwargs["connect_args"] = {"timeout": 120, "isolation_level": None}
    else:
        engine_kwargs["pool_pre_ping"] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # heartbeat and the retry callback are marked experimental
        try:
            callback_name = ("heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback"
                             in inspect.signature(optuna.storages.RDBStorage).parameters else "failed_trial_callback")
            storage = optuna.storages.RDBStorage(
                spec, engine_kwargs=engine_kwargs, heartbeat_interval=heartbeat,
                grace_period=GRACE_FACTOR * heartbeat, **{callback_name: _retry_callback()},
            )
            if sqlite:
                _lock_on_begin(storage.engine)
            return storage
        except ImportError as exc:  # Optuna re-raises the driver's ModuleNotFoundError as ImportError
            raise ConfigError(f"the storage {spec.split('://')[0]} needs its Python driver ({exc}): "
                              "`pip install ppoga-dspy[postgres]` installs psycopg") from exc
        except Exception as exc:  # SQLAlchemy's OperationalError and friends: the server is not there
            if type(exc).__module__.startswith(("sqlalchemy", "psycopg")):
                raise ConfigError(f"cannot open the Optuna storage {spec}: {exc}") from exc
            raise


def _lock_on_begin(engine: Any) -> None:
    """Make every SQLite transaction take the write lock when it begins (`BEGIN IMMEDIATE`).

    Optuna claims a WAITING trial (an enqueued starting point, a retry) by reading it `FOR UPDATE`
    and writing RUNNING; SQLite ignores `FOR UPDATE`, so two workers starting together both read
    WAITING and both run the trial, and the second one's result is refused ("Cannot tell a COMPLETE
    trial"). Taking the lock at BEGIN serialises the read with the write, as PostgreSQL does.
    """
    from sqlalchemy import event

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # connections opened while Optuna built the schema began their own way


def has_heartbeat(storage: Any) -> bool:
    from optuna.storages._heartbeat import is_heartbeat_enabled

    return is_heartbeat_enabled(storage)


def worker_identity() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fail_dead_trials(study: Any) -> list[int]:
    """Fail the RUNNING trials whose worker on this host has exited, and enqueue their retries (journal storage).

    RDB storages do this themselves from the heartbeat (`optuna.storages.fail_stale_trials`), on
    every host; here only this host's dead workers can be told apart from slow ones.
    """
    import optuna
    from optuna.trial import TrialState

    if has_heartbeat(study._storage):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optuna.storages.fail_stale_trials(study)
        return []
    host = socket.gethostname()
    failed: list[int] = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = trial.user_attrs.get(WORKER_ATTR) or {}
        if worker.get("host") != host or not worker.get("pid") or _alive(int(worker["pid"])):
            continue
        if study._storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL):
            failed.append(trial.number)
            _enqueue_retry(study, study._storage.get_trial(trial._trial_id))
    return failed


def _enqueue_retry(study: Any, trial: Any) -> None:
    """What Optuna's retry callback does, minus the dead worker's identity (the next worker writes its own)."""
    import optuna

    history = [*trial.system_attrs.get("retry_history", []), trial.number]
    if len(history) > MAX_RETRY:
        return
    system_attrs = {**trial.system_attrs, "failed_trial": trial.system_attrs.get("failed_trial", trial.number),
                    "retry_history": history}
    user_attrs = {k: v for k, v in trial.user_attrs.items() if k != WORKER_ATTR}
    study.add_trial(optuna.create_trial(state=optuna.trial.TrialState.WAITING, params=trial.params,
                                        distributions=trial.distributions, user_attrs=user_attrs,
                                        system_attrs=system_attrs))


def complete_count(study: Any) -> int:
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def worker_shares(remaining: int, workers: int) -> list[int]:
    """`remaining` trials split as evenly as possible over at most `workers` processes (none gets zero)."""
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    count = min(workers, remaining)
    if count == 0:
        return []
    base = remaining // count
    return [base + (1 if index < remaining % count else 0) for index in range(count)]


#: The study's user attribute recording what it tunes (LM, dataset, split, seed, questions).
PROVENANCE_ATTR = "ppoga_provenance"


class StudyMismatch(ConfigError):
    """The study was made with another LM or other questions; resuming would mix two tunings in one front."""


def check_study_provenance(study: Any, provenance: dict[str, Any] | None, *, where: str) -> None:
    """Record `provenance` on a new study; refuse (one line) to resume a study that recorded other values.

    A study made before this record existed (no attribute, but trials) is resumed as it is.
    """
    if not provenance:
        return
    recorded = study.user_attrs.get(PROVENANCE_ATTR)
    if recorded is None:
        if not study.trials:
            study.set_user_attr(PROVENANCE_ATTR, provenance)
        return
    conflict = provenance_conflict(recorded, provenance)
    if conflict is not None:
        key, found, wanted = conflict
        raise StudyMismatch(f"study {study.study_name!r} in {where} was made with {key} {found!r}, and this run "
                            f"uses {key} {wanted!r}; resume it with the same flags, or start another study "
                            "with --study NAME or --storage")


def provenance_conflict(recorded: dict[str, Any], wanted: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """(key, recorded value, wanted value) of the first key the two record differently, else None.

    A key either side leaves out (or records as None) is no conflict: a record made before the key
    existed resumes as it is. Every resumable piece of work (a tuning study, MIPROv2's kept scores)
    decides "same work?" by this one rule.
    """
    for key, value in wanted.items():
        found = recorded.get(key)
        if found is not None and value is not None and str(found) != str(value):
            return key, found, value
    return None


def questions_digest(examples: list) -> str:
    """`N:HASH` of the questions' ids, in any order: the same questions give the same digest."""
    import hashlib

    from ppoga_dspy.evaluation.evaluate import example_id

    ids = "\n".join(sorted(str(example_id(e)) for e in examples))
    return f"{len(examples)}:{hashlib.sha256(ids.encode()).hexdigest()[:12]}"
