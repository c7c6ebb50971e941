"""Benchmark loaders -> `dspy.Example`, and deterministic, leak-free train/dev/test splits.

Every loader returns examples of one shape, so the program, the evaluator and the optimizers never
look at a file format::

    dspy.Example(
        id=str, question=str,
        topic_entities={entity_id: name},      # ids in the KG's dialect (IRN name, Freebase mid, Wikidata QID)
        answers=[str, ...],                    # every accepted name or alias, best first
        answer_ids=[str, ...],                 # may be empty (literal answers, sets without ids)
        metadata={"dataset", "source", "type", "level", "hops", "path", "paths", "group"[, "answer_groups"]},
    ).with_inputs("question", "topic_entities")

`metadata["path"]` is the gold relation path as a flat list (for a conjunctive question, the
relations of both branches in order; `paths` keeps the branches apart), `[]` when the set has none.
`metadata["group"]` is what `split_examples` keeps together: the gold path for IRN sets (whose
paraphrases share one), the WebQSP question for CWQ, otherwise the question text. `answer_groups`
(one list of aliases per answer, where the file knows them) lets F1 count an answer once.

A spec is `FORMAT:PATH` (`pathquestion:../shared/data/pathquestion/PQ-2H.txt`) or the short name
`demo` (the questions shipped in `data/demo/`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ppoga_dspy.data import DEMO_QUESTIONS, DEMO_TRAIN
from ppoga_dspy.datasets.examples import (
    SPLITS,
    DatasetError,
    DatasetSpecError,
    dedupe,
    make_example,
    sample_examples,
    split_examples,
)
from ppoga_dspy.text import TEXT_ENCODING

_QID = re.compile(r"Q\d+")
_PREFIXES = ("http://rdf.freebase.com/ns/", "ns:", "fb:")


def _mid(entity: str) -> str:
    """`ns:m.0abc` or `http://rdf.freebase.com/ns/m.0abc` -> `m.0abc`."""
    for prefix in _PREFIXES:
        if entity.startswith(prefix):
            return entity[len(prefix):]
    return entity


def _pql_relation(rel: str) -> str:
    """PQL writes Freebase relations as `__people__person__gender`; the KG dialect says `people.person.gender`."""
    return rel[2:].replace("__", ".") if rel.startswith("__") else rel


# --------------------------------------------------------------------------- IRN sets (PQ, PQL, WC2014)


def _gold_path(text: str) -> tuple[list[str], list[str]]:
    """`subj#r1#e1#r2#ans(#<end>#ans)` -> (entities, relations)."""
    parts = text.strip().split("#")
    if "<end>" in parts:
        parts = parts[: parts.index("<end>")]
    if len(parts) < 3 or len(parts) % 2 == 0:
        raise ValueError(f"not an IRN gold path: {text!r}")
    return parts[0::2], [_pql_relation(r) for r in parts[1::2]]


def _pq_answers(column: str) -> list[str]:
    """`answer(alt1/alt2/)` -> [answer, alt1, alt2]; names may hold parentheses (`PG_(USA)(PG_(USA)/)`)."""
    if column.endswith("/)"):
        for i, char in enumerate(column):
            if char == "(":
                alternatives = column[i + 1 : -1].split("/")
                if column[:i] in alternatives:
                    return [column[:i], *alternatives]
        head, _, rest = column[:-1].rpartition("(")
        return [head, *rest.split("/")]
    return [column]


def _irn_lines(path: Path) -> Iterable[tuple[int, list[str]]]:
    with path.open(encoding=TEXT_ENCODING, newline="\n") as f:  # a BOM is no part of the first question
        for number, line in enumerate(f, 1):
            if line.strip():
                yield number, line.rstrip("\n").split("\t")


def _load_pathquestion(path: Path) -> list:
    """PQ (`...#answer#<end>#answer`) and PQL (`...#answer`, relations as `__a__b__c`) lines, told apart per line."""
    examples = []
    for number, cols in _irn_lines(path):
        if len(cols) < 3:
            raise ValueError(f"line {number}: expected question, answer and gold path separated by tabs")
        question, answer_col, gold = cols[0].strip(), cols[1].strip(), cols[2].strip()
        entities, relations = _gold_path(gold)
        answers = dedupe([entities[-1], *_pq_answers(answer_col)])
        examples.append(make_example(
            id=f"{path.stem}-{number:05d}", question=question, topic_entities={entities[0]: entities[0]},
            answers=answers, answer_ids=answers, dataset="pql" if "<end>" not in gold else "pathquestion",
            source=path.name, type=f"{len(relations)}-hop", hops=len(relations), path=relations, group=gold,
        ))
    return examples


def _load_wc2014(path: Path) -> list:
    """WC-P1/P2 (one gold path) and WC-C (two gold paths joined by `*`, two topic entities)."""
    examples = []
    for number, cols in _irn_lines(path):
        if len(cols) < 4:
            raise ValueError(f"line {number}: expected question, answer, gold path and answer set separated by tabs")
        question, answer, gold, answer_set = (c.strip() for c in cols[:4])
        branches = [_gold_path(p) for p in gold.split("*")]
        relations = [r for _, rels in branches for r in rels]
        answers = dedupe([answer, *answer_set.split("/")])
        conjunctive = len(branches) > 1
        examples.append(make_example(
            id=f"{path.stem}-{number:05d}", question=question,
            topic_entities={ents[0]: ents[0] for ents, _ in branches}, answers=answers, answer_ids=answers,
            dataset="wc2014", source=path.name, type="conjunctive" if conjunctive else f"{len(relations)}-hop",
            hops=len(relations), path=relations, paths=[rels for _, rels in branches], group=gold,
        ))
    return examples


# --------------------------------------------------------------------------- ToG / PoG JSON sets


def _json_items(path: Path) -> list[dict]:
    data = json.loads(path.read_text(encoding=TEXT_ENCODING))
    if isinstance(data, dict):  # some releases wrap the list: {"Questions": [...]}
        data = next((v for v in data.values() if isinstance(v, list)), None)
    if not isinstance(data, list):
        raise ValueError("expected a JSON list of question objects")
    return data


def _topics(raw: Any) -> dict[str, str]:
    return {_mid(str(k)): str(v) for k, v in (raw or {}).items()}


def _load_cwq(path: Path) -> list:
    """ComplexWebQuestions; aliases from `cwq_aname_dict.json` beside the file (PoG's evaluation) when present."""
    aname_file = path.with_name("cwq_aname_dict.json")
    anames = json.loads(aname_file.read_text(encoding=TEXT_ENCODING)) if aname_file.is_file() else {}
    return [
        make_example(
            id=str(item.get("ID", f"cwq-{i}")), question=item["question"],
            topic_entities=_topics(item.get("topic_entity")),
            answers=[item.get("answer", ""), *anames.get(item["question"], [])], dataset="cwq", source=path.name,
            type=item.get("compositionality_type"), group=item.get("webqsp_ID") or item["question"],
        )
        for i, item in enumerate(_json_items(path), 1)
    ]


def _load_grailqa(path: Path) -> list:
    """GrailQA: entity answers by name (ids kept), value answers by their argument; `level` and graph relations."""
    examples = []
    for item in _json_items(path):
        answers, ids = [], []
        for ans in item.get("answer", []):
            argument = str(ans.get("answer_argument", ""))
            answers.append(ans.get("entity_name") or argument)
            if ans.get("answer_type") == "Entity":
                ids.append(_mid(argument))
        relations = [e["relation"] for e in (item.get("graph_query") or {}).get("edges", []) if e.get("relation")]
        examples.append(make_example(
            id=str(item["qid"]), question=item["question"], topic_entities=_topics(item.get("topic_entity")),
            answers=answers, answer_ids=ids, dataset="grailqa", source=path.name, type=item.get("function"),
            level=item.get("level"), hops=item.get("num_edge"), path=relations,
        ))
    return examples


def _load_webqsp(path: Path) -> list:
    """WebQSP (ToG's release): `RawQuestion`, answers of every parse, topic entity from the file or the first parse."""
    examples = []
    for i, item in enumerate(_json_items(path), 1):
        parses = item.get("Parses") or []
        answers, ids = [], []
        for parse in parses:
            for ans in parse.get("Answers") or []:
                answers.append(ans.get("EntityName") or ans.get("AnswerArgument", ""))
                if ans.get("AnswerType", "Entity") == "Entity" and ans.get("AnswerArgument"):
                    ids.append(_mid(ans["AnswerArgument"]))
        topics = _topics(item.get("topic_entity"))
        if not topics and parses and parses[0].get("TopicEntityMid"):
            topics = {_mid(parses[0]["TopicEntityMid"]): parses[0].get("TopicEntityName", "")}
        chain = list(parses[0].get("InferentialChain") or []) if parses else []
        question = item.get("RawQuestion") or item.get("ProcessedQuestion") or ""
        examples.append(make_example(
            id=str(item.get("QuestionId", f"webqsp-{i}")), question=question, topic_entities=topics, answers=answers,
            answer_ids=ids, dataset="webqsp", source=path.name, hops=len(chain) or None, path=chain,
        ))
    return examples


def _load_webquestions(path: Path) -> list:
    return [
        make_example(id=f"webquestions-{i}", question=item["question"],
                     topic_entities=_topics(item.get("topic_entity")), answers=item.get("answers") or [],
                     dataset="webquestions", source=path.name)
        for i, item in enumerate(_json_items(path), 1)
    ]


def _load_simpleqa(path: Path) -> list:
    return [
        make_example(id=f"simpleqa-{i}", question=item["question"], topic_entities=_topics(item.get("topic_entity")),
                     answers=[item.get("answer", "")], dataset="simpleqa", source=path.name, type="1-hop", hops=1,
                     path=[item["relation"]] if item.get("relation") else [])
        for i, item in enumerate(_json_items(path), 1)
    ]


def _load_qald10(path: Path) -> list:
    """QALD-10 on Wikidata: answers `{QID: label}` (literal answers map a value to itself), topics by QID."""
    examples = []
    for i, item in enumerate(_json_items(path), 1):
        answer = item.get("answer") or {}
        examples.append(make_example(
            id=f"qald10-{i}", question=item["question"], topic_entities=_topics(item.get("qid_topic_entity")),
            answers=[str(label) for label in answer.values()], answer_ids=[k for k in answer if _QID.fullmatch(str(k))],
            dataset="qald10", source=path.name,
        ))
    return examples


def _load_demo(path: Path) -> list:
    """The JSONL written for the demo KG (see data/demo/README.md)."""
    examples = []
    with path.open(encoding=TEXT_ENCODING, newline="\n") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            item = json.loads(line)
            examples.append(make_example(
                id=item.get("id", f"demo-{number:03d}"), question=item["question"],
                topic_entities=item["topic_entities"], answers=item["answers"], answer_ids=item.get("answer_ids", []),
                dataset="demo", source=path.name, type=item.get("type"), level=item.get("level"),
                hops=item.get("hops"), path=item.get("path", []), group=item.get("id", f"demo-{number:03d}"),
                **({"answer_groups": item["answer_groups"]} if item.get("answer_groups") else {}),
            ))
    return examples


def _load_metaqa(path: Path) -> list:
    from ppoga_dspy.datasets.metaqa import load_metaqa  # its own module (templates, KB reachability)

    return load_metaqa(path)


def _load_nsm(path: Path) -> list:
    from ppoga_dspy.datasets.nsm import load_nsm  # its own module (subgraphs, both name layouts)

    return load_nsm(path)


def _load_rog(path: Path, split: str | None = None) -> list:
    from ppoga_dspy.datasets.rog import load_rog  # its own module (parquet / Arrow, read by row group)

    return load_rog(path, split)


#: formats whose PATH may be a folder and whose --split picks files by name (train-*, validation-*, test-*)
_SPLIT_BY_FILE = {"rog"}

_LOADERS: dict[str, Callable[[Path], list]] = {
    "pathquestion": _load_pathquestion,
    "pql": _load_pathquestion,
    "wc2014": _load_wc2014,
    "cwq": _load_cwq,
    "grailqa": _load_grailqa,
    "webqsp": _load_webqsp,
    "webquestions": _load_webquestions,
    "simpleqa": _load_simpleqa,
    "qald10": _load_qald10,
    "demo": _load_demo,
    "metaqa": _load_metaqa,
    "nsm": _load_nsm,
    "rog": _load_rog,
}
DATASET_FORMATS: tuple[str, ...] = tuple(_LOADERS)
# `demo-train`: questions over the demo KG, disjoint from the demo's own (scripts/make_demo_train.py); the
# default artifact of the embedded model is compiled on them.
SHORT_NAMES: dict[str, tuple[str, Path]] = {"demo": ("demo", DEMO_QUESTIONS), "demo-train": ("demo", DEMO_TRAIN)}


def parse_spec(spec: str) -> tuple[str, Path]:
    """`FORMAT:PATH` or a short name -> (format, path). Raises `DatasetError` naming the accepted forms."""
    text = spec.strip()
    if text.lower() in SHORT_NAMES:
        return SHORT_NAMES[text.lower()]
    fmt, sep, path = text.partition(":")
    fmt = fmt.strip().lower().replace("-", "").replace("_", "")
    if not sep or fmt not in _LOADERS or not path.strip():
        raise DatasetSpecError(
            f"unknown dataset spec {spec!r}: write FORMAT:PATH with FORMAT one of {', '.join(DATASET_FORMATS)} "
            f"(e.g. pathquestion:../shared/data/pathquestion/PQ-2H.txt), or a short name: {', '.join(SHORT_NAMES)}"
        )
    return fmt, Path(path.strip()).expanduser()


def load_dataset(spec: str, *, limit: int | None = None, split: str | None = None, seed: int = 0,
                 sample: int | None = None) -> list:
    """Read a benchmark into `dspy.Example`s; `split` picks train/dev/test of `split_examples(seed=seed)`,
    then `sample` draws that many of what is left (`sample_examples`, seeded), and `limit` keeps the first
    examples of what is left."""
    fmt, path = parse_spec(spec)
    if fmt in _SPLIT_BY_FILE and not path.exists():
        raise DatasetError(f"dataset not found: tried {path.resolve()} (a {fmt} file or a folder of them)")
    if fmt not in _SPLIT_BY_FILE and not path.is_file():
        hint = " (the demo data ships with a source checkout; pass demo:PATH to use a copy)" if fmt == "demo" else ""
        raise DatasetError(f"dataset file not found: tried {path.resolve()}{hint}")
    try:
        examples = _LOADERS[fmt](path, split) if fmt in _SPLIT_BY_FILE else _LOADERS[fmt](path)
    except DatasetError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:  # JSON and Unicode errors too
        from ppoga_dspy.text import for_terminal

        raise DatasetError(f"{path} does not read as a {fmt} file: {for_terminal(exc)}") from exc
    except OSError as exc:
        raise DatasetError(f"{path} cannot be read: {exc.strerror or exc}") from exc
    if split is not None and split != "all" and fmt not in _SPLIT_BY_FILE:  # "all": every question of the file
        if split not in SPLITS:
            raise DatasetSpecError(f"unknown split {split!r}: choose one of {', '.join(SPLITS)} or all")
        examples = split_examples(examples, seed=seed)[split]
    if sample is not None:
        examples = sample_examples(examples, sample, seed=seed)
    if limit is not None:
        if limit < 0:
            raise DatasetSpecError(f"limit must be >= 0, got {limit}")
        examples = examples[:limit]
    return examples


__all__ = ["DATASET_FORMATS", "DatasetError", "load_dataset", "parse_spec", "sample_examples", "split_examples"]
