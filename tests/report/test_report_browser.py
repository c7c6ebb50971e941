"""The HTML report in a real browser: headless Chromium (Debian's package; CI installs it) opens the file
offline, with no console error, every question row present, and a question's reasoning view opening from the
part file that holds it."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.evaluation.runs import read_run
from ppoga_dspy.report.html import parts_folder, write_report
from ppoga_dspy.testing.browser import chromium_page, find_chromium

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="no chromium on PATH (apt-get install chromium; "
                                                                 ".ci/run installs it)")


def test_report_renders_in_chromium(demo_runs, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", str(demo_runs["gold"]), str(demo_runs["noisy"]), "--html", str(out),
                 "--resamples", "500"]) == 0
    ids = [r["id"] for r in read_run(demo_runs["gold"])]
    replanned = next(r["id"] for r in read_run(demo_runs["noisy"])
                     if any(e["stage"] == "plan_correction" for e in r["trace"]))
    with chromium_page() as page:
        page.goto(out.as_uri())
        assert page.wait_for("document.body.dataset.ready") == "true"
        assert page.evaluate("Array.from(document.querySelectorAll('#questions tbody tr')).map(r => r.dataset.id)") \
            == ids
        assert page.evaluate("document.querySelectorAll('#plot-hops .main-svg').length") >= 1  # Plotly drew
        row = json.dumps(f'#questions tbody tr[data-id="{replanned}"]')
        page.evaluate(f"document.querySelector({row}).click()")
        cycles = page.wait_for("!document.getElementById('viewer').hidden && "
                               "document.querySelectorAll('#viewer .cycle').length")
        assert cycles >= 3
        viewer = page.evaluate("document.getElementById('viewer').textContent")
        assert "(abandoned)" in viewer and "plan correction" in viewer and "Evidence chains" in viewer
        assert page.wait_for("document.querySelectorAll('#viewer .graph .main-svg').length") >= 1
        page.evaluate("document.querySelector('[data-filter=r1]').value = 'wrong';"
                      "document.querySelector('[data-filter=r1]').dispatchEvent(new Event('input'))")
        wrong = sum(1 for r in read_run(demo_runs["noisy"]) if not r["metrics"]["hits@1"])
        assert page.evaluate("document.getElementById('shown-count').textContent") == str(wrong)
        assert page.errors() == []
        assert all(url.startswith(("file:", "data:", "blob:", "about:")) for url in page.requests()), page.requests()


def test_reasoning_in_a_later_part_file_opens_on_demand(demo_runs, tmp_path):
    """With 10 questions a part, question 23's view is in part-0003.js: it is loaded only when the question is
    opened (by the #q= address, then by a click on its row after filtering), from file:// with no server."""
    rows = read_run(demo_runs["noisy"])
    out = tmp_path / "paged.html"
    write_report(out, {"noisy": rows}, part_size=10)
    assert sorted(p.name for p in parts_folder(out).iterdir()) == [f"part-000{i}.js" for i in range(1, 5)]
    target, other = rows[22], rows[31]
    with chromium_page() as page:
        page.goto(out.as_uri() + "#q=" + quote(target["id"]))
        assert page.wait_for("document.body.dataset.ready") == "true"
        assert page.wait_for("document.querySelectorAll('#viewer .cycle').length") >= 1
        assert target["question"] in page.evaluate("document.getElementById('viewer').textContent")
        loaded = page.evaluate("Array.from(document.scripts).map(s => s.src).filter(Boolean)")
        assert [src.rsplit("/", 1)[1] for src in loaded] == ["part-0003.js"]  # only the part it needed
        page.evaluate("document.getElementById('viewer-close').click();"
                      "const box = document.querySelector('[data-filter=text]');"
                      f"box.value = {json.dumps(other['id'])}; box.dispatchEvent(new Event('input'))")
        assert page.evaluate("document.getElementById('shown-count').textContent") == "1"
        page.evaluate("document.querySelector('#questions tbody tr').click()")
        assert page.wait_for(f"document.getElementById('viewer').dataset.question === {json.dumps(other['id'])} && "
                             "document.querySelectorAll('#viewer .run-view').length") == 1
        assert page.wait_for("document.getElementById('viewer').textContent.includes('Answer')")
        assert page.errors() == []
        assert all(url.startswith(("file:", "data:", "blob:", "about:")) for url in page.requests()), page.requests()
