"""The HTML report in a real browser: headless Chromium (Debian's package; CI installs it) opens the file
offline, with no console error, every question row present, and a question's reasoning view opening."""

from __future__ import annotations

import json

import pytest

from ppoga_dspy.cli import main
from ppoga_dspy.evaluation.runs import read_run
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
