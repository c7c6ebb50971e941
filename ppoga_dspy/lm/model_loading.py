"""One lock for every model construction in the process.

Why: transformers sets torch's *global* default dtype while it builds a model (`dtype=torch.bfloat16`
for the embedded model), and flips its global progress-bar switch around our loads. A model built in
another thread meanwhile (MiniLM for pruning and demos, in one question's thread of a threaded
`ppoga eval` while another loads the embedded model) gets bfloat16 weights and fails at its first
matmul ("mat1 and mat2 must have the same dtype"): seen when the embedded model was loaded in the
background of `ppoga ask`. Loads holding this lock never overlap; reading a tokenizer still may.
"""

from __future__ import annotations

import threading

#: Held around each transformers model construction (`AutoModel*.from_pretrained`, GGUF conversion, LoRA merge).
MODEL_LOAD_LOCK = threading.RLock()
