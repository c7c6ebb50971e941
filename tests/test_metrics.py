"""Hand-checked cases for lenient/strict Hits@1, set F1, scoring of predictions and breakdowns."""

from __future__ import annotations

import doctest

import dspy
import pytest

import ppoga_dspy.evaluation.metrics as metrics
from ppoga_dspy.datasets.loaders import load_dataset
from ppoga_dspy.evaluation.metrics import (
    answer_f1,
    breakdown,
    dspy_metric,
    hits_at_1_lenient,
    hits_at_1_pog,
    hits_at_1_strict,
    normalize_lenient,
    normalize_strict,
    score_prediction,
)
from tests.conftest import shared_data


def test_docstring_examples_hold():
    result = doctest.testmod(metrics)
    assert result.attempted >= 15 and result.failed == 0


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("Alan_PULIDO", ["alan pulido"], True),  # case and underscore
        ("ALAN PULIDO", ["Alan_PULIDO"], True),
        ("Chris Nolan", ["Christopher Nolan", "Chris Nolan"], True),  # an alias
        ("The answer is Christopher Nolan.", ["Christopher Nolan"], True),  # gold inside prediction
        ("Nolan", ["Christopher Nolan"], True),  # prediction inside gold
        ("James Cameron", ["Christopher Nolan", "Chris Nolan"], False),
        ("", ["Christopher Nolan"], False),  # empty prediction is never correct
        ("   ", ["Christopher Nolan"], False),
        ("Nolan", ["", "  "], False),  # empty gold aliases are ignored, not contained in everything
        ("Nolan", [], False),
        ("united_kingdom", ["United Kingdom"], True),
    ],
)
def test_hits_at_1_lenient(prediction, gold, expected):
    assert hits_at_1_lenient(prediction, gold) is expected


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("the_dark_knight", ["The Dark Knight"], True),
        ("Dark Knight", ["The Dark Knight"], True),  # articles dropped
        ("Washington DC", ["Washington, D.C."], True),  # punctuation dropped
        ("Chris Nolan", ["Christopher Nolan", "Chris Nolan"], True),
        ("Nolan", ["Christopher Nolan"], False),  # lenient says True
        ("Christopher Nolan, director", ["Christopher Nolan"], False),
        ("", [""], False),
    ],
)
def test_hits_at_1_strict(prediction, gold, expected):
    assert hits_at_1_strict(prediction, gold) is expected


def test_a_lone_gold_string_is_one_alias():
    assert not hits_at_1_strict("p", "Paris")  # not the letters of "Paris"
    assert answer_f1(["p", "a"], "Paris") == 0.0
    assert hits_at_1_lenient("paris", "Paris") and hits_at_1_strict("paris", "Paris")
    assert answer_f1("Paris", "Paris") == 1.0


def test_strict_and_lenient_disagree_on_containment():
    gold = ["Perth"]
    prediction = "Perth, Western Australia"
    assert hits_at_1_lenient(prediction, gold)
    assert not hits_at_1_strict(prediction, gold)


def test_normalisations():
    assert normalize_lenient("Alan_PULIDO") == normalize_lenient("alan pulido") == "alanpulido"
    assert normalize_lenient("New  York\tCity") == "newyorkcity"
    assert normalize_strict("The_Joker!") == "joker"
    assert normalize_strict("An   Officer and a Gentleman") == "officer and gentleman"


def test_answer_f1_multi_answer():
    assert answer_f1(["Titanic", "Avatar"], ["Titanic", "Avatar"]) == 1.0
    # one of two gold, nothing wrong: P=1, R=1/2
    assert answer_f1(["Titanic"], ["Titanic", "Avatar"]) == pytest.approx(2 / 3)
    # two right, one wrong of three gold: P=2/3, R=2/3
    assert answer_f1(["Titanic", "Avatar", "Inception"], ["Titanic", "Avatar", "Aliens"]) == pytest.approx(2 / 3)
    assert answer_f1(["Inception"], ["Titanic"]) == 0.0
    assert answer_f1([], ["Titanic"]) == 0.0 and answer_f1(["Titanic"], []) == 0.0
    # duplicates after normalisation count once
    assert answer_f1(["Titanic", "titanic", "TITANIC"], ["Titanic"]) == 1.0


def test_answer_f1_alias_groups_do_not_inflate_recall():
    groups = [["Christopher Nolan", "Chris Nolan"], ["Jonathan Nolan"]]
    assert answer_f1(["Chris Nolan"], groups) == pytest.approx(2 / 3)  # one of two answers
    assert answer_f1(["Chris Nolan", "Christopher Nolan", "Jonathan Nolan"], groups) == 1.0
    # the same list without groups is three answers
    flat = ["Christopher Nolan", "Chris Nolan", "Jonathan Nolan"]
    assert answer_f1(["Chris Nolan", "Jonathan Nolan"], flat) == pytest.approx(0.8)


def test_score_prediction_forms():
    example = dspy.Example(
        question="Who wrote The Dark Knight?", topic_entities={},
        answers=["Christopher Nolan", "Jonathan Nolan", "Chris Nolan"], answer_ids=["m.1", "m.2"],
        metadata={"answer_groups": [["Christopher Nolan", "Chris Nolan"], ["Jonathan Nolan"]]},
    ).with_inputs("question", "topic_entities")
    pred = dspy.Prediction(answers=["Chris Nolan", "Jonathan Nolan"])
    assert score_prediction(example, pred) == {"hits@1": 1, "hits@1_strict": 1, "f1": 1.0, "hits@1_pog": 1}
    assert score_prediction(example, ["Nolan"]) == {"hits@1": 1, "hits@1_strict": 0, "f1": 0.0, "hits@1_pog": 1}
    assert score_prediction(example, "Jonathan Nolan")["f1"] == pytest.approx(2 / 3)
    assert score_prediction(example, dspy.Prediction(answers=[])) == {"hits@1": 0, "hits@1_strict": 0, "f1": 0.0,
                                                                      "hits@1_pog": 0}
    assert score_prediction(example, None)["hits@1"] == 0
    assert score_prediction(example, {"answers": ["Jonathan Nolan"]})["hits@1_strict"] == 1


def test_score_prediction_uses_the_first_answer_for_hits():
    example = dspy.Example(question="q", answers=["Avatar"], metadata={})
    assert score_prediction(example, ["Titanic", "Avatar"])["hits@1"] == 0
    assert score_prediction(example, ["Titanic", "Avatar"])["f1"] == pytest.approx(2 / 3)


def test_dspy_metric_on_the_demo_questions():
    examples = load_dataset("demo")
    perfect = [dspy_metric(e, dspy.Prediction(answers=list(e.answers))) for e in examples]
    assert perfect == [1.0] * len(examples)
    assert all(score_prediction(e, e.answers)["f1"] == 1.0 for e in examples)
    wrong = [dspy_metric(e, dspy.Prediction(answers=["Nobody at all"])) for e in examples]
    assert sum(wrong) == 0.0
    # one name per answer entity (no aliases) is a perfect F1 thanks to the answer groups
    for example in examples:
        names = [group[0] for group in example.metadata["answer_groups"]]
        assert score_prediction(example, names)["f1"] == 1.0


def test_breakdown_groups_by_metadata_key():
    rows = [
        {"id": "a", "hits@1": 1, "hits@1_strict": 1, "f1": 1.0, "metadata": {"type": "1-hop", "hops": 1}},
        {"id": "b", "hits@1": 0, "hits@1_strict": 0, "f1": 0.5, "metadata": {"type": "1-hop", "hops": 1}},
        {"id": "c", "scores": {"hits@1": 1, "hits@1_strict": 0, "f1": 0.25}, "metadata": {"type": "cvt", "hops": 2}},
        {"id": "d", "type": "cvt", "hits@1": 1},  # key at top level; missing metrics count as 0
    ]
    by_type = breakdown(rows, "type")
    assert list(by_type) == ["1-hop", "cvt"]
    assert by_type["1-hop"] == {"n": 2, "hits@1": 0.5, "hits@1_strict": 0.5, "f1": 0.75, "hits@1_pog": 0.0}
    assert by_type["cvt"] == {"n": 2, "hits@1": 1.0, "hits@1_strict": 0.0, "f1": 0.125, "hits@1_pog": 0.0}
    by_hops = breakdown(rows, "hops")
    assert by_hops[1]["n"] == 2 and by_hops[2]["n"] == 1 and by_hops[None]["n"] == 1
    assert breakdown([], "type") == {}


def test_hits_at_1_pog_scores_the_whole_answer_field_as_pog_does():
    """PoG: lower-case, remove spaces, containment either way, every alias; '_' is not a space there."""
    gold = ["Jamaica", "Commonwealth of Jamaica"]
    assert hits_at_1_pog("The answer is {Jamaica}.", gold)
    assert hits_at_1_pog("commonwealthof jamaica", gold)
    assert not hits_at_1_pog("Kingston", gold)
    assert not hits_at_1_pog("   ", gold)  # an empty field is a miss (PoG's script would count it)
    assert not hits_at_1_pog("Alan PULIDO", ["Alan_PULIDO"]) and hits_at_1_lenient("Alan PULIDO", ["Alan_PULIDO"])
    # the whole field may hold several names: PoG counts it where strict Hits@1 on the first answer does not
    example = {"answers": ["Jamaica"]}
    scores = score_prediction(example, ["Kingston", "Jamaica"], answer_field="{Kingston}, {Jamaica}")
    assert scores["hits@1_pog"] == 1 and scores["hits@1"] == scores["hits@1_strict"] == 0


def test_hits_at_1_pog_reads_the_cwq_aliases(tmp_path):
    """The CWQ loader merges `cwq_aname_dict.json`; an alias-only answer is a PoG hit on a real question."""
    import json

    cwq = shared_data("freebase-questions", "cwq.json")
    anames = json.loads(shared_data("freebase-questions", "cwq_aname_dict.json").read_text(encoding="utf-8"))
    examples = load_dataset(f"cwq:{cwq}")
    with_alias = next(e for e in examples if any(a != e.answers[0] for a in anames.get(e.question, [])))
    alias = next(a for a in anames[with_alias.question] if a != with_alias.answers[0])
    assert alias in with_alias.answers
    assert score_prediction(with_alias, [alias])["hits@1_pog"] == 1
