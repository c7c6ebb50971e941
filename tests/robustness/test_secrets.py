"""Secrets (#30, class 7): a credential in an LM URL is refused before any work, without repeating it; an LM error
that echoes the key is stored and printed redacted."""

from __future__ import annotations

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.errors import ConfigError
from ppoga_dspy.testing.faults import FaultLMServer

KEY = "sk-test-0123456789abcdefSECRET"


@pytest.mark.parametrize("url", ["http://user:{key}@127.0.0.1:{port}/v1", "http://127.0.0.1:{port}/v1?api-key={key}",
                                 "http://127.0.0.1:{port}/v1?key={key}", "http://{key}@127.0.0.1:{port}/v1"])
def test_a_credential_in_the_lm_url_is_refused_and_not_repeated(url, tmp_path, capsys):
    with FaultLMServer("ok") as server:
        spec = f"openai/m@{url.format(key=KEY, port=server.port)}"
        assert main(["ask", "Who directed Inception?", "--lm", spec]) == ConfigError.exit_code
        assert main(["eval", "--dataset", "demo", "--limit", "1", "--lm", spec,
                     "--out", str(tmp_path / "r.jsonl")]) == ConfigError.exit_code
        assert server.requests == 0
    err = capsys.readouterr().err
    assert KEY not in err and "0123456789abcdef" not in err and "OPENAI_API_KEY" in err and "Traceback" not in err
    assert not (tmp_path / "r.jsonl").exists()


def test_an_error_body_that_echoes_the_key_is_redacted_everywhere(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    out, trace = tmp_path / "r.jsonl", tmp_path / "trace.json"
    with FaultLMServer("echo-key") as server:
        code = main(["eval", "--dataset", "demo", "--limit", "2", "--lm", server.spec(), "--out", str(out),
                     "--lm-retries", "0", "--no-progress"])
        assert code == 7 and server.requests >= 1
        asked = main(["ask", "Who directed Inception?", "--lm", server.spec(), "--lm-retries", "0",
                      "--trace", str(trace)])
        assert asked == 5
    shown = capsys.readouterr()
    stored = out.read_text(encoding="utf-8") + trace.read_text(encoding="utf-8")
    assert "invalid credentials" in stored  # the error is kept, its key is not
    for text in (stored, shown.out, shown.err):
        assert KEY not in text and "0123456789abcdef" not in text
