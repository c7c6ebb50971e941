"""The scripted planners: offline LMs that stand in for a model, so control flow, benchmarks and tests run without
one. `engine.py` is the DSPy engine that answers by signature and inputs; `gold_path.py` the careful planner that
knows each question's gold path (`oracle/gold-path`), `noisy_planner.py` the one that makes seeded mistakes
(`oracle/noisy:P`), `fused_handlers.py` their fused-stage handlers, `texts.py` the free text they write from each
call's own inputs, `proposer.py` the offline prompt writer for MIPROv2 and GEPA (`oracle/proposer`), and `specs.py`
the `--lm` specs that name them. May import `errors`, `text`, `kg`, `signatures` and `lm`; they read the gold facts
from the examples they are given, never from a dataset file or from the method.
"""
