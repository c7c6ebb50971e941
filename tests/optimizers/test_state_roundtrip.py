"""DSPy's own save / load keeps everything an artifact holds, for every kind of artifact.

`program.save("x.json")`, `program.save("x.pkl")`, `program.save(DIR, save_program=True)` + `dspy.load`
and the project's artifact must all give back the same program: prompts and demos, the tuned thresholds,
the stage mode and the nearest-neighbour pool. Before `PPoGA.dump_state` carried its own section, a
DSPy save dropped the last three silently and `save_program=True` failed on a lock.
"""

from __future__ import annotations

import json

import dspy
import pytest

from ppoga_dspy.errors import ArtifactError
from ppoga_dspy.method.program import STATE_KEY, PPoGA
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.method.vocabulary import StageMode
from ppoga_dspy.optimizers.artifact import Artifact, load_artifact
from ppoga_dspy.optimizers.knn import KNNPredict, pool_of
from tests.conftest import REPO

SHIPPED_KNN = REPO / "data" / "embedded-demo.json"


def _prompted(kg) -> PPoGA:
    """A program as bootstrap/random-search/mipro/gepa leave it: instructions and demos changed."""
    program = PPoGA(kg)
    decompose = program.planner.decompose
    decompose.signature = decompose.signature.with_instructions("Plan one step per hop of the question.")
    decompose.demos = [dspy.Example(question="Who directed Inception?", topic_entities="Inception",
                                    steps='[{"objective": "find the director", "action": "explore"}]')]
    program.executor.select_relations.demos = [dspy.Example(question="q", relations="a; b", chosen='["a"]')]
    return program


def _tuned(kg) -> PPoGA:
    """A program as tune leaves it: thresholds moved off the paper's (the issue: tuned max_replans 0 came back as 2)."""
    program = _prompted(kg)
    program.thresholds = Thresholds(max_replans=0, max_path_corrections=0, prune_threshold=7, use_prediction=False)
    return program


def _fused(kg) -> PPoGA:
    program = _tuned(kg)
    program.stages = StageMode.FUSED
    return program


def _knn(kg) -> PPoGA:
    """The shipped artifact, a knn pool: every predictor a KNNPredict over it."""
    program = PPoGA(kg)
    load_artifact(SHIPPED_KNN).apply(program)
    assert pool_of(program) is not None
    return program


KINDS = {"prompts": _prompted, "tuned": _tuned, "fused": _fused, "knn": _knn}


def _summary(program: PPoGA) -> dict:
    """Everything that decides behaviour, comparable: the full state, and which predictors read a pool."""
    state = program.dump_state()
    return {"state": json.loads(json.dumps(state, default=str)),
            "knn": sorted(name for name, p in program.named_predictors() if isinstance(p, KNNPredict)),
            "thresholds": program.thresholds.to_dict(), "stages": str(program.stages)}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("form", ["json", "pkl"])
def test_dspy_save_and_load_keep_everything(kind, form, demo_kg, tmp_path):
    program = KINDS[kind](demo_kg)
    path = tmp_path / f"program.{form}"
    program.save(str(path))
    loaded = PPoGA(demo_kg)  # a fresh program: paper thresholds, paper stages, plain predictors
    loaded.load(str(path), allow_pickle=form == "pkl")
    assert _summary(loaded) == _summary(program)
    if kind != "prompts":
        assert loaded.thresholds.max_replans == 0 or kind == "knn"
    if kind == "fused":
        assert loaded.stages == StageMode.FUSED
    if kind == "knn":
        assert pool_of(loaded) is not None and pool_of(loaded).questions == pool_of(program).questions


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_save_program_pickles_the_whole_program(kind, demo_kg, tmp_path):
    """`save_program=True` + `dspy.load`: the KG and role LMs are bound again at run time (`with_kg`)."""
    program = KINDS[kind](demo_kg)
    program.save(str(tmp_path / "whole"), save_program=True)
    loaded = dspy.load(str(tmp_path / "whole"), allow_pickle=True)
    assert loaded.kg is None and loaded.role_lms == {}
    assert _summary(loaded) == _summary(program)
    answered = loaded.with_kg(demo_kg)
    assert answered.kg is demo_kg


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_artifact_is_the_program_state(kind, demo_kg, tmp_path):
    """The project's artifact round-trips the same state, and a DSPy save of an applied artifact equals it."""
    program = KINDS[kind](demo_kg)
    Artifact.from_program(program, lm="none").save(tmp_path / "a.json")
    applied = PPoGA(demo_kg)
    load_artifact(tmp_path / "a.json").apply(applied)
    assert _summary(applied) == _summary(program)


def test_loading_a_state_without_a_pool_removes_the_pool(demo_kg, tmp_path):
    """A loaded program is the saved one, never a mix: a pool-less state turns KNN predictors back into Predict."""
    _tuned(demo_kg).save(str(tmp_path / "plain.json"))
    program = _knn(demo_kg)
    program.load(str(tmp_path / "plain.json"))
    assert pool_of(program) is None and program.thresholds.max_replans == 0


def test_a_plain_dspy_state_loads_the_predictors_only(demo_kg):
    state = _tuned(demo_kg).dump_state()
    del state[STATE_KEY]
    program = PPoGA(demo_kg, thresholds=Thresholds(max_replans=1))
    program.load_state(state)
    assert program.planner.decompose.signature.instructions.startswith("Plan one step")
    assert program.thresholds.max_replans == 1  # kept: the state says nothing about thresholds


def test_a_bad_section_changes_nothing(demo_kg):
    state = _tuned(demo_kg).dump_state()
    state[STATE_KEY]["thresholds"]["max_replans"] = -3
    program = PPoGA(demo_kg)
    before = _summary(program)
    with pytest.raises(ArtifactError, match="thresholds"):
        program.load_state(state)
    assert _summary(program) == before


def test_the_shipped_artifact_comes_from_the_documented_recipe():
    """The shipped artifact is compiled with no hand-set `--set` (docs/compile-and-tune.md): its on/off rules are
    the defaults, which serve every model, and it names the KG it was compiled on (so a run on another KG says so)."""
    import json

    from ppoga_dspy.method.thresholds import CHOSEN_ON_DEV, Thresholds

    data = json.loads(SHIPPED_KNN.read_text(encoding="utf-8"))
    shipped = Thresholds.from_dict(data["thresholds"])
    assert {name: getattr(shipped, name) for name in CHOSEN_ON_DEV} == {
        name: getattr(Thresholds(), name) for name in CHOSEN_ON_DEV}
    assert data["kg"] == "freebase@demo-kg.nt"
