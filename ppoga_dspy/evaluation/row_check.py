"""The shape of a run row that `report`, `report --html` and `show` rely on, checked field by field.

`runs.py` checks that a line is a JSON object with a string id; the readers of a row then do arithmetic on
`time` and `call_num`, read `metrics` as a mapping and walk `trace`, `memory` and `reasoning_chains`. A row
damaged in one field (`time: "fast"`, `call_num: 1e308`, `metrics: [1, 2]`, `memory: {"strategic": "x"}`),
or written by a newer ppoga whose rows say another `row_format`, gave a traceback. `damage(row)` names the
first field that is not what a reader expects, with why; the reports skip such a row and say how many they
skipped (`report`), or refuse it in one line naming `PATH:LINE` and the field (`show`).

A field that is absent is fine (older rows lack newer fields); a field that is present has its type.
"""

from __future__ import annotations

import math
from typing import Any

#: The format of the rows this version writes (`row_format`; rows written before the field are format 1).
ROW_FORMAT = 1
#: The most of one count a row can hold (LM calls, tokens): a larger number is damage, not a run.
MAX_COUNT = 10**12

_COUNTS = ("call_num", "input_token", "cached_input_token", "output_token", "total_token", "unusable_replies")
_TEXTS = ("question", "status", "error_kind", "error", "reasoning", "results", "lm", "program")
_LISTS = ("answers", "answer_ids", "gold", "ungrounded", "reasoning_chains", "trace")
_MAPPINGS = ("metrics", "metadata", "costs", "memory", "topic_entities")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any) -> bool:
    if isinstance(value, float) and _number(value) and value.is_integer():
        value = int(value)
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def damage(row: dict[str, Any]) -> tuple[str, str] | None:
    """(field, why) for the first field of `row` a reader cannot use; None when the row is sound."""
    version = row.get("row_format", 1)
    if not _count(version):
        return "row_format", f"expected a whole number, found {version!r}"
    if version > ROW_FORMAT:
        return "row_format", (f"written by a newer ppoga (row format {version}; this one reads up to {ROW_FORMAT}); "
                              "upgrade ppoga-dspy to read it")
    if "time" in row and row["time"] is not None and not (_number(row["time"]) and row["time"] >= 0):
        return "time", f"expected seconds (a finite number >= 0), found {row['time']!r}"
    for name in _COUNTS:
        if name in row and row[name] is not None and not _count(row[name]):
            return name, f"expected a count (a whole number 0..{MAX_COUNT:.0e}), found {row[name]!r}"
    for name in _TEXTS:
        if row.get(name) is not None and not isinstance(row[name], str):
            return name, f"expected text, found {_kind(row[name])}"
    for name in _LISTS:
        if row.get(name) is not None and not isinstance(row[name], list):
            return name, f"expected a list, found {_kind(row[name])}"
    for name in _MAPPINGS:
        if row.get(name) is not None and not isinstance(row[name], dict):
            return name, f"expected an object, found {_kind(row[name])}"
    return _metrics(row.get("metrics") or {}) or _costs(row.get("costs") or {}) or _trace(row.get("trace") or []) \
        or _memory(row.get("memory") or {}) or _chains(row.get("reasoning_chains") or [])


def _metrics(metrics: dict[str, Any]) -> tuple[str, str] | None:
    for name, value in metrics.items():
        if value is not None and not (_number(value) or isinstance(value, bool)):
            return f"metrics.{name}", f"expected a number, found {value!r}"
    return None


def _costs(costs: dict[str, Any]) -> tuple[str, str] | None:
    for name, value in costs.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not (_number(value) and value >= 0):
            return f"costs.{name}", f"expected a number >= 0, found {value!r}"
        if isinstance(value, str):
            return f"costs.{name}", f"expected a number or an object, found {value!r}"
    return None


def _each(items: list[Any], shape: type, where: str, expected: str) -> tuple[str, str] | None:
    """The first item of a list that is not of the shape, named by its place (`where[index]`)."""
    for index, item in enumerate(items):
        if not isinstance(item, shape):
            return f"{where}[{index}]", f"expected {expected}, found {_kind(item)}"
    return None


def _trace(trace: list[Any]) -> tuple[str, str] | None:
    if found := _each(trace, dict, "trace", "an event object"):
        return found
    for index, event in enumerate(trace):
        for part in ("inputs", "outputs"):
            if event.get(part) is not None and not isinstance(event[part], dict):
                return f"trace[{index}].{part}", f"expected an object, found {_kind(event[part])}"
        if event.get("stage") is not None and not isinstance(event["stage"], str):
            return f"trace[{index}].stage", f"expected text, found {_kind(event['stage'])}"
    return None


def _memory(memory: dict[str, Any]) -> tuple[str, str] | None:
    shapes = {"strategic": dict, "knowledge": dict, "step_cycles": list}
    for name, shape in shapes.items():
        value = memory.get(name)
        if value is not None and not isinstance(value, shape):
            return f"memory.{name}", f"expected {'an object' if shape is dict else 'a list'}, found {_kind(value)}"
    strategic = memory.get("strategic") or {}
    for name in ("topic_entities", "plan", "archived_plans"):
        if strategic.get(name) is not None and not isinstance(strategic[name], list):
            return f"memory.strategic.{name}", f"expected a list, found {_kind(strategic[name])}"
    for name in ("plan", "topic_entities"):
        if found := _each(strategic.get(name) or [], dict, f"memory.strategic.{name}", "an object"):
            return found
    return _each(memory.get("step_cycles") or [], dict, "memory.step_cycles", "an object")


def _chains(chains: list[Any]) -> tuple[str, str] | None:
    if found := _each(chains, list, "reasoning_chains", "a list of facts"):
        return found
    for index, chain in enumerate(chains):
        for fact in chain:
            if not isinstance(fact, dict) or not all(isinstance(fact.get(k), dict) for k in ("head", "tail")):
                return f"reasoning_chains[{index}]", "expected facts with a head and a tail object"
    return None


def describe(path: Any, number: int, found: tuple[str, str]) -> str:
    """`PATH:LINE: field 'time': why` — one line for a damaged row."""
    name, why = found
    return f"{path}:{number}: field {name!r}: {why}"
