"""PoG's result files are read by `ppoga report` and scored both ways: PoG's rule and ours."""

from __future__ import annotations

import json

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.evaluation.pog_runs import PoGRunError, extracted_answers, read_scored_run
from tests.conftest import shared_data


@pytest.fixture(scope="module")
def cwq_questions():
    cwq = shared_data("freebase-questions", "cwq.json")
    items = json.loads(cwq.read_text(encoding="utf-8"))
    return cwq, items[:5]


def _pog_lines(items):
    """PoG's fields, replies as GPT-3.5 wrote them in PoG's runs: braced answers, sometimes in a sentence."""
    a, b, c, d, e = items
    replies = [
        "{" + a["answer"] + "}",                                   # right everywhere
        "The answer is {" + b["answer"] + "}.",                    # right: the braces hold it
        "{Nobody, " + c["answer"] + "}",                           # PoG's rule: hit; first answer: miss
        "{Nobody at all}",                                         # wrong everywhere
        "I could not find it in the knowledge graph.",            # wrong everywhere
    ]
    lines = [{"question": item["question"], "results": reply, "reasoning_chains": [], "call_num": 9,
              "input_token": 5000, "output_token": 400, "total_token": 5400, "time": 12.5}
             for item, reply in zip((a, b, c, d, e), replies, strict=True)]
    lines.append({"question": "A question that is not in CWQ?", "results": "{x}", "call_num": 1})
    return lines


def test_extracted_answers():
    assert extracted_answers("The answer is {Jamaica}.") == ["Jamaica"]
    assert extracted_answers("{a, b} and {c}") == ["a", "b", "c"]
    assert extracted_answers(["Kingston"]) == ['["Kingston"]']


@pytest.mark.parametrize("as_list", [False, True])
def test_a_pog_file_is_scored_both_ways(tmp_path, cwq_questions, as_list):
    cwq, items = cwq_questions
    lines = _pog_lines(items)
    path = tmp_path / ("PoG_cwq.json" if as_list else "PoG_cwq.jsonl")
    path.write_text(json.dumps(lines) if as_list else "".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    rows, notes = read_scored_run(path, dataset=f"cwq:{cwq}")
    assert notes == {"format": "pog", "lines": 6, "unmatched": 1}
    assert [r["metrics"]["hits@1_pog"] for r in rows] == [1, 1, 1, 0, 0]
    assert [r["metrics"]["hits@1_strict"] for r in rows] == [1, 1, 0, 0, 0]
    assert rows[0]["call_num"] == 9 and rows[0]["total_token"] == 5400 and rows[0]["id"] == items[0]["ID"]


def test_report_prints_pog_and_strict_hits_for_a_pog_file(tmp_path, cwq_questions, capsys):
    cwq, items = cwq_questions
    path = tmp_path / "PoG_cwq.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in _pog_lines(items)), encoding="utf-8")
    assert main(["report", str(path), "--dataset", f"cwq:{cwq}", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["n"] == 5 and summary["format"] == "pog" and summary["unmatched"] == 1
    assert summary["hits@1_pog"] == pytest.approx(0.6) and summary["hits@1_strict"] == pytest.approx(0.4)
    assert summary["lm_calls_mean"] == pytest.approx(9.0)


def test_a_pog_file_without_its_dataset_is_a_clear_error(tmp_path, cwq_questions, capsys):
    _, items = cwq_questions
    path = tmp_path / "PoG_cwq.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in _pog_lines(items)), encoding="utf-8")
    with pytest.raises(PoGRunError, match="--dataset"):
        read_scored_run(path)
    assert main(["report", str(path)]) == PoGRunError.exit_code
    assert "pass --dataset" in capsys.readouterr().err


def test_a_pog_row_is_scored_on_the_part_pogs_script_reads(tmp_path, cwq_questions):
    """Issue 29, point 9: PoG's script scores what the braces hold, not the reasoning around them; a reply whose
    reasoning names the gold answer but whose braced answer is wrong is a miss, as PoG counts it."""
    cwq, items = cwq_questions
    line = {"question": items[0]["question"], "results": "{Nobody at all}. The graph also lists "
            + items[0]["answer"] + ", which does not fit.", "call_num": 3}
    path = tmp_path / "PoG_cwq.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    rows, _ = read_scored_run(path, dataset=f"cwq:{cwq}")
    assert rows[0]["metrics"]["hits@1_pog"] == 0
