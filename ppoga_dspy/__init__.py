"""ppoga-dspy: PPoGA knowledge-graph question answering as a compiled DSPy program.

Heavy dependencies (dspy, pyoxigraph, transformers, optuna, torch) are imported by the
modules that need them, never here, so `import ppoga_dspy` and `ppoga --help` stay fast.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
