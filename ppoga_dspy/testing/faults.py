"""Loopback servers that misbehave on purpose: an OpenAI-compatible LM and a SPARQL endpoint.

They exist so that timeouts, retries, circuit breakers, reply caps and cache keys are tested against
real sockets and real client libraries (litellm / lm15, SPARQLWrapper), never against mocks.
Both bind 127.0.0.1 on a free port, serve from a daemon thread, count the requests they receive
and stop on `close()` (or leaving the `with` block). Only the standard library is used.

    with FaultLMServer("hang") as lm, FaultSparqlServer("hang") as kg:
        make_lm(lm.spec(), timeout=2)          # openai/fault@http://127.0.0.1:PORT/v1
        open_kg(kg.url, timeout=2)
        ...
        lm.requests, kg.requests               # how many requests arrived

LM modes (`LM_MODES`): `ok` (a well-formed ChatAdapter reply for whatever fields the prompt asks
for), `empty` (an empty message), `garbage` (text in no format), `huge` (a 100 KB reply),
`always-replan` (well-formed, but every decision is "replan"), `http500`, `hang` (read the request,
never answer); hostile text in well-formed replies (`HOSTILE_TEXT[mode]` in every free-text field):
`surrogate` (a lone surrogate, sent as a JSON `\\ud800` escape), `markup` (rich markup and a markup link),
`escapes` (terminal colours, a hyperlink and clear-screen); `echo-key` (HTTP 401 whose body echoes the
request's Authorization header, as some gateways do). A server that is slow on purpose: `trickle` (200 and a
Content-Length at once, then the well-formed body one byte every `trickle_seconds`), `trickle-chunked` (the same
body in one-byte chunks), `trickle-sse` (server-sent events, one byte at a time). Replies with nothing to use:
`no-choices` (`choices: []`), `null-content` (`content: null`). Usage figures that are hints gone wrong, on a
well-formed reply: `usage-strings` (token counts as strings), `usage-huge` (1e30 tokens).

SPARQL modes (`SPARQL_MODES`): `refuse` (the port is closed: connection refused), `hang`,
`http500`, `garbage-json` (200 with a body that is not JSON), `non-utf8` (200 with JSON whose
bytes are not UTF-8), `ok` (an empty but valid SELECT result).

A hanging handler waits at most `hang_seconds` (default 600) so that a forgotten server never
pins a thread forever; `close()` releases hanging handlers at once.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["HOSTILE_TEXT", "LM_MODES", "SPARQL_MODES", "TRICKLE_MODES", "FaultLMServer", "FaultSparqlServer",
           "free_port"]

LM_MODES = ("ok", "empty", "garbage", "huge", "always-replan", "http500", "hang", "surrogate", "markup", "escapes",
            "echo-key", "trickle", "trickle-chunked", "trickle-sse", "no-choices", "null-content", "usage-strings",
            "usage-huge")
#: Modes that send 200 and their headers at once, then the body one byte every `trickle_seconds`.
TRICKLE_MODES = ("trickle", "trickle-chunked", "trickle-sse")
SPARQL_MODES = ("ok", "refuse", "hang", "http500", "garbage-json", "non-utf8")

HUGE_REPLY_BYTES = 100_000
#: What the hostile-text modes put into every free-text field of a well-formed reply.
HOSTILE_TEXT = {
    "surrogate": "bad \ud800 text",
    "markup": "[/] [link=http://evil.example]click[/link] [bold red]x",
    "escapes": "\x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ \x1b[2J\x1b[H",
}
_MAX_BODY = 8 * 1024 * 1024

# DSPy's ChatAdapter system prompt lists "Your output fields are:\n1. `name` (type): ..."
_OUTPUTS = re.compile(r"Your output fields are:\n(.*?)(?:\n[A-Z]|\Z)", re.S)
_FIELD = re.compile(r"^\d+\. `(\w+)` \(([^)]*)\)", re.M)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (nothing listens on it after this returns)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Base:
    """Start/stop, request counting and bounded hanging, shared by both fault servers."""

    modes: tuple[str, ...] = ()
    handler_class: type[BaseHTTPRequestHandler] = BaseHTTPRequestHandler  # each server's request handler
    url_path = ""  # the path of the URL clients are given

    def __init__(self, mode: str, *, hang_seconds: float = 600.0, trickle_seconds: float = 1.0) -> None:
        if mode not in self.modes:
            raise ValueError(f"unknown mode {mode!r}; one of {', '.join(self.modes)}")
        self.mode = mode
        self.hang_seconds = hang_seconds
        self.trickle_seconds = trickle_seconds
        self._count = 0
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._port = free_port()
        if mode != "refuse":
            handler = type("Handler", (self.handler_class,), {"owner": self})
            self._httpd = _Server(("127.0.0.1", self._port), handler)
            self._port = int(self._httpd.server_address[1])
            self._thread = threading.Thread(target=self._httpd.serve_forever, name=f"fault-{mode}", daemon=True)
            self._thread.start()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT` and the server's path (`/v1` for the LM, `/sparql` for SPARQL)."""
        return f"http://127.0.0.1:{self.port}{self.url_path}"

    @property
    def requests(self) -> int:
        """Requests received so far (a refused port receives none)."""
        with self._lock:
            return self._count

    def _counted(self) -> None:
        with self._lock:
            self._count += 1

    def hang(self) -> None:
        """Block the handling thread until close() or hang_seconds, whichever comes first."""
        self._released.wait(self.hang_seconds)

    def pause(self) -> bool:
        """Wait one trickle interval; False once the server is closing (the trickle stops)."""
        return not self._released.wait(self.trickle_seconds)

    def close(self) -> None:
        self._released.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: Any = None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's signature
        return

    def _counted_or_hung(self) -> bool:
        """Count the request; in `hang` mode hold it (bounded) and say so, so the caller sends nothing."""
        self.owner._counted()
        if self.owner.mode == "hang":
            self.owner.hang()
            return True
        return False

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length", "0") or 0)
        return self.rfile.read(min(length, _MAX_BODY)) if length > 0 else b""

    def _reply(self, status: int, data: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout): nothing to do
            pass

    def _trickle(self, data: bytes, content_type: str, framing: str) -> None:
        """200 and the headers at once, then `data` one byte per `trickle_seconds` (bounded by `hang_seconds`
        and `close()`): framed by a Content-Length (`length`), as one-byte chunks (`chunked`), or bare (`sse`)."""
        deadline = time.monotonic() + self.owner.hang_seconds
        try:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            if framing == "length":
                self.send_header("Content-Length", str(len(data)))
            elif framing == "chunked":
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.flush()
            for i in range(len(data)):
                if time.monotonic() > deadline or not self.owner.pause():
                    return
                byte = data[i:i + 1]
                self.wfile.write(b"1\r\n" + byte + b"\r\n" if framing == "chunked" else byte)
                self.wfile.flush()
            if framing == "chunked":
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):  # the client gave up: nothing to do
            pass


# -- the LM server ---------------------------------------------------------------------------------


def _fields(system: str) -> list[tuple[str, str]]:
    match = _OUTPUTS.search(system)
    return _FIELD.findall(match.group(1)) if match else []


def _value(name: str, kind: str, *, replan: bool, hostile: str = "") -> str:
    """A plausible value for one output field, from its declared type (free text: `hostile` when given)."""
    if "Literal" in kind:
        options = re.findall(r"'([^']*)'", kind)
        if replan and "replan" in options:
            return "replan"
        return options[0] if options else "x"
    if kind.startswith("list"):
        if "PlanStep" in kind or name in ("steps", "new_steps"):
            return json.dumps([{"objective": "find the answer", "expected_outcome": "an entity"}])
        return json.dumps([hostile or "unknown"])
    if kind in ("int", "float"):
        return "0"
    if kind == "bool":
        return "false"
    return hostile or ("replanning" if replan else "unknown")


def chat_reply(system: str, *, replan: bool = False, hostile: str = "") -> str:
    """A ChatAdapter-format reply filling every output field the system prompt names."""
    parts = [f"[[ ## {name} ## ]]\n{_value(name, kind, replan=replan, hostile=hostile)}"
             for name, kind in _fields(system)]
    parts.append("[[ ## completed ## ]]")
    return "\n\n".join(parts)


class _LMHandler(_Quiet):
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = {"object": "list", "data": [{"id": "fault", "object": "model", "created": 0, "owned_by": "ppoga"}]}
        self._reply(200, json.dumps(body).encode(), "application/json")

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        owner: FaultLMServer = self.owner
        raw = self._body()
        if self._counted_or_hung():
            return
        mode = owner.mode
        if mode == "http500":
            error = {"error": {"message": "fault server: internal error", "type": "server_error", "code": None}}
            self._reply(500, json.dumps(error).encode(), "application/json")
            return
        if mode == "echo-key":
            seen = self.headers.get("Authorization", "")
            error = {"error": {"message": f"invalid credentials: {seen}", "type": "auth_error", "code": 401}}
            self._reply(401, json.dumps(error).encode(), "application/json")
            return
        try:
            payload = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            payload = {}
        messages = payload.get("messages") or []
        system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
        if mode in ("empty", "null-content"):
            text = ""
        elif mode == "garbage":
            text = "~~ %%% no fields here, only noise 0xDEADBEEF ~~"
        elif mode == "huge":
            text = ("[[ ## " + "m.0huge " * 8 + "## ]]\n") + ("m.0mediator " * (HUGE_REPLY_BYTES // 12))
        else:
            text = chat_reply(system, replan=mode == "always-replan", hostile=HOSTILE_TEXT.get(mode, ""))
        body = {
            "id": f"fault-{owner.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(payload.get("model") or "fault"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": max(1, len(text) // 4),
                      "total_tokens": 10 + max(1, len(text) // 4)},
        }
        if mode == "no-choices":
            body["choices"] = []
        elif mode == "null-content":
            body["choices"][0]["message"]["content"] = None
        elif mode == "usage-strings":
            body["usage"] = {k: str(v) for k, v in body["usage"].items()}
        elif mode == "usage-huge":
            body["usage"] = {"prompt_tokens": 1e30, "completion_tokens": 1e30, "total_tokens": 2e30}
        if mode == "trickle-sse":
            delta = {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            chunk = {**body, "object": "chat.completion.chunk", "choices": [delta]}
            self._trickle(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode(), "text/event-stream", "sse")
        elif mode in TRICKLE_MODES:
            self._trickle(json.dumps(body).encode(), "application/json",
                          "length" if mode == "trickle" else "chunked")
        else:
            self._reply(200, json.dumps(body).encode(), "application/json")


class FaultLMServer(_Base):
    """An OpenAI-compatible chat server on loopback that answers in one fault mode (see `LM_MODES`)."""

    modes = LM_MODES
    handler_class = _LMHandler
    url_path = "/v1"

    def spec(self, model: str = "fault") -> str:
        """An LM spec for this server: `openai/MODEL@URL`."""
        return f"openai/{model}@{self.url}"


# -- the SPARQL server -----------------------------------------------------------------------------


class _SparqlHandler(_Quiet):
    def _answer(self) -> None:
        owner: FaultSparqlServer = self.owner
        if self.command == "POST":
            self._body()
        if self._counted_or_hung():
            return
        mode = owner.mode
        if mode == "http500":
            self._reply(500, b"fault server: internal error", "text/plain")
        elif mode == "garbage-json":
            self._reply(200, b'{"head": {"vars": ["x"]}, "results": {"bindings": [ oops',
                        "application/sparql-results+json")
        elif mode == "non-utf8":
            body = (b'{"head": {"vars": ["x"]}, "results": {"bindings": '
                    b'[{"x": {"type": "literal", "value": "\xff\xfe\xc3("}}]}}')
            self._reply(200, body, "application/sparql-results+json")
        else:
            self._reply(200, b'{"head": {"vars": []}, "results": {"bindings": []}}', "application/sparql-results+json")

    do_GET = _answer  # noqa: N815 - http.server's naming
    do_POST = _answer  # noqa: N815 - http.server's naming


class FaultSparqlServer(_Base):
    """A SPARQL protocol endpoint on loopback that fails in one mode (see `SPARQL_MODES`).

    `refuse` binds nothing: the port was free when chosen, so connecting is refused.
    """

    modes = SPARQL_MODES
    handler_class = _SparqlHandler
    url_path = "/sparql"
