"""`--optimizer knn`: bootstrap the teacher's stage traces on the training split into a nearest-neighbour pool.

The pool and the predictors that read it at run time live in `method/knn_demos.py` (a compiled
program carries them in its own state, `PPoGA.dump_state`); this module only builds the pool.
"""

from __future__ import annotations

from typing import Any

from ppoga_dspy.method.demo_trim import DemoTrim
from ppoga_dspy.method.knn_demos import (
    EMBEDDER,
    POOL_FORMAT,
    DemoPool,
    KNNPredict,
    embed_questions,
    install_pool,
    pool_of,
    question_template,
    uninstall_pool,
)

__all__ = ["EMBEDDER", "POOL_FORMAT", "DemoPool", "DemoTrim", "KNNPredict", "compile_knn", "embed_questions",
           "install_pool", "pool_of", "question_template", "uninstall_pool"]


def compile_knn(program: Any, trainset: list, *, teacher_lm: Any | None, k: int = 3, threads: int = 1,
                teacher_name: str = "", trim: DemoTrim | None = None) -> Any:
    """A copy of `program` with a pool bootstrapped from the teacher's right answers on `trainset`."""
    from ppoga_dspy.optimizers.traces import collect_traces

    traces = collect_traces(program, trainset, teacher_lm=teacher_lm, threads=threads)
    pool = DemoPool.from_traces(traces, k=k, teacher=teacher_name, trim=trim)
    return install_pool(program.deepcopy(), pool)
