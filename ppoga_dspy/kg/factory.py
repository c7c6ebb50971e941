"""`open_kg(spec)`: the one place a KG spec (file, files, store directory, URL, object) becomes a KnowledgeGraph."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ppoga_dspy.kg.base import KGSpecError, KnowledgeGraph
from ppoga_dspy.kg.dialects import Dialect, get_dialect
from ppoga_dspy.kg.graph import SparqlGraph

ACCEPTED = (
    "an RDF or IRN file (.nt, .ttl, .nq, or .txt/.tsv tab-separated), a list of such files, a store directory "
    "made by `ppoga kg load`, an http(s):// SPARQL endpoint URL, or a KnowledgeGraph object"
)


def _is_url(spec: object) -> bool:
    return isinstance(spec, str) and spec.lower().startswith(("http://", "https://"))


def open_kg(
    spec: KnowledgeGraph | str | Path | Sequence[str | Path],
    *,
    dialect: str | Dialect | None = None,
    timeout: float = 30.0,
    retries: int = 3,
    cache_size: int = 4096,
    ontology: str | Path | None = None,
    backoff: float = 0.5,
    breaker: int = 3,
) -> KnowledgeGraph:
    """A KnowledgeGraph for `spec`.

    `dialect` (freebase, wikidata, rdf, irn, or a Dialect) is detected from files when None, read
    from a store directory's metadata, and defaults to freebase for URLs. `timeout` is per query,
    `retries`/`backoff` apply to endpoints, `breaker`: an endpoint is marked down (every later query fails
    at once) after that many failed attempts in a row (0: never), `cache_size` 0 disables the query cache,
    `ontology` is the GrailQA ontology folder for Freebase mediator types (found beside the repo when None).
    """
    if isinstance(spec, KnowledgeGraph):
        return spec
    if timeout <= 0:
        raise KGSpecError(f"timeout must be positive seconds, got {timeout!r}")

    def make(name: str | Dialect) -> Dialect:
        return get_dialect(name, ontology=ontology)

    if _is_url(spec):
        from ppoga_dspy.kg.sparql import SparqlEndpoint

        engine = SparqlEndpoint(str(spec), timeout=timeout, retries=retries, backoff=backoff, breaker=breaker)
        return SparqlGraph(engine, make(dialect or "freebase"), cache_size=cache_size)

    if isinstance(spec, (list, tuple)):
        paths = [Path(p) for p in spec]
        if not paths:
            raise KGSpecError(f"an empty list of KG files; expected {ACCEPTED}")
        return _open_files(paths, dialect, make, timeout=timeout, cache_size=cache_size)

    if isinstance(spec, (str, Path)):
        path = Path(spec)
        if path.is_dir():
            from ppoga_dspy.kg.store import EmbeddedStore, is_store_dir, read_meta

            if not is_store_dir(path):
                raise KGSpecError(f"{path} is a directory but not a store made by `ppoga kg load`; expected {ACCEPTED}")
            meta = read_meta(path)
            if meta.get("triples") == 0:
                from ppoga_dspy.kg.base import KGLoadError

                raise KGLoadError(f"the store {path} holds no triples; load a KG into it with `ppoga kg load`")
            engine = EmbeddedStore.open_dir(path, timeout=timeout)
            return SparqlGraph(engine, make(dialect or meta.get("dialect", "rdf")), cache_size=cache_size)
        if path.is_file():
            return _open_files([path], dialect, make, timeout=timeout, cache_size=cache_size)
        raise KGSpecError(f"no such KG file or directory: {path}; expected {ACCEPTED}")

    raise KGSpecError(f"cannot open a KG from {spec!r}; expected {ACCEPTED}")


def _open_files(paths: list[Path], dialect, make, *, timeout: float, cache_size: int) -> SparqlGraph:
    from ppoga_dspy.kg.base import KGLoadError
    from ppoga_dspy.kg.importers import detect_dialect
    from ppoga_dspy.kg.store import EmbeddedStore

    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise KGLoadError(f"no such KG file: {', '.join(map(str, missing))}; expected {ACCEPTED}")
    chosen = make(dialect or detect_dialect(paths))
    cached = _cached_store(paths, chosen.name)
    if cached is not None:
        return SparqlGraph(EmbeddedStore.open_dir(cached, timeout=timeout), chosen, cache_size=cache_size)
    engine = EmbeddedStore.in_memory(paths, timeout=timeout)
    if engine.count_triples() == 0:  # every question would spend LM calls on a graph that answers nothing
        engine.close()
        raise KGLoadError(f"{', '.join(map(str, paths))} holds no triples; is it the right KG file?")
    return SparqlGraph(engine, chosen, cache_size=cache_size)


def _cached_store(paths: list[Path], dialect: str):
    """A MetaQA (`head|relation|tail`) KB is imported once into a store under the user cache (see persistent.py);
    None for other files, or when the cache is off."""
    from ppoga_dspy.kg.importers import detect_format
    from ppoga_dspy.kg.persistent import cached_store_dir

    if len(paths) != 1 or detect_format(paths[0]) != "pipe":
        return None
    return cached_store_dir(paths[0], dialect=dialect, fmt="pipe")
