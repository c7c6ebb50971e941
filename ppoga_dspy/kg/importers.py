"""Files -> RDF: format and dialect detection, IRN tab-separated KBs as N-Triples, loading, exporting.

IRN KBs (PathQuestion, WC2014) are lines `subject<TAB>relation<TAB>object`. They become triples
under http://ppoga-dspy.org/irn/ (names percent-encoded, PQL relations `__a__b` written `a.b`),
plus one `rdfs:label "name"` per entity so that find_entities can match a name with an indexed
exact lookup on any engine. `export_ntriples` writes any input as one N-Triples file, which is
what the loopback servers (oxigraph, Virtuoso) bulk-load.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from ppoga_dspy.kg.base import KGLoadError
from ppoga_dspy.kg.delimited import delimited_ntriples
from ppoga_dspy.kg.dialects import (
    FREEBASE_NS,
    IRN_ENTITY,
    IRN_RELATION,
    WIKIDATA_ENTITY,
    IrnDialect,
    pql_relation,
)
from ppoga_dspy.kg.pipe_kb import looks_like_pipe_kb, pipe_ntriples

FORMATS = ("nt", "ttl", "nq", "irn", "pipe")
_EXTENSIONS = {
    ".nt": "nt",
    ".ntriples": "nt",
    ".ttl": "ttl",
    ".turtle": "ttl",
    ".nq": "nq",
    ".txt": "irn",
    ".tsv": "irn",
}
_CHUNK_LINES = 200_000
_SNIFF_BYTES = 2_000_000


def detect_format(path: str | Path, fmt: str | None = None) -> str:
    """`nt`, `ttl`, `nq` or `irn`: `fmt` when given, else from the file extension."""
    if fmt is not None:
        key = fmt.lower().lstrip(".")
        key = {
            "ntriples": "nt",
            "n-triples": "nt",
            "turtle": "ttl",
            "nquads": "nq",
            "n-quads": "nq",
            "tsv": "irn",
            "txt": "irn",
            "metaqa": "pipe",
        }.get(key, key)
        if key not in FORMATS:
            raise KGLoadError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        return key
    suffix = Path(path).suffix.lower()
    if suffix not in _EXTENSIONS:
        raise KGLoadError(
            f"cannot tell the format of {path} from its extension; use .nt, .ttl, .nq, or .txt/.tsv for IRN "
            "tab-separated KBs, or pass --format nt|ttl|nq|irn|pipe"
        )
    kind = _EXTENSIONS[suffix]
    if kind == "irn" and looks_like_pipe_kb(path):  # MetaQA's kb.txt: head|relation|tail
        return "pipe"
    return kind


def _check_exists(path: Path) -> None:
    if not path.is_file():
        raise KGLoadError(f"no such KG file: {path}")


def detect_dialect(paths: Iterable[str | Path], fmt: str | None = None) -> str:
    """`irn` for IRN files, `freebase` when the Freebase namespace appears, `wikidata` likewise, else `rdf`."""
    found: set[str] = set()
    for raw in paths:
        path = Path(raw)
        _check_exists(path)
        gz = path.suffix == ".gz"  # a compressed dump (`ppoga kg load`): the format and the head read through gzip
        kind = detect_format(path.with_suffix("") if gz and fmt is None else path, fmt)
        if kind in ("irn", "pipe"):
            found.add("irn" if kind == "irn" else "names")
            continue
        import gzip

        with gzip.open(path, "rb") if gz else path.open("rb") as handle:
            head = handle.read(_SNIFF_BYTES).decode("utf-8", errors="replace")
        if FREEBASE_NS in head:
            found.add("freebase")
        elif WIKIDATA_ENTITY in head:
            found.add("wikidata")
        else:
            found.add("rdf")
    specific = found - {"rdf"}
    if len(specific) > 1:
        raise KGLoadError(
            f"these files mix KG dialects ({', '.join(sorted(specific))}); load them separately or pass --dialect"
        )
    return specific.pop() if specific else "rdf"


def irn_ntriples(path: str | Path, seen: set[str] | None = None) -> Iterator[str]:
    """N-Triples lines for an IRN KB: one per fact, plus an rdfs:label line for each new entity.

    `seen` carries the entities already labelled across several files.
    """
    from urllib.parse import quote

    path = Path(path)
    _check_exists(path)

    def iris(subject: str, relation: str, obj: str) -> tuple[str, str, str]:
        for value, what in ((subject, "entity"), (relation, "relation"), (obj, "entity")):
            IrnDialect.check_name(value, what)
        return (IRN_ENTITY + quote(subject, safe=""), IRN_RELATION + quote(pql_relation(relation), safe=""),
                IRN_ENTITY + quote(obj, safe=""))

    return delimited_ntriples(
        path, set() if seen is None else seen, split=lambda line: line.split("\t"),
        shape="an IRN KB line needs exactly three tab-separated fields (subject, relation, object)", iris=iris,
        kind="IRN")


def _rdf_format(fmt: str):
    import pyoxigraph as ox

    return {"nt": ox.RdfFormat.N_TRIPLES, "ttl": ox.RdfFormat.TURTLE, "nq": ox.RdfFormat.N_QUADS}[fmt]


def load_files(store, paths: Iterable[str | Path], *, fmt: str | None = None, bulk: bool = False) -> int:
    """Load RDF and IRN files into a pyoxigraph store; returns the store's size afterwards.

    `bulk` uses pyoxigraph's bulk loader (for persisted stores: fast, no transaction); in memory the
    plain loader is as fast and keeps everything in RAM.
    """
    paths = [Path(p) for p in paths]
    if not paths:
        raise KGLoadError("no KG files given; pass one or more .nt/.ttl/.nq/.txt files")
    seen: set[str] = set()
    loader = store.bulk_load if bulk else store.load
    for path in paths:
        _check_exists(path)
        kind = detect_format(path, fmt)
        try:
            if kind in ("irn", "pipe"):
                import pyoxigraph as ox

                lines = irn_ntriples(path, seen) if kind == "irn" else pipe_ntriples(path, seen)
                chunk: list[str] = []
                for line in lines:
                    chunk.append(line)
                    if len(chunk) >= _CHUNK_LINES:
                        loader("".join(chunk).encode("utf-8"), ox.RdfFormat.N_TRIPLES)
                        chunk = []
                if chunk:
                    loader("".join(chunk).encode("utf-8"), ox.RdfFormat.N_TRIPLES)
            else:
                loader(path=str(path), format=_rdf_format(kind), base_iri=path.resolve().as_uri())
        except SyntaxError as exc:
            raise KGLoadError(f"{path} is not valid {kind} ({exc}); fix the file or pass the right --format") from exc
        except (OSError, ValueError) as exc:
            raise KGLoadError(f"could not load {path}: {exc}") from exc
    return len(store)


def export_ntriples(paths: Iterable[str | Path], out_path: str | Path, format: str | None = None) -> int:  # noqa: A002
    """Write every input (RDF or IRN) as one N-Triples file (graph names dropped); returns the triples written.

    The loopback SPARQL servers bulk-load this file, so an IRN KB answers there exactly as in the
    embedded store.
    """
    import pyoxigraph as ox

    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    seen: set[str] = set()
    with out.open("w", encoding="utf-8") as handle:
        for raw in paths:
            path = Path(raw)
            _check_exists(path)
            kind = detect_format(path, format)
            if kind in ("irn", "pipe"):
                for line in irn_ntriples(path, seen) if kind == "irn" else pipe_ntriples(path, seen):
                    handle.write(line)
                    count += 1
                continue
            try:
                for quad in ox.parse(path=str(path), format=_rdf_format(kind), base_iri=path.resolve().as_uri()):
                    triple = quad.triple if isinstance(quad, ox.Quad) else quad
                    handle.write(f"{triple.subject} {triple.predicate} {triple.object} .\n")
                    count += 1
            except SyntaxError as exc:
                raise KGLoadError(f"{path} is not valid {kind} ({exc})") from exc
    return count
