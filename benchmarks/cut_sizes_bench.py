"""The relation menu's width and the evidence budget, sized by measurement on dev and training questions.

Two cuts the program makes before the model sees anything (issue 29, point 4):

- **the relation menu** (`relation_candidates`): at each frontier entity the program ranks the entity's
  relations by embedding similarity and shows the best W. For every gold hop, this script stands on the
  hop's on-path entities (up to `frontier_limit` of them, the way home known, as the program does) and asks
  the program's own menu code (`Executor.relation_menu`, both stage modes use it) for the whole ranked menu;
  the recall at W is the share of (hop, entity) menus whose first W hold a gold relation. The menus are
  ranked by similarity to the **question alone**: the step a planner writes is not known without a model
  (the scripted planners write "follow relation R", which puts R first and would measure nothing).
- **the evidence budget** (`evidence_tokens`): the gold-path planner (`oracle/gold-path`) and one that errs
  (`oracle/noisy:0.2`, whose detours add chains and facts) walk each question, paper stages, with no budget
  (100,000 tokens); from the final memory, the program's own evidence order (`KnowledgeMemory.held`:
  reasoning chains first, then the other facts, counted as `FactGroups` counts tokens) gives the smallest
  budget at which Answer's evidence holds a whole gold chain (topic -> ... -> a gold answer), and the
  smallest at which it also names every gold answer the walk reached. Fused stages read no more than this
  (their last judgement reads the earlier steps' chains within the budget and the step's facts beside it);
  `--fused-check` walks the MetaQA sample with fused stages at the chosen budget and at none.

Rows (dev splits or training files only; nothing here reads a test split but the one CWQ check row):
MetaQA 1/2/3-hop dev (a seeded sample, `metaqa_bench.sample`), the demo KG's training questions
(`demo-train`, Freebase dialect, 36 through mediators), PQL-3H dev (Freebase relation names), and the CWQ
subgraph sample. The CWQ sample carries no gold paths and its two dev questions have no answer in their
subgraphs; its gold relations are a stated proxy: the relations that begin a shortest path (in the
program's steps: a mediator is read through, not stood on) from the topic entity to an answer entity in
the question's own subgraph. The 4 training questions with an answer in their subgraph are a row; the one
test question with an answer there is printed apart, as a check (its SPARQL's relations, with their
Freebase paired reverses, are exactly that proxy's), and is not used to choose.

    python benchmarks/cut_sizes_bench.py [--n 200] [--n-evidence 100] [--seed 0] [--fused-check]

It prints the two tables and the defaults they choose: the smallest W whose recall is >= 0.99 on every row
but the test check, and the smallest budget (of --budgets) that holds every gold chain and names every gold
answer reached on every row but the test check.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# One torch thread: on a shared machine the default OpenMP team spins at its barriers and the MiniLM encoder that
# ranks menus and prunes candidates ran six times slower (docs/metaqa.md says the same of the embedded model).
os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import add_data_option, data_dir  # noqa: E402
from metaqa_bench import sample  # noqa: E402

WIDTHS = (3, 5, 8, 10, 15, 20, 25, 30, 40)
BUDGETS = (200, 300, 400, 500, 600, 800, 1200, 1600)
NO_BUDGET = 100_000  # the most `evidence_tokens` accepts: nothing is cut
FULL_MENU = 500  # the most `relation_candidates` accepts: the whole ranked menu
LAYER_CAP = 2000  # on-path entities walked per hop (MetaQA's genre hubs reach 4,000 films)
TARGET = 0.99
# The planners whose walks size the evidence: the perfect one, and one that errs (its detours add chains and facts).
PLANNERS = {"gold-path": "oracle/gold-path", "noisy P=0.2": "oracle/noisy:0.2"}


@dataclass(frozen=True)
class Hop:
    """One gold hop seen from one on-path entity: the menu there must hold one of `gold` (menu keys)."""

    row: str
    question: str
    entity: Any  # kg.base.Entity
    arrived_by: Any  # kg.base.Triple that reached `entity`, None at a topic entity
    gold: frozenset[str]


# -- walking gold paths ------------------------------------------------------------------------------------------


def walked_hops(row: str, question: str, topic: Any, relations: list[str], answers: set[str], neighbors,
                sources: int = 3) -> list[Hop]:
    """The hops of one gold path: per semantic hop (a mediator is read through, as the program reads it), the
    first `sources` on-path entities by id, each with the fact that reached it and the hop's menu key.

    `neighbors(entity_id, relation, direction)` -> entities (mediators with their facts); `answers` holds ids or
    names; on-path = some walk along the rest of the path from it reaches an answer."""
    from ppoga_dspy.kg.base import Direction, Relation, Triple
    from ppoga_dspy.method.memory import relation_key
    from ppoga_dspy.scripted.gold_path import walk_directions

    layers: list[tuple[str, dict[str, tuple[Any, Any, set[str]]]]] = []  # (key, child id -> (entity, fact, parents))
    frontier = {topic.id: topic}
    i = 0
    while i < len(relations) and frontier:
        name, directions = walk_directions(relations[i])
        reached: dict[str, tuple[Any, Any, set[str]]] = {}
        through = False
        for direction in directions:
            for pid in sorted(frontier)[:LAYER_CAP]:
                parent = frontier[pid]
                for other in neighbors(pid, name, direction):
                    if other.is_mediator and i + 1 < len(relations):  # read through to the next relation
                        inner_name = walk_directions(relations[i + 1])[0]
                        through = True
                        for relation, inner in other.facts:
                            if relation == inner_name and inner.id != pid:
                                reached.setdefault(inner.id, (inner, Triple(other, relation, inner), set()))[2].add(pid)
                        continue
                    fact = Triple(parent, name, other) if direction is Direction.OUT else Triple(other, name, parent)
                    reached.setdefault(other.id, (other, fact, set()))[2].add(pid)
            if reached:
                layers.append((relation_key(Relation(name, direction)), reached))
                break
        if not reached:
            return []
        frontier = {cid: entity for cid, (entity, _, _) in reached.items()}
        i += 2 if through else 1
    if i < len(relations) or not layers:
        return []
    kept = {cid for cid, (entity, _, _) in layers[-1][1].items() if cid in answers or entity.label in answers}
    on_path: list[set[str]] = [set() for _ in layers]
    for k in range(len(layers) - 1, -1, -1):
        on_path[k] = kept
        kept = {pid for cid in kept for pid in layers[k][1][cid][2]}
    if topic.id not in kept:
        return []
    hops = [Hop(row, question, topic, None, frozenset({layers[0][0]}))]
    for k in range(1, len(layers)):
        for cid in sorted(on_path[k - 1])[:sources]:
            entity, fact, _ = layers[k - 1][1][cid]
            hops.append(Hop(row, question, entity, fact, frozenset({layers[k][0]})))
    return hops


def metaqa_hops(data: Path, hop: int, n: int, seed: int) -> tuple[list[Hop], list, int]:
    """(hops, the sampled questions with a reachable answer, sample size) of MetaQA `hop`-hop dev."""
    from ppoga_dspy.datasets.loaders import load_dataset
    from ppoga_dspy.datasets.metaqa import kb_index
    from ppoga_dspy.kg.base import Entity

    chosen = sample(load_dataset(f"metaqa:{data / 'metaqa' / f'{hop}hop_qa_dev.txt'}"), n, seed)
    index = kb_index(data / "metaqa" / "kb.txt")

    def neighbors(entity: str, relation: str, direction) -> list:
        return [Entity(x, x) for x in sorted(index.edges.get((entity, relation, direction.value), ()))]

    hops, reachable = [], []
    for example in chosen:
        if not example.metadata.get("reachable"):
            continue
        reachable.append(example)
        topic = next(iter(example.topic_entities))
        hops += walked_hops(f"metaqa {hop}-hop dev", example.question, Entity(topic, topic),
                            list(example.metadata["path"]), set(example.answers), neighbors)
    return hops, reachable, len(chosen)


def kg_hops(row: str, examples: list, kg: Any) -> list[Hop]:
    """Hops of datasets whose gold path is walked on their own KG (the demo KG, PathQuestion's KBs)."""
    from ppoga_dspy.kg.base import Entity

    def neighbors(entity: str, relation: str, direction) -> list:
        return kg.neighbors(entity, relation, direction, LAYER_CAP)

    hops = []
    for example in examples:
        topic_id, label = next(iter(example.topic_entities.items()))
        answers = set(example.answer_ids) | set(example.answers)
        hops += walked_hops(row, example.question, Entity(topic_id, label), list(example.metadata["path"]),
                            answers, neighbors)
    return hops


# -- the CWQ sample: gold relations from shortest paths in each question's own subgraph ---------------------------


def cwq_gold(item: dict[str, Any], vocab: Any, max_hops: int = 3) -> list[dict[str, Any]]:
    """The shortest paths, in the program's steps, from each topic entity to an answer in one NSM subgraph.

    A step goes from a named node over one relation to a named node, or through an unnamed node (a mediator,
    read through over one of its outgoing facts, as the program reads it) to a named node beyond. One entry per
    topic entity with an answer within `max_hops` steps, nearest first: the topic, its distance, and the steps on
    its shortest paths (`edges[u] = {(menu key, v, (mediator, its relation) or None)}`)."""
    named = {i for i in range(len(vocab.ids)) if vocab.name(i) is not None}
    out: dict[int, list[tuple[str, int]]] = defaultdict(list)
    into: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for head, relation, tail in item["subgraph"]["tuples"]:
        out[head].append((vocab.relations[relation], tail))
        into[tail].append((vocab.relations[relation], head))

    def steps(u: int) -> list[tuple[str, int, tuple[int, str] | None]]:
        found = []
        for relation, v in out[u]:
            found.append((relation, v, None))
        for relation, v in into[u]:
            found.append((f"{relation} (reverse)", v, None))
        kept = []
        for key, v, _ in found:
            if v in named:
                kept.append((key, v, None))
            else:  # a mediator: read through its outgoing facts
                kept += [(key, w, (v, relation)) for relation, w in out[v] if w in named and w != u]
        return kept

    answers = {vocab.ids.index(a["kb_id"]) for a in item["answers"] if a.get("kb_id") in vocab.ids}
    found = []
    for topic in item["entities"]:
        dist, parents, queue = {topic: 0}, defaultdict(list), deque([topic])
        while queue:
            u = queue.popleft()
            if dist[u] >= max_hops:
                continue
            for key, w, via in steps(u):
                if w not in dist:
                    dist[w] = dist[u] + 1
                    queue.append(w)
                if dist[w] == dist[u] + 1:
                    parents[w].append((u, key, via))
        reached = [a for a in answers if a in dist]
        if not reached:
            continue
        depth = min(dist[a] for a in reached)
        edges: dict[int, set] = defaultdict(set)  # back from the nearest answers, one step at a time
        layer = nearest = {a for a in reached if dist[a] == depth}
        for _ in range(depth):
            above = set()
            for w in layer:
                for u, key, via in parents[w]:
                    edges[u].add((key, w, via))
                    above.add(u)
            layer = above
        found.append({"topic": topic, "depth": depth, "edges": edges, "answers": nearest})
    return sorted(found, key=lambda g: (g["depth"], vocab.entity(g["topic"])))


def cwq_rows(folder: Path, split: str, row: str, sources: int = 3) -> tuple[list[Hop], list, int]:
    """(hops, gold examples for the gold-path planner, questions in the split) of one split of the CWQ sample."""
    from ppoga_dspy.datasets.loaders import load_dataset
    from ppoga_dspy.datasets.nsm import vocabulary
    from ppoga_dspy.kg.base import Entity, Triple

    path = folder / f"{split}_simple.json"
    vocab = vocabulary(folder)
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    examples = load_dataset(f"nsm:{path}")
    def entity(i: int) -> Entity:
        return Entity(vocab.entity(i), vocab.name(i) or vocab.entity(i))

    def fact(u: int, key: str, w: int, via: tuple[int, str] | None) -> Triple:
        """The fact a step from u reaches w by (through a mediator: the mediator's own fact, as the program keeps)."""
        if via is not None:
            return Triple(Entity(vocab.entity(via[0]), vocab.entity(via[0])), via[1], entity(w))
        name = key.removesuffix(" (reverse)")
        return Triple(entity(w), name, entity(u)) if key.endswith(" (reverse)") else Triple(entity(u), name, entity(w))

    hops, golds = [], []
    for item, example in zip(items, examples, strict=True):
        found = cwq_gold(item, vocab)
        for gold in found:  # every topic entity with an answer near: the program explores from each
            edges, frontier, arrived = gold["edges"], [gold["topic"]], {gold["topic"]: None}
            for _ in range(gold["depth"]):
                nxt: dict[int, Any] = {}
                for u in sorted(frontier, key=vocab.entity)[:sources]:
                    hops.append(Hop(row, example.question, entity(u), arrived[u],
                                    frozenset(k for k, _, _ in edges[u])))
                for u in frontier:
                    for key, w, via in sorted(edges[u], key=_preferred):
                        nxt.setdefault(w, fact(u, key, w, via))
                frontier, arrived = list(nxt), nxt
        if found:
            golds.append(_gold_example(example, found[0], vocab))
    return hops, golds, len(items)


def _preferred(edge: tuple[str, int, Any]) -> tuple[bool, str, int]:
    """Steps in a stable order, forward relations first (Freebase stores most facts both ways)."""
    return edge[0].endswith(" (reverse)"), edge[0], edge[1]


def _gold_example(example: Any, gold: dict[str, Any], vocab: Any) -> Any:
    """The question with one shortest path as its gold path, walked from its topic (for `oracle/gold-path`):
    the forward relation where there is one, a mediator's two relations as two path entries."""
    u, keys, names = gold["topic"], [], [vocab.name(gold["topic"]) or vocab.entity(gold["topic"])]
    for _ in range(gold["depth"]):
        key, w, via = sorted(gold["edges"][u], key=_preferred)[0]
        if via is not None:
            keys += [key, via[1]]
            names += [vocab.entity(via[0])]
        else:
            keys.append(key)
        names.append(vocab.name(w) or vocab.entity(w))
        u = w
    group = names[0] + "".join(f"#{k}#{n}" for k, n in zip(keys, names[1:], strict=True))
    meta = {**example.metadata, "path": keys, "paths": [keys], "group": group,
            "gold_ids": [vocab.entity(a) for a in sorted(gold["answers"])]}
    topic = vocab.entity(gold["topic"])
    return example.copy(topic_entities={topic: example.topic_entities.get(topic, topic)}, metadata=meta)


# -- the menu ------------------------------------------------------------------------------------------------------


def menu_ranks(program: Any, hops: list[Hop]) -> list[tuple[int | None, int]]:
    """Per hop: (the best rank of a gold relation in the whole ranked menu, or None when none is on it; the menu's
    size), from the program's own `Executor.relation_menu` ranking by similarity to the question."""
    from ppoga_dspy.method.memory import Memory, StrategicMemory, relation_key
    from ppoga_dspy.method.question_run import QuestionRun
    from ppoga_dspy.method.tools import KGTools

    thresholds = program.thresholds.model_copy(update={"relation_candidates": FULL_MENU})
    out = []
    for hop in hops:
        memory = Memory(StrategicMemory(question=hop.question))
        run = QuestionRun(memory=memory, thresholds=thresholds, tools=None)
        run.tools = KGTools(program.kg, run.costs, memory)
        menu = program.executor.relation_menu(run, hop.entity, hop.question, arrived_by=hop.arrived_by)
        keys = [relation_key(r) for r in menu.shown] if menu is not None else []
        ranks = [i for i, key in enumerate(keys) if key in hop.gold]
        out.append((min(ranks) if ranks else None, len(keys)))
    return out


def recall_table(ranked: dict[str, list[tuple[int | None, int]]], widths: tuple[int, ...]) -> str:
    head = ("| rows | menus | menu size mean / max | gold not on the whole menu | "
            + " | ".join(f"W={w}" for w in widths) + " |")
    lines = [head, "|" + "---|" * (len(widths) + 4)]
    for row, pairs in ranked.items():
        sizes = [size for _, size in pairs]
        cells = [f"{sum(r is not None and r < w for r, _ in pairs) / len(pairs):.3f}" for w in widths]
        lines.append(f"| {row} | {len(pairs)} | {sum(sizes) / len(sizes):.1f} / {max(sizes)} | "
                     f"{sum(r is None for r, _ in pairs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- the evidence --------------------------------------------------------------------------------------------------


def _entity(data: dict[str, Any]) -> Any:
    from ppoga_dspy.kg.base import Entity

    facts = tuple((f["relation"], _entity(f["entity"])) for f in data.get("facts") or ())
    return Entity(data["id"], data["label"], facts, bool(data.get("literal")))


def _triple(data: dict[str, Any]) -> Any:
    from ppoga_dspy.kg.base import Triple

    return Triple(_entity(data["head"]), data["relation"], _entity(data["tail"]))


def _key(triple: Any) -> tuple[str, str, str]:
    return triple.head.id, triple.relation, triple.tail.id


def _least(holds) -> int | None:
    """The smallest budget in [1, NO_BUDGET] for which `holds(budget)` (monotone), or None."""
    if not holds(NO_BUDGET):
        return None
    low, high = 0, NO_BUDGET
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if holds(middle) else (middle, high)
    return high


def evidence_needs(program: Any, examples: list) -> list[dict[str, Any]]:
    """Per question walked by `program`: the budgets its Answer's evidence needs (see `_needs`)."""
    out = []
    for example in examples:
        prediction = program(question=example.question, topic_entities=example.topic_entities)
        out.append(_needs(prediction.memory["knowledge"], example))
    return out


def _needs(known: dict[str, Any], example: Any) -> dict[str, Any]:
    """The budget Answer's evidence needs to hold a whole gold chain, and to name every gold answer the walk reached
    as well (None when the walk reached no gold answer), read off the final memory in the program's order."""
    from ppoga_dspy.kg.names import normalize_name
    from ppoga_dspy.method.memory import KnowledgeMemory

    memory = KnowledgeMemory(triples=[_triple(t) for t in known["triples"]],
                             reasoning_chains=[[_triple(t) for t in c] for c in known["reasoning_chains"]])
    ids = set(example.metadata.get("gold_ids") or example.answer_ids or ())
    names = {normalize_name(a) for a in example.answers}

    def gold(entity: Any) -> bool:
        return not entity.is_mediator and (entity.id in ids or normalize_name(entity.label) in names)

    chains = [c for c in memory.reasoning_chains if c and (gold(c[-1].tail) or gold(c[-1].head))]
    reached = {e.id for t in memory.triples for e in (t.head, t.tail) if gold(e)}

    def chain_held(budget: int) -> bool:
        held = {_key(t) for t in memory.held(budget)}
        return any(all(_key(t) in held for t in chain) for chain in chains)

    def all_held(budget: int) -> bool:
        named = {e.id for t in memory.held(budget) for e in (t.head, t.tail) if gold(e)}
        return chain_held(budget) and reached <= named

    if not chains:
        return {"chain": None, "all": None, "answers": len(reached)}
    return {"chain": _least(chain_held), "all": _least(all_held), "answers": len(reached)}


def evidence_table(needs: dict[str, list[dict[str, Any]]], budgets: tuple[int, ...]) -> str:
    head = ("| rows | n | gold chain walked | tokens for a whole gold chain: max / p99 / mean | for every gold answer "
            "reached: max / p99 / mean | " + " | ".join(f"held at {b}" for b in budgets) + " |")
    lines = [head, "|" + "---|" * (len(budgets) + 5)]
    for row, items in needs.items():
        walked = [i for i in items if i["chain"] is not None]
        if not walked:
            lines.append(f"| {row} | {len(items)} | 0 | - | - | " + " | ".join("-" for _ in budgets) + " |")
            continue
        chain = sorted(i["chain"] for i in walked)
        every = sorted(i["all"] for i in walked if i["all"] is not None)
        cells = [f"{sum(c <= b for c in chain) / len(chain):.3f} / {sum(a <= b for a in every) / len(every):.3f}"
                 for b in budgets]
        lines.append(f"| {row} | {len(items)} | {len(walked)} | {_stats(chain)} | {_stats(every)} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def _p99(values: list[int]) -> int:
    return values[min(len(values) - 1, math.ceil(0.99 * len(values)) - 1)]


def _stats(values: list[int]) -> str:
    return f"{values[-1]} / {_p99(values)} / {sum(values) / len(values):.0f}" if values else "-"


# -- main ----------------------------------------------------------------------------------------------------------


def opened(spec: str, *, lm: str = "none", examples: list | None = None, kg: str | None = None,
           stages: str = "paper", budget: int = NO_BUDGET):
    from ppoga_dspy.app.session import ProgramSettings, open_program
    from ppoga_dspy.lm.settings import LMSettings

    settings = ProgramSettings(dataset=spec, kg=kg, dialect="freebase" if kg else None, lm=LMSettings(lm=lm),
                               stages=stages, overrides={"evidence_tokens": str(budget)})
    return open_program(settings, examples=examples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="MetaQA dev questions per hop for the menus (default 200)")
    parser.add_argument("--n-evidence", type=int, default=100,
                        help="MetaQA 3-hop dev questions walked for the evidence (the first of the menus' sample)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--widths", type=int, nargs="+", default=list(WIDTHS))
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    parser.add_argument("--fused-check", action="store_true",
                        help="also walk the MetaQA 3-hop evidence sample (gold-path) with fused stages at the chosen "
                             "budget and at none, and print Hits@1 and F1 of both")
    add_data_option(parser)
    args = parser.parse_args()
    data = data_dir(args.data, needs="metaqa/kb.txt", script="cut_sizes_bench.py")
    widths, budgets = tuple(args.widths), tuple(args.budgets)
    started = time.perf_counter()

    from ppoga_dspy.datasets.loaders import load_dataset

    ranked: dict[str, list[tuple[int | None, int]]] = {}
    needs: dict[str, list[dict[str, Any]]] = {}
    chosen_rows: list[str] = []  # the rows the defaults are chosen on (not the CWQ test check)
    evidence_sample: list = []
    metaqa_spec = f"metaqa:{data / 'metaqa' / '3hop_qa_dev.txt'}"
    with opened(metaqa_spec) as session:
        for hop in (1, 2, 3):
            hops, reachable, n = metaqa_hops(data, hop, args.n, args.seed)
            row = f"metaqa {hop}-hop dev"
            ranked[row] = menu_ranks(session.program, hops)
            chosen_rows.append(row)
            print(f"{row}: {len(hops)} menus of {len(reachable)} reachable of {n} sampled "
                  f"({time.perf_counter() - started:.0f}s)", flush=True)
            if hop == 3:
                evidence_sample = reachable[: args.n_evidence]
    for row, spec, split in (("demo-train (Freebase dialect, mediators)", "demo-train", "all"),
                             ("PQL-3H dev (Freebase relation names)",
                              f"pql:{data / 'pathquestion' / 'PQL-3H.txt'}", "dev")):
        examples = load_dataset(spec, split=split)
        with opened(spec) as session:
            ranked[row] = menu_ranks(session.program, kg_hops(row, examples, session.program.kg))
        chosen_rows.append(row)
        print(f"{row}: {len(ranked[row])} menus of {len(examples)} questions "
              f"({time.perf_counter() - started:.0f}s)", flush=True)

    from ppoga_dspy.datasets.nsm import question_kg_file

    folder = data / "cwq-subgraph-sample"
    cwq_golds: dict[str, list] = {}
    for split, row in (("train", "cwq sample train (proxy gold: shortest paths)"),
                       ("dev", "cwq sample dev (proxy gold: shortest paths)"),
                       ("test", "cwq sample test, check only (gold: shortest paths = SPARQL's)")):
        hops, golds, n = cwq_rows(folder, split, row)
        print(f"{row}: {len(golds)} of {n} questions have an answer in their subgraph", flush=True)
        if not golds:
            continue
        cwq_golds[row] = golds
        ranked[row] = []
        for example in golds:
            spec = f"nsm:{folder / f'{split}_simple.json'}"
            with opened(spec, kg=str(question_kg_file(example))) as session:
                ranked[row] += menu_ranks(session.program, [h for h in hops if h.question == example.question])
        if split != "test":
            chosen_rows.append(row)

    print(f"\nevidence: {len(evidence_sample)} MetaQA 3-hop dev questions, demo-train and the CWQ rows walked "
          f"({time.perf_counter() - started:.0f}s)", flush=True)
    demo = load_dataset("demo-train", split="all")
    for planner, lm in PLANNERS.items():
        with opened(metaqa_spec, lm=lm, examples=evidence_sample) as session:
            needs[f"metaqa 3-hop dev, {planner}"] = evidence_needs(session.program, evidence_sample)
        with opened("demo-train", lm=lm, examples=demo) as session:
            walked = evidence_needs(session.program, demo)
        needs[f"demo-train through a mediator, {planner}"] = [
            w for w, e in zip(walked, demo, strict=True) if e.metadata.get("type") == "cvt"]
        needs[f"demo-train 2 and 3 hops, {planner}"] = [
            w for w, e in zip(walked, demo, strict=True) if e.metadata.get("type") in ("2-hop", "3-hop")]
        for row, golds in cwq_golds.items():
            split = "test" if "test" in row else "train"
            label = f"{row.split(' (')[0]}, {planner}"
            needs[label] = []
            for example in golds:
                spec = f"nsm:{folder / f'{split}_simple.json'}"
                with opened(spec, lm=lm, examples=[example], kg=str(question_kg_file(example))) as session:
                    needs[label] += evidence_needs(session.program, [example])
        print(f"{planner}: walked ({time.perf_counter() - started:.0f}s)", flush=True)

    print("\nGold-relation recall of the relation menu at width W (ranked by similarity to the question):")
    print(recall_table(ranked, widths))
    print("\nEvidence tokens (as `FactGroups` counts them) Answer's evidence needs, paper stages; 'held at B': the "
          "share holding a whole gold chain / also naming every gold answer the walk reached:")
    print(evidence_table(needs, budgets))
    width = next((w for w in widths if all(
        sum(r is not None and r < w for r, _ in ranked[row]) / len(ranked[row]) >= TARGET for row in chosen_rows)),
        None)
    used = [i for row, items in needs.items() if "test" not in row for i in items if i["chain"] is not None]
    chain_max, all_max = max(i["chain"] for i in used), max(i["all"] for i in used)
    budget = next((b for b in budgets if b >= all_max), None)
    print(f"\nsmallest W with gold-relation recall >= {TARGET} on every row but the test check: {width}")
    print(f"every gold chain fits {chain_max} tokens, every gold answer reached as well {all_max}: the smallest budget "
          f"of {list(budgets)} that holds both on every row but the test check: {budget}")
    if args.fused_check and budget is not None:
        for limit in (budget, NO_BUDGET):
            with opened(metaqa_spec, lm=PLANNERS["gold-path"], examples=evidence_sample, stages="fused",
                        budget=limit) as session:
                rows = [_scored(session.program, e) for e in evidence_sample]
            print(f"fused stages, gold-path, metaqa 3-hop dev, evidence_tokens={limit}: Hits@1 "
                  f"{sum(h for h, _ in rows) / len(rows):.3f}, F1 {sum(f for _, f in rows) / len(rows):.3f} "
                  f"(n={len(rows)})")
    print(f"\n({time.perf_counter() - started:.0f}s)")
    return 0


def _scored(program: Any, example: Any) -> tuple[float, float]:
    from ppoga_dspy.evaluation.evaluate import answer_one

    metrics = answer_one(program, example)["metrics"]
    return float(metrics.get("hits@1", 0.0)), float(metrics.get("f1", 0.0))


if __name__ == "__main__":
    sys.exit(main())
