"""`ppoga kg load | serve | relations | neighbors | find`: build a store, serve one, look around a KG by hand.

Its subcommands take the same `--kg` options as every other command (`ppoga_dspy.cli.common.add_kg_options`);
`kg_from_args(args)` opens the KG they describe.
"""

from __future__ import annotations

import argparse
import json
import sys

from ppoga_dspy.cli.common import DIALECTS, add_kg_options, at_least


def kg_from_args(args: argparse.Namespace):
    """The KnowledgeGraph the --kg options describe."""
    from ppoga_dspy.kg import open_kg

    return open_kg(
        args.kg,
        dialect=args.dialect,
        timeout=args.timeout,
        retries=args.retries,
        breaker=getattr(args, "breaker", 3),
        ontology=getattr(args, "ontology", None),
    )


def _positive(text: str) -> int:
    return at_least(1)(text)


def register(subparsers: argparse._SubParsersAction) -> None:
    kg = subparsers.add_parser("kg", help="load a KG into a store, or look at relations, neighbours and names")
    sub = kg.add_subparsers(dest="kg_command", metavar="KG_COMMAND")
    kg.set_defaults(handler=lambda args: _usage(kg))

    load = sub.add_parser("load", help="load RDF/IRN files into a store folder (embedded oxigraph or Virtuoso), "
                                       "with progress; a rerun after a kill loads only what is not loaded yet")
    load.add_argument("files", nargs="+", metavar="FILE", help="N-Triples / Turtle / N-Quads (plain or .gz), IRN or "
                                                               "MetaQA KB files")
    load.add_argument("--store", required=True, metavar="DIR", help="store folder to create, resume or add to")
    load.add_argument("--engine", choices=("oxigraph", "virtuoso"), default="oxigraph",
                      help="oxigraph: an embedded store (default); virtuoso: a Virtuoso database folder for "
                           "`ppoga kg serve` (scripts/setup_virtuoso.sh unpacks Virtuoso)")
    load.add_argument("--format", choices=("nt", "ttl", "nq", "irn", "pipe"), default=None,
                      help="default: from extension")
    load.add_argument("--dialect", choices=DIALECTS, default=None, help="default: detected from the files")
    load.add_argument("--memory", type=float, default=None, metavar="GB",
                      help="virtuoso: GB of buffers (default: half the machine's RAM)")
    load.add_argument("--chunk-mb", type=float, default=64.0, metavar="MB",
                      help="N-Triples read, loaded and committed this many MB at a time (the unit of resume)")
    load.add_argument("--no-progress", action="store_true", help="no progress bar")
    load.add_argument("--json", action="store_true", help="print JSON")
    load.set_defaults(handler=_load)

    serve = sub.add_parser("serve", help="serve a Virtuoso database folder on loopback until Ctrl-C",
                           description="Start Virtuoso on a database folder (one `ppoga kg load --engine virtuoso` "
                                       "made, or a pre-built Freebase database), wait until it answers, and print "
                                       "the --kg URL and dialect to use.")
    serve.add_argument("store", metavar="DIR")
    serve.add_argument("--port", type=_positive, default=None, help="HTTP port (default: a free one)")
    serve.add_argument("--memory", type=float, default=None, metavar="GB",
                       help="GB of buffers (default: half the machine's RAM)")
    serve.add_argument("--timeout", type=float, default=600.0, metavar="S",
                       help="seconds to wait for the first answer (a big database recovers for a while)")
    serve.set_defaults(handler=_serve)

    rel = sub.add_parser("relations", help="relations of an entity")
    rel.add_argument("entity", metavar="ENTITY")
    rel.add_argument("--direction", choices=("in", "out", "both"), default="both")
    rel.add_argument("--json", action="store_true", help="print JSON")
    add_kg_options(rel)
    rel.set_defaults(handler=_relations)

    nb = sub.add_parser("neighbors", help="entities reached from ENTITY through RELATION")
    nb.add_argument("entity", metavar="ENTITY")
    nb.add_argument("relation", metavar="RELATION")
    nb.add_argument("--direction", choices=("in", "out"), default="out")
    nb.add_argument("--limit", type=_positive, default=100)
    nb.add_argument("--json", action="store_true", help="print JSON")
    add_kg_options(nb)
    nb.set_defaults(handler=_neighbors)

    find = sub.add_parser("find", help="entities whose name matches TEXT")
    find.add_argument("text", metavar="TEXT")
    find.add_argument("--limit", type=_positive, default=10)
    find.add_argument("--json", action="store_true", help="print JSON")
    add_kg_options(find)
    find.set_defaults(handler=_find)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 1


def _print_json(data: object) -> None:
    from ppoga_dspy.text import clean_tree

    print(json.dumps(clean_tree(data), indent=2, ensure_ascii=False))


def _table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    from ppoga_dspy.text import markup_safe  # KG text is outside text: never markup, never escapes

    table = Table(title=markup_safe(title))
    for column in columns:
        table.add_column(markup_safe(column))
    for row in rows:
        table.add_row(*[markup_safe(cell) for cell in row])
    Console().print(table)


def _load(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ppoga_dspy.kg.bulk_load import load_store_dir, load_virtuoso_dir
    from ppoga_dspy.kg.importers import detect_dialect

    if args.chunk_mb <= 0:
        from ppoga_dspy.errors import ConfigError

        raise ConfigError(f"--chunk-mb {args.chunk_mb}: give a positive size in MB, e.g. --chunk-mb 64")
    files = [Path(f) for f in args.files]
    dialect = args.dialect or detect_dialect(files, args.format)
    options = {"dialect": dialect, "fmt": args.format, "chunk_bytes": int(args.chunk_mb * 2**20),
               "progress": not args.no_progress and not args.json}
    if args.engine == "virtuoso":
        meta = load_virtuoso_dir(files, Path(args.store), memory_gb=args.memory,
                                 say=lambda text: print(text, file=sys.stderr), **options)
    else:
        meta = load_store_dir(files, Path(args.store), **options)
    if args.json:
        _print_json({"store": args.store, "engine": args.engine, **meta})
    else:
        skipped = f" ({meta['files_skipped']} already loaded)" if meta.get("files_skipped") else ""
        print(f"loaded {len(args.files)} file(s){skipped} into {args.store} ({args.engine}): {meta['triples']} "
              f"triples, dialect {dialect}, {meta['seconds']:.1f} s")
        if args.engine == "virtuoso":
            print(f"serve it: ppoga kg serve {args.store}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    import signal
    from pathlib import Path

    from ppoga_dspy.kg.virtuoso_db import MemorySettings, database_meta, is_database, start_database

    db = Path(args.store)
    if not is_database(db):
        from ppoga_dspy.kg.servers import ServerError

        raise ServerError(f"{db} holds no Virtuoso database (virtuoso.db); make one with `ppoga kg load FILE... "
                          f"--engine virtuoso --store {db}`")
    meta = database_meta(db)
    memory = MemorySettings.for_machine(args.memory)
    print(memory.describe(), file=sys.stderr)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # a plain kill stops Virtuoso too (the handle's exit)
    with start_database(db, memory=memory, port=args.port, timeout=args.timeout) as handle:
        dialect = meta.get("dialect", "freebase")
        triples = f", {meta['triples']} triples" if "triples" in meta else ""
        print(f"serving {db}{triples}: --kg {handle.url} --dialect {dialect}", flush=True)
        try:
            handle.process.wait()
        except KeyboardInterrupt:
            pass
        if handle.process.returncode not in (None, 0, -15):
            from ppoga_dspy.kg.servers import ServerError

            raise ServerError(f"Virtuoso stopped (exit {handle.process.returncode}); log {handle.log_path}")
    return 0


def resolve_entity(kg, text: str) -> str:
    """An entity id as given, or, when the text is not a valid id of the dialect, the entity it names."""
    from ppoga_dspy.kg import EntityNotFound, InvalidIdentifier

    try:
        kg.dialect.entity_iri(text)
        return text
    except InvalidIdentifier as invalid:
        found = kg.find_entities(text, 1)
        if not found:
            raise EntityNotFound(f"{text!r} is neither an entity id of this KG nor a name in it ({invalid})") from None
        from ppoga_dspy.text import for_terminal

        print(for_terminal(f"ppoga kg: {text!r} is {found[0].id} ({found[0].label})"), file=sys.stderr)
        return found[0].id


def _check_entity_known(kg, entity: str) -> None:
    """Raise EntityNotFound (exit 2) when `entity` is in no triple (an IRN id is any text: its syntax says nothing)."""
    from ppoga_dspy.kg import Direction, EntityNotFound

    if not any(kg.relations(entity, d) for d in (Direction.OUT, Direction.IN)):
        raise EntityNotFound(f"entity {entity!r} is unknown: it is in no triple of {kg.name}; "
                             f"`ppoga kg find TEXT --kg ...` looks it up by name")


def _check_relation_known(kg, entity: str, relation: str, direction: str) -> None:
    """Raise EntityNotFound (exit 2) when `relation` is not one of `entity`'s relations in that direction."""
    from ppoga_dspy.kg import Direction, EntityNotFound

    _check_entity_known(kg, entity)
    have = sorted({r.id for r in kg.relations(entity, Direction(direction))})
    if relation not in have:
        shown = ", ".join(have[:8]) + (", ..." if len(have) > 8 else "")
        raise EntityNotFound(f"relation {relation!r} is unknown for {entity} ({direction}); its relations: "
                             f"{shown or 'none'} (`ppoga kg relations {entity} --kg ...` lists them)")


def _relations(args: argparse.Namespace) -> int:
    from ppoga_dspy.kg import Direction

    kg = kg_from_args(args)
    try:
        args.entity = resolve_entity(kg, args.entity)
        directions = [Direction.OUT, Direction.IN] if args.direction == "both" else [Direction(args.direction)]
        found = [r for d in directions for r in kg.relations(args.entity, d)]
        if not found:
            _check_entity_known(kg, args.entity)
    finally:
        kg.close()
    if args.json:
        _print_json({"entity": args.entity, "relations": [r.to_dict() for r in found]})
    else:
        _table(f"relations of {args.entity}", ["direction", "relation"], [[r.direction.value, r.id] for r in found])
    return 0


def _neighbors(args: argparse.Namespace) -> int:
    kg = kg_from_args(args)
    try:
        args.entity = resolve_entity(kg, args.entity)
        found = kg.neighbors(args.entity, args.relation, args.direction, args.limit)
        if not found:
            _check_relation_known(kg, args.entity, args.relation, args.direction)
    finally:
        kg.close()
    if args.json:
        _print_json(
            {
                "entity": args.entity,
                "relation": args.relation,
                "direction": args.direction,
                "neighbors": [e.to_dict() for e in found],
            }
        )
    else:
        _table(
            f"{args.entity} --{args.relation} ({args.direction})-->",
            ["id", "label"],
            [[e.id, e.describe()] for e in found],
        )
    return 0


def _find(args: argparse.Namespace) -> int:
    kg = kg_from_args(args)
    try:
        found = kg.find_entities(args.text, args.limit)
    finally:
        kg.close()
    if args.json:
        _print_json({"text": args.text, "entities": [e.to_dict() for e in found]})
    else:
        _table(f"entities named {args.text!r}", ["id", "label"], [[e.id, e.label] for e in found])
    return 0
