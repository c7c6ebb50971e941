"""The nsm: loader on the 8 real CWQ questions with their Freebase subgraphs (both layouts), and the questions run
end to end on the embedded store, per question and on the union, with the no-model baseline and a scripted planner."""

from __future__ import annotations

import shutil

import pytest

from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.datasets.nsm import kg_for, subgraph_ntriples
from tests.conftest import shared_data

SPLITS = ("train", "dev", "test")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PPOGA_KG_CACHE", str(tmp_path / "cache"))


def _all(folder):
    return [e for split in SPLITS for e in load_dataset(f"nsm:{folder / f'{split}_simple.json'}")]


def test_the_sample_loads_with_topics_answers_and_subgraph_sizes():
    folder = shared_data("cwq-subgraph-sample")
    examples = _all(folder)
    assert len(examples) == 8
    first = examples[0]
    assert first.topic_entities == {"m.sample_0": "George Washington Colonials men's basketball"}
    assert first.answers == ["Washington, D.C."] and first.answer_ids == ["m.sample_14"]
    assert first.metadata["subgraph_triples"] == 1158 and first.metadata["relations_in_subgraph"] == 169
    assert min(e.metadata["relations_in_subgraph"] for e in examples) >= 90


def test_the_second_layout_entities_txt_and_a_names_file_reads_the_same(tmp_path):
    folder = shared_data("cwq-subgraph-sample")
    other = tmp_path / "release"
    other.mkdir()
    for split in SPLITS:
        shutil.copy(folder / f"{split}_simple.json", other)
    shutil.copy(folder / "relations.txt", other)
    rows = [line.split("\t", 1) for line in (folder / "entity_name.txt").read_text(encoding="utf-8").splitlines()]
    (other / "entities.txt").write_text("".join(f"{mid}\n" for mid, _ in rows), encoding="utf-8")
    (other / "entity2name.txt").write_text("".join(f"{mid}\t{name}\n" for mid, name in rows if name != "None"),
                                           encoding="utf-8")
    ours, theirs = _all(folder), _all(other)
    assert [(e.question, e.topic_entities, e.answers) for e in ours] == \
        [(e.question, e.topic_entities, e.answers) for e in theirs]
    path = "test_simple.json"
    assert subgraph_ntriples(folder / path) == subgraph_ntriples(other / path)


def test_a_subgraph_reads_in_the_freebase_dialect_with_unnamed_nodes_as_mediators():
    path = shared_data("cwq-subgraph-sample", "train_simple.json")
    example = load_dataset(f"nsm:{path}")[0]
    with kg_for(example, path=path) as kg:
        assert kg.dialect.name == "freebase"
        topic = next(iter(example.topic_entities))
        relations = kg.relations(topic)
        assert relations and all("." in r.id for r in relations)
        seeds = kg.neighbors(topic, "base.marchmadness.ncaa_basketball_team.ncaa_tournament_seeds", "out")
        assert seeds and all(e.is_mediator and e.facts for e in seeds)  # read through to the named tournament


@pytest.mark.parametrize("lm", ["none", "oracle/gold-path"])
def test_the_eight_questions_run_end_to_end_on_their_subgraphs(lm):
    from ppoga_dspy.app.session import ProgramSettings, open_program
    from ppoga_dspy.evaluation.evaluate import answer_one
    from ppoga_dspy.evaluation.instruments import measure_row
    from ppoga_dspy.lm.settings import LMSettings

    folder = shared_data("cwq-subgraph-sample")
    measures = []
    for split in SPLITS:
        path = folder / f"{split}_simple.json"
        examples = load_dataset(f"nsm:{path}")
        settings = ProgramSettings(dataset=f"nsm:{path}", lm=LMSettings(lm=lm), stages="fused")
        with open_program(settings, examples=examples) as opened:  # the union of the file's subgraphs
            assert opened.kg.dialect.name == "freebase" and opened.kg.engine.kind == "embedded"
            for example in examples:
                row = answer_one(opened.program, example)
                assert row["status"] != "failed", row["error"]
                measures.append(measure_row(row))
    assert len(measures) == 8
    assert all(m["menus"] >= 1 for m in measures)  # every question's topic showed a relation menu
    assert max(max(m["menu_of"]) for m in measures) > 25  # wide Freebase menus, cut to the shown candidates
    assert sum(m["mediators"] for m in measures) > 0  # mediators were read through
