"""The HTML report: a page that needs no network, every question in its index and each one's reasoning in the
part files beside it, text from run files escaped."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from ppoga_dspy.cli import main
from ppoga_dspy.evaluation.runs import read_run
from ppoga_dspy.report.compare import compare_runs
from ppoga_dspy.report.data import chain_graph, correction_effects, groups_with_intervals
from ppoga_dspy.report.html import parts_folder, write_report

PART_PREFIX = "ppogaReportPart("


def read_parts(page) -> list[dict]:
    """Every question's detail from the part files beside `page`, in order (each file: `ppogaReportPart({...});`)."""
    questions = []
    files = sorted(parts_folder(page).iterdir())
    for index, part in enumerate(files):
        text = part.read_text(encoding="utf-8")
        assert text.startswith(PART_PREFIX) and text.endswith(");\n")
        payload = json.loads(text[len(PART_PREFIX):-3])
        assert payload["part"] == index
        questions += payload["questions"]
    return questions


class _Page(HTMLParser):
    """What the tests look at: external references, question rows, the JSON data, section ids."""

    def __init__(self) -> None:
        super().__init__()
        self.external: list[str] = []
        self.rows: list[str] = []
        self.ids: set[str] = set()
        self._in_data = False
        self.data = ""

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for key in ("src", "href"):
            value = attributes.get(key) or ""
            if value and not value.startswith("#"):
                self.external.append(value)
        if tag == "tr" and "data-id" in attributes:
            self.rows.append(attributes["data-id"])
        if attributes.get("id"):
            self.ids.add(attributes["id"])
        self._in_data = attributes.get("id") == "report-data"

    def handle_data(self, data):
        if self._in_data:
            self.data += data

    def handle_endtag(self, tag):
        self._in_data = False


def _parse(path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def test_report_is_self_contained_and_lists_every_question(demo_runs, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", str(demo_runs["gold"]), str(demo_runs["noisy"]), "--html", str(out),
                 "--resamples", "500"]) == 0
    page = _parse(out)
    assert page.external == []  # no script, stylesheet or link leaves the file
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|@import url", out.read_text(encoding="utf-8"))
    ids = [r["id"] for r in read_run(demo_runs["gold"])]
    assert page.rows == []  # the table's rows are drawn by the script from the index
    assert {"summary", "corrections", "comparison", "provenance", "questions", "viewer", "plot-hops",
            "plot-costs", "plot-differences"} <= page.ids
    data = json.loads(page.data)
    assert [q["id"] for q in data["questions"]] == ids and len(data["runs"]) == 2
    assert data["parts"]["dir"] == "report.html.parts" and data["parts"]["count"] == 1
    detail = read_parts(out)
    assert [q["id"] for q in detail] == ids
    view = detail[0]["views"][0]
    assert view["plan"] and view["cycles"] and view["graph"]["nodes"] and view["answers"]
    assert {"data", "layout"} <= set(data["figures"]["plot-hops"])


def test_unequal_runs_warn_in_the_page(demo_runs, tmp_path):
    runs = {str(p): read_run(p) for p in (demo_runs["gold"], demo_runs["part"])}
    out = tmp_path / "unequal.html"
    write_report(out, runs, comparison=compare_runs(runs, resamples=200))
    page = _parse(out)
    assert "coverage-warning" in page.ids and "20 questions they share" in out.read_text(encoding="utf-8")
    data = json.loads(page.data)
    assert sum(q["r"][1] is None for q in data["questions"]) == 15  # in the first run only: shown as not run
    assert sum(q["views"][1] is None for q in read_parts(out)) == 15


def test_hostile_text_is_escaped(demo_runs, tmp_path):
    rows = read_run(demo_runs["gold"])[:2]
    evil = "</script><img src=x onerror=alert(1)>"
    rows[0] = {**rows[0], "question": evil, "answers": [evil], "id": "x'><b>"}
    out = tmp_path / "evil.html"
    write_report(out, {"run": rows})
    text = out.read_text(encoding="utf-8")
    assert evil not in text and "<img src=x" not in text
    page = _parse(out)
    assert page.external == [] and json.loads(page.data)["questions"][0]["id"] == "x'><b>"
    assert json.loads(page.data)["questions"][0]["q"] == evil  # kept as text, shown with textContent
    assert read_parts(out)[0]["views"][0]["answers"] == [evil]


def test_chain_graph_layers_from_the_topic_to_the_answer(demo_runs):
    row = next(r for r in read_run(demo_runs["gold"]) if r["metadata"]["hops"] == 3)
    graph = chain_graph(row)
    kinds = {n["kind"]: n["x"] for n in graph["nodes"]}
    assert kinds["topic"] == 0 and kinds["answer"] == max(n["x"] for n in graph["nodes"]) >= 2
    assert len(graph["edges"]) >= 2


def test_group_intervals_and_correction_effects(demo_runs):
    rows = read_run(demo_runs["noisy"])
    hops = {e["value"]: e for e in groups_with_intervals(rows)["hops"]}
    assert sum(e["n"] for e in hops.values()) == 35
    assert all(e["low"] <= e["hits@1"] <= e["high"] for e in hops.values())
    effects = {e["kind"]: e for e in correction_effects(rows)}
    assert effects["no correction"]["n"] + effects["path correction only"]["n"] + effects["replan"]["n"] == 35
    assert effects["replan"]["n"] and effects["replan"]["calls_after"] > 0
    assert effects["replan"]["calls"] > effects["no correction"]["calls"]  # correcting costs calls
