"""Optimizer names, importable without DSPy so `ppoga --help` stays light."""

OPTIMIZERS = ("bootstrap", "random-search", "mipro", "gepa")
