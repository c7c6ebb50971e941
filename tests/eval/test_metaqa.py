"""The metaqa: loader on the real MetaQA files: topics, answers, gold paths from templates, the reachable ceiling,
and a few questions run end to end with the scripted gold-path planner, measured by the instruments."""

from __future__ import annotations

import pytest

from ppoga_dspy.datasets.loaders import DatasetError, load_dataset
from ppoga_dspy.datasets.metaqa import ceiling, template_path
from tests.conftest import shared_data


def test_templates_name_the_relation_path_with_directions():
    assert template_path("movie_to_director") == [("directed_by", "out")]
    assert template_path("actor_to_movie_to_director") == [("starred_actors", "in"), ("directed_by", "out")]
    assert template_path("tag_to_movie") == [("has_tags", "in")]
    with pytest.raises(ValueError, match="unknown MetaQA template"):
        template_path("movie_to_budget")


def test_one_hop_questions_read_topic_answers_and_gold_path():
    path = shared_data("metaqa", "1hop_qa_test.txt")
    examples = load_dataset(f"metaqa:{path}", limit=None)
    assert len(examples) == 8953
    first = examples[0]
    assert first.question == "what does Grégoire Colin appear in"
    assert first.topic_entities == {"Grégoire Colin": "Grégoire Colin"} and first.answers == ["Before the Rain"]
    meta = first.metadata
    assert meta["type"] == "actor_to_movie" and meta["hops"] == 1
    assert meta["path"] == ["starred_actors (reverse)"] and meta["directions"] == ["in"]
    assert meta["reachable"] is True and meta["answers_reached"] == 1
    assert ceiling(examples) == {"1": {"n": 8953, "reachable": 8953, "ceiling": 1.0}}


def test_the_ceiling_counts_questions_with_no_answer_reachable_on_this_kb():
    examples = load_dataset(f"metaqa:{shared_data('metaqa', '2hop_qa_test.txt')}")
    counts = ceiling(examples)["2"]
    assert counts["n"] == 13385 and counts["reachable"] == 12998  # the rebuilt KB misses ~3.4k triples
    missed = next(e for e in examples if not e.metadata["reachable"])
    assert missed.metadata["answers_reached"] == 0
    chained = next(e for e in examples if e.metadata["type"] == "actor_to_movie_to_director"
                   and e.metadata["reachable"])
    branch = chained.metadata["group"].split("*")[0].split("#")
    assert branch[0] == next(iter(chained.topic_entities)) and branch[1] == "starred_actors (reverse)"
    assert branch[3] == "directed_by" and branch[4] in chained.answers


def test_a_file_without_its_templates_is_a_clear_error(tmp_path):
    questions = tmp_path / "1hop_qa_test.txt"
    questions.write_text("what does [X] appear in\tY\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="1hop_qa_test_qtype.txt"):
        load_dataset(f"metaqa:{questions}")


def test_gold_path_runs_metaqa_questions_to_their_answers_and_the_instruments_see_each_cut(tmp_path, monkeypatch):
    from ppoga_dspy.app.session import ProgramSettings, open_program
    from ppoga_dspy.evaluation.evaluate import answer_one
    from ppoga_dspy.evaluation.instruments import instrument_table, measure_row
    from ppoga_dspy.lm.settings import LMSettings

    monkeypatch.setenv("PPOGA_KG_CACHE", str(tmp_path / "cache"))
    spec = f"metaqa:{shared_data('metaqa', '2hop_qa_test.txt')}"
    examples = [e for e in load_dataset(spec, limit=40) if e.metadata["type"] == "actor_to_movie_to_director"][:2]
    settings = ProgramSettings(dataset=spec, lm=LMSettings(lm="oracle/gold-path"), stages="fused")
    with open_program(settings, examples=examples) as opened:
        assert opened.kg.dialect.name == "names"
        rows = [answer_one(opened.program, e) for e in examples]
    for row in rows:
        assert row["metrics"]["hits@1"] == 1.0, row["answers"]
        measure = measure_row(row)
        assert measure["relation_hits"] == [True, True] and measure["entity_hits"] == [True, True]
        assert measure["answer_in_evidence"] is True and measure["menus"] >= 2
    summary = instrument_table(rows)["metaqa 2-hop"]
    assert summary["relation_recall"] == 1.0 and summary["n"] == 2
