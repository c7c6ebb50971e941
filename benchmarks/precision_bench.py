"""How far the embedded model's bf16 arithmetic moves its logits from fp32, on the recorded program prompts.

Issue 12: the bf16 fast path answers 3 of 50 WC-P2 questions differently from fp32, each time through a
near-tie between two candidates. This prints, for each of the 45 prompts of `lm_prompts.json` (every
stage), how far the next-token logits of fp32's five best tokens move under
- `bf16`: the fast path as it runs (bf16 weights, activations and residual stream);
- `bf16, fp32 residual`: the same bf16 matmuls with the residual stream, norms and final hidden state
  kept in fp32 (a candidate fix, measured here and not adopted);
and how often the best token stays the same. A choice whose two best candidates are closer than these
differences can go either way. The output layer is applied in fp32 for all three, as the engine does
for constrained choices. One torch thread; about two minutes.

    python benchmarks/precision_bench.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
FIXTURE = Path(__file__).resolve().parent / "lm_prompts.json"


def fp32_residual(model: Any) -> list[Any]:
    """Hooks that keep `model`'s residual stream in fp32 around its bf16 layers (returned, to be removed)."""
    import torch

    bf16 = torch.bfloat16
    body = model.model
    hooks = [body.embed_tokens.register_forward_hook(lambda _m, _i, out: out.float())]
    for layer in body.layers:  # what enters a layer's matmuls goes back to bf16; what it adds stays fp32
        for norm in (layer.input_layernorm, layer.pre_feedforward_layernorm):
            hooks.append(norm.register_forward_hook(lambda _m, _i, out: out.to(bf16)))
    for name in ("rotary_emb", "rotary_emb_local"):
        if (rotary := getattr(body, name, None)) is not None:
            hooks.append(rotary.register_forward_hook(lambda _m, _i, out: tuple(t.to(bf16) for t in out)))
    return hooks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--limit", type=int, default=None, help="first N prompts only")
    args = parser.parse_args(argv)
    import torch

    from ppoga_dspy.lm.embedded import EmbeddedEngine, load_embedded

    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    prompts = json.loads(args.fixture.read_text(encoding="utf-8"))["prompts"][: args.limit]
    engine = EmbeddedEngine()
    low, full = load_embedded(dtype="bfloat16"), load_embedded(dtype="float32")
    head = full.model.lm_head.weight.detach().float()

    def logits(model: Any, ids: list[int]) -> Any:
        hidden = model.model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1].float()
        return torch.nn.functional.linear(hidden, head)

    variants: dict[str, list[tuple[float, bool]]] = {"bf16": [], "bf16, fp32 residual": []}
    seconds = dict.fromkeys(variants, 0.0)
    for prompt in prompts:
        ids = low.tokenizer(engine.render(prompt["chat"]), add_special_tokens=False)["input_ids"]
        reference = logits(full.model, ids)
        top = reference.topk(5).indices
        for name in variants:
            hooks = fp32_residual(low.model) if name != "bf16" else []
            try:
                started = time.perf_counter()
                got = logits(low.model, ids)
                seconds[name] += time.perf_counter() - started
            finally:
                for hook in hooks:
                    hook.remove()
            variants[name].append(((got[top] - reference[top]).abs().max().item(),
                                   bool(got.argmax() == reference.argmax())))
    print(f"next-token logits against fp32 on {len(prompts)} recorded prompts (|difference| over fp32's top 5)")
    print("| variant | median | p90 | max | same best token | prefill s (one thread) |")
    print("|---|---|---|---|---|---|")
    for name, rows in variants.items():
        drift = sorted(d for d, _ in rows)
        p90 = statistics.quantiles(drift, n=10)[-1] if len(drift) > 1 else drift[0]
        print(f"| {name} | {statistics.median(drift):.3f} | {p90:.3f} | {drift[-1]:.3f} "
              f"| {sum(same for _, same in rows)}/{len(rows)} | {seconds[name]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
