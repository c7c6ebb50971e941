"""`ppoga report RUN... --html FILE`: an HTML page that opens offline, and its question detail beside it.

The page holds the aggregates: the summary with intervals, Plotly figures (plotly.js inlined once, no CDN),
what the corrections did, the runs compared (when there are several), and a filterable table of questions
(drawn by the script from a compact JSON index). Each question's reasoning view (plan, step cycles,
corrections, answer, evidence graph) is in `FILE.parts/part-NNNN.js`, `PART_SIZE` questions a file, loaded
with a <script> element when a question is opened: that works from file:// with no server (a page on disk
may not fetch a JSON file), and keeps a 50,000-question page at about 12 MB instead of 188 MB. Writing it
reads each row again from its run file by offset (`evaluation/digests.py`), one part at a time, so the
report never holds every row's reasoning. Move or copy the page with its `.parts` folder.

Text from run files is escaped in the page and set as text by the script (`report.js`, beside this module
with `report.css`), so a question or a reply cannot inject markup.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import os
import re
import secrets
from importlib import resources
from pathlib import Path
from typing import Any

from ppoga_dspy.errors import ConfigError
from ppoga_dspy.report.data import (
    correction_counts,
    correction_effects,
    group_value,
    groups_with_intervals,
    hit,
    question_view,
)
from ppoga_dspy.report.stats import wilson_interval

#: Questions per part file: at 50,000 questions, 200 files of about 1 MB, one loaded per question opened.
PART_SIZE = 250
_PART_NAME = re.compile(r"part-\d{4,}\.js")


class ReportError(ConfigError):
    """The report cannot be written where it was asked (its parts folder's name is taken); the message says why."""


_SUMMARY_ROWS = (
    ("questions", "n", "{:.0f}"), ("Hits@1 (strict)", "hits@1_strict", "{:.3f}"),
    ("Hits@1 (PoG's rule)", "hits@1_pog", "{:.3f}"), ("answer F1", "f1", "{:.3f}"), ("failed", "failed", "{:.0f}"),
    ("LM calls / q (mean)", "lm_calls_mean", "{:.2f}"), ("LM calls / q (median)", "lm_calls_median", "{:.1f}"),
    ("tokens / q (mean)", "tokens_mean", "{:.0f}"), ("seconds / q (mean)", "seconds_mean", "{:.2f}"),
    ("seconds / q (median)", "seconds_median", "{:.2f}"), ("KG queries / q (mean)", "kg_queries_mean", "{:.1f}"),
)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _script_json(data: Any) -> str:
    """JSON safe inside a <script> element: every `<` written as \\u003c, so no text can close the element."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str).replace("<", "\\u003c")


def parts_folder(path: Path) -> Path:
    """Where the page's per-question detail goes: `FILE.parts/` beside `FILE`."""
    path = Path(path)
    return path.with_name(path.name + ".parts")


def write_report(
    path: Path, runs: dict[str, list[dict[str, Any]]], *, summaries: dict[str, dict[str, Any]] | None = None,
    comparison: Any = None, title: str = "PPoGA run report", part_size: int = PART_SIZE,
) -> int:
    """Write the report for `runs` (name -> rows or digests) to `path` and its detail to `FILE.parts/`; the
    page's size in bytes. The page is replaced atomically, the parts folder just before it."""
    from ppoga_dspy.evaluation.evaluate import summarize
    from ppoga_dspy.report.compare import comparison_json

    path = Path(path)
    folder = _check_parts_folder(parts_folder(path))
    summaries = summaries or {name: summarize(rows) for name, rows in runs.items()}
    names = list(runs)
    compared = comparison_json(comparison) if comparison is not None else None
    questions = _questions(runs)
    key = secrets.token_hex(8)  # parts of another write of this page are refused by the page, not mixed in
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.with_name(folder.name + ".tmp")
    _remove_folder(staging)
    staging.mkdir()
    count = _write_parts(staging, questions, key=key, size=part_size)
    data = {"runs": names, "figures": _figures(runs, compared), "questions": [_index_entry(q) for q in questions],
            "parts": {"dir": folder.name, "size": part_size, "count": count, "key": key}}
    text = _page(title, names, runs, summaries, compared, questions, data)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    _remove_folder(folder)
    os.replace(staging, folder)
    os.replace(temporary, path)
    return path.stat().st_size


def _check_parts_folder(folder: Path) -> Path:
    """The parts folder, refused before any work when something other than a folder holds its name."""
    for candidate in (folder, folder.with_name(folder.name + ".tmp")):
        if candidate.is_symlink() or (candidate.exists() and not candidate.is_dir()):
            raise ReportError(f"{candidate} exists and is not a folder; the report writes its question detail "
                              "there: remove it or write the report elsewhere")
    return folder


def _remove_folder(folder: Path) -> None:
    """Remove a parts folder this writer made (only its part files and itself: nothing else is deleted)."""
    if not folder.is_dir():
        return
    for item in folder.iterdir():
        if not _PART_NAME.fullmatch(item.name) or item.is_dir():
            raise ReportError(f"{folder} holds {item.name}, which is not a report part; move it out or write the "
                              "report elsewhere")
        item.unlink()
    folder.rmdir()


def _figures(runs: dict[str, list[dict[str, Any]]], compared: dict[str, Any] | None) -> dict[str, Any]:
    """The page's Plotly figures, from the runs' aggregates."""
    from ppoga_dspy.report import plots

    groups = {name: groups_with_intervals(rows) for name, rows in runs.items()}
    figures: dict[str, Any] = {}
    for key in ("hops", "type", "level"):
        if any(key in g for g in groups.values()):
            figures[f"plot-{key}"] = plots.hits_by_group(groups, key)
    figures["plot-costs"] = plots.cost_distributions(runs)
    figures["plot-corrections"] = plots.correction_bars({name: correction_effects(rows) for name, rows in runs.items()})
    if compared and compared["pairs"]:
        figures["plot-differences"] = plots.difference_forest(compared["pairs"])
    return figures


def _page(title: str, names: list[str], runs: dict[str, list[dict[str, Any]]], summaries: dict[str, dict[str, Any]],
          compared: dict[str, Any] | None, questions: list[dict[str, Any]], data: dict[str, Any]) -> str:
    """The page's text: sections, plotly.js, the aggregates as JSON, the script."""
    from plotly.offline import get_plotlyjs

    page_css, page_js = (resources.files("ppoga_dspy.report").joinpath(name).read_text(encoding="utf-8")
                         for name in ("report.css", "report.js"))
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{_e(title)}</title><style>{page_css}</style></head><body>",
        f"<header><h1>{_e(title)}</h1><p>{_e(', '.join(names))}; written "
        f"{_dt.datetime.now(_dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}</p></header><main>",
    ]
    if compared and compared["warning"]:
        parts.append(f"<div class='warning' id='coverage-warning'><b>Warning:</b> {_e(compared['warning'])}</div>")
    parts.append(_summary_section(runs, summaries))
    parts.append("<section><h2>Hits@1 by group and cost</h2><div class='plots'>"
                 + "".join(f"<div id='{_e(k)}'></div>" for k in data["figures"] if k.startswith("plot-") and k not in
                           ("plot-corrections", "plot-differences")) + "</div></section>")
    parts.append(_corrections_section({name: correction_effects(rows) for name, rows in runs.items()}))
    if compared:
        parts.append(_comparison_section(compared, questions))
    parts.append(_questions_section(names, questions))
    parts.append("</main><div id='viewer' hidden><button class='close' id='viewer-close' title='close (Esc)'>✕"
                 "</button><div id='viewer-body'></div></div>")
    parts.append(f"<script>{get_plotlyjs()}</script>")
    parts.append(f"<script type='application/json' id='report-data'>{_script_json(data)}</script>")
    parts.append(f"<script>{page_js}</script></body></html>")
    return "".join(parts)


def _index_entry(question: dict[str, Any]) -> dict[str, Any]:
    """A question's line of the page's table: id, text, hops, type, and per run [right, corrected, first answer,
    LM calls, seconds] (null where the run lacks it); its reasoning is in a part file."""
    runs = []
    for row in question["rows"]:
        if row is None:
            runs.append(None)
            continue
        counts = correction_counts(row)
        corrected = bool(counts["path_correction"] or counts["plan_correction"])
        runs.append([int(hit(row)), int(corrected), str((row.get("answers") or [""])[0]), int(row.get("call_num") or 0),
                     round(float(row.get("time") or 0), 2)])
    return {"id": question["id"], "q": question["question"], "h": question["hops"], "t": question["type"], "r": runs}


def _write_parts(folder: Path, questions: list[dict[str, Any]], *, key: str, size: int) -> int:
    """Each run's reasoning view of every question, `size` questions per part file (`part-0001.js`, ...), each
    row read again from its run file and dropped once its view is written; the number of part files.

    A part is a script calling `ppogaReportPart({key, part, questions})`: a page opened from disk (file://) may
    load a script beside it, where it could not fetch JSON, so the detail needs no server."""
    from ppoga_dspy.evaluation.digests import RowFetcher

    count = 0
    with RowFetcher() as fetcher:
        for start in range(0, len(questions), size):
            entries = []
            for q in questions[start:start + size]:
                views = [question_view(fetcher.full(row)) if row is not None else None for row in q["rows"]]
                entries.append({"id": q["id"], "gold": q["gold"], "views": views})
            payload = json.dumps({"key": key, "part": count, "questions": entries}, ensure_ascii=False,
                                 separators=(",", ":"), default=str)
            (folder / _part_name(count)).write_text(f"ppogaReportPart({payload});\n", encoding="utf-8")
            count += 1
    return count


def _part_name(index: int) -> str:
    return f"part-{index + 1:04d}.js"


def _questions(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every question id of any run, in first-seen order, with each run's row (None where a run lacks it)."""
    by_run = [{str(r.get("id")): r for r in rows} for rows in runs.values()]
    order: dict[str, dict[str, Any]] = {}
    for rows in by_run:
        for qid, row in rows.items():
            order.setdefault(qid, row)
    return [{"id": qid, "question": str(first.get("question", "")), "gold": [str(g) for g in first.get("gold") or []],
             "hops": group_value(first, "hops") or "", "type": group_value(first, "type") or "",
             "rows": [rows.get(qid) for rows in by_run]} for qid, first in order.items()]


def _summary_section(runs: dict[str, list[dict[str, Any]]], summaries: dict[str, dict[str, Any]]) -> str:
    names = list(runs)
    head = "".join(f"<th class='num'>{_e(n)}</th>" for n in names)
    body = []
    hits = []
    for name in names:
        rows = runs[name]
        right = sum(hit(r) for r in rows)
        low, high = wilson_interval(right, len(rows))
        hits.append(f"<td class='num'>{right / max(1, len(rows)):.3f} <span class='small'>[{low:.3f}, {high:.3f}]"
                    "</span></td>")
    body.append("<tr><td>Hits@1 (lenient) [95% Wilson]</td>" + "".join(hits) + "</tr>")
    for label, key, fmt in _SUMMARY_ROWS:
        cells = []
        for name in names:
            value = summaries.get(name, {}).get(key)
            cells.append(f"<td class='num'>{'-' if value is None else _e(fmt.format(value))}</td>")
        body.append(f"<tr><td>{_e(label)}</td>{''.join(cells)}</tr>")
    return (f"<section id='summary'><h2>Summary</h2><table><thead><tr><th></th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></section>")


def _corrections_section(effects: dict[str, list[dict[str, Any]]]) -> str:
    rows = []
    for name, entries in effects.items():
        for e in entries:
            after = f"{e['calls_after']:.2f}" if e["kind"] != "no correction" else "-"
            rows.append(f"<tr><td>{_e(name)}</td><td>{_e(e['kind'])}</td><td class='num'>{e['n']}</td>"
                        f"<td class='num'>{e['share']:.1%}</td><td class='num'>{e['right']}</td>"
                        f"<td class='num'>{e['hits@1']:.3f} <span class='small'>[{e['low']:.2f}, {e['high']:.2f}]"
                        f"</span></td><td class='num'>{e['calls']:.2f}</td><td class='num'>{e['tokens']:.0f}</td>"
                        f"<td class='num'>{after}</td></tr>")
    return ("<section id='corrections'><h2>What the corrections did</h2><p class='small'>A question counts under "
            "<i>path correction only</i> or <i>replan</i> when its trace holds one; it was turned around when it "
            "ended right (the step that triggered the correction had failed). <i>rule override</i>: the caps changed "
            "the model's decision. Cost: the group's mean LM calls and tokens, and the LM calls made from the first "
            "correction on.</p><table><thead><tr><th>run</th><th>questions</th><th class='num'>n</th>"
            "<th class='num'>share</th><th class='num'>right in the end</th><th class='num'>Hits@1</th>"
            "<th class='num'>LM calls / q</th><th class='num'>tokens / q</th><th class='num'>calls from the first "
            f"correction</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
            "<div id='plot-corrections'></div></section>")


def _comparison_section(compared: dict[str, Any], questions: list[dict[str, Any]]) -> str:
    text = {q["id"]: q["question"] for q in questions}
    names = compared["runs"]
    out = ["<section id='comparison'><h2>Runs compared</h2>",
           f"<p>Compared on the {compared['shared']} questions every run answered; each run against "
           f"<b>{_e(names[0])}</b>. Intervals: 95% paired bootstrap (seed 0); * the interval excludes 0.</p>",
           "<table id='provenance'><thead><tr><th>provenance</th>"
           + "".join(f"<th>{_e(n)}</th>" for n in names) + "</tr></thead><tbody>",
           "<tr><td>questions</td>" + "".join(f"<td>{compared['questions'][n]}</td>" for n in names) + "</tr>"]
    labels = list(next(iter(compared["provenance"].values())))
    for label in labels:
        out.append(f"<tr><td>{_e(label)}</td>" + "".join(f"<td>{_e(compared['provenance'][n][label])}</td>"
                                                           for n in names) + "</tr>")
    out.append("</tbody></table>")
    for pair in compared["pairs"]:
        m = pair["mcnemar"]
        out.append(f"<h3>{_e(pair['other'])} vs {_e(pair['baseline'])}</h3><table class='pair'><thead><tr>"
                   f"<th>metric</th><th class='num'>{_e(pair['baseline'])}</th><th class='num'>{_e(pair['other'])}"
                   "</th><th class='num'>difference</th><th class='num'>95% interval</th></tr></thead><tbody>")
        for metric, d in pair["differences"].items():
            star = " *" if d["low"] > 0 or d["high"] < 0 else ""
            out.append(f"<tr><td>{_e(metric)}</td><td class='num'>{d['mean_a']:.3f}</td><td class='num'>"
                       f"{d['mean_b']:.3f}</td><td class='num'>{d['difference']:+.3f}</td><td class='num'>"
                       f"[{d['low']:+.3f}, {d['high']:+.3f}]{star}</td></tr>")
        out.append(f"</tbody></table><p>Hits@1, McNemar's exact test: p = {m['p_value']:.4g} ({m['b_only']} right "
                   f"only in {_e(pair['other'])}, {m['a_only']} right only in {_e(pair['baseline'])}).</p>")
        for what, ids in (("won", pair["won"]), ("lost", pair["lost"])):
            links = "".join(f"<li><a href='#q={_e(i)}' data-open='{_e(i)}'>{_e(i)}</a> {_e(text.get(i, ''))}</li>"
                            for i in ids)
            out.append(f"<details><summary>{_e(pair['other'])} {what} {len(ids)} question(s)</summary>"
                       f"<ul class='{what}'>{links}</ul></details>")
    out.append("<div id='plot-differences'></div></section>")
    return "".join(out)


def _questions_section(names: list[str], questions: list[dict[str, Any]]) -> str:
    """Filters and the table's head; the script draws the rows from the page's JSON, a page at a time, so a
    50,000-question report neither carries 50,000 HTML rows nor makes the browser lay them out at once."""
    hops = sorted({q["hops"] for q in questions if q["hops"]}, key=lambda v: (len(v), v))
    types = sorted({q["type"] for q in questions if q["type"]})
    filters = ["<div class='filters'><input data-filter='text' placeholder='filter: id, question, answer' size='36'>"]
    if hops:
        filters.append(_select("hops", "hops", hops))
    if types:
        filters.append(_select("type", "type", types))
    for index, name in enumerate(names):
        filters.append(_select(f"r{index}", f"{name}: result", ["right", "wrong"]))
        filters.append(_select(f"c{index}", f"{name}: corrected", ["yes", "no"]))
    filters.append(f"<span class='small'><span id='shown-count'>{len(questions)}</span> of {len(questions)} "
                   "questions shown; click a row for its reasoning</span></div>")
    head = "<th>id</th><th>question</th><th>hops</th><th>type</th>" + "".join(
        f"<th>{_e(n)}</th><th>answer</th><th class='num'>calls</th><th class='num'>s</th>" for n in names)
    return (f"<section id='questions-section'><h2>Questions</h2>{''.join(filters)}<div id='questions-scroll'>"
            f"<table id='questions'><thead><tr>{head}</tr></thead><tbody></tbody></table>"
            "<button id='questions-more' hidden></button></div>"
            "<p class='small'>✓ right, ✗ wrong (lenient Hits@1), ↻ went through a path or plan correction.</p>"
            "</section>")


def _select(key: str, label: str, values: list[str]) -> str:
    options = "".join(f"<option value='{_e(v)}'>{_e(v)}</option>" for v in values)
    return f"<label class='small'>{_e(label)} <select data-filter='{_e(key)}'><option value=''>any</option>{options}" \
           "</select></label>"
