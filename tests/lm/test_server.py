"""The loopback OpenAI-compatible server, and the port test: a two-role program over two real HTTP servers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import dspy
import pytest

from ppoga_dspy.lm.errors import LMConfigError
from ppoga_dspy.lm.factory import build_role_lms, make_lm
from ppoga_dspy.lm.server import serve_lm
from ppoga_dspy.lm.settings import LMSettings


def http(method: str, url: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_chat_completions_speaks_the_openai_wire_format(scripted_server):
    server, engine = scripted_server("A", "model-a")
    assert server.url.startswith("http://127.0.0.1:") and server.port > 0
    status, body = http(
        "POST",
        server.url + "/chat/completions",
        {
            "model": "model-a",
            "messages": [
                {"role": "system", "content": "Your output fields are:\n1. `answer` (str):\nAnswer."},
                {"role": "user", "content": [{"type": "text", "text": "[[ ## question ## ]]\nWho?"}]},
            ],
            "temperature": 0,
            "max_tokens": 64,
        },
    )
    assert status == 200
    assert body["object"] == "chat.completion" and body["model"] == "model-a" and body["id"]
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant" and choice["finish_reason"] == "stop"
    assert choice["message"]["content"] == "[[ ## answer ## ]]\nA:answer [question=Who?]\n\n[[ ## completed ## ]]"
    usage = body["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert engine.requests == [("answer", {"question": "Who?"})]
    assert server.stats.requests == 1 and server.stats.prompt_tokens == usage["prompt_tokens"]


def test_models_and_health_routes(scripted_server):
    server, _ = scripted_server("A", "model-a")
    status, body = http("GET", server.url + "/models")
    assert status == 200 and [m["id"] for m in body["data"]] == ["model-a"] and body["object"] == "list"
    assert http("GET", f"http://127.0.0.1:{server.port}/health") == (200, {"status": "ok"})


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"model": "m", "messages": []}, 400, "non-empty list"),
        ({"model": "m", "messages": [{"role": "system", "content": "x"}]}, 400, "add a user message"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, 400, "unknown message role"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}, 400, "streaming"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 3}, 400, "n=1"),
    ],
)
def test_bad_requests_get_openai_style_errors_and_the_server_keeps_serving(scripted_server, body, status, fragment):
    server, _ = scripted_server("A", "m")
    code, error = http("POST", server.url + "/chat/completions", body)
    assert code == status and fragment in error["error"]["message"]
    assert http("GET", server.url + "/models")[0] == 200
    assert server.stats.errors == 1 and server.stats.requests == 0


def test_unknown_routes_are_404(scripted_server):
    server, _ = scripted_server("A", "m")
    assert http("GET", server.url + "/engines")[0] == 404
    assert http("POST", server.url + "/completions", {"prompt": "x"})[0] == 404


def test_api_key_is_required_when_set(scripted_server):
    server, _ = scripted_server("A", "m", api_key="secret")
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert http("POST", server.url + "/chat/completions", body)[0] == 401
    assert http("POST", server.url + "/chat/completions", body, {"Authorization": "Bearer secret"})[0] == 200
    lm = make_lm(server.spec(), api_key="secret", cache=False)
    assert lm("hi") and server.stats.requests == 2
    with pytest.raises(Exception, match="(?i)api key|auth|401"):
        make_lm(server.spec(), api_key="wrong", cache=False, num_retries=0)("hi")


def test_engine_failures_become_500_not_a_dead_server():
    class Broken:
        def complete(self, request):
            raise RuntimeError("weights on fire")

    with serve_lm(Broken(), model_name="b") as server:
        code, body = http("POST", server.url + "/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
        assert code == 500 and "weights on fire" in body["error"]["message"]
        assert http("GET", server.url + "/models")[0] == 200


def test_serve_lm_rejects_what_is_not_an_engine():
    with pytest.raises(LMConfigError, match="needs an engine"):
        serve_lm("openai/gpt-4o-mini")


class TwoRoles(dspy.Module):
    """The program's shape in miniature: a planner call whose output feeds an executor call."""

    def __init__(self) -> None:
        super().__init__()
        self.plan = dspy.Predict("question -> plan")
        self.act = dspy.Predict("question, plan -> answer")

    def forward(self, question: str) -> dspy.Prediction:
        plan = self.plan(question=question).plan
        return self.act(question=question, plan=plan)


def test_port_each_role_talks_to_its_own_server_and_usage_is_per_lm(scripted_server):
    planner_server, planner_engine = scripted_server("P", "planner-model")
    executor_server, executor_engine = scripted_server("E", "executor-model")
    settings = LMSettings(lm=planner_server.spec(), executor_lm=executor_server.spec(), cache=False)
    lms = build_role_lms(settings)
    assert lms["planner"] is not lms["executor"]
    assert lms["planner"].model == "openai/planner-model" and lms["executor"].model == "openai/executor-model"

    program = TwoRoles()
    program.plan.set_lm(lms["planner"])
    program.act.set_lm(lms["executor"])
    with dspy.context(track_usage=True):
        result = program(question="Who won?")

    # The wire format round-trips both ways: the executor saw the planner server's output as its input.
    plan_text = "P:plan [question=Who won?]"
    assert result.answer == f"E:answer [plan={plan_text},question=Who won?]"
    # Each predictor hit its own server exactly once.
    assert (planner_server.stats.requests, executor_server.stats.requests) == (1, 1)
    assert [name for name, _ in planner_engine.requests] == ["plan"]
    assert [name for name, _ in executor_engine.requests] == ["answer"]
    # Usage is accounted per LM, and matches what each server reported on the wire.
    usage = result.get_lm_usage()
    assert set(usage) == {"openai/planner-model", "openai/executor-model"}
    for model, server in (("openai/planner-model", planner_server), ("openai/executor-model", executor_server)):
        assert usage[model]["prompt_tokens"] == server.stats.prompt_tokens > 0
        assert usage[model]["completion_tokens"] == server.stats.completion_tokens > 0
    for role, server in (("planner", planner_server), ("executor", executor_server)):
        history = lms[role].history
        assert len(history) == 1
        assert history[0]["usage"]["prompt_tokens"] == server.stats.prompt_tokens


def test_port_two_model_names_on_one_server_are_accounted_apart(scripted_server):
    server, _ = scripted_server("S", "big")
    lms = build_role_lms(LMSettings(lm=server.spec("big"), executor_lm=server.spec("small"), cache=False))
    program = TwoRoles()
    program.plan.set_lm(lms["planner"])
    program.act.set_lm(lms["executor"])
    with dspy.context(track_usage=True):
        result = program(question="q")
    assert dict(server.stats.by_model) == {"big": 1, "small": 1}
    assert set(result.get_lm_usage()) == {"openai/big", "openai/small"}


def test_every_openai_compatible_provider_prefix_reaches_the_server(scripted_server):
    server, _ = scripted_server("A", "m")
    for spec in (f"openai/m@{server.url}", f"hosted_vllm/m@{server.url}", f"ollama_chat/m@{server.url}"):
        lm = make_lm(spec, cache=False)
        with dspy.context(lm=lm):
            assert dspy.Predict("question -> answer")(question="x").answer == "A:answer [question=x]"
    litellm = make_lm(f"openai/m@{server.url}", cache=False, engine="litellm")
    with dspy.context(lm=litellm):
        assert dspy.Predict("question -> answer")(question="y").answer == "A:answer [question=y]"
    assert server.stats.requests == 4


def test_a_dspy_lm_can_be_served_too(scripted_server):
    # A proxy: server B serves an LM that itself talks to server A; the reply and usage pass through.
    upstream, _ = scripted_server("A", "up")
    with serve_lm(make_lm(upstream.spec(), cache=False), model_name="proxy") as proxy:
        lm = make_lm(proxy.spec(), cache=False)
        with dspy.context(lm=lm):
            assert dspy.Predict("question -> answer")(question="z").answer == "A:answer [question=z]"
        assert proxy.stats.requests == upstream.stats.requests == 1
        assert proxy.stats.completion_tokens == upstream.stats.completion_tokens > 0
