"""The scale curve of issue 40: Freebase-shaped N-Triples at growing sizes, loaded and queried on both engines.

Usage:
    python benchmarks/kg_scale_bench.py [--sizes 1M,5M,20M] [--engines oxigraph,virtuoso] [--queries 200]
                                        [--seed 0] [--virtuoso-memory GB] [--budget S] [--keep DIR]
                                        [--data DIR]

For each size (`200k`, `1M`, `1.5M`, `20000` are all accepted) it writes a Freebase-shaped N-Triples file: mids as
`http://rdf.freebase.com/ns/m.0...` IRIs; every named entity with one `type.object.name`@en label, some also @fr,
@de and @es, and `type.object.type` triples; mediator (CVT) nodes without a name, each reached from one entity and
leading back to it and on to others; hubs, a few entities with 2,000-20,000 links of one relation in or out (8% of
the triples, fewer links per hub below 1M); and facts whose relations follow the CWQ sample's mix
(`cwq-subgraph-sample/relations.txt`, weighted by how often each relation joins named and unnamed nodes in its
`*_simple.json` subgraphs; a Zipf mix over the names when the subgraphs are absent, Freebase-shaped names when the
sample is). Written with numpy a chunk of entities at a time, seeded, so the same size and seed give the same file.

Then, per engine, it loads the file with the project's loader in a child process (`ppoga kg load FILE --engine
oxigraph|virtuoso --store DIR`) and measures the child's wall time, the peak RSS of the process holding the data
(the loader for oxigraph, `virtuoso-t` for Virtuoso: VmHWM from /proc, polled) and the store folder's size on disk.
It drops the store's files from the page cache (fsync + POSIX_FADV_DONTNEED on those files only; no root needed),
opens the store (oxigraph: in a worker process; Virtuoso: `ppoga kg serve DIR`, queried over HTTP) and times the
Executor's own calls through `open_kg(..., cache_size=0)`, so every call reaches the engine:

- relations: `relations(entity, out)` + `relations(entity, in)` of a random named entity (one menu);
- hub neighbours: `neighbors(hub, relation, direction, neighbor_limit + 1)`, then `count_neighbors` when the hub
  has more links than `neighbor_limit` (the Executor's `_follow`);
- mediator read-through: `neighbors(entity, relation)` where the relation leads to CVTs (their facts and the
  labels of what they lead to are fetched);
- labels: `labels()` of 20 random entities (one VALUES query);
- find by name: `find_entities(an entity's English name)` (exact label match).

"cold" is the first run of each call after the store was opened (the server started) with its files out of the
page cache; "warm" is the same calls again, in the same order. `--queries` samples of each kind (hubs: each hub once,
at most `--queries`); a kind whose cold calls have taken `--budget` seconds runs no more samples (the n column says
how many were left out), so one query shape that does not scale cannot hold a run for hours.

Prints one markdown table, one row per query kind, the load's figures on each (size, engine) group's first row:
triples loaded, load seconds and triples/s (the child's wall time, process and server start included), bytes per
triple on disk, peak RSS while loading, seconds to open the store, peak RSS while querying (the worker process for
oxigraph, `virtuoso-t` for Virtuoso), then the calls made and p50 / p95 ms cold and warm for each query kind.
Virtuoso's RSS follows its buffer setting more than the data (`--virtuoso-memory`, default the loader's: half the
machine's RAM), since it touches much of its buffer pool at start.

Why: choosing an engine for Freebase (about 3 billion triples) needs measured load rates, bytes per triple,
memory and latencies that grow with size, on data whose shape (CVTs, hubs, labels, relation mix) is Freebase's,
queried the way the program queries it. Files and stores go to a temporary folder, removed after each size;
`--keep DIR` keeps them (an existing file of the same size and seed is reused, stores are always loaded again).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from _data import BESIDE_REPO, ENV_VAR, add_data_option

REPO = Path(__file__).resolve().parents[1]
NS = "http://rdf.freebase.com/ns/"
NAME_PREDICATE = "type.object.name"
TYPE_PREDICATE = "type.object.type"
TOPIC_TYPE = "common.topic"
SAMPLE_FOLDER = "cwq-subgraph-sample"

# The graph's shape (per named entity unless said otherwise); see GraphPlan.
LANGUAGE_RATES = (("fr", 0.30), ("de", 0.15), ("es", 0.10))  # share of entities with a label in that language too
TYPES_PER_ENTITY = 2  # common.topic and one domain type, as Freebase gives every topic
MEDIATORS_PER_ENTITY = 0.35
MEDIATOR_OUT_DEGREES = ((2, 0.50), (3, 0.35), (4, 0.15))  # the first link leads back to the entity it hangs from
PLAIN_FACTS_PER_ENTITY = 4.0
HUB_SHARE = 0.08
HUB_LINKS = (2_000, 20_000)
MIN_HUBS = 8
CHUNK_ENTITIES = 40_000

QUERY_KINDS = ("relations", "hub neighbours", "mediator read-through", "labels", "find by name")
LABEL_BATCH = 20

_MID_ALPHABET = np.frombuffer(b"0123456789bcdfghjklmnpqrstvwxyz_", dtype=np.uint8)  # Freebase's mid digits
_MID_SCRAMBLE = 0x9E3779B1  # odd: a bijection modulo any power of two, so mids are unique and look random
_SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeio"]  # 64
_LANGUAGE_SPELLING = {"fr": str.maketrans("e", "é"), "de": str.maketrans("a", "ä"), "es": str.maketrans("o", "ó")}


# --------------------------------------------------------------------------- sizes and the relation mix


def parse_size(text: str) -> int:
    """`200k` -> 200000, `1M` / `1.5M` -> millions, `20000` as is."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 200k, 1M, 20000)")
    scale = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}[match.group(2).lower()]
    value = int(round(float(match.group(1)) * scale))
    if value < 1000:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least 1000 triples")
    return value


def size_label(triples: int) -> str:
    for unit, scale in (("M", 10**6), ("k", 10**3)):
        if triples >= scale and triples % (scale // 10) == 0:
            return f"{triples / scale:g}{unit}"
    return str(triples)


# The CWQ sample names three schema relations by their W3C vocabularies (`rdf-schema#range`); Freebase's dump writes
# them under those namespaces, where the Freebase dialect does not see them.
W3C_VOCABULARIES = {"rdf-schema": "http://www.w3.org/2000/01/rdf-schema#", "owl": "http://www.w3.org/2002/07/owl#",
                    "22-rdf-syntax-ns": "http://www.w3.org/1999/02/22-rdf-syntax-ns#"}


def relation_iri(name: str) -> str:
    """`ns:NAME`, or the W3C IRI of a sample relation named `vocabulary#local`."""
    vocabulary, hash_sign, local = name.partition("#")
    if hash_sign and vocabulary in W3C_VOCABULARIES:
        return W3C_VOCABULARIES[vocabulary] + local
    return NS + name


def _keeps(relation: str) -> bool:
    """A relation the Executor is offered: the Freebase dialect maps its IRI to a relation id and keeps it."""
    from ppoga_dspy.kg.dialects import FreebaseDialect

    dialect = FreebaseDialect(ontology=False)
    return dialect.relation_id(relation_iri(relation)) is not None and dialect.keep_relation(relation)


@dataclass(frozen=True)
class RelationMix:
    """Relation names and how often each joins two named entities, a named entity to a CVT, a CVT to an entity.

    From the CWQ sample's subgraphs (the NSM release: `entity_name.txt` says `None` for an unnamed node), so the
    generated graph has Freebase's heavy head (common.topic.notable_types, people.person.profession, ...) and long
    tail. Relations into and out of CVTs are restricted to those the Executor is offered (the dialect's filter), as
    a mediator read-through follows only those.
    """

    names: list[str]
    entity_entity: np.ndarray
    entity_mediator: np.ndarray
    mediator_entity: np.ndarray
    source: str

    @classmethod
    def from_data(cls, data: Path | None) -> RelationMix:
        folder = data / SAMPLE_FOLDER if data is not None else None
        listed = folder / "relations.txt" if folder is not None else None
        if listed is None or not listed.is_file():
            names = [f"domain{i % 40}.type{i % 97}.property_{i}" for i in range(857)]
            return cls._zipf(names, "Freebase-shaped names, Zipf mix (no CWQ sample found)")
        names = [line.strip() for line in listed.read_text(encoding="utf-8").splitlines() if line.strip()]
        counts = cls._sample_counts(folder, len(names))
        if counts is None:
            return cls._zipf(names, f"{listed} (Zipf mix: no subgraphs beside it)")
        keep = np.array([_keeps(n) and n not in (NAME_PREDICATE, TYPE_PREDICATE) for n in names])
        usable = np.array([n not in (NAME_PREDICATE, TYPE_PREDICATE) for n in names])
        named_named, named_unnamed, unnamed_any = counts
        return cls(names, _normalised(named_named * usable), _normalised(named_unnamed * keep),
                   _normalised(unnamed_any * keep), f"{folder} (relation frequencies of its subgraphs)")

    @staticmethod
    def _sample_counts(folder: Path, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        names_file = folder / "entity_name.txt"
        splits = sorted(folder.glob("*_simple.json"))
        if not names_file.is_file() or not splits:
            return None
        unnamed = {i for i, line in enumerate(names_file.read_text(encoding="utf-8").splitlines())
                   if line.partition("\t")[2].strip() in ("", "None", "null")}
        counts = np.zeros((3, n))
        for split in splits:
            for line in split.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                for head, relation, tail in json.loads(line).get("subgraph", {}).get("tuples", []):
                    if 0 <= relation < n:
                        row = 2 if head in unnamed else (1 if tail in unnamed else 0)
                        counts[row, relation] += 1
        if counts.sum() == 0:
            return None
        return counts[0], counts[1], counts[2]

    @classmethod
    def _zipf(cls, names: list[str], source: str) -> RelationMix:
        weights = 1.0 / np.arange(1, len(names) + 1) ** 1.1
        weights = weights[np.random.default_rng(12345).permutation(len(names))]
        keep = np.array([_keeps(n) for n in names])
        return cls(names, _normalised(weights), _normalised(weights * keep), _normalised(weights * keep), source)

    def domain(self, relation: int) -> str:
        """`people.person` for `people.person.nationality`: the type a subject of the relation has."""
        return ".".join(self.names[relation].split(".")[:2])

    def hub_relations(self, count: int) -> list[int]:
        """The most frequent entity-entity relations the Executor is offered, for hubs."""
        order = [int(i) for i in np.argsort(-self.entity_entity, kind="stable") if _keeps(self.names[i])]
        return [order[i % len(order)] for i in range(count)]


def _normalised(weights: np.ndarray) -> np.ndarray:
    total = float(weights.sum())
    if total <= 0:
        raise ValueError("a relation mix without any usable relation")
    return weights / total


# --------------------------------------------------------------------------- the generator


def entity_name(index: int) -> str:
    """A readable, deterministic name, unique for the first 2**24 entities ("Bako Feri")."""
    code = ((index + 1) * _MID_SCRAMBLE) % (1 << 24)
    a, b, c, d = ((code >> shift) & 63 for shift in (18, 12, 6, 0))
    return f"{_SYLLABLES[a].capitalize()}{_SYLLABLES[b]} {_SYLLABLES[c].capitalize()}{_SYLLABLES[d]}"


def mid_digits(nodes: int) -> int:
    """Digits after `m.0` so that every node has its own mid, with room to scramble."""
    return max(4, math.ceil(math.log(max(nodes, 2), 32)) + 1)


def mids(ids: np.ndarray, digits: int) -> list[bytes]:
    """The mids' local parts after `m.0`, vectorised: ids scrambled modulo 32**digits, written in mid digits."""
    code = ((ids.astype(np.uint64) + np.uint64(1)) * np.uint64(_MID_SCRAMBLE)) % np.uint64(32**digits)
    shifts = np.arange(digits - 1, -1, -1, dtype=np.uint64) * np.uint64(5)
    letters = _MID_ALPHABET[((code[:, None] >> shifts) & np.uint64(31)).astype(np.intp)]
    return np.ascontiguousarray(letters).view(f"S{digits}").ravel().tolist()


@dataclass
class GraphPlan:
    """Everything drawn before writing: counts, hubs and CVTs, so chunks can be written one subject range at a time.

    Entities are node ids [0, entities), CVTs [entities, entities + mediators). CVT j hangs from entity
    `mediator_parent[j]` (sorted, so the CVTs of a chunk of entities are one range) through `mediator_in[j]`.
    """

    target: int
    entities: int
    mediators: int
    languages: np.ndarray  # (entities, 3) bool: has an fr / de / es label
    entity_type: np.ndarray  # index into `types`
    plain_degree: np.ndarray  # plain facts out of each entity
    popularity: np.ndarray  # entity ids, most linked-to first
    mediator_parent: np.ndarray
    mediator_in: np.ndarray
    mediator_out_degree: np.ndarray
    hub_entity: np.ndarray
    hub_relation: np.ndarray
    hub_out: np.ndarray  # True: hub -> members; False: members -> hub
    hub_members: list[np.ndarray]
    types: list[str]
    digits: int

    @property
    def planned_triples(self) -> int:
        return int(self.entities * (1 + TYPES_PER_ENTITY) + self.languages.sum() + self.plain_degree.sum()
                   + self.mediators * 2 + self.mediator_out_degree.sum() + sum(len(m) for m in self.hub_members))


def hub_links(target: int, rng: np.random.Generator) -> np.ndarray:
    """Links per hub: log-uniform in HUB_LINKS, about HUB_SHARE of the triples in all; below about 1M triples,
    MIN_HUBS hubs with their links scaled down to that share (a hub of 20,000 links in a 200k graph is no hub)."""
    budget = HUB_SHARE * target
    low, high = HUB_LINKS
    mean = (high - low) / math.log(high / low)
    count = max(MIN_HUBS, int(budget / mean))
    links = np.exp(rng.uniform(math.log(low), math.log(high), count))
    if count == MIN_HUBS and links.sum() > budget:
        links *= budget / links.sum()
    return np.maximum(links.astype(np.int64), 1)


def plan_graph(target: int, mix: RelationMix, rng: np.random.Generator) -> GraphPlan:
    links = hub_links(target, rng)
    out_degrees = np.array([d for d, _ in MEDIATOR_OUT_DEGREES])
    out_p = np.array([p for _, p in MEDIATOR_OUT_DEGREES])
    per_entity = (1 + sum(p for _, p in LANGUAGE_RATES) + TYPES_PER_ENTITY + PLAIN_FACTS_PER_ENTITY
                  + MEDIATORS_PER_ENTITY * (2 + float(out_degrees @ out_p)))
    entities = max(MIN_HUBS * 4, int((target - links.sum()) / per_entity))
    mediators = int(round(MEDIATORS_PER_ENTITY * entities))
    languages = rng.random((entities, len(LANGUAGE_RATES))) < np.array([r for _, r in LANGUAGE_RATES])
    types = sorted({mix.domain(i) for i in range(len(mix.names))} | {TOPIC_TYPE})
    type_index = {t: i for i, t in enumerate(types)}
    domain_of = np.array([type_index[mix.domain(i)] for i in range(len(mix.names))])
    # an entity's domain type: the domain of a relation it could have (common.* / type.* domains left out: every
    # entity already has common.topic, and a second one would be a duplicate triple)
    typed = mix.entity_entity * np.array([_keeps(n) for n in mix.names])
    entity_type = domain_of[rng.choice(len(mix.names), entities, p=_normalised(typed))]
    mediator_parent = np.sort(rng.integers(0, entities, mediators))
    mediator_in = rng.choice(len(mix.names), mediators, p=mix.entity_mediator)
    mediator_out_degree = rng.choice(out_degrees, mediators, p=out_p)
    hub_entity = rng.choice(entities, len(links), replace=False)
    hub_members = []
    for hub, count in zip(hub_entity, links, strict=True):
        members = np.sort(rng.choice(entities - 1, int(min(count, entities - 1)), replace=False))
        hub_members.append(members + (members >= hub))  # never the hub itself
    fixed = (entities * (1 + TYPES_PER_ENTITY) + int(languages.sum()) + mediators * 2
             + int(mediator_out_degree.sum()) + sum(len(m) for m in hub_members))
    plain = max(0, target - fixed)
    heads = rng.permutation(entities)[(entities * rng.random(plain) ** 1.5).astype(np.int64)]
    plan = GraphPlan(
        target=target, entities=entities, mediators=mediators, languages=languages, entity_type=entity_type,
        plain_degree=np.bincount(heads, minlength=entities), popularity=rng.permutation(entities),
        mediator_parent=mediator_parent, mediator_in=mediator_in, mediator_out_degree=mediator_out_degree,
        hub_entity=hub_entity, hub_relation=np.array(mix.hub_relations(len(links))),
        hub_out=np.arange(len(links)) % 2 == 0, hub_members=hub_members, types=types,
        digits=mid_digits(entities + mediators))
    return plan


@dataclass
class _Lines:
    """One chunk's lines with their subjects, sorted by subject when written (as a dump groups a subject's facts)."""

    subjects: list[np.ndarray] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)

    def add(self, subjects: np.ndarray, lines: list[bytes]) -> None:
        self.subjects.append(subjects)
        self.lines.extend(lines)

    def joined(self) -> bytes:
        if not self.lines:
            return b""
        order = np.argsort(np.concatenate(self.subjects), kind="stable")
        lines = self.lines
        return b"".join([lines[i] for i in order.tolist()])


class FreebaseWriter:
    """Writes a GraphPlan as N-Triples, CHUNK_ENTITIES subjects (and the CVTs hanging from them) at a time."""

    def __init__(self, plan: GraphPlan, mix: RelationMix, rng: np.random.Generator) -> None:
        self.plan, self.mix, self.rng = plan, mix, rng
        self.prefix = f"<{NS}m.0".encode()  # every subject is a mid: this, its digits, then the line's middle
        self.relation_middle = [f"> <{relation_iri(name)}> <{NS}m.0".encode() for name in mix.names]
        self.type_middle = [f"> <{NS}{TYPE_PREDICATE}> <{NS}{t}> .\n".encode() for t in plan.types]
        self.name_middle = f"> <{NS}{NAME_PREDICATE}> ".encode()
        self.topic = plan.types.index(TOPIC_TYPE)
        ee, ce = mix.entity_entity, mix.mediator_entity
        self.ee_cdf, self.ce_cdf = np.cumsum(ee), np.cumsum(ce)
        self.domain_of = {d: i for i, d in enumerate(plan.types)}

    def _relations(self, cdf: np.ndarray, n: int) -> np.ndarray:
        return np.minimum(np.searchsorted(cdf, self.rng.random(n) * cdf[-1], side="right"), len(cdf) - 1)

    def _popular(self, n: int) -> np.ndarray:
        """Tails of plain facts: a few entities are linked to far more than most (u**2 skew over a permutation)."""
        plan = self.plan
        return plan.popularity[(plan.entities * self.rng.random(n) ** 2).astype(np.int64)]

    def chunks(self) -> Iterator[tuple[bytes, int]]:
        """(N-Triples bytes, triples) per chunk of subjects, duplicates dropped (a store is a set)."""
        plan = self.plan
        for start in range(0, plan.entities, CHUNK_ENTITIES):
            yield self._chunk(start, min(plan.entities, start + CHUNK_ENTITIES))

    def _chunk(self, start: int, stop: int) -> tuple[bytes, int]:
        plan, out = self.plan, _Lines()
        ids = np.arange(start, stop)
        heads, rels, tails = [], [], []
        # plain facts between named entities
        degree = plan.plain_degree[start:stop]
        plain_heads = np.repeat(ids, degree)
        heads.append(plain_heads)
        rels.append(self._relations(self.ee_cdf, len(plain_heads)))
        tails.append(self._popular(len(plain_heads)))
        # hubs: members -> hub for the members in this chunk, hub -> members for a hub in this chunk
        for hub, relation, hub_out, members in zip(plan.hub_entity, plan.hub_relation, plan.hub_out,
                                                   plan.hub_members, strict=True):
            if hub_out:
                if start <= hub < stop:
                    heads.append(np.full(len(members), hub))
                    rels.append(np.full(len(members), relation))
                    tails.append(members)
            else:
                inside = members[np.searchsorted(members, start):np.searchsorted(members, stop)]
                heads.append(inside)
                rels.append(np.full(len(inside), relation))
                tails.append(np.full(len(inside), hub))
        # CVTs hanging from this chunk's entities: entity -> CVT, CVT -> the entity back, CVT -> others
        low, high = np.searchsorted(plan.mediator_parent, [start, stop])
        cvts = np.arange(low, high)
        cvt_ids = plan.entities + cvts
        parents = plan.mediator_parent[low:high]
        heads.append(parents)
        rels.append(plan.mediator_in[low:high])
        tails.append(cvt_ids)
        out_degree = plan.mediator_out_degree[low:high]
        cvt_heads = np.repeat(cvt_ids, out_degree)
        cvt_rels = self._relations(self.ce_cdf, len(cvt_heads))
        cvt_tails = self._popular(len(cvt_heads))
        first = np.concatenate([[0], np.cumsum(out_degree)[:-1]]).astype(np.int64) if len(cvts) else cvts
        cvt_tails[first] = parents  # the link back to the entity the CVT hangs from
        heads.append(cvt_heads)
        rels.append(cvt_rels)
        tails.append(cvt_tails)
        h, r, t = (np.concatenate(a).astype(np.int64) for a in (heads, rels, tails))
        nodes = plan.entities + plan.mediators
        _, unique = np.unique((h * len(self.mix.names) + r) * nodes + t, return_index=True)
        h, r, t = h[unique], r[unique], t[unique]
        head_mids, tail_mids = mids(h, plan.digits), mids(t, plan.digits)
        prefix, middle, end = self.prefix, self.relation_middle, b"> .\n"
        out.add(h, [prefix + s + middle[p] + o + end for s, p, o in zip(head_mids, r.tolist(), tail_mids, strict=True)])
        # types: common.topic and a domain type for entities, the domain of the first link out for CVTs
        cvt_first_rel = cvt_rels[first] if len(cvts) else cvt_rels
        cvt_types = [self.domain_of[self.mix.domain(int(i))] for i in cvt_first_rel]
        type_subjects = np.concatenate([ids, ids, cvt_ids])
        type_objects = [self.topic] * len(ids) + plan.entity_type[start:stop].tolist() + cvt_types
        type_mids = mids(type_subjects, plan.digits)
        out.add(type_subjects, [prefix + s + self.type_middle[o] for s, o in zip(type_mids, type_objects, strict=True)])
        # names: @en for every entity, @fr / @de / @es for some; CVTs have none
        entity_mids = mids(ids, plan.digits)
        names = [entity_name(i) for i in ids.tolist()]
        label_lines = [prefix + s + self.name_middle + b'"' + n.encode() + b'"@en .\n'
                       for s, n in zip(entity_mids, names, strict=True)]
        label_subjects = [ids]
        for column, (language, _) in enumerate(LANGUAGE_RATES):
            where = np.flatnonzero(plan.languages[start:stop, column])
            spelling = _LANGUAGE_SPELLING[language]
            tag = f'"@{language} .\n'.encode()
            label_lines += [prefix + entity_mids[i] + self.name_middle + b'"' + names[i].translate(spelling).encode()
                            + tag for i in where.tolist()]
            label_subjects.append(ids[where])
        out.add(np.concatenate(label_subjects), label_lines)
        return out.joined(), len(out.lines)


def write_graph(path: Path, target: int, mix: RelationMix, *, seed: int = 0, queries: int = 200) -> dict:
    """Write the Freebase-shaped file and its workload (`<path>.workload.json`); the workload, with counts."""
    rng = np.random.default_rng(seed)
    plan = plan_graph(target, mix, rng)
    written = 0
    with path.open("wb", buffering=0) as handle:
        for text, triples in FreebaseWriter(plan, mix, rng).chunks():
            handle.write(text)
            written += triples
    workload = make_workload(plan, mix, seed=seed, queries=queries)
    workload.update(triples=written, file_bytes=path.stat().st_size, relation_source=mix.source)
    workload_path(path).write_text(json.dumps(workload) + "\n", encoding="utf-8")
    return workload


def workload_path(path: Path) -> Path:
    return path.with_name(path.name + ".workload.json")


def make_workload(plan: GraphPlan, mix: RelationMix, *, seed: int, queries: int) -> dict:
    """The calls to time, drawn with their own seed: the same entities whatever the engine."""
    rng = np.random.default_rng([seed, 1])

    def mid(i: int) -> str:
        return "m.0" + mids(np.array([i]), plan.digits)[0].decode()

    entities = rng.choice(plan.entities, min(queries, plan.entities), replace=False).tolist()
    hubs = [{"entity": mid(int(e)), "relation": mix.names[int(r)], "direction": "out" if o else "in",
             "links": len(m)}
            for e, r, o, m in zip(plan.hub_entity, plan.hub_relation, plan.hub_out, plan.hub_members, strict=True)]
    hub_order = rng.permutation(len(hubs))[:queries].tolist()
    cvts = rng.choice(plan.mediators, min(queries, plan.mediators), replace=False).tolist()
    batches = rng.integers(0, plan.entities, (queries, LABEL_BATCH)).tolist()
    named = rng.choice(plan.entities, min(queries, plan.entities), replace=False).tolist()
    return {
        "size": plan.target, "seed": seed, "entities": plan.entities, "mediators": plan.mediators, "hubs": hubs,
        "samples": {
            "relations": [mid(i) for i in entities],
            "hub neighbours": [[hubs[i]["entity"], hubs[i]["relation"], hubs[i]["direction"]] for i in hub_order],
            "mediator read-through": [[mid(int(plan.mediator_parent[j])), mix.names[int(plan.mediator_in[j])]]
                                      for j in cvts],
            "labels": [[mid(i) for i in batch] for batch in batches],
            "find by name": [entity_name(i) for i in named],
        },
    }


# --------------------------------------------------------------------------- processes: RSS, page cache


def _children(pid: int) -> list[int]:
    """All descendants of `pid`, from /proc (no psutil needed)."""
    parents: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _status(pid: int) -> tuple[str, int, int] | None:
    """(name, VmHWM bytes, VmRSS bytes) of a live process."""
    try:
        text = Path(f"/proc/{pid}/status").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    kb = {k: int(fields[k].split()[0]) * 1024 for k in ("VmHWM", "VmRSS") if k in fields}
    return fields.get("Name", "").strip(), kb.get("VmHWM", 0), kb.get("VmRSS", 0)


class TreeMonitor:
    """Polls a process tree's /proc entries: each process's peak RSS (VmHWM, exact whenever it is read) by name,
    and the tree's largest total RSS seen. Why VmHWM: a poll can miss a short spike of VmRSS, never of VmHWM."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid, self.interval = pid, interval
        self.peaks: dict[int, tuple[str, int]] = {}
        self.tree_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.interval)

    def poll(self) -> None:
        total = 0
        for pid in [self.pid, *_children(self.pid)]:
            status = _status(pid)
            if status is None:
                continue
            name, hwm, rss = status
            total += rss
            if hwm >= self.peaks.get(pid, ("", 0))[1]:
                self.peaks[pid] = (name, hwm)
        self.tree_peak = max(self.tree_peak, total)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def peak(self, name: str | None = None, pid: int | None = None) -> int:
        """The largest VmHWM of the processes called `name` (or of `pid`); 0 when none was seen."""
        return max((hwm for p, (n, hwm) in self.peaks.items() if (name is None or n == name)
                    and (pid is None or p == pid)), default=0)


def disk_bytes(folder: Path) -> int:
    """Bytes the folder takes on disk (allocated blocks, as `du`)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def evict_page_cache(folder: Path) -> None:
    """Drop this folder's files from the OS page cache (written back first), so the first queries read the disk.

    Only these files: `echo 3 > /proc/sys/vm/drop_caches` would need root and would disturb everything else."""
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
            finally:
                os.close(fd)


def _ppoga(*args: str) -> list[str]:
    """The `ppoga` command, run by this interpreter."""
    return [sys.executable, "-m", "ppoga_dspy.cli", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def run_measured(command: list[str], *, timeout: float) -> tuple[subprocess.CompletedProcess, float, TreeMonitor,
                                                                   int]:
    """Run a child, polling its tree; (result, wall seconds, monitor, the child's own peak RSS: its last VmHWM read)."""
    started = time.monotonic()
    child = subprocess.Popen(command, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    monitor = TreeMonitor(child.pid)
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
    finally:
        monitor.stop()
    seconds = time.monotonic() - started
    result = subprocess.CompletedProcess(command, child.returncode, out, err)
    return result, seconds, monitor, monitor.peak(pid=child.pid)


# --------------------------------------------------------------------------- loading


@dataclass
class LoadResult:
    engine: str
    triples: int
    seconds: float
    disk: int
    rss: int  # peak RSS of the process that holds the data
    tree_rss: int
    loader_seconds: float  # the loader's own time for the chunks (no process start, server start or final count)
    note: str  # what the loader said on stderr besides progress (Virtuoso's memory settings)


def load(engine: str, source: Path, store: Path, *, memory_gb: float | None, timeout: float) -> LoadResult:
    """`ppoga kg load SOURCE --engine ENGINE --store STORE` in a child process, measured."""
    if store.exists():
        shutil.rmtree(store)
    command = _ppoga("kg", "load", str(source), "--engine", engine, "--store", str(store), "--dialect", "freebase",
                     "--json")
    if engine == "virtuoso" and memory_gb is not None:
        command += ["--memory", f"{memory_gb:g}"]
    result, seconds, monitor, own = run_measured(command, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"kg_scale_bench.py: {' '.join(command)} failed (exit {result.returncode}):\n"
                         f"{result.stderr.decode(errors='replace')[-3000:]}")
    meta = json.loads(result.stdout)
    rss = monitor.peak(name="virtuoso-t") if engine == "virtuoso" else own
    note = " ".join(line for line in result.stderr.decode(errors="replace").splitlines() if "memory" in line.lower())
    return LoadResult(engine, int(meta["triples"]), seconds, disk_bytes(store), rss, monitor.tree_peak,
                      float(meta.get("seconds", 0.0)), note)


# --------------------------------------------------------------------------- querying


def timed_calls(kg, samples: dict[str, list], neighbor_limit: int) -> dict[str, Callable[[object], object]]:
    """Each query kind as the Executor makes it, one sample -> the calls."""
    from ppoga_dspy.kg.base import Direction
    from ppoga_dspy.kg.graph import MAX_LIMIT

    asked = min(neighbor_limit + 1, MAX_LIMIT)

    def relations(entity: str) -> object:
        return kg.relations(entity, Direction.OUT) + kg.relations(entity, Direction.IN)

    def hub(sample: list[str]) -> object:
        entity, relation, direction = sample
        found = kg.neighbors(entity, relation, direction, asked)
        if len(found) > neighbor_limit or len(found) >= MAX_LIMIT:
            kg.count_neighbors(entity, relation, direction)
        return found

    def mediator(sample: list[str]) -> object:
        entity, relation = sample
        found = kg.neighbors(entity, relation, Direction.OUT, asked)
        if not any(e.is_mediator for e in found):
            raise AssertionError(f"{entity} -{relation}-> reached no mediator: {found[:3]}")
        return found

    return {"relations": relations, "hub neighbours": hub, "mediator read-through": mediator,
            "labels": kg.labels, "find by name": lambda text: kg.find_entities(text, 10)}


def query_worker(argv: list[str]) -> int:
    """`kg_scale_bench.py query-worker TARGET WORKLOAD BUDGET`: open TARGET (a store folder or URL) with `open_kg`,
    time the workload's calls cold then warm, print JSON. A process of its own, so its RSS is the embedded engine's.

    A kind whose cold calls have taken BUDGET seconds runs no more samples (one slow query shape must not hold a
    run for hours); the warm pass repeats the calls the cold pass made."""
    from ppoga_dspy.kg import KGError, open_kg
    from ppoga_dspy.method.thresholds import Thresholds

    target, workload_file, budget_text = argv
    budget = float(budget_text)
    samples = json.loads(Path(workload_file).read_text(encoding="utf-8"))["samples"]
    started = time.perf_counter()
    kg = open_kg(target, dialect="freebase", cache_size=0, timeout=600.0, retries=0)
    opened = time.perf_counter() - started
    _ = kg.dialect.ontology  # read the GrailQA ontology (if found) now, not inside the first timed call
    calls = timed_calls(kg, samples, Thresholds().neighbor_limit)
    order = [(kind, i) for i in range(max(len(s) for s in samples.values())) for kind in QUERY_KINDS
             if i < len(samples[kind])]  # the kinds interleaved, as a walk mixes them
    times: dict[str, dict[str, list[float]]] = {k: {"cold": [], "warm": []} for k in QUERY_KINDS}
    errors: dict[str, int] = dict.fromkeys(QUERY_KINDS, 0)
    spent: dict[str, float] = dict.fromkeys(QUERY_KINDS, 0.0)
    made: list[tuple[str, int]] = []
    for phase in ("cold", "warm"):
        for kind, i in order if phase == "cold" else made:
            if phase == "cold":
                if spent[kind] >= budget:
                    continue
                made.append((kind, i))
            began = time.perf_counter()
            try:
                calls[kind](samples[kind][i])
            except (KGError, AssertionError) as exc:
                errors[kind] += phase == "cold"
                print(f"query-worker: {phase} {kind} {samples[kind][i]!r}: {exc}", file=sys.stderr)
                continue
            finally:
                spent[kind] += time.perf_counter() - began
            times[kind][phase].append(time.perf_counter() - began)
    kg.close()
    skipped = {kind: len(samples[kind]) - sum(k == kind for k, _ in made) for kind in QUERY_KINDS}
    print(json.dumps({"open_s": opened, "times": times, "errors": errors, "skipped": skipped}))
    return 0


@dataclass
class QueryResult:
    open_s: float
    rss: int
    times: dict[str, dict[str, list[float]]]
    errors: dict[str, int]  # calls that failed (cold; the warm pass repeats them)
    skipped: dict[str, int]  # samples not run: the kind's budget was spent


def _worker(target: str, workload: Path, budget: float, timeout: float) -> tuple[dict, int]:
    command = [sys.executable, str(Path(__file__).resolve()), "query-worker", target, str(workload), f"{budget:g}"]
    result, _, _, own = run_measured(command, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"kg_scale_bench.py: the query worker failed on {target} (exit {result.returncode}):\n"
                         f"{result.stderr.decode(errors='replace')[-3000:]}")
    report = json.loads(result.stdout.decode().strip().splitlines()[-1])
    if any(report["errors"].values()):
        _say(f"query worker on {target}: some calls failed:\n{result.stderr.decode(errors='replace')[-2000:]}")
    return report, own


def query_oxigraph(store: Path, workload: Path, *, budget: float, timeout: float) -> QueryResult:
    evict_page_cache(store)
    report, rss = _worker(str(store), workload, budget, timeout)
    return QueryResult(report["open_s"], rss, report["times"], report["errors"], report["skipped"])


def query_virtuoso(store: Path, workload: Path, *, memory_gb: float | None, budget: float,
                   timeout: float) -> QueryResult:
    """`ppoga kg serve STORE`, then the worker against the URL it prints; RSS is virtuoso-t's."""
    evict_page_cache(store)
    command = _ppoga("kg", "serve", str(store))
    if memory_gb is not None:
        command += ["--memory", f"{memory_gb:g}"]
    started = time.monotonic()
    server = subprocess.Popen(command, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    monitor = TreeMonitor(server.pid)
    try:
        line = _read_line(server, deadline=started + timeout)
        opened = time.monotonic() - started
        match = re.search(r"--kg (\S+)", line)
        if not match:
            raise SystemExit(f"kg_scale_bench.py: `ppoga kg serve` printed no URL: {line!r}\n{_drain(server)}")
        report, _ = _worker(match.group(1), workload, budget, timeout)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        monitor.stop()
    return QueryResult(opened, monitor.peak(name="virtuoso-t"), report["times"], report["errors"], report["skipped"])


def _read_line(process: subprocess.Popen, *, deadline: float) -> str:
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 1.0)
        if ready:
            return process.stdout.readline()
        if process.poll() is not None:
            break
    raise SystemExit(f"kg_scale_bench.py: `ppoga kg serve` did not start:\n{_drain(process)}")


def _drain(process: subprocess.Popen) -> str:
    if process.poll() is None:
        process.kill()
    _, err = process.communicate()
    return (err or "")[-3000:]


# --------------------------------------------------------------------------- the table


def _ms(values: list[float], q: float) -> str:
    return f"{np.percentile(np.array(values) * 1000, q):.1f}" if values else "-"


def _gb(value: int) -> str:
    return f"{value / 2**30:.2f}" if value else "-"


HEADER = ["size", "engine", "triples", "load s", "triples/s", "B/triple", "load RSS GB", "open s", "query RSS GB",
          "query", "n", "cold p50 ms", "cold p95 ms", "warm p50 ms", "warm p95 ms"]


def table_rows(size: int, loaded: LoadResult, queried: QueryResult) -> list[list[str]]:
    rows = []
    for number, kind in enumerate(QUERY_KINDS):
        cold, warm = queried.times[kind]["cold"], queried.times[kind]["warm"]
        n = f"{len(cold)}" + (f" ({queried.errors[kind]} failed)" if queried.errors[kind] else "") + (
            f" ({queried.skipped[kind]} over budget)" if queried.skipped[kind] else "")
        head = ([size_label(size), loaded.engine, f"{loaded.triples:,}", f"{loaded.seconds:.1f}",
                 f"{loaded.triples / loaded.seconds:,.0f}", f"{loaded.disk / max(loaded.triples, 1):.0f}",
                 _gb(loaded.rss), f"{queried.open_s:.2f}", _gb(queried.rss)] if number == 0 else [""] * 9)
        rows.append(head + [kind, n, _ms(cold, 50), _ms(cold, 95), _ms(warm, 50), _ms(warm, 95)])
    return rows


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


# --------------------------------------------------------------------------- main


def _data_folder(given: Path | None) -> Path:
    """--data, else $PPOGA_DATA, else ../shared/data; only for the CWQ sample's relation mix (a Zipf mix without)."""
    if given is not None:
        return given
    return Path(os.environ[ENV_VAR]) if os.environ.get(ENV_VAR, "").strip() else BESIDE_REPO


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def bench_size(size: int, work: Path, args: argparse.Namespace, mix: RelationMix) -> list[list[str]]:
    source = work / f"freebase-{size_label(size)}-seed{args.seed}.nt"
    stored = workload_path(source)
    reuse = source.is_file() and stored.is_file()
    if reuse:
        workload = json.loads(stored.read_text(encoding="utf-8"))
        reuse = len(workload["samples"]["relations"]) == min(args.queries, workload["entities"])
    if reuse:
        _say(f"{size_label(size)}: reusing {source} ({workload['triples']:,} triples)")
    else:
        began = time.monotonic()
        workload = write_graph(source, size, mix, seed=args.seed, queries=args.queries)
        _say(f"{size_label(size)}: wrote {workload['triples']:,} triples ({workload['file_bytes'] / 2**20:,.0f} MB, "
             f"{workload['entities']:,} entities, {workload['mediators']:,} CVTs, {len(workload['hubs'])} hubs) in "
             f"{time.monotonic() - began:.1f} s to {source}")
    rows = []
    for engine in args.engines:
        store = work / f"{source.stem}-{engine}"
        _say(f"{size_label(size)}: loading into {engine} ...")
        loaded = load(engine, source, store, memory_gb=args.virtuoso_memory, timeout=args.timeout)
        _say(f"{size_label(size)}: {engine}: {loaded.triples:,} triples in {loaded.seconds:.1f} s "
             f"({loaded.loader_seconds:.1f} s in the loader's chunks; tree peak RSS {_gb(loaded.tree_rss)} GB) "
             f"{loaded.note}; querying ...")
        if engine == "virtuoso":
            queried = query_virtuoso(store, stored, memory_gb=args.virtuoso_memory, budget=args.budget,
                                     timeout=args.timeout)
        else:
            queried = query_oxigraph(store, stored, budget=args.budget, timeout=args.timeout)
        rows += table_rows(size, loaded, queried)
        _say(markdown(rows[-len(QUERY_KINDS):]))
        if args.keep is None:
            shutil.rmtree(store, ignore_errors=True)
    if args.keep is None:
        source.unlink(missing_ok=True)
        stored.unlink(missing_ok=True)
    return rows


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "query-worker":
        return query_worker(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1M,5M,20M", help="comma-separated triple counts, e.g. 200k,1M,5M,20M")
    parser.add_argument("--engines", default="oxigraph,virtuoso", help="comma-separated: oxigraph, virtuoso")
    parser.add_argument("--queries", type=int, default=200, help="calls of each query kind (hubs: at most their "
                                                                 "number)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--virtuoso-memory", type=float, default=None, metavar="GB",
                        help="`--memory` for Virtuoso's load and serve (default: the loader's, half the RAM)")
    parser.add_argument("--budget", type=float, default=300.0, metavar="S",
                        help="seconds of cold calls per query kind; a kind over it runs no more samples (the n column "
                             "says how many were left out) and the warm pass repeats the calls made")
    parser.add_argument("--timeout", type=float, default=6 * 3600.0, metavar="S", help="per load / query phase")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="write files and stores here and keep them (default: a temporary folder, removed)")
    add_data_option(parser)
    args = parser.parse_args()
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    except argparse.ArgumentTypeError as exc:
        parser.error(f"--sizes: {exc}")
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(args.engines) - {"oxigraph", "virtuoso"}
    if unknown:
        parser.error(f"--engines: unknown {sorted(unknown)}; choose oxigraph, virtuoso")
    if "virtuoso" in args.engines:
        from ppoga_dspy.kg.servers import virtuoso_home

        if virtuoso_home() is None:
            parser.error("Virtuoso is not unpacked: run scripts/setup_virtuoso.sh, or pass --engines oxigraph")
    mix = RelationMix.from_data(_data_folder(args.data))
    _say(f"relation mix: {mix.source}")
    began = time.monotonic()
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="kg-scale-") as scratch:
        work = args.keep if args.keep is not None else Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        for size in sizes:
            rows += bench_size(size, work, args, mix)
    print(markdown(rows))
    print(f"\n{len(sizes)} size(s), {len(args.engines)} engine(s) in {time.monotonic() - began:.0f} s; cold: first run "
          "of each call after opening the store (its files out of the page cache), warm: the same calls again; "
          "load s: the loader child's wall time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
