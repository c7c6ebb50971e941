"""The per-question Freebase subgraphs of GraftNet / NSM / GNN-RAG (WebQSP, CWQ) -> examples and KGs.

The release researchers run WebQSP and CWQ with when they have no Freebase server: one JSON object
per line in `{train,dev,test}_simple.json` (`id`, `question`, `entities` = the topic entities' indices,
`answers` [{`kb_id`, `text`}], `subgraph` {`tuples` [[head, relation, tail] as indices], `entities`}),
beside the index files, in one of two layouts:

- `entity_name.txt`: line i = `id<TAB>name` of entity i (`None` for an unnamed node, a CVT mediator);
- `entities.txt`: line i = the id of entity i, with the names in a separate file keyed by id
  (`entity2name.txt`, `mid2name.txt` or `entity_names.txt`: `id<TAB>name` lines, or a JSON object).

`relations.txt`: line i = the Freebase name of relation i. A subgraph becomes Freebase N-Triples
(`ns:` IRIs, `type.object.name` labels), so the program reads it in the Freebase dialect and reads
unnamed nodes through as mediators. `kg_for(...)` opens one question's subgraph, or the union of a
file's subgraphs (built once into a store under the KG cache, see kg/persistent.py).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ppoga_dspy.kg.dialects import FREEBASE_NS
from ppoga_dspy.kg.terms import escape_string
from ppoga_dspy.text import TEXT_ENCODING
from ppoga_dspy.text import lines as text_lines

NAME_FILES = ("entity2name.txt", "mid2name.txt", "entity_names.txt")
_FREEBASE_ID = re.compile(r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)+")
_NAME = FREEBASE_NS + "type.object.name"


def _lines(path: Path) -> list[str]:
    return text_lines(path.read_text(encoding=TEXT_ENCODING))


def _names_by_id(path: Path) -> dict[str, str]:
    text = path.read_text(encoding=TEXT_ENCODING)
    if text.lstrip().startswith("{"):
        return {str(k): str(v) for k, v in json.loads(text).items()}
    out = {}
    for line in text_lines(text):
        key, sep, name = line.partition("\t")
        if sep:
            out[key.strip()] = name.strip()
    return out


class Vocabulary:
    """Entity ids and names by index, relation names by index, read from the folder of a `*_simple.json` file."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        relations = folder / "relations.txt"
        if not relations.is_file():
            raise ValueError(f"relations.txt is not beside the questions in {folder}")
        self.relations = [line.strip() for line in _lines(relations)]
        named = folder / "entity_name.txt"
        if named.is_file():
            rows = [line.split("\t", 1) for line in _lines(named)]
            self.ids = [row[0].strip() for row in rows]
            self.names = [_named(row[1]) if len(row) > 1 else None for row in rows]
        elif (folder / "entities.txt").is_file():
            self.ids = [line.strip() for line in _lines(folder / "entities.txt")]
            names_file = next((folder / n for n in NAME_FILES if (folder / n).is_file()), None)
            by_id = _names_by_id(names_file) if names_file else {}
            self.names = [_named(by_id.get(i)) for i in self.ids]
        else:
            raise ValueError(f"neither entity_name.txt nor entities.txt is beside the questions in {folder}")

    def entity(self, index: int) -> str:
        return self.ids[index]

    def name(self, index: int) -> str | None:
        return self.names[index]


def _named(text: str | None) -> str | None:
    """A name, or None for the release's unnamed nodes (`None`, empty)."""
    value = (text or "").strip()
    return None if value in ("", "None", "null") else value


@lru_cache(maxsize=4)
def _vocabulary(folder: str, stamp: tuple) -> Vocabulary:
    return Vocabulary(Path(folder))


def vocabulary(folder: Path) -> Vocabulary:
    files = sorted(p for p in folder.iterdir() if p.suffix == ".txt")
    return _vocabulary(str(folder.resolve()), tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files))


def _items(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text_lines(path.read_text(encoding=TEXT_ENCODING)) if line.strip()]


def load_nsm(path: Path) -> list:
    """One example per question: topic entities by id with their names, answers by name (ids kept)."""
    from ppoga_dspy.datasets.examples import make_example

    vocab = vocabulary(path.parent)
    examples = []
    for number, item in enumerate(_items(path), 1):
        topics = {vocab.entity(i): vocab.name(i) or vocab.entity(i) for i in item.get("entities") or []}
        answers = [a.get("text") or a.get("kb_id", "") for a in item.get("answers") or []]
        ids = [a["kb_id"] for a in item.get("answers") or [] if a.get("kb_id")]
        tuples = (item.get("subgraph") or {}).get("tuples") or []
        examples.append(make_example(
            id=str(item.get("id", f"{path.stem}-{number}")), question=item["question"], topic_entities=topics,
            answers=answers, answer_ids=ids, dataset="nsm", source=path.name, source_path=str(path.resolve()),
            subgraph_line=number,
            subgraph_triples=len(tuples), relations_in_subgraph=len({t[1] for t in tuples}),
            answer_groups=[[a] for a in answers], gold_ids=ids,
        ))
    return examples


def _term(vocab: Vocabulary, index: int) -> str:
    entity = vocab.entity(index)
    if _FREEBASE_ID.fullmatch(entity):
        return f"<{FREEBASE_NS}{entity}>"
    return f'"{escape_string(entity)}"'  # a value (a year, a number) stands as a literal


def subgraph_ntriples(path: Path, lines: set[int] | None = None) -> list[str]:
    """N-Triples of the subgraphs on `lines` (1-based) of the file, or of every line; names as type.object.name."""
    vocab = vocabulary(path.parent)
    out: list[str] = []
    named: set[int] = set()
    for number, item in enumerate(_items(path), 1):
        if lines is not None and number not in lines:
            continue
        for head, relation, tail in (item.get("subgraph") or {}).get("tuples") or []:
            subject = _term(vocab, head)
            if subject.startswith('"'):
                continue  # a literal cannot be a subject
            rel = vocab.relations[relation]
            if not _FREEBASE_ID.fullmatch(rel):
                continue
            out.append(f"{subject} <{FREEBASE_NS}{rel}> {_term(vocab, tail)} .\n")
            named.update((head, tail))
        named.update(item.get("entities") or [])
    for index in sorted(named):
        name, term = vocab.name(index), _term(vocab, index)
        if name is not None and not term.startswith('"'):
            out.append(f'{term} <{_NAME}> "{escape_string(name)}"@en .\n')
    return out


def write_subgraphs(path: Path, out: Path, lines: set[int] | None = None) -> Path:
    """Write the subgraphs (see `subgraph_ntriples`) as one .nt file; returns `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("".join(dict.fromkeys(subgraph_ntriples(path, lines))), encoding="utf-8")
    tmp.replace(out)
    return out


def union_store(path: Path) -> Path:
    """The union of every subgraph of the file, as a store directory under the KG cache (built once).

    With the cache off (`PPOGA_KG_CACHE=off`), the .nt file in a temporary folder (loaded in memory).
    """
    import tempfile

    from ppoga_dspy.kg.persistent import cache_root, cached_store_dir, store_key

    root = cache_root()
    folder = root / "nsm" if root is not None else Path(tempfile.mkdtemp(prefix="ppoga-nsm-"))
    nt = folder / f"{store_key(path, 'nsm')}.nt"
    if not nt.is_file():
        write_subgraphs(path, nt)
    return cached_store_dir(nt, dialect="freebase", fmt="nt") or nt


def question_kg_file(example: Any, path: Path | None = None) -> Path:
    """One question's subgraph as an .nt file under the KG cache (a temporary folder with the cache off), for
    `--kg`: the question then runs on its own subgraph, as GraftNet / NSM run it."""
    import tempfile

    from ppoga_dspy.kg.persistent import cache_root, store_key

    meta = dict(getattr(example, "metadata", {}) or {})
    source = path or Path(meta["source_path"])
    root = cache_root()
    folder = root / "nsm" if root is not None else Path(tempfile.mkdtemp(prefix="ppoga-nsm-"))
    out = folder / f"{store_key(source, 'nsm')}-q{int(meta['subgraph_line'])}.nt"
    return out if out.is_file() else write_subgraphs(source, out, {int(meta["subgraph_line"])})


def kg_for(example: Any = None, *, path: Path | None = None, union: bool = False, **options: Any):
    """A KnowledgeGraph (Freebase dialect) of one example's subgraph, or with `union`, of its whole file."""
    from ppoga_dspy.kg import open_kg
    from ppoga_dspy.kg.graph import SparqlGraph
    from ppoga_dspy.kg.store import EmbeddedStore

    meta = dict(getattr(example, "metadata", {}) or {}) if example is not None else {}
    source = path or Path(meta["source_path"])
    if union:
        return open_kg(union_store(source), dialect="freebase", **options)
    import pyoxigraph as ox

    store = ox.Store()
    store.load("".join(subgraph_ntriples(source, {int(meta["subgraph_line"])})).encode("utf-8"),
               ox.RdfFormat.N_TRIPLES)
    from ppoga_dspy.kg.dialects import get_dialect

    engine = EmbeddedStore(store, name=f"{source.name}#{meta['subgraph_line']}", timeout=options.get("timeout", 30.0))
    return SparqlGraph(engine, get_dialect("freebase", ontology=options.get("ontology")))
