"""Fine-tune the embedded model on the teacher's traces with LoRA (DSPy's BootstrapFinetune idea, local models only).

Training pairs come from the same teacher traces as the knn pool (`traces.py`): for every stage of every
question the teacher answered right, the prompt is the chat the program sends for that stage (its
compact ChatAdapter, lm/adapter.py; zero-shot: what the student sees at run time) rendered exactly as
the engine renders it, and the completion is the teacher's outputs in ChatAdapter format. Only
completion tokens are learned (prompt tokens are masked). The adapter is written as a folder beside the artifact
(`X.json` -> `X.adapter/`) and recorded in it relative to the artifact; `ppoga_dspy.inference.lora.apply_adapter`
merges it into the loaded model.

On 2 CPU cores keep it small: a few hundred pairs, a few hundred steps, rank 8 on the attention
projections; bf16 is used where the CPU supports it natively (`--bf16`), float32 otherwise.
"""

from __future__ import annotations

import copy
import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppoga_dspy.errors import ConfigError
from ppoga_dspy.optimizers.traces import QuestionTrace

log = logging.getLogger(__name__)

#: Gemma 3's attention projections: where LoRA adapts a small model most for its size.
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass
class TrainingPair:
    """One stage of the teacher: the chat the student is sent, and the reply it should write."""

    predictor: str
    messages: list[dict[str, str]]
    completion: str


@dataclass
class FinetuneResult:
    adapter: Path
    pairs: int
    steps: int
    seconds: float
    first_loss: float
    last_loss: float


def training_pairs(traces: list[QuestionTrace], program: Any) -> list[TrainingPair]:
    """Prompt/completion pairs in the format the program sends (its compact ChatAdapter) and parses."""
    from ppoga_dspy.lm.adapter import compact_adapter

    adapter = compact_adapter(json_fallback=False)  # what a `local/...` student runs with (method/question_run.py)
    predictors = dict(program.named_predictors())
    pairs: list[TrainingPair] = []
    for trace in traces:
        for stage in trace.stages:
            predictor = predictors.get(stage.predictor)
            if predictor is None:
                continue
            signature = predictor.signature
            messages = adapter.format(signature, demos=[], inputs=stage.inputs)
            completion = adapter.format_assistant_message_content(signature, stage.outputs)
            pairs.append(TrainingPair(stage.predictor, messages, completion))
    return pairs


def adapter_folder_for(artifact: Path) -> Path:
    """`artifacts/x.json` -> `artifacts/x.adapter` (the folder travels with the artifact)."""
    return artifact.with_suffix(".adapter")


def train_lora(
    pairs: list[TrainingPair],
    out: Path,
    *,
    model_name: str | None = None,
    steps: int = 200,
    learning_rate: float = 2e-4,
    rank: int = 8,
    max_length: int = 1024,
    seed: int = 0,
    bf16: bool = False,
) -> FinetuneResult:
    """Train a LoRA adapter of the embedded model on `pairs` (cycled, shuffled with `seed`) and save it at `out`."""
    import torch
    from peft import LoraConfig, get_peft_model

    from ppoga_dspy.lm.embedded import EmbeddedEngine, load_embedded

    if not pairs:
        raise ConfigError("no training pairs: the teacher answered no training question right")
    if steps < 1:
        raise ConfigError(f"--steps {steps}: train at least one step")
    started = time.perf_counter()
    engine = EmbeddedEngine(model_name)
    loaded = load_embedded(engine.name)
    tokenizer = loaded.tokenizer
    with loaded.lock:  # the shared weights are copied, never trained in place
        base = copy.deepcopy(loaded.model)
    dtype = torch.bfloat16 if bf16 else torch.float32
    base = base.to(dtype)
    model = get_peft_model(base, LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0,
                                            target_modules=list(TARGET_MODULES), task_type="CAUSAL_LM"))
    model.train()
    torch.manual_seed(seed)
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=learning_rate)
    losses: list[float] = []
    for step in range(steps):
        pair = pairs[order[step % len(order)]]
        prompt = engine.render(pair.messages)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        reply_ids = tokenizer(pair.completion, add_special_tokens=False)["input_ids"]
        if tokenizer.eos_token_id is not None:
            reply_ids = reply_ids + [tokenizer.eos_token_id]
        ids = (prompt_ids + reply_ids)[-max_length:]  # keep the reply; cut the prompt's start if too long
        labels = ([-100] * len(prompt_ids) + reply_ids)[-max_length:]
        batch = torch.tensor([ids])
        output = model(input_ids=batch, labels=torch.tensor([labels]))
        output.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(output.loss.detach()))
        if step % 25 == 0:
            log.info("finetune step %d/%d loss %.3f", step + 1, steps, losses[-1])
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    return FinetuneResult(adapter=out, pairs=len(pairs), steps=steps, seconds=time.perf_counter() - started,
                          first_loss=losses[0], last_loss=losses[-1])


def finetune(program: Any, trainset: list, *, teacher_lm: Any, artifact: Path, threads: int = 1,
             **training: Any) -> FinetuneResult:
    """Collect the teacher's traces on `trainset`, train the adapter, save it beside `artifact`."""
    from ppoga_dspy.optimizers.traces import collect_traces

    traces = collect_traces(program, trainset, teacher_lm=teacher_lm, threads=threads)
    pairs = training_pairs(traces, program)
    return train_lora(pairs, adapter_folder_for(Path(artifact)), **training)


def finetune_artifact(program: Any, trainset: list, *, teacher_lm: Any, out: Path, lm: str, threads: int = 1,
                      provenance: dict[str, Any] | None = None, **training: Any) -> tuple[Any, FinetuneResult]:
    """Fine-tune (`finetune`) and save the artifact at `out` naming its adapter (`out` -> `out.adapter/`).

    The adapter is recorded relative to the artifact, so the pair can move together; `lm` is the
    student's description (`local/...`), `provenance` the artifact's dataset/split fields.
    """
    from ppoga_dspy.optimizers.artifact import Artifact

    result = finetune(program, trainset, teacher_lm=teacher_lm, artifact=out, threads=threads, **training)
    scores = {"finetune": {"pairs": result.pairs, "steps": result.steps, "seconds": round(result.seconds, 1),
                           "first_loss": round(result.first_loss, 4), "last_loss": round(result.last_loss, 4)}}
    artifact = Artifact.from_program(program, lm=lm, optimizer="finetune", scores=scores, **(provenance or {}))
    artifact.adapter = result.adapter.name
    artifact.save(out)
    return artifact, result
