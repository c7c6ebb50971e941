"""Write data/demo/train-questions.jsonl: training questions over the demo KG, disjoint from its 35 questions.

The default compiled artifact of the embedded model (`ppoga_dspy/data/embedded-demo.json`) is compiled
on these, never on the demo questions it is measured on. Each training question takes one demo
question's wording and gold path and puts another topic entity of the same type in its place; the
answers are read off the KG by walking the path (simple paths only, as the demo's own questions).
A (topic entity, path) pair of a demo question is never reused, so no demo question appears here.

    python scripts/make_demo_train.py            # rewrites data/demo/train-questions.jsonl
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyoxigraph as ox

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
NS = "http://rdf.freebase.com/ns/"
PER_TEMPLATE = 4

# Wordings beyond the demo's own, with their gold paths. The questions the README and `ppoga ask` show
# (the default "Where was the director of Inception born?", "Who is the spouse of Christopher Nolan?")
# are held out: their topic entity is excluded, so neither is ever a training question.
EXTRA_TEMPLATES = [
    {"id": "extra-1", "question": "Where was the director of {} born?", "type": "2-hop", "hops": 2,
     "path": ["film.film.directed_by", "people.person.place_of_birth"], "held_out": ["Inception"]},
    {"id": "extra-2", "question": "Who is the spouse of {}?", "type": "cvt", "hops": 2,
     "path": ["people.person.spouse_s", "people.marriage.spouse"], "held_out": ["Christopher Nolan"]},
    {"id": "extra-3", "question": "In which city was the composer of {} born?", "type": "2-hop", "hops": 2,
     "path": ["film.film.music", "people.person.place_of_birth"], "held_out": []},
]


def _store() -> ox.Store:
    store = ox.Store()
    store.load(path=str(DEMO / "demo-kg.nt"), format=ox.RdfFormat.N_TRIPLES)
    return store


def _objects(store: ox.Store, subject: str, predicate: str) -> list:
    return [q.object for q in store.quads_for_pattern(ox.NamedNode(NS + subject), ox.NamedNode(NS + predicate), None)]


def _names(store: ox.Store, node: ox.NamedNode, predicate: str) -> list[str]:
    return [q.object.value for q in store.quads_for_pattern(node, ox.NamedNode(NS + predicate), None)]


def _walk(store: ox.Store, start: str, path: list[str]) -> list:
    """End nodes of the simple walks from `start` along `path` (no node twice on one walk)."""
    walks = [[ox.NamedNode(NS + start)]]
    for relation in path:
        walks = [walk + [nxt] for walk in walks if isinstance(walk[-1], ox.NamedNode)
                 for nxt in _objects(store, walk[-1].value[len(NS):], relation) if nxt not in walk]
    ends = []
    for walk in walks:
        if walk[-1] not in ends:
            ends.append(walk[-1])
    return ends


def _answer(store: ox.Store, node) -> tuple[str | None, list[str]]:
    if isinstance(node, ox.Literal):
        return None, [node.value]
    names = _names(store, node, "type.object.name")
    return node.value[len(NS):], names + [a for a in _names(store, node, "common.topic.alias") if a not in names]


def _answer_names(answers: list[tuple[str | None, list[str]]]) -> list[str]:
    """Each answer's name first, then the aliases (the demo's `answers` layout)."""
    return [names[0] for _, names in answers] + [a for _, names in answers for a in names[1:]]


def main() -> None:
    store = _store()
    demo = [json.loads(line) for line in (DEMO / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line]
    used = {(next(iter(q["topic_entities"])), tuple(q["path"])) for q in demo}
    typed: dict[str, list[str]] = {}
    for quad in store.quads_for_pattern(None, ox.NamedNode(NS + "type.object.type"), None):
        typed.setdefault(quad.object.value, []).append(quad.subject.value[len(NS):])
    rng = random.Random(0)
    out = []
    for q in demo:
        if len(q["topic_entities"]) != 1:
            continue  # a second topic entity constrains the walk; swapping one of them breaks the question
        topic, name = next(iter(q["topic_entities"].items()))
        if name not in q["question"]:
            continue
        types = [t.value for t in _objects(store, topic, "type.object.type")]
        peers = sorted({e for t in types for e in typed.get(t, []) if e != topic})
        rng.shuffle(peers)
        made = 0
        for peer in peers:
            if made == PER_TEMPLATE or (peer, tuple(q["path"])) in used:
                continue
            peer_names = _names(store, ox.NamedNode(NS + peer), "type.object.name")
            ends = _walk(store, peer, q["path"])
            if not peer_names or not ends:
                continue
            answers = [_answer(store, end) for end in ends]
            if any(not names for _, names in answers):
                continue  # an unnamed end node (a mediator) is no answer
            made += 1
            used.add((peer, tuple(q["path"])))
            out.append({
                "id": f"train-{len(out) + 1:03d}", "question": q["question"].replace(name, peer_names[0]),
                "topic_entities": {peer: peer_names[0]},
                "answers": _answer_names(answers),
                "answer_ids": [i for i, _ in answers if i], "answer_groups": [names for _, names in answers],
                "hops": q["hops"], "path": q["path"], "type": q["type"], "template": q["id"],
            })
    for template in EXTRA_TEMPLATES:
        first = ox.NamedNode(NS + template["path"][0])
        peers = sorted({q.subject.value[len(NS):] for q in store.quads_for_pattern(None, first, None)})
        rng.shuffle(peers)
        made = 0
        for peer in peers:
            names = _names(store, ox.NamedNode(NS + peer), "type.object.name")
            if made == PER_TEMPLATE or not names or names[0] in template["held_out"]:
                continue
            if (peer, tuple(template["path"])) in used:
                continue
            answers = [_answer(store, end) for end in _walk(store, peer, template["path"])]
            if not answers or any(not n for _, n in answers):
                continue
            made += 1
            used.add((peer, tuple(template["path"])))
            out.append({
                "id": f"train-{len(out) + 1:03d}", "question": template["question"].format(names[0]),
                "topic_entities": {peer: names[0]}, "answers": _answer_names(answers),
                "answer_ids": [i for i, _ in answers if i], "answer_groups": [ns for _, ns in answers],
                "hops": template["hops"], "path": template["path"], "type": template["type"],
                "template": template["id"],
            })
    target = DEMO / "train-questions.jsonl"
    target.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in out), encoding="utf-8")
    print(f"wrote {len(out)} training questions to {target}")


if __name__ == "__main__":
    main()
