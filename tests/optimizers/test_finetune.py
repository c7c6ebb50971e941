"""Fine-tuning mechanics: training pairs in ChatAdapter format, one LoRA step on the real model, the adapter files."""

from __future__ import annotations

import copy
import json

import pytest

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.errors import ArtifactError
from ppoga_dspy.method.program import PPoGA
from ppoga_dspy.optimizers.artifact import Artifact, load_artifact
from ppoga_dspy.optimizers.finetune import adapter_folder_for, finetune_artifact, train_lora, training_pairs
from ppoga_dspy.optimizers.traces import collect_traces, teacher_program
from ppoga_dspy.scripted.gold_path import oracle_lm


@pytest.fixture(scope="module")
def pairs(demo_kg):
    train = load_dataset("demo", split="train")[:3]
    program = PPoGA(demo_kg)
    return training_pairs(collect_traces(program, train, teacher_lm=oracle_lm(train)), program)


def test_pairs_are_the_programs_prompts_and_the_teachers_replies(pairs):
    decompose = [p for p in pairs if p.predictor == "planner.decompose"]
    assert len(decompose) == 3
    first = decompose[0]
    assert [m["role"] for m in first.messages] == ["system", "user"]  # zero-shot: what the student is sent
    assert "[[ ## question ## ]]" in first.messages[-1]["content"]
    assert first.completion.startswith("[[ ## steps ## ]]") and "follow relation" in first.completion
    assert first.completion.rstrip().endswith("[[ ## completed ## ]]")
    assert {p.predictor for p in pairs} >= {"planner.answer", "executor.select_relations"}


@pytest.mark.slow
def test_one_lora_step_on_five_pairs_writes_an_adapter_that_applies(pairs, tmp_path):
    from ppoga_dspy.inference.lora import adapter_digest, apply_adapter
    from ppoga_dspy.lm.embedded import load_embedded

    artifact_path = tmp_path / "ft.json"
    result = train_lora(pairs[:5], adapter_folder_for(artifact_path), steps=1, max_length=768)
    assert result.steps == 1 and result.pairs == 5 and result.first_loss > 0
    assert (result.adapter / "adapter_config.json").is_file()
    config = json.loads((result.adapter / "adapter_config.json").read_text())
    assert config["r"] == 8 and set(config["target_modules"]) >= {"q_proj", "v_proj"}
    merged = apply_adapter(copy.deepcopy(load_embedded().model), result.adapter)
    assert not hasattr(merged, "peft_config")  # merged back into a plain model: no cost at generation time
    assert len(adapter_digest(result.adapter)) == 12
    # the artifact names the adapter relative to itself, so the two move together
    artifact = Artifact(program_state={}, thresholds={}, optimizer="finetune", adapter=result.adapter.name)
    artifact.save(artifact_path)
    assert load_artifact(artifact_path).adapter_path() == result.adapter.resolve()


@pytest.mark.slow
def test_finetune_artifact_saves_the_artifact_naming_its_adapter_and_the_training(demo_kg, tmp_path):
    """What `ppoga compile --optimizer finetune` and compile_bench's finetune row write: one call, both files."""
    train = load_dataset("demo", split="train")[:2]
    out = tmp_path / "arts" / "ft.json"
    out.parent.mkdir()
    artifact, result = finetune_artifact(PPoGA(demo_kg), train, teacher_lm=oracle_lm(train), out=out,
                                         lm="local/gemma3-270m", provenance={"dataset": "demo", "split": "train"},
                                         steps=1, max_length=512)
    loaded = load_artifact(out)
    assert loaded.optimizer == "finetune" and loaded.lm == "local/gemma3-270m" and loaded.split == "train"
    assert loaded.adapter_path() == adapter_folder_for(out).resolve() == result.adapter.resolve()
    assert (result.adapter / "adapter_config.json").is_file()
    recorded = loaded.scores["finetune"]
    assert recorded["steps"] == 1 and recorded["pairs"] == result.pairs > 0 and recorded["first_loss"] > 0
    assert artifact.scores == loaded.scores


def test_a_missing_adapter_folder_is_an_artifact_error(demo_kg, tmp_path):
    program = PPoGA(demo_kg)
    artifact = Artifact.from_program(program, lm="local/gemma3-270m", optimizer="finetune")
    artifact.adapter = "gone.adapter"
    artifact.save(tmp_path / "ft.json")
    with pytest.raises(ArtifactError, match="gone.adapter"):
        load_artifact(tmp_path / "ft.json").apply(program)


def test_the_teacher_asks_every_choice_a_gated_student_skips(demo_kg):
    """A student gated on named relations still gets SelectRelations demos: the teacher runs ungated."""
    from ppoga_dspy.method.thresholds import Thresholds

    train = load_dataset("demo", split="train")[:3]
    program = PPoGA(demo_kg, thresholds=Thresholds(follow_named_relations=True, gate_margin=0.0,
                                                   back_to_named_relation=True))
    traces = collect_traces(program, train, teacher_lm=oracle_lm(train))
    assert any(s.predictor == "executor.select_relations" for t in traces for s in t.stages)
    assert program.thresholds.follow_named_relations  # the student keeps its gates
    assert program.thresholds.back_to_named_relation
    assert not teacher_program(program, None).thresholds.back_to_named_relation  # the teacher follows its plan
