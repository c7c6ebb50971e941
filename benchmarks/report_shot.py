"""A screenshot of a run's HTML report, taken in headless Chromium (Debian's `chromium`): one command.

    python benchmarks/report_shot.py RUN.jsonl [RUN2.jsonl ...] OUT.png            # the report's top
    python benchmarks/report_shot.py RUN.jsonl OUT.png --question ID                # a question's reasoning view
    python benchmarks/report_shot.py RUN.jsonl OUT.png --full-page                  # the whole page

docs/report-wc2014.png was taken so (two runs of 60 WC-P2 test questions, `ppoga eval --dataset
wc2014:../shared/data/wc2014/WC-P2.txt --split test --limit 60 --lm oracle/gold-path` and `--lm oracle/noisy:0.2`):

    python benchmarks/report_shot.py runs/wc-gold.jsonl runs/wc-noisy.jsonl docs/report-wc2014.png \
        --question WC-P2-00144 --palette

The report is written as `ppoga report RUN... --html FILE` writes it, to a temporary file (kept with `--html FILE`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from urllib.parse import quote


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path, metavar="RUN.jsonl ... OUT.png")
    parser.add_argument("--question", metavar="ID", default=None, help="open this question's reasoning view")
    parser.add_argument("--full-page", action="store_true", help="the whole page, not the first screen")
    parser.add_argument("--palette", action="store_true",
                        help="write a 128-colour PNG (about a third of the bytes; what docs/ keeps)")
    parser.add_argument("--html", type=Path, default=None, metavar="FILE", help="keep the report here")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1000)
    args = parser.parse_args()
    *runs, out = args.files
    if not runs or out.suffix.lower() != ".png":
        parser.error("give one or more run files, then the PNG to write (OUT.png)")
    import tempfile

    from ppoga_dspy.cli import main as ppoga
    from ppoga_dspy.testing.browser import BrowserError, chromium_page

    folder = tempfile.TemporaryDirectory(prefix="report-shot-")
    report = args.html or Path(folder.name) / "report.html"
    code = ppoga(["report", *map(str, runs), "--html", str(report)])
    if code != 0:
        return code
    try:
        with chromium_page() as page:
            page.call("Emulation.setDeviceMetricsOverride", width=args.width, height=args.height,
                      deviceScaleFactor=1, mobile=False)
            page.goto(report.as_uri() + (f"#q={quote(args.question, safe='')}" if args.question else ""))
            page.wait_for("document.body.dataset.ready")
            if args.question:
                page.wait_for("document.querySelectorAll('#viewer .run-view').length")  # its part file loaded
                page.wait_for("document.querySelectorAll('#viewer .graph .main-svg').length "
                              "|| !document.querySelector('#viewer .graph')")
            errors = page.errors()
            page.screenshot(out, width=args.width, height=args.height, full_page=args.full_page)
    except BrowserError as exc:
        print(f"report_shot: {exc}", file=sys.stderr)
        return 2
    if errors:
        print("report_shot: the page logged errors: " + "; ".join(errors), file=sys.stderr)
        return 1
    if args.palette:
        from PIL import Image  # Pillow comes with matplotlib

        with Image.open(out) as image:
            small = image.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
        small.save(out, optimize=True)
    print(f"report_shot: wrote {out} ({out.stat().st_size / 1e3:.0f} KB)" + (f" from {report}" if args.html else ""))
    folder.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
