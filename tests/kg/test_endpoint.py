"""The endpoint engine's failure paths and the cache, against real sockets and a real oxigraph server."""

from __future__ import annotations

import socket
import time

import pytest

from ppoga_dspy.kg import Direction, KGQueryError, KGTimeoutError, KGUnavailableError, open_kg
from ppoga_dspy.kg.cache import LRUCache
from ppoga_dspy.kg.sparql import SparqlEndpoint


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_endpoint_down_names_the_url_after_retries():
    url = f"http://127.0.0.1:{_closed_port()}/sparql"
    kg = open_kg(url, retries=2, backoff=0.05, timeout=2)
    started = time.monotonic()
    with pytest.raises(KGUnavailableError) as info:
        kg.relations("m.0demo001")
    assert url in str(info.value) and "3 tries" in str(info.value)
    assert "/sparql" in str(info.value) and "/query" in str(info.value)  # tells what to check
    assert time.monotonic() - started >= 0.05 + 0.1  # backed off between tries
    assert kg.stats().errors == 1


def test_a_silent_server_times_out():
    with socket.socket() as server:  # accepts connections, never answers
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        url = f"http://127.0.0.1:{server.getsockname()[1]}/sparql"
        engine = SparqlEndpoint(url, timeout=0.3, retries=1, backoff=0.01)
        with pytest.raises(KGTimeoutError, match="did not answer within 0.3s"):
            engine.select("SELECT * WHERE { ?s ?p ?o } LIMIT 1")


@pytest.fixture(scope="module")
def oxigraph_url(tmp_path_factory, wc_kb):
    from ppoga_dspy.kg import servers
    from ppoga_dspy.kg.importers import export_ntriples

    root = tmp_path_factory.mktemp("oxi")
    export_ntriples([wc_kb], root / "wc.nt")
    with servers.start_oxigraph([root / "wc.nt"], root) as handle:
        yield handle.url


@pytest.mark.slow
def test_wrong_path_is_unavailable_with_a_hint(oxigraph_url):
    wrong = oxigraph_url.rsplit("/", 1)[0] + "/sparql-nowhere"
    with pytest.raises(KGUnavailableError, match="404"):
        SparqlEndpoint(wrong, retries=0).select("SELECT * WHERE { ?s ?p ?o } LIMIT 1")


@pytest.mark.slow
def test_rejected_query_is_a_query_error_without_retries(oxigraph_url):
    engine = SparqlEndpoint(oxigraph_url, retries=3, backoff=5)
    started = time.monotonic()
    with pytest.raises(KGQueryError, match="rejected"):
        engine.select("SELECT WHERE {")
    assert time.monotonic() - started < 2


@pytest.mark.slow
def test_cache_counts_hits_and_can_be_disabled(oxigraph_url):
    cached = open_kg(oxigraph_url, dialect="irn")
    for _ in range(3):
        assert [e.id for e in cached.neighbors("Alan_PULIDO", "plays_in_club")] == ["Tigres_UANL"]
    stats = cached.stats()
    assert (stats.queries, stats.cache_hits) == (1, 2)
    assert stats.by_kind == {"neighbors": 1} and stats.seconds > 0
    uncached = open_kg(oxigraph_url, dialect="irn", cache_size=0)
    for _ in range(3):
        uncached.relations("Alan_PULIDO", Direction.IN)
    assert (uncached.stats().queries, uncached.stats().cache_hits) == (3, 0)


def test_lru_cache_evicts_the_least_recently_used():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert LRUCache.missing(cache.get("b"))
    assert cache.get("a") == 1 and cache.get("c") == 3
    assert (cache.hits, cache.misses) == (3, 1)
