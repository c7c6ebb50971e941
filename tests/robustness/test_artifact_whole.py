"""An artifact is checked whole when it is loaded (#30, class 6): one line, exit 6; and an internal error is never
taken for a model's bad reply (a fallback is for the model's mistakes only)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.errors import ArtifactError
from tests.conftest import REPO

SHIPPED = REPO / "data" / "embedded-demo.json"


def _damaged(tmp_path, change) -> str:
    data = json.loads(SHIPPED.read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _narrow(data):
    pool = data["knn"]
    n = pool["embeddings"]["shape"][0]
    pool["embeddings"] = {"dtype": "float16", "shape": [n, 8],
                          "base64": base64.b64encode(np.ones((n, 8), dtype=np.float16).tobytes()).decode()}


@pytest.mark.parametrize(("change", "expected"), [
    (_narrow, "vectors have shape"),
    (lambda d: d["knn"].update(k=-1), "k is -1"),
    (lambda d: d["knn"].update(k=10**9), "k is 1000000000"),
    (lambda d: d["knn"].update(records=[1, 2]), "damaged"),
    (lambda d: d.update(program=[1]), "not a JSON object"),
])
def test_a_pool_or_state_that_disagrees_is_refused_at_load(change, expected, tmp_path, capsys):
    from ppoga_dspy.optimizers.artifact import load_artifact

    path = _damaged(tmp_path, change)
    with pytest.raises(ArtifactError, match=expected):
        load_artifact(path)
    assert main(["ask", "Who directed Inception?", "--program", path, "--lm", "none"]) == ArtifactError.exit_code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ppoga ask: error: ") and expected in err[0]


@pytest.mark.parametrize("content", [b"\xff\xfe{}", b"[" * 100_000 + b"]" * 100_000,
                                     b'{"a": ' * 5000 + b"1" + b"}" * 5000, SHIPPED.read_bytes()[:1000]])
def test_stray_bytes_deep_nesting_and_cuts_are_one_line(content, tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    assert main(["ask", "Who?", "--program", str(path), "--lm", "none"]) == ArtifactError.exit_code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ppoga ask: error: "), err
    assert main(["ask", "Who?", "--program", "/dev/zero", "--lm", "none"]) == ArtifactError.exit_code


def test_an_internal_error_in_a_predictor_fails_the_question_not_a_fallback(demo_kg):
    import dspy

    from ppoga_dspy.lm import make_lm
    from ppoga_dspy.method.program import PPoGA
    from ppoga_dspy.testing.faults import FaultLMServer

    program = PPoGA(demo_kg)

    def broken(**_):  # what a pool of the wrong width did inside the predictor, before any request
        raise ValueError("matmul: Input operand 1 has a mismatch in its core dimension 0")

    program.planner.decompose.forward = broken
    with FaultLMServer("ok") as server:
        with dspy.context(lm=make_lm(server.spec(), cache=False)):
            prediction = program(question="Who directed Inception?")
        assert prediction.status == "failed" and prediction.error_kind == "internal", prediction.error
        assert server.requests == 0
