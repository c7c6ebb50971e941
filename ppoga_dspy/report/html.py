"""`ppoga report RUN... --html FILE`: one self-contained HTML file that opens offline.

The file holds everything: the summary with intervals, Plotly figures (plotly.js inlined once, no CDN),
what the corrections did, the runs compared (when there are several), a filterable table of questions, and
for each question its reasoning view (plan, step cycles, corrections, answer, evidence graph), drawn on
demand from JSON data in the page. Text from run files is escaped in the table and set as text by the
script (`report.js`, beside this module with `report.css`), so a question or a reply cannot inject markup.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from ppoga_dspy.report.data import (
    correction_effects,
    corrections,
    group_value,
    groups_with_intervals,
    hit,
    question_view,
)
from ppoga_dspy.report.stats import wilson_interval

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


def write_report(
    path: Path, runs: dict[str, list[dict[str, Any]]], *, summaries: dict[str, dict[str, Any]] | None = None,
    comparison: Any = None, title: str = "PPoGA run report",
) -> int:
    """Write the report for `runs` (name -> rows) to `path` atomically; the number of bytes written."""
    from plotly.offline import get_plotlyjs

    from ppoga_dspy.evaluation.evaluate import summarize
    from ppoga_dspy.report import plots
    from ppoga_dspy.report.compare import comparison_json

    page_css, page_js = (resources.files("ppoga_dspy.report").joinpath(name).read_text(encoding="utf-8")
                         for name in ("report.css", "report.js"))
    summaries = summaries or {name: summarize(rows) for name, rows in runs.items()}
    names = list(runs)
    groups = {name: groups_with_intervals(rows) for name, rows in runs.items()}
    effects = {name: correction_effects(rows) for name, rows in runs.items()}
    compared = comparison_json(comparison) if comparison is not None else None
    figures: dict[str, Any] = {}
    for key in ("hops", "type", "level"):
        if any(key in g for g in groups.values()):
            figures[f"plot-{key}"] = plots.hits_by_group(groups, key)
    figures["plot-costs"] = plots.cost_distributions(runs)
    figures["plot-corrections"] = plots.correction_bars(effects)
    if compared and compared["pairs"]:
        figures["plot-differences"] = plots.difference_forest(compared["pairs"])
    questions = _questions(runs)
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
                 + "".join(f"<div id='{_e(k)}'></div>" for k in figures if k.startswith("plot-") and k not in
                           ("plot-corrections", "plot-differences")) + "</div></section>")
    parts.append(_corrections_section(effects))
    if compared:
        parts.append(_comparison_section(compared, questions))
    parts.append(_questions_section(names, questions, runs))
    parts.append("</main><div id='viewer' hidden><button class='close' id='viewer-close' title='close (Esc)'>✕"
                 "</button><div id='viewer-body'></div></div>")
    data = {"runs": names, "figures": figures, "questions": [
        {"id": q["id"], "question": q["question"], "gold": q["gold"],
         "views": [question_view(row) if row is not None else None for row in q["rows"]]} for q in questions]}
    parts.append(f"<script>{get_plotlyjs()}</script>")
    parts.append(f"<script type='application/json' id='report-data'>{_script_json(data)}</script>")
    parts.append(f"<script>{page_js}</script></body></html>")
    text = "".join(parts)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
    return path.stat().st_size


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


def _questions_section(names: list[str], questions: list[dict[str, Any]], runs: dict[str, list[dict]]) -> str:
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
    body = []
    for q in questions:
        attributes = [f"data-id='{_e(q['id'])}'", f"data-hops='{_e(q['hops'])}'", f"data-type='{_e(q['type'])}'"]
        cells = [f"<td>{_e(q['id'])}</td><td>{_e(q['question'])}</td><td>{_e(q['hops'])}</td><td>{_e(q['type'])}</td>"]
        for index, row in enumerate(q["rows"]):
            if row is None:
                attributes.append(f"data-r{index}='absent'")
                cells.append("<td class='small'>not run</td><td></td><td></td><td></td>")
                continue
            right = hit(row)
            counts = corrections(row)
            corrected = "yes" if counts["path_correction"] or counts["plan_correction"] else "no"
            attributes += [f"data-r{index}='{'right' if right else 'wrong'}'", f"data-c{index}='{corrected}'"]
            answer = (row.get("answers") or [""])[0]
            cells.append(f"<td class='{'right' if right else 'wrong'}'>{'✓' if right else '✗'}"
                         f"{' ↻' if corrected == 'yes' else ''}</td><td>{_e(answer)}</td>"
                         f"<td class='num'>{int(row.get('call_num') or 0)}</td>"
                         f"<td class='num'>{float(row.get('time') or 0):.2f}</td>")
        body.append(f"<tr {' '.join(attributes)}>{''.join(cells)}</tr>")
    return (f"<section id='questions-section'><h2>Questions</h2>{''.join(filters)}<div id='questions-scroll'>"
            f"<table id='questions'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
            "<p class='small'>✓ right, ✗ wrong (lenient Hits@1), ↻ went through a path or plan correction.</p>"
            "</section>")


def _select(key: str, label: str, values: list[str]) -> str:
    options = "".join(f"<option value='{_e(v)}'>{_e(v)}</option>" for v in values)
    return f"<label class='small'>{_e(label)} <select data-filter='{_e(key)}'><option value=''>any</option>{options}" \
           "</select></label>"
