"""PoG's released result files, scored the way our runs are, so `ppoga report` can compare them.

PoG (liyichen-cly/PoG, `main_freebase.py`) writes one JSON object per question, as JSONL or as one
JSON list: `question` (the dataset's question text), `results` (the LLM's whole final reply, e.g.
`"{Jamaica}"` or a sentence), `reasoning_chains`, `call_num`, `input_token`, `output_token`,
`total_token`, `time`. It holds no gold answers: PoG's evaluation looks each question up in the
dataset file (and, for CWQ, in `cwq_aname_dict.json`). We do the same through our loaders, then score
each line both ways: `hits@1_pog` as PoG's evaluation script reads the reply (`pog_answer_part`: what
the first `{...}` holds, the whole text only when there is no brace), and `hits@1`, `hits@1_strict`, `f1`
on the answers extracted from it (the `{...}` items, else the whole text). Scoring the whole reply,
reasoning included, would count an answer the reasoning merely mentions, which PoG's script does not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppoga_dspy.errors import DataError
from ppoga_dspy.text import TEXT_ENCODING
from ppoga_dspy.text import lines as text_lines

if TYPE_CHECKING:
    from ppoga_dspy.evaluation.digests import Derive

_BRACED = re.compile(r"\{([^{}]*)\}")


class PoGRunError(DataError):
    """A PoG result file cannot be read or matched to its dataset; the message says what to pass."""


def is_pog_row(row: Any) -> bool:
    """A line of a PoG result file: it has `question` and `results`, and none of our run fields."""
    return isinstance(row, dict) and "question" in row and "results" in row and "metrics" not in row


def read_pog_file(path: Path) -> list[dict[str, Any]]:
    """The lines of a PoG result file (JSONL, or a JSON list as PoG's `jsonl_to_json` writes)."""
    text = Path(path).read_text(encoding=TEXT_ENCODING)
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise PoGRunError(f"{path} is not a JSON list of PoG results: {exc}") from None
    else:
        rows = []
        for number, line in enumerate(text_lines(text), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    raise PoGRunError(f"{path}:{number} is not JSON; is this a PoG result file?") from None
    if not all(is_pog_row(r) for r in rows):
        raise PoGRunError(f"{path}: not every line has PoG's `question` and `results` fields")
    return rows


def extracted_answers(results: Any) -> list[str]:
    """The answers named in a PoG reply: the `{...}` items (comma-separated inside), else the whole text.

    >>> extracted_answers("The answer is {Jamaica}.")
    ['Jamaica']
    >>> extracted_answers("{Barack Obama, Joe Biden}")
    ['Barack Obama', 'Joe Biden']
    >>> extracted_answers("Kingston")
    ['Kingston']
    """
    text = results if isinstance(results, str) else json.dumps(results, ensure_ascii=False)
    braced = _BRACED.findall(text)
    items = [part.strip() for group in braced for part in group.split(",")] if braced else [text.strip()]
    return [item for item in items if item]


def pog_answer_part(results: Any) -> str:
    """The part of a PoG reply that PoG's evaluation script scores: from the first "{" to the first "}" (its
    `clean_results`), or the whole text when the reply has no "{".

    >>> pog_answer_part("The film was shot in {Jamaica}; Kingston is its capital.")
    'Jamaica'
    >>> pog_answer_part("{Barack Obama, Joe Biden}")
    'Barack Obama, Joe Biden'
    >>> pog_answer_part("Kingston")
    'Kingston'
    """
    text = results if isinstance(results, str) else json.dumps(results, ensure_ascii=False)
    if "{" not in text:
        return text
    return text[text.find("{") + 1: text.find("}")]


def _key(question: str) -> str:
    return " ".join(str(question).split()).casefold()


def score_pog_rows(rows: list[dict[str, Any]], examples: list) -> tuple[list[dict[str, Any]], int]:
    """PoG lines as our run rows (metrics, costs, metadata), and how many found no question in `examples`."""
    from ppoga_dspy.evaluation.evaluate import example_id
    from ppoga_dspy.evaluation.metrics import score_prediction

    by_question = {_key(e.question): e for e in examples}
    scored, unmatched = [], 0
    for row in rows:
        example = by_question.get(_key(row.get("question") or row.get("RawQuestion") or ""))
        if example is None:
            unmatched += 1
            continue
        results = row.get("results")
        field = results if isinstance(results, str) else json.dumps(results, ensure_ascii=False)
        answers = extracted_answers(results)
        scored.append({
            "id": example_id(example), "question": example.question, "results": field, "answers": answers,
            "gold": list(example.answers),
            "metrics": score_prediction(example, answers, answer_field=pog_answer_part(results)),
            "call_num": row.get("call_num", 0), "input_token": row.get("input_token", 0),
            "output_token": row.get("output_token", 0), "total_token": row.get("total_token", 0),
            "time": row.get("time", 0), "status": "ok", "metadata": dict(example.metadata or {}),
            "source": "pog",
        })
    if rows and not scored:
        raise PoGRunError("no line of the PoG result file matches a question of the dataset: is --dataset the "
                          "set PoG ran on (e.g. cwq:../shared/data/freebase-questions/cwq.json)?")
    return scored, unmatched


def read_scored_run(path: Path, *, dataset: str | None = None,
                    derive: Iterable[Derive] = ()) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows of a run file, ours or PoG's, with metrics; and notes for the summary (format, unmatched lines).

    Our run files carry their metrics, and are read as digests (`digests.py`: the aggregates of each row, the
    reasoning left in the file; `derive` adds the caller's trace-derived counts), so a run of any size is
    summarized in bounded memory. A PoG file needs `dataset` (a loader spec) for its gold answers; its scored
    rows are small and held whole.
    """
    from ppoga_dspy.evaluation.runs import check_run_file, numbered_rows, read_rows

    path = Path(path)
    check_run_file(path)  # a device or FIFO is never read as a run
    with path.open("rb") as handle:
        first = handle.read(4096).lstrip()[:1].decode("ascii", errors="replace")
    # A JSON list is PoG's converted .json; JSONL lines are read as written (PoG's carry no id to de-duplicate by).
    # Our own run (its first row is not PoG's) is read once, streamed, below; never held twice.
    if first == "[":
        rows = read_pog_file(path)
    else:
        head = next(numbered_rows(path, require_id=False), None)
        rows = read_rows(path, require_id=False) if head is not None and is_pog_row(head[1]) else []
    if rows and all(is_pog_row(r) for r in rows):
        if not dataset:
            raise PoGRunError(f"{path} is a PoG result file, which holds no gold answers: pass --dataset SPEC, "
                              "e.g. --dataset cwq:../shared/data/freebase-questions/cwq.json")
        from ppoga_dspy.datasets.loaders import load_dataset

        scored, unmatched = score_pog_rows(rows, load_dataset(dataset))
        return scored, {"format": "pog", "lines": len(rows), "unmatched": unmatched}
    from ppoga_dspy.evaluation.digests import read_run_digests

    # a row damaged in one field is skipped and counted, never a traceback
    sound, damaged = read_run_digests(path, derive=derive)
    notes: dict[str, Any] = {"format": "ppoga"}
    if damaged:
        notes.update(damaged_rows=len(damaged), first_damaged=damaged[0])
    return sound, notes
