"""MetaQA (vanilla) 1-, 2- and 3-hop questions over the WikiMovies KB -> `dspy.Example`s.

A question line is `what films did [Tom Hanks] star in<TAB>Big|Cast Away|...`: the topic entity is
the text in brackets (the question keeps the words, without the brackets), the answers the `|` list.
`NAME_qtype.txt` beside the file gives each line's template (`actor_to_movie_to_director`), which
names the gold relation path with its directions: every hop joins a movie to something, `movie_to_X`
follows X's relation forwards (`movie_to_director` = `directed_by`), `X_to_movie` backwards
(`actor_to_movie` = `starred_actors` reversed).

Metadata, beyond the common fields (see datasets.py):
- `path`: the relations as the program's relation menu writes them (`starred_actors (reverse)` for a
  backwards hop), so the scripted planners match them against the menu as they are;
  `relations` / `directions`: the plain relation names and `out`/`in` per hop.
- `group`: the gold chains in the IRN path text the scripted planners read (`topic#r1#e1#r2#answer`, one
  branch per on-path entity of the widest hop, joined by `*`): the entities on some path from the
  topic to an answer, hop by hop (names holding `#` or `*` are left out of it).
- `reachable`: whether any answer is reached from the topic along the gold path in this KB;
  `answers_reached`: how many of the answers are. The shared copy of the KB misses about 3.4k of the
  original triples (../shared/data/README.md), so a question with no reachable answer is the data's
  ceiling, not the method's miss; reports count it apart.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from ppoga_dspy.text import TEXT_ENCODING
from ppoga_dspy.text import lines as text_lines

# A template word -> the KB relation that joins a movie to it (forwards: movie -> X).
TEMPLATE_RELATIONS = {
    "director": "directed_by", "actor": "starred_actors", "writer": "written_by", "year": "release_year",
    "genre": "has_genre", "tags": "has_tags", "tag": "has_tags", "language": "in_language",
    "imdbrating": "has_imdb_rating", "imdbvotes": "has_imdb_votes",
}
_TOPIC = re.compile(r"\[([^\]]+)\]")
_MAX_LAYER = 1000  # on-path entities kept per hop for the scripted planners (hubs reach thousands)


def template_path(template: str) -> list[tuple[str, str]]:
    """`actor_to_movie_to_director` -> [("starred_actors", "in"), ("directed_by", "out")].

    >>> template_path("movie_to_writer_to_movie")
    [('written_by', 'out'), ('written_by', 'in')]
    """
    words = template.strip().split("_to_")
    if len(words) < 2 or any(w != "movie" and w not in TEMPLATE_RELATIONS for w in words):
        raise ValueError(f"unknown MetaQA template {template!r}")
    path = []
    for left, right in zip(words, words[1:], strict=False):
        if (left == "movie") == (right == "movie"):
            raise ValueError(f"MetaQA template {template!r}: every hop joins a movie to something else")
        path.append((TEMPLATE_RELATIONS[right], "out") if left == "movie" else (TEMPLATE_RELATIONS[left], "in"))
    return path


def menu_key(relation: str, direction: str) -> str:
    """The relation as the program's menu writes it: `r`, or `r (reverse)` when followed backwards."""
    return relation if direction == "out" else f"{relation} (reverse)"


class KBIndex:
    """The KB's facts by (entity, relation, direction), in memory: reachability and gold chains at load time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.edges: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        with path.open(encoding=TEXT_ENCODING, newline="\n") as handle:  # a BOM is not part of the first name
            for number, line in enumerate(handle, 1):
                parts = [p.strip() for p in line.rstrip("\r\n").split("|")]
                if len(parts) == 1 and not parts[0]:
                    continue
                if len(parts) != 3 or not all(parts):
                    raise ValueError(f"{path}:{number}: expected head|relation|tail")
                head, relation, tail = parts
                self.edges[(head, relation, "out")].add(tail)
                self.edges[(tail, relation, "in")].add(head)
        self.entities = {key[0] for key in self.edges}

    def layers(self, topic: str, path: list[tuple[str, str]]) -> list[set[str]]:
        """The entities reached after each hop, walking the whole path forwards from the topic."""
        frontier, out = {topic}, []
        for relation, direction in path:
            frontier = {t for e in frontier for t in self.edges.get((e, relation, direction), ())}
            out.append(frontier)
        return out

    def on_path(self, topic: str, path: list[tuple[str, str]], answers: set[str]) -> list[set[str]]:
        """Per hop, the reached entities that lead on to an answer (the last hop: the answers reached)."""
        forward = self.layers(topic, path)
        if not forward:
            return []
        kept = [set() for _ in forward]
        kept[-1] = forward[-1] & answers
        for hop in range(len(path) - 1, 0, -1):
            relation, direction = path[hop]
            back = "in" if direction == "out" else "out"
            kept[hop - 1] = {s for e in kept[hop] for s in self.edges.get((e, relation, back), ())} & forward[hop - 1]
        return kept


@lru_cache(maxsize=2)
def _kb_index(path: str, size: int, mtime: int) -> KBIndex:
    return KBIndex(Path(path))


def kb_index(path: Path) -> KBIndex:
    stat = path.stat()
    return _kb_index(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def qtype_file(path: Path) -> Path:
    """`2hop_qa_test.txt` -> `2hop_qa_test_qtype.txt` beside it."""
    return path.with_name(f"{path.stem}_qtype{path.suffix}")


def default_kb(path: Path) -> Path:
    """The KB beside the questions (`kb.txt`), as the MetaQA release lays it out."""
    return path.parent / "kb.txt"


def _chains_text(topic: str, keys: list[str], on_path: list[set[str]]) -> str:
    """The on-path entities as IRN path text, one branch per entity of the widest hop (see the module doc)."""
    clean = [sorted(n for n in layer if "#" not in n and "*" not in n)[:_MAX_LAYER] for layer in on_path]
    if not clean or not all(clean) or "#" in topic or "*" in topic:
        return ""
    branches = []
    for k in range(max(len(layer) for layer in clean)):
        parts = [topic]
        for key, layer in zip(keys, clean, strict=True):
            parts += [key, layer[k % len(layer)]]
        branches.append("#".join(parts))
    return "*".join(branches)


def load_metaqa(path: Path, kb: Path | None = None) -> list:
    """The questions of one MetaQA file, with their templates' gold paths and reachability on `kb`.

    `kb` defaults to `kb.txt` beside the questions; when there is none, the examples carry no gold chains
    and `reachable` is None (the program still runs on the KG named with `--kg`)."""
    from ppoga_dspy.datasets.examples import DatasetError, make_example

    types_path = qtype_file(path)
    if not types_path.is_file():
        raise ValueError(f"the templates file {types_path.name} is not beside {path.name}; MetaQA ships one per file")
    kb_path = kb or default_kb(path)
    index = kb_index(kb_path) if kb_path.is_file() else None  # elsewhere (--kg): no chains, reachability unknown
    # utf-8-sig and newlines only (ppoga_dspy.text): a BOM is no part of the first template, a U+2028 in a
    # question does not cut it in two; line numbers are the file's own, blank lines counted
    templates = [line.strip() for line in text_lines(types_path.read_text(encoding=TEXT_ENCODING)) if line.strip()]
    numbered = [(n, line) for n, line in enumerate(text_lines(path.read_text(encoding=TEXT_ENCODING)), 1)
                if line.strip()]
    if len(templates) != len(numbered):
        raise ValueError(f"{types_path.name} has {len(templates)} templates for {len(numbered)} questions")
    examples = []
    for position, ((line_number, line), template) in enumerate(zip(numbered, templates, strict=True), 1):
        where = f"{path}:{line_number}"
        text, sep, answer_col = line.partition("\t")
        topic = _TOPIC.search(text)
        if not sep or topic is None:
            raise DatasetError(f"{where}: expected `question with [topic]<TAB>answer|answer`")
        path_dirs = template_path(template)
        answers = [a.strip() for a in answer_col.split("|") if a.strip()]
        name = topic.group(1).strip()
        if not answers:  # it could only be scored as a miss, after its LM calls were paid
            raise DatasetError(f"{where}: no answers; a MetaQA line ends with a tab and answer|answer (fill or "
                               "remove the line)")
        if not name:
            raise DatasetError(f"{where}: the topic entity in [ ] is blank; name the entity inside the brackets")
        number = position  # ids count questions (blank lines skipped), as they always have
        on_path = index.on_path(name, path_dirs, set(answers)) if index and name in index.entities else []
        reached = on_path[-1] if on_path else set()
        keys = [menu_key(r, d) for r, d in path_dirs]
        examples.append(make_example(
            id=f"{path.stem}-{number:05d}", question=_TOPIC.sub(lambda m: m.group(1), text).strip(),
            topic_entities={name: name}, answers=answers, answer_ids=answers, dataset="metaqa", source=path.name,
            type=template, level=f"{len(path_dirs)}-hop", hops=len(path_dirs), path=keys,
            relations=[r for r, _ in path_dirs], directions=[d for _, d in path_dirs],
            group=_chains_text(name, keys, on_path) or f"{path.stem}-{number:05d}",
            reachable=bool(reached) if index else None, answers_reached=len(reached) if index else None,
        ))
    return examples


def ceiling(examples: list) -> dict[str, Any]:
    """How many questions have a reachable answer on the KB (per hop count): the best Hits@1 any method can score."""
    by_hops: dict[str, list[bool]] = defaultdict(list)
    for example in examples:
        meta = getattr(example, "metadata", {}) or {}
        if meta.get("reachable") is not None:
            by_hops[str(meta.get("hops"))].append(bool(meta["reachable"]))
    return {hops: {"n": len(flags), "reachable": sum(flags), "ceiling": sum(flags) / len(flags)}
            for hops, flags in sorted(by_hops.items())}
