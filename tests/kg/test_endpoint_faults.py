"""A dead, hanging or babbling SPARQL endpoint (ppoga_dspy.testing.faults): breaker, bad replies, one-line errors."""

from __future__ import annotations

import time

import pytest

from ppoga_dspy.errors import KGError
from ppoga_dspy.kg import KGBadReplyError, KGEndpointDownError, KGTimeoutError, KGUnavailableError, open_kg
from ppoga_dspy.testing.faults import FaultSparqlServer


@pytest.mark.parametrize("mode", ["garbage-json", "non-utf8"])
def test_a_bad_reply_is_retried_then_one_kg_error(mode):
    with FaultSparqlServer(mode) as server:
        kg = open_kg(server.url, timeout=5, retries=2, backoff=0.01, breaker=0)
        with pytest.raises(KGBadReplyError) as info:
            kg.relations("m.0demo001")
        assert server.requests == 3  # retried like any transient failure
    message = str(info.value)
    assert "\n" not in message and "bad reply, 3 tries" in message and server.url in message
    assert isinstance(info.value, KGError) and info.value.exit_code == KGError.exit_code


def test_non_utf8_names_the_problem():
    with FaultSparqlServer("non-utf8") as server:
        kg = open_kg(server.url, retries=0, breaker=0)
        with pytest.raises(KGBadReplyError, match="not UTF-8"):
            kg.relations("m.0demo001")


def test_http_500_is_retried_then_unavailable():
    with FaultSparqlServer("http500") as server:
        kg = open_kg(server.url, retries=1, backoff=0.01, breaker=0)
        with pytest.raises(KGUnavailableError, match="failed 2 tries"):
            kg.relations("m.0demo001")
        assert server.requests == 2


def test_the_breaker_marks_a_hanging_endpoint_down_and_later_queries_fail_at_once():
    with FaultSparqlServer("hang") as server:
        kg = open_kg(server.url, timeout=0.5, retries=1, backoff=0.01, breaker=3)
        with pytest.raises(KGTimeoutError):
            kg.relations("m.0demo001")  # attempts 1 and 2 time out
        with pytest.raises(KGEndpointDownError) as info:
            kg.relations("m.0demo002")  # attempt 3 trips the breaker; attempt 4 is never made
        assert server.requests == 3
        started = time.perf_counter()
        with pytest.raises(KGEndpointDownError):
            kg.neighbors("m.0demo003", "film.film.directed_by")
        assert time.perf_counter() - started < 0.1 and server.requests == 3
    message = str(info.value)
    assert "marked down after 3 failed attempts in a row" in message and "resume" in message
    assert "timed out after 0.5s" in message


def test_a_refused_port_trips_the_breaker_too():
    with FaultSparqlServer("refuse") as server:
        kg = open_kg(server.url, retries=5, backoff=0.01, breaker=2)
        with pytest.raises(KGEndpointDownError):
            kg.relations("m.0demo001")
        assert server.requests == 0


def test_a_good_reply_resets_the_count():
    with FaultSparqlServer("ok") as server:
        kg = open_kg(server.url, retries=0, breaker=2)
        kg.engine._failed_in_a_row = 1
        assert kg.relations("m.0demo001") == []
        assert not kg.engine.is_down and kg.engine._failed_in_a_row == 0


def test_breaker_zero_never_marks_down():
    with FaultSparqlServer("http500") as server:
        kg = open_kg(server.url, retries=0, breaker=0)
        for entity in ("m.0demo001", "m.0demo002", "m.0demo003", "m.0demo004"):
            with pytest.raises(KGUnavailableError) as info:
                kg.relations(entity)
            assert not isinstance(info.value, KGEndpointDownError)
        assert server.requests == 4
