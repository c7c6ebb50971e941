"""`ppoga kg load --engine virtuoso` + `ppoga kg serve` on MetaQA's KB give the embedded store's Hits@1, and a load
killed midway then rerun ends with the uninterrupted load's triple count (no duplicates), on both engines. Real
Virtuoso on loopback, real pyoxigraph, the real CLI in child processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ppoga_dspy.kg.servers import virtuoso_home
from tests.conftest import shared_data

REPO = Path(__file__).resolve().parents[2]
needs_virtuoso = pytest.mark.skipif(virtuoso_home() is None, reason="Virtuoso binaries absent: run "
                                    "scripts/setup_virtuoso.sh (or set PPOGA_VIRTUOSO_HOME)")


def _env(tmp_path):
    return {**os.environ, "PPOGA_KG_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1"}


def ppoga(tmp_path, *args, check=True):
    result = subprocess.run([sys.executable, "-m", "ppoga_dspy.cli", *args], cwd=REPO, env=_env(tmp_path),
                            capture_output=True, text=True, timeout=900)
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def _summary(result):
    return json.loads(result.stdout.strip().splitlines()[-1])


@needs_virtuoso
def test_metaqa_through_a_served_virtuoso_gives_the_embedded_hits_at_1(tmp_path):
    kb = shared_data("metaqa", "kb.txt")
    questions = shared_data("metaqa", "2hop_qa_dev.txt")
    db = tmp_path / "metaqa-virtuoso"
    loaded = ppoga(tmp_path, "kg", "load", str(kb), "--engine", "virtuoso", "--store", str(db), "--memory", "0.5",
                   "--json")
    meta = json.loads(loaded.stdout)
    assert meta["triples"] > 170_000 and meta["dialect"] == "names"
    assert "NumberOfBuffers=" in loaded.stderr  # the memory settings are printed
    server = subprocess.Popen([sys.executable, "-m", "ppoga_dspy.cli", "kg", "serve", str(db), "--memory", "0.5"],
                              cwd=REPO, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        assert "--kg http://127.0.0.1:" in line and "--dialect names" in line, line + server.stderr.read()
        url = line.split("--kg ")[1].split()[0]
        common = ["eval", "--dataset", f"metaqa:{questions}", "--sample", "20", "--lm", "oracle/gold-path",
                  "--json", "--no-progress"]
        served = _summary(ppoga(tmp_path, *common, "--kg", url, "--dialect", "names", "--out",
                                str(tmp_path / "virtuoso.jsonl")))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    embedded = _summary(ppoga(tmp_path, *common, "--out", str(tmp_path / "embedded.jsonl")))
    assert served["n"] == embedded["n"] == 20
    assert served["hits@1"] == embedded["hits@1"] and served["hits@1"] > 0.5
    assert not (db / "virtuoso.lck").exists()  # the served Virtuoso stopped with `ppoga kg serve`


@pytest.mark.parametrize("engine", ["oxigraph", pytest.param("virtuoso", marks=needs_virtuoso)])
def test_a_load_killed_midway_and_rerun_has_the_uninterrupted_triple_count(tmp_path, engine):
    kb = tmp_path / "kb.txt"
    lines = shared_data("metaqa", "kb.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    kb.write_text("".join(lines[:40_000]), encoding="utf-8")
    options = ["--engine", engine, "--chunk-mb", "0.25", "--json", "--memory", "0.25"]
    whole = json.loads(ppoga(tmp_path, "kg", "load", str(kb), "--store", str(tmp_path / "whole"), *options).stdout)
    store = tmp_path / "killed"
    child = subprocess.Popen([sys.executable, "-m", "ppoga_dspy.cli", "kg", "load", str(kb), "--store", str(store),
                              *options], cwd=REPO, env=_env(tmp_path), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    state = store / "ppoga-load.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if state.is_file():
            try:
                chunks = next(iter(json.loads(state.read_text(encoding="utf-8"))["files"].values()))["chunks"]
            except (ValueError, StopIteration):
                chunks = 0
            if chunks >= 2:
                break
        assert child.poll() is None, "the load ended before it could be killed; lower --chunk-mb"
        time.sleep(0.05)
    child.kill()  # SIGKILL: no clean-up of any kind
    child.wait()
    assert not (store / "ppoga-kg.json").exists()  # an unfinished load is not a store yet
    rerun = json.loads(ppoga(tmp_path, "kg", "load", str(kb), "--store", str(store), *options).stdout)
    assert rerun["triples"] == whole["triples"] > 60_000
    assert rerun["triples_read"] < whole["triples_read"]  # the rerun loaded only what was not loaded yet
