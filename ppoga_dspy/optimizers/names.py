"""Optimizer names, importable without DSPy so `ppoga --help` stays light."""

#: bootstrap / random-search / mipro / gepa are DSPy's; knn selects demos per question from a pool of the
#: teacher's traces (optimizers/knn.py); finetune trains a LoRA adapter of a local model on them (finetune.py).
OPTIMIZERS = ("bootstrap", "random-search", "mipro", "gepa", "knn", "finetune")
