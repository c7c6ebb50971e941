"""An OpenAI-compatible HTTP server in front of any engine or `dspy.LM`, on loopback by default.

`serve_lm(backend)` answers `POST /v1/chat/completions` (non-streaming, OpenAI wire format with
`usage`) and `GET /v1/models`, from a background thread. It lets any OpenAI client, or another
process's `make_lm("openai/NAME@http://127.0.0.1:PORT/v1")`, use the embedded model, and it lets tests
prove that a program really talks to the server its spec names (the handle counts requests and tokens).
A request that asks for structured output (OpenAI `response_format`, vLLM `guided_json`/`guided_choice`,
Ollama `format`, llama.cpp `json_schema`) gets a reply that obeys its schema. An engine that can decode under
the schema (`complete_structured`: the embedded engine, for the shapes its constraints cover) writes it so by
construction ("constrained"); any other engine or schema shape is answered freely and the reply conformed
after the fact (`lm/schema_replies.py`, "conformed"). The path taken is in the response header
`X-PPoGA-Structured` and counted in `ServerStats.structured_paths`.

    python -m ppoga_dspy.lm.server --lm local/embedded --port 8000     # serve until Ctrl-C

The backend is an engine (an object with `complete(lm15 Request) -> lm15 Response`: the embedded
engine, a scripted one) or a `dspy.LM`. Engines serialise their own generation; the server handles
each connection in its own thread. It is meant for loopback use: no TLS, an optional bearer key.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from collections import Counter
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ppoga_dspy.lm.errors import LMConfigError
from ppoga_dspy.lm.schema_replies import conform, requested_schema
from ppoga_dspy.lm.wire import openai_to_request, response_to_openai

logger = logging.getLogger(__name__)

_MAX_BODY = 32 * 1024 * 1024
#: Response header naming how a structured-output request was answered: "constrained" or "conformed".
STRUCTURED_HEADER = "X-PPoGA-Structured"


class _LMBackend:
    """Adapts a `dspy.LM` to the engine interface: its own engine when it has one, else a call through it."""

    def __init__(self, lm: Any) -> None:
        self.lm = lm

    def _filled(self, config: Any) -> Any:
        """The request's settings, with the LM's own temperature / max_tokens where the client sent none."""
        from dspy.lm15 import Config

        defaults = self.lm.kwargs
        return Config(
            max_tokens=config.max_tokens or defaults.get("max_tokens"),
            temperature=config.temperature if config.temperature is not None else defaults.get("temperature"),
            top_p=config.top_p,
            stop=config.stop,
            seed=config.seed,
        )

    def complete_structured(self, request: Any, schema: dict[str, Any]) -> Any | None:
        """The LM's engine's reply under `schema` where the engine can constrain it (else None: conform after)."""
        from dataclasses import replace

        engine = self.lm.engine
        method = None if isinstance(engine, str) else getattr(engine, "complete_structured", None)
        if not callable(method):
            return None
        return method(replace(request, config=self._filled(request.config)), schema)

    def complete(self, request: Any) -> Any:
        from dspy.lm15 import Message, Response, Usage

        engine = self.lm.engine
        filled = self._filled(request.config)
        if not isinstance(engine, str):  # a custom engine: call it directly (no DSPy cache in between)
            from dataclasses import replace

            return engine.complete(replace(request, config=filled))
        from ppoga_dspy.lm.wire import request_to_chat

        options = {k: v for k, v in {"temperature": filled.temperature, "max_tokens": filled.max_tokens}.items() if v}
        if filled.stop:
            options["stop"] = list(filled.stop)
        reply = self.lm.forward(messages=request_to_chat(request), **options)
        choice = reply.choices[0]
        usage = getattr(reply, "usage", None)
        return Response(
            id=getattr(reply, "id", None) or None,
            model=self.lm.model,
            message=Message.assistant(choice.message.content or ""),
            finish_reason="length" if choice.finish_reason == "length" else "stop",
            usage=Usage(
                input_tokens=getattr(usage, "prompt_tokens", None),
                output_tokens=getattr(usage, "completion_tokens", None),
            ),
        )


def _as_engine(backend: Any) -> Any:
    try:
        import dspy

        if isinstance(backend, dspy.LM):
            return _LMBackend(backend)
    except ImportError:  # pragma: no cover - dspy is a dependency
        pass
    if not callable(getattr(backend, "complete", None)):
        raise LMConfigError(
            f"serve_lm needs an engine (an object with complete(request)) or a dspy.LM, not {type(backend).__name__}"
        )
    return backend


def _default_model_name(backend: Any) -> str:
    for attr in ("model_string", "model"):
        value = getattr(backend, attr, None)
        if isinstance(value, str) and value:
            return value
    return "ppoga-local"


@dataclass
class ServerStats:
    """What the server has answered so far; read it from tests or logs (thread-safe updates)."""

    by_model: Counter = field(default_factory=Counter)  # requests answered, by the model name they asked for
    usage: Counter = field(default_factory=Counter)  # prompt_tokens, completion_tokens, summed over requests
    errors: int = 0
    structured: Counter = field(default_factory=Counter)  # requests that carried a schema, by wire form
    # (wire form, "constrained" | "conformed"): decoded under the schema by the engine, or conformed afterwards
    structured_paths: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def requests(self) -> int:
        return sum(self.by_model.values())

    @property
    def prompt_tokens(self) -> int:
        return self.usage["prompt_tokens"]

    @property
    def completion_tokens(self) -> int:
        return self.usage["completion_tokens"]

    def record(self, model: str, usage: dict[str, int]) -> None:
        with self.lock:
            self.by_model[model] += 1
            self.usage.update({k: usage.get(k, 0) for k in ("prompt_tokens", "completion_tokens")})

    def record_structured(self, form: str, path: str) -> None:
        with self.lock:
            self.structured[form] += 1
            self.structured_paths[(form, path)] += 1

    def record_error(self) -> None:
        with self.lock:
            self.errors += 1


class LMServer(AbstractContextManager):  # `with` closes it
    """A running server: `url` is the base URL to give a client (`http://HOST:PORT/v1`). Close it when done."""

    def __init__(self, httpd: ThreadingHTTPServer, model_name: str) -> None:
        self._httpd = httpd
        self.model_name = model_name
        self.stats: ServerStats = httpd.stats  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"lm-server:{self.port}", daemon=True
        )
        self._thread.start()

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def spec(self, model: str | None = None) -> str:
        """The LM spec that points `make_lm` at this server, e.g. `openai/local/smollm2-135m@http://127.0.0.1:PORT/v1`."""
        return f"openai/{model or self.model_name}@{self.url}"

    def close(self) -> None:
        """Stop serving and release the port (waits for the request in progress)."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LMServer({self.url}, model={self.model_name!r}, requests={self.stats.requests})"


class _Handler(BaseHTTPRequestHandler):
    server_version = "ppoga-lm-server/1"
    protocol_version = "HTTP/1.1"

    # -- plumbing ------------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's signature
        logger.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: HTTPStatus, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: HTTPStatus, message: str, kind: str, code: str | None = None) -> None:
        self.server.stats.record_error()  # type: ignore[attr-defined]
        self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": code}})

    def _authorised(self) -> bool:
        key = self.server.api_key  # type: ignore[attr-defined]
        if key is None or self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        self._error(HTTPStatus.UNAUTHORIZED, "invalid or missing API key", "invalid_request_error", "invalid_api_key")
        return False

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    # -- routes --------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        path = self._path()
        if path in ("/health", "/v1/health"):
            self._send(HTTPStatus.OK, {"status": "ok"})
        elif path == "/v1/models":
            if self._authorised():
                name = self.server.model_name  # type: ignore[attr-defined]
                created = self.server.created  # type: ignore[attr-defined]
                model = {"id": name, "object": "model", "created": created, "owned_by": "ppoga-dspy"}
                self._send(HTTPStatus.OK, {"object": "list", "data": [model]})
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route GET {path}", "invalid_request_error", "not_found")

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        path = self._path()
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._error(HTTPStatus.NOT_FOUND, f"no route POST {path}", "invalid_request_error", "not_found")
            return
        if not self._authorised():
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
            if not 0 < length <= _MAX_BODY:
                raise ValueError(f"Content-Length must be between 1 and {_MAX_BODY}")
            payload = json.loads(self.rfile.read(length))
            if not isinstance(payload, dict):
                raise ValueError("the body must be a JSON object")
        except (ValueError, json.JSONDecodeError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, f"bad request body: {exc}", "invalid_request_error")
            return
        if payload.get("stream"):
            self._error(HTTPStatus.BAD_REQUEST, "streaming is not supported", "invalid_request_error", "unsupported")
            return
        if int(payload.get("n") or 1) != 1:
            self._error(HTTPStatus.BAD_REQUEST, "only n=1 is supported", "invalid_request_error", "unsupported")
            return
        self._complete(payload)

    def _complete(self, payload: dict[str, Any]) -> None:
        from dspy.lm15 import ContextLengthError, LM15Error

        model = str(payload.get("model") or self.server.model_name)  # type: ignore[attr-defined]
        engine = self.server.engine  # type: ignore[attr-defined]
        wanted = requested_schema(payload)  # structured outputs, in any wire form (lm/schema_replies.py)
        try:
            request = openai_to_request(payload)
            response = None
            if wanted is not None and callable(getattr(engine, "complete_structured", None)):
                response = engine.complete_structured(request, wanted[1])  # None: a shape it cannot constrain
            path = "constrained" if response is not None else "conformed"
            if response is None:
                response = engine.complete(request)
        except LMConfigError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc), "invalid_request_error")
            return
        except ContextLengthError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc), "invalid_request_error", "context_length_exceeded")
            return
        except (LM15Error, ValueError, TypeError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc), "invalid_request_error")
            return
        except Exception as exc:  # the engine failed: answer 500 and keep serving
            logger.exception("engine failed on a request")
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"engine error: {exc}", "server_error")
            return
        body = response_to_openai(response, model=model)
        headers = {}
        if wanted is not None:
            form, schema = wanted
            message = body["choices"][0]["message"]
            text = message.get("content") or ""
            if path == "conformed":
                message["content"] = conform(text, form, schema)
            elif form == "vllm-choice":  # guided_choice answers the bare member; the engine wrote a JSON string
                message["content"] = str(json.loads(text))
            headers[STRUCTURED_HEADER] = path
            self.server.stats.record_structured(form, path)  # type: ignore[attr-defined]
        self.server.stats.record(model, body["usage"])  # type: ignore[attr-defined]
        self._send(HTTPStatus.OK, body, headers)


def serve_lm(
    backend: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    model_name: str | None = None,
    api_key: str | None = None,
) -> LMServer:
    """Serve `backend` (an engine or a dspy.LM) at `http://host:port/v1` from a background thread.

    `port=0` picks a free port (read it from the handle). `model_name` is what `/v1/models` lists
    (default: the engine's model string). With `api_key`, requests must send `Authorization: Bearer KEY`.
    """
    engine = _as_engine(backend)
    try:
        httpd = ThreadingHTTPServer((host, port), _Handler)
    except OSError as exc:
        raise LMConfigError(f"cannot listen on {host}:{port}: {exc}; choose another --port") from exc
    httpd.daemon_threads = True
    httpd.engine = engine  # type: ignore[attr-defined]
    httpd.model_name = model_name or _default_model_name(backend)  # type: ignore[attr-defined]
    httpd.api_key = api_key  # type: ignore[attr-defined]
    httpd.created = int(time.time())  # type: ignore[attr-defined]
    httpd.stats = ServerStats()  # type: ignore[attr-defined]
    return LMServer(httpd, httpd.model_name)  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    """`python -m ppoga_dspy.lm.server`: serve an LM spec (default: the embedded model) until interrupted."""
    from ppoga_dspy.lm.factory import make_lm

    parser = argparse.ArgumentParser(prog="python -m ppoga_dspy.lm.server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lm", metavar="SPEC", default="local/embedded", help="what to serve [local/embedded]")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind [127.0.0.1]")
    parser.add_argument("--port", type=int, default=8000, help="port [8000; 0 picks a free one]")
    parser.add_argument("--model-name", default=None, help="model id to list at /v1/models")
    parser.add_argument("--api-key-env", default=None, help="require the key held by this environment variable")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    import os

    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    lm = make_lm(args.lm, cache=False)
    with serve_lm(lm, args.host, args.port, model_name=args.model_name, api_key=key) as server:
        print(f"serving {lm.model} at {server.url} (spec: {server.spec()}); Ctrl-C stops", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
