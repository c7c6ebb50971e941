"""Nearest-neighbour demos: the pool, per-call selection (thread-safe), artifact round trips, old artifacts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.errors import ArtifactError
from ppoga_dspy.evaluation.evaluate import score_program
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.method.thresholds import Thresholds
from ppoga_dspy.optimizers.artifact import SCHEMA, Artifact, load_artifact
from ppoga_dspy.optimizers.compile import compile_program
from ppoga_dspy.optimizers.knn import DemoPool, KNNPredict, pool_of
from ppoga_dspy.scripted.gold_path import oracle_lm
from tests.conftest import DEMO_KG, REPO, shared_data
from tests.optimizers.copier import CopierEngine, copier_lm

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def demo():
    return load_dataset("demo", split="train"), load_dataset("demo", split="dev") + load_dataset("demo", split="test")


def _copier_program(kg, engine=None):
    """A model that copies its demos copies their answers too: it is held to the graph (answer_from_knowledge off),
    as a small model that invents names is."""
    lm = copier_lm(engine)
    return PPoGA(kg, thresholds=Thresholds(answer_from_knowledge=False), role_lms={"planner": lm, "executor": lm})


def test_pool_keeps_every_stage_once_per_question(demo_kg, demo):
    train, _ = demo
    result = compile_program(_copier_program(demo_kg), trainset=train, devset=[], optimizer="knn",
                             teacher_lm=oracle_lm(train), k=2)
    pool = pool_of(result.program)
    assert pool is not None and pool.k == 2
    assert len(pool.questions) == len(set(pool.questions)) and set(pool.questions) <= {e.question for e in train}
    assert {"planner.decompose", "planner.answer", "executor.select_relations"} <= set(pool.records)
    assert len(pool.records["planner.decompose"]) == len(pool.questions)  # one plan per question
    # the question text is stored once, in pool.questions, not in each stage record
    assert all("question" not in fields for stage in pool.records.values() for _, fields in stage)
    assert all(isinstance(p, KNNPredict) for _, p in result.program.named_predictors())
    assert "planner.decompose" in result.changed_predictors


def test_each_call_gets_the_demos_of_its_own_question_in_parallel(demo_kg, demo):
    train, held_out = demo
    engine = CopierEngine()
    result = compile_program(_copier_program(demo_kg, engine), trainset=train, devset=[], optimizer="knn",
                             teacher_lm=oracle_lm(train), k=3)
    pool = pool_of(result.program)
    engine.requests.clear()
    score_program(result.program, held_out, threads=4)  # questions share one program in four threads
    assert len(engine.requests) > len(held_out)
    predictor_of = {"Decompose": "planner.decompose", "PredictOutcome": "planner.predict_outcome",
                    "Think": "planner.think", "Evaluate": "planner.evaluate", "Replan": "planner.replan",
                    "Answer": "planner.answer", "SelectRelations": "executor.select_relations",
                    "SelectEntities": "executor.select_entities"}
    for signature, asked, demo_questions in engine.requests:
        having = {i for i, _ in pool.records.get(predictor_of[signature], [])}  # questions with this stage
        nearest = [pool.questions[i] for i in pool.nearest(asked) if i in having][:3]
        assert demo_questions == list(reversed(nearest)), (signature, asked)  # its own neighbours, nearest last
        assert asked not in demo_questions  # held-out questions are not in the pool


def test_a_hop_two_call_gets_the_neighbours_hop_two_stage(demo_kg, demo):
    train, _ = demo
    result = compile_program(_copier_program(demo_kg), trainset=train, devset=[], optimizer="knn",
                             teacher_lm=oracle_lm(train), k=1)
    pool = pool_of(result.program)
    two_hop = next(q for q in pool.questions
                   if sum(pool.questions[i] == q for i, _ in pool.records["executor.select_relations"]) >= 2)
    index = pool.questions.index(two_hop)
    hop2 = [f for i, f in pool.records["executor.select_relations"] if i == index][1]
    call = {"question": two_hop, **{k: hop2[k] for k in ("step", "entity", "candidates")}}
    [chosen] = pool.demos("executor.select_relations", call)
    assert chosen.step == hop2["step"] and chosen.relations == hop2["relations"]


def test_knn_beats_fixed_demos_for_a_model_that_copies(tmp_path):
    """On WC-P2 (questions of shared templates) a copier is right when its demo comes from the same template."""
    from ppoga_dspy.kg import open_kg

    spec = f"wc2014:{shared_data('wc2014', 'WC-P2.txt')}"
    train = load_dataset(spec, split="train", limit=80)
    test = load_dataset(spec, split="test", limit=20)
    kg = open_kg(shared_data("wc2014", "WC2014.txt"))
    try:
        program = _copier_program(kg)
        fixed = compile_program(program, trainset=train, devset=test, optimizer="bootstrap",
                                teacher_lm=oracle_lm(train), max_demos=2)
        knn = compile_program(program, trainset=train, devset=test, optimizer="knn", teacher_lm=oracle_lm(train),
                              k=2)
    finally:
        kg.close()
    zero_shot = knn.dev_before["hits@1"]
    assert knn.dev_after["hits@1"] >= zero_shot + 0.3
    assert knn.dev_after["hits@1"] > fixed.dev_after["hits@1"]


def test_artifact_round_trip_keeps_the_pool_and_the_score(demo_kg, demo, tmp_path):
    train, held_out = demo
    result = compile_program(_copier_program(demo_kg), trainset=train, devset=held_out, optimizer="knn",
                             teacher_lm=oracle_lm(train), k=2)
    path = Artifact.from_program(result.program, lm="local/copier", optimizer="knn").save(tmp_path / "knn.json")
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA and data["knn"]["embeddings"]["dtype"] == "float16"
    pool = pool_of(result.program)
    assert len(data["knn"]["embeddings"]["base64"]) == pytest.approx(len(pool.questions) * 384 * 2 * 4 / 3, abs=4)
    fresh = _copier_program(demo_kg)
    load_artifact(path).apply(fresh, lm_description="local/copier")
    reloaded = pool_of(fresh)
    assert reloaded.questions == pool.questions and reloaded.records == pool.records
    for example in held_out:  # float16 storage keeps every neighbour order
        assert reloaded.nearest(example.question) == pool.nearest(example.question)
    timeless = ("seconds_mean", "seconds_median")
    scores = [{k: v for k, v in score_program(p, held_out).items() if k not in timeless}
              for p in (fresh, result.program)]
    assert scores[0] == scores[1]
    # a knn program saved again (e.g. by `ppoga tune`) still carries its pool
    again = Artifact.from_program(fresh, lm="local/copier").save(tmp_path / "again.json")
    assert json.loads(again.read_text())["knn"] == data["knn"]


def test_artifact_reproduces_its_score_in_a_fresh_process(demo_kg, demo, tmp_path):
    train, held_out = demo
    result = compile_program(_copier_program(demo_kg), trainset=train, devset=held_out, optimizer="knn",
                             teacher_lm=oracle_lm(train), k=2)
    path = Artifact.from_program(result.program, lm="local/copier", optimizer="knn",
                                 scores=result.scores).save(tmp_path / "knn.json")
    script = (
        "import json, sys\n"
        "from ppoga_dspy.kg import open_kg\n"
        "from ppoga_dspy.datasets.loaders import load_dataset\n"
        "from ppoga_dspy.evaluation.evaluate import score_program\n"
        "from ppoga_dspy.optimizers.artifact import load_artifact\n"
        "from tests.optimizers.test_knn import _copier_program\n"
        "kg = open_kg(sys.argv[2])\n"
        "program = _copier_program(kg)\n"
        "load_artifact(sys.argv[1]).apply(program)\n"
        "held = load_dataset('demo', split='dev') + load_dataset('demo', split='test')\n"
        "print(json.dumps(score_program(program, held)['hits@1']))\n"
    )
    env = {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script, str(path), str(DEMO_KG)], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == result.dev_after["hits@1"]


def test_schema_1_artifacts_still_load(demo_kg):
    artifact = load_artifact(DATA / "artifact-v1.json")
    assert artifact.knn is None and artifact.adapter is None
    program = PPoGA(demo_kg)
    artifact.apply(program, lm_description="local/gemma3-270m")
    assert program.planner.decompose.demos[0]["question"] == "Who directed Inception?"
    assert pool_of(program) is None


def test_a_damaged_pool_is_refused_before_the_program_changes(demo_kg, demo, tmp_path):
    train, _ = demo
    result = compile_program(_copier_program(demo_kg), trainset=train[:4], devset=[], optimizer="knn",
                             teacher_lm=oracle_lm(train), k=2)
    data = Artifact.from_program(result.program, lm="x").to_dict()
    data["knn"]["embeddings"]["shape"] = [1, 384]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    program = PPoGA(demo_kg)
    with pytest.raises(ArtifactError, match="knn pool"):
        load_artifact(tmp_path / "bad.json").apply(program)
    assert pool_of(program) is None
    with pytest.raises(ArtifactError, match="format"):
        DemoPool.from_dict({"format": "something else"})


def test_a_teacher_that_is_never_right_is_a_config_error(demo_kg, demo):
    from ppoga_dspy.errors import ConfigError

    train, _ = demo
    unanswerable = [ex.copy(answers=["no such answer"]) for ex in train[:3]]  # nobody gets these right
    with pytest.raises(ConfigError, match="teacher answered none"):
        compile_program(_copier_program(demo_kg), trainset=unanswerable, devset=[], optimizer="knn",
                        teacher_lm=oracle_lm(train))


def test_compile_with_dev_limit_zero_writes_the_pool_without_scoring(tmp_path, capsys):
    # A slow local student is scored later by `ppoga eval`; the compile itself only needs the teacher.
    from ppoga_dspy.cli import main

    out = tmp_path / "knn.json"
    code = main(["compile", "--dataset", "demo", "--split", "train", "--optimizer", "knn", "--k", "2",
                 "--teacher-lm", "oracle/gold-path", "--lm", "none", "--program", "none", "--dev-limit", "0",
                 "--out", str(out)])
    assert code == 0
    assert "not scored" in capsys.readouterr().out
    artifact = load_artifact(out)
    assert artifact.knn is not None
    assert artifact.scores["dev_after"].get("n") is None and artifact.scores["dev_after"].get("hits@1") is None


def test_a_demo_shows_its_inputs_cut_and_its_reply_whole():
    """A demo's long inputs are cut (a list keeps the items its reply chooses); its outputs never are; the trim
    travels with the pool, and a pool saved before trims existed shows its demos whole, as it did."""
    from ppoga_dspy.method.demo_trim import ELLIPSIS, DemoTrim
    from ppoga_dspy.method.knn_demos import embed_questions

    candidates = [f"Film {i}  <- (Actor, starred_actors, Film {i})" for i in range(40)]
    record = {"step": "find the films of the actor", "candidates": candidates,
              "memory": "Plan: " + "step done; " * 80, "entities": ["Film 31", "Film 7"], "rationale": "Film 31 " * 60}
    asked = ["which films did X star in ?"]
    pool = DemoPool(questions=asked, embeddings=embed_questions(asked),
                    records={"executor.select_entities": [(0, record)]}, k=1, trim=DemoTrim(chars=120, items=5))
    [demo] = pool.demos("executor.select_entities", {"question": "which films did Y star in ?", "step": "s",
                                                    "candidates": ["a"], "memory": "m"})
    shown = demo.candidates
    assert shown[-1] == ELLIPSIS.strip() and len(shown) == 6
    assert candidates[7] in shown and candidates[31] in shown  # what the reply chooses stays in what it chooses from
    assert shown[:-1] == [c for c in candidates if c in shown]  # in the list's own order
    assert demo.memory.endswith(ELLIPSIS) and len(demo.memory) <= 120 + len(ELLIPSIS)
    assert demo.entities == record["entities"] and demo.rationale == record["rationale"]  # outputs whole
    assert demo.step == record["step"]  # short inputs untouched
    again = DemoPool.from_dict(json.loads(json.dumps(pool.to_dict())))
    assert again.trim == DemoTrim(120, 5)
    old = pool.to_dict()
    del old["trim"]
    assert DemoPool.from_dict(old).trim == DemoTrim(None, None)
    call = {"question": "q", "candidates": [], "memory": ""}
    [whole] = DemoPool.from_dict(old).demos("executor.select_entities", call)
    assert whole.candidates == candidates and whole.memory == record["memory"]
    with pytest.raises(ArtifactError, match="trim"):
        DemoPool.from_dict({**old, "trim": {"chars": 0}})


def test_the_last_steps_call_gets_the_neighbours_last_step_record_whatever_its_length():
    """A neighbour's records are matched field by field: the last step's record (next step "none", no candidates)
    wins for a last-step call even when its long observation shares few of the call's many words, where one bag of
    all words picked the first step's short record (and the small model, copying it, never wrote its answers)."""
    from ppoga_dspy.method.knn_demos import embed_questions

    plan = ("Plan: 1. follow relation directed_by 2. follow relation directed_by (reverse) "
            "3. follow relation starred_actors")
    first = {"step": "follow relation directed_by", "prediction": "Following directed_by reaches a director",
             "observation": "(Film A, directed_by, Ann Lee)", "memory": plan,
             "next_step": "follow relation directed_by", "candidates": ["Ann Lee: directed_by (reverse)"],
             "decision": "proceed", "answers": []}
    actors = "; ".join(f"Actor {i}" for i in range(30))
    last = {"step": "follow relation starred_actors", "prediction": "Following starred_actors reaches actors",
            "observation": f"(Film B, starred_actors, {actors})",
            "memory": plan + " Known: (Film B, directed_by, Ann Lee)", "next_step": "none", "candidates": [],
            "decision": "finish", "answers": ["Actor 1"]}
    asked = ["who acted in the films directed by the director of X"]
    pool = DemoPool(questions=asked, embeddings=embed_questions(asked), k=1,
                    records={"planner.think_evaluate": [(0, first), (0, last)]})
    call = {"question": "who acted in the movies directed by the director of Y",
            "step": "follow relation starred_actors", "prediction": "Following directed_by reaches a director",
            "observation": "(Film C, starred_actors, Bo Ray)\n(Film D, starred_actors, Cy Dee)",
            "memory": plan + " Known: (Film C; Film D, directed_by, Dan Fox)", "next_step": "none", "candidates": []}
    [shown] = pool.demos("planner.think_evaluate", call)
    assert shown.decision == "finish" and shown.answers == ["Actor 1"]
    step_one = {**call, "step": "follow relation directed_by", "next_step": "follow relation directed_by",
                "candidates": ["Dan Fox: directed_by (reverse)"], "observation": "(Film C, directed_by, Dan Fox)"}
    [shown] = pool.demos("planner.think_evaluate", step_one)
    assert shown.decision == "proceed"


def test_an_extended_pool_shows_each_kg_its_own_demos_and_warns_only_off_them(demo_kg, tmp_path, capsys):
    """`ppoga compile --extend` keeps an earlier artifact's demos (another KG) beside the new ones. Run on either KG,
    the program is shown only that KG's questions (a copying model writes only names that lead somewhere there);
    on a third KG it keeps the whole pool and says, once, which graphs its demos come from."""
    import warnings

    from ppoga_dspy.cli import main
    from ppoga_dspy.optimizers.artifact import ArtifactKGMismatch

    wc = shared_data("wc2014", "WC-P2.txt")
    base = ["compile", "--optimizer", "knn", "--k", "2", "--teacher-lm", "oracle/gold-path", "--lm", "none",
            "--program", "none", "--dev-limit", "0"]
    first, both = tmp_path / "demo.json", tmp_path / "both.json"
    assert main([*base, "--dataset", "demo", "--split", "train", "--out", str(first)]) == 0
    assert main([*base, "--dataset", f"wc2014:{wc}", "--split", "train", "--limit", "12", "--extend", str(first),
                 "--out", str(both)]) == 0
    artifact = load_artifact(both)
    assert artifact.graphs() == ["freebase@demo-kg.nt", "irn@WC2014.txt"]
    assert artifact.dataset.startswith("demo + wc2014:")
    whole = DemoPool.from_dict(artifact.knn)
    demo_questions = set(DemoPool.from_dict(load_artifact(first).knn).questions)
    assert demo_questions < set(whole.questions) and len(whole.questions) > len(demo_questions)

    program = PPoGA(demo_kg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        artifact.apply(program, kg_name=demo_kg.name)
    assert set(pool_of(program).questions) == demo_questions
    wc_program = PPoGA(demo_kg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        artifact.apply(wc_program, kg_name=f"irn@{wc.parent}/WC2014.txt")
    wc_questions = set(pool_of(wc_program).questions)
    assert wc_questions and not wc_questions & demo_questions
    demos = pool_of(wc_program).demos("planner.decompose", {"question": "which country does Abel_HERNANDEZ play "
                                                                        "professional in ?"})
    assert demos and all("film." not in json.dumps(dict(d)) for d in demos)
    with pytest.warns(ArtifactKGMismatch, match="compiled on freebase@demo-kg.nt, irn@WC2014.txt, not irn@kb.txt"):
        artifact.apply(PPoGA(demo_kg), kg_name="irn@/x/kb.txt")

    fused = tmp_path / "fused.json"
    capsys.readouterr()
    assert main([*base, "--dataset", f"wc2014:{wc}", "--split", "train", "--limit", "4", "--stages", "fused",
                 "--extend", str(first), "--out", str(fused)]) != 0
    err = capsys.readouterr().err
    assert "holds paper stages' demos" in err and "compile: knn on" not in err  # refused before any work
    assert not fused.exists()


def test_on_another_graph_the_demos_show_the_plans_shape_without_its_relation_names(demo_kg, tmp_path):
    """Issue 38, point 5, `--foreign-demos unnamed`: the shipped demo-KG artifact run on a KG it holds no question of.
    Its plan demos keep their
    steps (how many, in what order) but say "follow the relation the question asks about" where they named a
    demo-KG relation, so a small model has no film relation to copy into a footballer's plan; the facts, menus and
    choices a demo read stay its graph's own. On the demo KG the same artifact's demos are as compiled."""
    from ppoga_dspy.method.demo_transfer import FIRST, NEXT, pool_relations

    artifact = load_artifact(REPO / "data" / "embedded-demo.json")
    own = PPoGA(demo_kg)
    artifact.apply(own, kg_name=demo_kg.name)
    wc = tmp_path / "kb.txt"
    wc.write_text("Pat\tplays_for_country\tLand_A\n")
    other = PPoGA(demo_kg)
    with pytest.warns(UserWarning, match="compiled on freebase@demo-kg.nt"):
        artifact.apply(other, kg_name=f"irn@{wc}", foreign_demos="unnamed")
    compiled = PPoGA(demo_kg)
    with pytest.warns(UserWarning, match="compiled on freebase@demo-kg.nt"):
        artifact.apply(compiled, kg_name=f"irn@{wc}")
    assert pool_of(compiled).records == pool_of(own).records, "by default the demos are shown as compiled"
    names = pool_relations(pool_of(own).records)
    assert "film.film.directed_by" in names
    question = {"question": "which country does Pat play professional in ?", "topic_entities": ["Pat"]}
    compiled = pool_of(own).demos("planner.decompose", question)
    moved = pool_of(other).demos("planner.decompose", question)
    assert [len(d.steps) for d in moved] == [len(d.steps) for d in compiled] and any(len(d.steps) > 1 for d in moved)
    assert any(name in json.dumps(d.steps) for d in compiled for name in names)
    for demo in moved:
        objectives = [step["objective"] for step in demo.steps]
        assert objectives == [FIRST] + [NEXT] * (len(objectives) - 1)
        assert not any(name in json.dumps(demo.steps) for name in names)
    think = pool_of(other).demos("planner.think", {**question, "step": FIRST, "observation": "", "memory": ""})
    assert think and all(not any(n in d.thought or n in d.memory for n in names) for d in think)
    assert any("(" in d.observation and any(n in d.observation for n in names) for d in think), "facts kept"
