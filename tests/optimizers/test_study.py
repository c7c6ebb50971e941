"""Shared Optuna studies: storage specs, worker processes on one study, and trials of killed workers.

The PostgreSQL tests run against a real server (`postgres_server`, from the pgserver wheel) and
the real `ppoga tune` command with the scripted oracle planner on the demo questions, so a trial
takes a second or two. A killed worker is killed with SIGKILL: no cleanup of its own runs.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ppoga_dspy.errors import ConfigError
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.optimizers.study import WORKER_ATTR, journal_path, open_storage, worker_shares
from ppoga_dspy.optimizers.tune import SEARCHED, open_study, remaining_trials

REPO = Path(__file__).resolve().parents[2]
STUDY = "ppoga-thresholds"


def _tune(storage: str, out: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True",
               PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "ppoga_dspy", "tune", "--dataset", "demo", "--lm", "oracle/gold-path",
               "--storage", storage, "--out", str(out), "--json", *extra]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen, timeout: float = 600) -> dict:
    stdout, stderr = process.communicate(timeout=timeout)
    assert process.returncode == 0, stderr[-3000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    assert all(w["exit_code"] == 0 for w in report.get("workers", [])), stderr[-6000:]
    return report


def _storage(spec: str):
    """A fresh storage object per read, so no cache hides what another process wrote."""
    return open_storage(spec, heartbeat=1)


def test_storage_specs():
    assert journal_path("journal:/tmp/x/s.log") == Path("/tmp/x/s.log")
    assert journal_path("runs/study.journal") == Path("runs/study.journal")
    assert journal_path("sqlite:///a.db") is None
    with pytest.raises(ConfigError, match="journal:PATH"):
        open_storage("study.db")
    with pytest.raises(ConfigError, match="heartbeat"):
        open_storage("sqlite:///x.db", heartbeat=0)
    assert worker_shares(7, 3) == [3, 2, 2]
    assert worker_shares(2, 4) == [1, 1]
    assert worker_shares(0, 2) == []
    with pytest.raises(ConfigError):
        worker_shares(3, 0)


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_sqlite_heartbeat_fails_a_silent_trial_and_enqueues_it_again(tmp_path):
    spec = f"sqlite:///{tmp_path / 's.db'}"
    study = open_study(spec, study_name=STUDY, seed=0, trials=3, base=Thresholds(), heartbeat=1)
    trial = study.ask()  # the enqueued starting point, as a worker would start it
    trial.suggest_int("max_replans", 0, 3)
    study._storage.record_heartbeat(trial._trial_id)
    assert remaining_trials(study, 3) == 3
    assert study.trials[0].state == TrialState.RUNNING  # within the grace period: maybe just slow
    time.sleep(3 * 1 + 1.5)
    assert remaining_trials(study, 3) == 3
    trials = optuna.load_study(study_name=STUDY, storage=_storage(spec)).trials
    assert trials[0].state == TrialState.FAIL
    assert trials[1].state == TrialState.WAITING and trials[1].system_attrs["failed_trial"] == 0
    assert trials[1].params == trials[0].params


def _claim_all(spec: str, trial_ids: list[int], start_at: float, claimed: multiprocessing.Queue) -> None:
    """One worker's claims: every WAITING trial it manages to move to RUNNING (what `study.ask` does)."""
    storage = open_storage(spec)
    while time.time() < start_at:
        pass
    claimed.put([i for i in trial_ids if storage.set_trial_state_values(i, TrialState.RUNNING)])


def test_sqlite_hands_each_waiting_trial_to_one_worker_only(tmp_path):
    """Four processes claim the same 40 enqueued trials at once; each trial must go to exactly one.

    SQLite ignores Optuna's `FOR UPDATE`: without `BEGIN IMMEDIATE` two workers read WAITING together,
    both run the trial, and the second is refused when it reports (CI saw it: "Cannot tell a COMPLETE trial").
    """
    import multiprocessing

    spec = f"sqlite:///{tmp_path / 's.db'}"
    study = optuna.create_study(storage=open_storage(spec), directions=["maximize"])
    for k in range(40):
        study.enqueue_trial({"x": k})
    trial_ids = [t._trial_id for t in study.get_trials(deepcopy=False)]
    context = multiprocessing.get_context("spawn")
    claimed = context.Queue()
    start_at = time.time() + 3
    workers = [context.Process(target=_claim_all, args=(spec, trial_ids, start_at, claimed)) for _ in range(4)]
    for worker in workers:
        worker.start()
    wins = [claimed.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    every_claim = sorted(i for won in wins for i in won)
    assert every_claim == sorted(trial_ids)


def test_journal_fails_the_running_trial_of_a_dead_local_worker(tmp_path):
    spec = f"journal:{tmp_path / 's.journal'}"
    study = open_study(spec, study_name=STUDY, seed=0, trials=3, base=Thresholds())
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    trial = study.ask()
    trial.suggest_int("max_replans", 0, 3)
    trial.set_user_attr(WORKER_ATTR, {"host": os.uname().nodename, "pid": dead.pid})
    alive = study.ask()
    alive.set_user_attr(WORKER_ATTR, {"host": os.uname().nodename, "pid": os.getpid()})
    assert remaining_trials(study, 3) == 3
    trials = optuna.load_study(study_name=STUDY, storage=_storage(spec)).trials
    states = [t.state for t in trials]
    assert states == [TrialState.FAIL, TrialState.RUNNING, TrialState.WAITING]
    assert trials[2].system_attrs["failed_trial"] == 0 and WORKER_ATTR not in trials[2].user_attrs


def _spec(backend: str, request: pytest.FixtureRequest, tmp_path: Path, name: str) -> str:
    """A fresh study storage: a database on the session's PostgreSQL server, a SQLite file or a journal file."""
    if backend == "postgres":
        return request.getfixturevalue("postgres_server").database_url(name)
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'study.db'}"
    return str(tmp_path / "study.journal")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgres", "sqlite", "journal"])
def test_two_workers_share_one_study(backend, request, tmp_path):
    spec = _spec(backend, request, tmp_path, "two_workers")
    report = _finish(_tune(spec, tmp_path / "tuned.json", "--split", "dev", "--trials", "6", "--workers", "2"))
    assert [w["trials_run"] for w in report["workers"]] == [3, 3]
    assert report["trials_run_now"] == 0 and report["trial_states"] == {"COMPLETE": 6}
    study = optuna.load_study(study_name=STUDY, storage=_storage(spec))
    pids = {t.user_attrs[WORKER_ATTR]["pid"] for t in study.trials}
    assert pids == {w["pid"] for w in report["workers"]}
    assert len({tuple(sorted(t.params.items())) for t in study.trials}) >= 4  # the workers sampled apart
    assert json.loads((tmp_path / "tuned.json").read_text())["tuning"]["storage"] == spec


def _kill_during_a_trial(spec: str, out: Path, trials: int) -> int:
    """Start `ppoga tune`, SIGKILL it while a trial runs; return that trial's number (retries a lucky miss)."""
    for _ in range(3):
        process = _tune(spec, out, "--split", "train", "--trials", str(trials), "--heartbeat", "1")
        deadline = time.time() + 300
        running: list = []
        while time.time() < deadline and process.poll() is None:
            try:
                running = [t for t in optuna.load_study(study_name=STUDY, storage=_storage(spec)).trials
                           if t.state == TrialState.RUNNING and len(t.params) == len(SEARCHED)]
            except KeyError:  # the study is not created yet
                running = []
            if running:
                break
            time.sleep(0.1)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
        still = [t for t in optuna.load_study(study_name=STUDY, storage=_storage(spec)).trials
                 if t.state == TrialState.RUNNING]
        if still:
            assert still[0].user_attrs[WORKER_ATTR]["pid"] == process.pid
            return still[0].number
    pytest.fail("never caught `ppoga tune` inside a trial in three tries")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgres", "journal"])
def test_a_killed_workers_trial_fails_and_the_study_finishes_on_resume(backend, request, tmp_path):
    spec = _spec(backend, request, tmp_path, "killed_worker")
    out = tmp_path / "tuned.json"
    killed = _kill_during_a_trial(spec, out, trials=4)
    assert not out.exists()
    time.sleep(3 * 1 + 1.5)  # past the grace period of a 1 s heartbeat
    report = _finish(_tune(spec, out, "--split", "train", "--trials", "4", "--heartbeat", "1"))
    study = optuna.load_study(study_name=STUDY, storage=_storage(spec))
    by_number = {t.number: t for t in study.trials}
    assert by_number[killed].state == TrialState.FAIL
    retries = [t for t in study.trials if t.system_attrs.get("failed_trial") == killed]
    assert len(retries) == 1 and retries[0].state == TrialState.COMPLETE
    assert retries[0].params == by_number[killed].params  # the point is not lost
    assert report["trial_states"].get("COMPLETE") == 4 and report["trial_states"].get("RUNNING") is None
    assert out.exists()


def test_worker_argv_rebuilds_the_same_flags():
    from ppoga_dspy.cli import build_parser
    from ppoga_dspy.cli.tune import _worker_argv

    parser = build_parser()
    argv = ["tune", "--dataset", "demo", "--split", "train", "--limit", "5", "--lm", "oracle/gold-path",
            "--out", "x.json", "--storage", "journal:s.journal", "--workers", "3", "--trials", "9",
            "--set", "max_replans=0", "--set", "use_prediction=false", "--timeout", "12.5", "--json"]
    args = parser.parse_args(argv)
    rebuilt = parser.parse_args(_worker_argv(argv))
    assert parser.parse_args(_worker_argv([*argv[:-1], "--work=3"])).workers == 1  # an abbreviation goes too
    same = {k: v for k, v in vars(args).items() if k not in {"workers", "json", "handler"}}
    assert {k: v for k, v in vars(rebuilt).items() if k in same} == same
    assert rebuilt.workers == 1 and rebuilt.json is False
