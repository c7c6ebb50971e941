"""Loading a `--optimizer finetune` artifact: its LoRA adapter reaches the embedded engine, changes the engine's
identity (so no base-model reply is served from the cache), and the adapted model loads and generates."""

from __future__ import annotations

import json

import pytest

from ppoga_dspy.app.session import adapted_role_lms
from ppoga_dspy.errors import LMError
from ppoga_dspy.lm import build_role_lms, load_lm_settings, make_lm, with_adapter
from ppoga_dspy.lm.embedded import EmbeddedEngine
from ppoga_dspy.lm.guard import engine_identity
from ppoga_dspy.optimizers.artifact import Artifact


def fake_adapter(folder, rank=8):
    """An adapter folder as far as identity goes (config and weights files); never loaded into a model."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": rank, "peft_type": "LORA"}))
    (folder / "adapter_model.safetensors").write_bytes(b"weights-%d" % rank)
    return folder


def test_an_adapter_is_part_of_the_engine_identity(tmp_path):
    folder = fake_adapter(tmp_path / "ft.adapter")
    base, adapted = EmbeddedEngine(), EmbeddedEngine(adapter=folder)
    assert adapted.adapter == str(folder.resolve()) and len(adapted.adapter_digest) == 12
    assert engine_identity(base) != engine_identity(adapted)
    again = EmbeddedEngine.load_state(adapted.dump_state())
    assert engine_identity(again) == engine_identity(adapted)
    fake_adapter(folder, rank=16)  # retrained at the same path: another model, another identity
    assert engine_identity(EmbeddedEngine(adapter=folder)) != engine_identity(adapted)


def test_a_missing_adapter_is_a_configuration_error(tmp_path):
    with pytest.raises(LMError, match="no LoRA adapter"):
        EmbeddedEngine(adapter=tmp_path / "gone.adapter")
    with pytest.raises(LMError, match="embedded model only"):
        make_lm("openai/gpt-4o-mini", adapter=str(tmp_path))


def test_the_artifacts_adapter_goes_to_the_embedded_role_lms_only(tmp_path):
    folder = fake_adapter(tmp_path / "ft.adapter")
    artifact = Artifact(program_state={}, thresholds={}, optimizer="finetune", adapter=folder.name)
    artifact.save(tmp_path / "ft.json")
    shared = build_role_lms(load_lm_settings(lm="local/embedded"))
    roles = adapted_role_lms(shared, artifact)
    assert roles["planner"] is roles["executor"]  # one LM for both roles stays one
    assert roles["planner"].engine.adapter == str(folder.resolve())
    assert shared["planner"].engine.adapter is None  # the base LM is not changed in place
    remote = make_lm("openai/gpt-4o-mini")
    assert with_adapter(remote, str(folder)) is remote
    plain = Artifact(program_state={}, thresholds={})
    assert adapted_role_lms(shared, plain) is shared


@pytest.mark.slow
def test_a_finetuned_artifact_loads_its_adapter_and_generates(demo_kg, tmp_path):
    """One LoRA step on five pairs, then `open_program` with the artifact: the adapted model answers."""
    from ppoga_dspy.app import ProgramSettings, open_program
    from ppoga_dspy.datasets.loaders import load_dataset
    from ppoga_dspy.inference.loading import _REGISTRY, load_embedded
    from ppoga_dspy.method.program import PPoGA
    from ppoga_dspy.optimizers.finetune import adapter_folder_for, train_lora, training_pairs
    from ppoga_dspy.optimizers.traces import collect_traces
    from ppoga_dspy.scripted.gold_path import oracle_lm

    train = load_dataset("demo", split="train")[:3]
    program = PPoGA(demo_kg)
    pairs = training_pairs(collect_traces(program, train, teacher_lm=oracle_lm(train)), program)
    artifact_path = tmp_path / "ft.json"
    result = train_lora(pairs[:5], adapter_folder_for(artifact_path), steps=1, max_length=768)
    artifact = Artifact.from_program(program, lm="local/gemma3-270m", optimizer="finetune")
    artifact.adapter = result.adapter.name
    artifact.save(artifact_path)

    settings = ProgramSettings(lm=load_lm_settings(lm="local/embedded"), program=str(artifact_path))
    with open_program(settings) as opened:
        lm = opened.role_lms["planner"]
        assert lm.engine.adapter == str(result.adapter.resolve())
        loaded = lm.engine.loaded()
        assert loaded.adapter == str(result.adapter.resolve())
        assert loaded is not load_embedded()  # the base model stays as it was, beside the adapted one
        assert any("+" in key for key in _REGISTRY)
        reply = lm.copy(cache=False)("Name a football club.", max_tokens=8)
    assert isinstance(reply[0], str) and reply[0].strip()
