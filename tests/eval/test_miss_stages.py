"""Which stage lost a missed question, read from a run row's trace and its gold path."""

from ppoga_dspy.evaluation.miss_stages import loss_counts, lost_at, markdown

PATH = ["directed_by (reverse)", "written_by"]


def _row(*, hit=0, objectives=("follow relation directed_by (reverse)", "follow relation written_by"),
         chosen=(["directed_by (reverse)"], ["written_by"]), evidence=("(Rich and Famous, written_by, Gerald Ayres)",)):
    trace = [{"stage": "decompose", "outputs": {"steps": [{"objective": o} for o in objectives]}}]
    trace += [{"stage": "select_relations", "outputs": {"relations": list(c)}} for c in chosen]
    trace += [{"stage": "answer", "inputs": {"evidence": list(evidence)}, "outputs": {}}]
    return {"metrics": {"hits@1": hit}, "metadata": {"path": PATH}, "gold": ["Gerald Ayres"], "trace": trace}


def test_a_hit_was_lost_nowhere():
    assert lost_at(_row(hit=1)) is None


def test_a_plan_that_reads_a_reverse_hop_forwards_loses_the_question_at_the_plan():
    assert lost_at(_row(objectives=("follow relation directed_by", "follow relation written_by"))) == "plan"


def test_a_right_plan_with_an_off_path_choice_loses_it_at_the_relation_choice():
    assert lost_at(_row(chosen=(["directed_by"],))) == "relation choice"
    # a retry that picks the gold relation after a wrong one still follows the path
    assert lost_at(_row(chosen=(["directed_by"], ["directed_by (reverse)"], ["written_by"]))) == "answer"


def test_a_gated_choice_counts_as_a_choice():
    row = _row(chosen=())
    row["trace"][1:1] = [{"stage": "select_relations.gated", "outputs": {"reason": "one candidate",
                                                                         "chosen": "directed_by (reverse)"}},
                         {"stage": "select_relations.gated", "outputs": {"reason": "named by the step",
                                                                         "chosen": ["written_by"]}}]
    assert lost_at(row) == "answer"


def test_the_gold_answer_missing_from_the_evidence_is_an_entity_choice_loss():
    assert lost_at(_row(evidence=("(Rich and Famous, written_by, John Van Druten)",))) == "entity choice"


def test_the_counts_and_table_list_every_stage_in_the_method_order():
    rows = [_row(hit=1), _row(), _row(chosen=()), _row(objectives=())]
    assert loss_counts(rows) == {"plan": 1, "relation choice": 1, "entity choice": 0, "answer": 1}
    table = markdown({"embedded 2-hop": rows})
    assert "| embedded 2-hop | 4 | 3 | 1 | 1 | 0 | 1 |" in table
