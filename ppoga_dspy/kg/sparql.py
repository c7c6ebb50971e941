"""The remote engine: any SPARQL 1.1 query endpoint, through SPARQLWrapper.

Each query is sent as an URL-encoded POST (long VALUES lists never hit URL length limits), asks
for JSON results, and has its own timeout. Transient failures (connection refused or reset, HTTP
5xx, timeouts) are retried with exponential backoff; after the last retry the engine raises
KGTimeoutError or KGUnavailableError naming the URL and what to check. A 400 (the endpoint
rejected the query) is not retried: it is a KGQueryError. A reply that is not SPARQL JSON (a
truncated body, bytes that are not UTF-8) is a bad reply: retried the same way, then KGBadReplyError.
Results become the neutral rows of terms.py, so Virtuoso (`/sparql`, "typed-literal" bindings) and
oxigraph (`/query`) look the same.

A circuit breaker keeps a dead endpoint from costing `timeout * (retries + 1)` per query for the
rest of a run: after `breaker` failed attempts in a row (timeouts, refused connections, 5xx, bad
replies; counted across queries and threads), the endpoint is marked down and every later query
raises KGEndpointDownError at once, with a message saying to resume the run once the endpoint is
back. One good reply resets the count; `breaker=0` disables it. A new `open_kg` starts closed.

A new SPARQLWrapper object is made per query: the wrapper keeps per-query state, so sharing one
between threads would mix queries; making one costs microseconds.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
import urllib.error

from ppoga_dspy.kg.base import (
    KGBadReplyError,
    KGEndpointDownError,
    KGQueryError,
    KGTimeoutError,
    KGUnavailableError,
)
from ppoga_dspy.kg.terms import Row, Term

log = logging.getLogger(__name__)

_AGENT = "ppoga-dspy (SPARQLWrapper)"
_HINT = (
    "check that the server is running and that the URL is its SPARQL query endpoint "
    "(Virtuoso: http://HOST:8890/sparql, oxigraph: http://HOST:7878/query)"
)


def _term(binding: dict) -> Term:
    kind = binding.get("type", "literal")
    value = binding.get("value", "")
    if kind == "uri":
        return Term("uri", value)
    if kind == "bnode":
        return Term("bnode", value)
    # "literal" and Virtuoso's "typed-literal"
    return Term("literal", value, binding.get("xml:lang") or None, binding.get("datatype"))


class _TransientError(Exception):
    """A failure worth retrying; `timeout` tells which error to raise when retries run out."""

    def __init__(self, reason: str, *, timeout: bool = False, bad_reply: bool = False) -> None:
        super().__init__(reason)
        self.timeout = timeout
        self.bad_reply = bad_reply


class SparqlEndpoint:
    """A SPARQL query endpoint URL behind the engine interface (select, count_triples, close)."""

    kind = "endpoint"
    can_scan_labels = False

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        union_default_graph: bool = True,
        breaker: int = 3,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if breaker < 0:
            raise ValueError(f"breaker must be >= 0 (0: never mark the endpoint down), got {breaker}")
        self.url = url
        self.name = url
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        # oxigraph's protocol option to read all graphs as the default graph; other servers ignore it
        # (Virtuoso's default graph already is the union of its graphs).
        self.union_default_graph = union_default_graph
        self.breaker = breaker
        self._failed_in_a_row = 0
        self._last_failure = ""
        self._breaker_lock = threading.Lock()

    def _run_once(self, query: str) -> dict:
        from SPARQLWrapper import JSON, POST, URLENCODED, SPARQLWrapper
        from SPARQLWrapper.SPARQLExceptions import (
            EndPointInternalError,
            EndPointNotFound,
            QueryBadFormed,
            Unauthorized,
            URITooLong,
        )

        wrapper = SPARQLWrapper(self.url, agent=_AGENT)
        wrapper.setQuery(query)
        wrapper.setReturnFormat(JSON)
        wrapper.setMethod(POST)
        wrapper.setRequestMethod(URLENCODED)
        wrapper.timeout = self.timeout
        if self.union_default_graph:
            wrapper.addParameter("union-default-graph", "true")
        try:
            result = wrapper.queryAndConvert()
        except QueryBadFormed as exc:
            raise KGQueryError(f"the endpoint {self.url} rejected a query: {_short(exc)}") from exc
        except (Unauthorized, URITooLong) as exc:
            raise KGQueryError(f"the endpoint {self.url} refused a query: {_short(exc)}") from exc
        except EndPointNotFound as exc:
            raise KGUnavailableError(f"{self.url} answered 404 Not Found; {_HINT}") from exc
        except EndPointInternalError as exc:
            raise _TransientError(f"HTTP 500: {_short(exc)}") from exc
        except urllib.error.HTTPError as exc:
            if exc.code >= 500 or exc.code == 429:
                raise _TransientError(f"HTTP {exc.code} {exc.reason}") from exc
            raise KGQueryError(f"the endpoint {self.url} answered HTTP {exc.code} {exc.reason}; {_HINT}") from exc
        except urllib.error.URLError as exc:
            is_timeout = isinstance(exc.reason, TimeoutError)
            raise _TransientError(str(exc.reason), timeout=is_timeout) from exc
        except TimeoutError as exc:
            raise _TransientError("timed out", timeout=True) from exc
        except json.JSONDecodeError as exc:
            raise _TransientError(f"the reply is not JSON ({exc})", bad_reply=True) from exc
        except UnicodeDecodeError as exc:  # SPARQLWrapper decodes the body as UTF-8 before parsing it
            raise _TransientError(f"the reply is not UTF-8 ({exc.reason} at byte {exc.start})", bad_reply=True) from exc
        except (ConnectionError, http.client.HTTPException) as exc:
            raise _TransientError(f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(result, dict) or not isinstance(result.get("results"), dict):
            raise _TransientError("the reply is not SPARQL JSON results for a SELECT query", bad_reply=True)
        bindings = result["results"].get("bindings", [])
        if not isinstance(bindings, list) or not all(isinstance(b, dict) for b in bindings):
            raise _TransientError("the reply's results.bindings is not a list of bindings", bad_reply=True)
        return result

    # -- the circuit breaker ---------------------------------------------------------------------
    @property
    def is_down(self) -> bool:
        """True once `breaker` attempts in a row failed; every query then fails at once."""
        with self._breaker_lock:
            return bool(self.breaker) and self._failed_in_a_row >= self.breaker

    def _down_error(self) -> KGEndpointDownError:
        with self._breaker_lock:
            count, last = self._failed_in_a_row, self._last_failure
        return KGEndpointDownError(
            f"the SPARQL endpoint {self.url} is marked down after {count} failed attempts in a row "
            f"(last: {last}); start it again, then resume the run: rerun the same `ppoga eval` command with "
            "--retry-failed (finished questions are kept, the failed ones run again)"
        )

    def _failed(self, exc: _TransientError) -> None:
        """Count one failed attempt."""
        with self._breaker_lock:
            self._failed_in_a_row += 1
            self._last_failure = f"timed out after {self.timeout:g}s" if exc.timeout else str(exc)

    def _answered(self) -> None:
        with self._breaker_lock:
            self._failed_in_a_row = 0

    def select(self, query: str) -> list[Row]:
        """Run a SELECT query; retried with backoff on transient failures."""
        last: _TransientError | None = None
        for attempt in range(self.retries + 1):
            if self.is_down:
                raise self._down_error()
            if attempt:
                delay = self.backoff * (2 ** (attempt - 1))
                log.debug("retrying %s in %.2fs after: %s", self.url, delay, last)
                time.sleep(delay)
            try:
                result = self._run_once(query)
            except _TransientError as exc:
                last = exc
                self._failed(exc)  # a trip shows at the next attempt, so the last one keeps its own message
                continue
            self._answered()
            return [{k: _term(v) for k, v in binding.items()} for binding in result["results"].get("bindings", [])]
        assert last is not None
        count = self.retries + 1
        tries = f"{count} {'try' if count == 1 else 'tries'}"
        if last.timeout:
            raise KGTimeoutError(
                f"the SPARQL endpoint {self.url} did not answer within {self.timeout:g}s, {tries}; "
                f"{_HINT}, or raise --timeout"
            )
        if last.bad_reply:
            raise KGBadReplyError(
                f"the SPARQL endpoint {self.url} sent a bad reply, {tries} (last: {last}); check the server's "
                "logs, or that the URL is a SPARQL endpoint and not a web page"
            )
        raise KGUnavailableError(f"the SPARQL endpoint {self.url} failed {tries} (last: {last}); {_HINT}")

    def count_triples(self) -> int:
        rows = self.select("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
        return int(rows[0]["n"].value) if rows else 0

    def close(self) -> None:
        """Nothing to release: each query opens and closes its own connection."""


def _short(exc: Exception, limit: int = 300) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."
