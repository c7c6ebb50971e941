"""The README is a front door and docs/ holds the rest: links resolve, every page is reachable, the README stays short.

Figures and guides moved from the README into docs/ pages; a renamed page or heading would otherwise leave
a dead link that nobody notices until a reader clicks it. Anchors are checked the way GitHub renders them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
#: The README's size limit: a front door, not a lab notebook (later figures go to docs/ pages).
README_MAX_BYTES = 15 * 1024
#: The project's two commands (install + ask, test), which scripts/test.sh and .ci/run name as the README's.
INSTALL_AND_ASK = 'python3 -m venv .venv && .venv/bin/pip install -e ".[test]" && .venv/bin/ppoga ask'
TEST_COMMAND = "bash scripts/test.sh"

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _prose(text: str) -> str:
    """The text without code blocks and inline code, where `[x](y)` is not a link."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def _links(page: Path) -> list[str]:
    return _LINK.findall(_prose(page.read_text(encoding="utf-8")))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (but - and _), spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors on its text
    text = text.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _local(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE)  # http:, https:, mailto: ...


def test_the_readme_is_short_and_starts_with_the_two_commands():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes (limit {README_MAX_BYTES}): move detail to docs/"
    text = README.read_text(encoding="utf-8")
    first_block = _FENCE.search(text)
    assert first_block is not None and text.index(first_block.group(0)) < text.index("\n## ")
    lines = [line.strip() for line in first_block.group(0).splitlines()]
    assert INSTALL_AND_ASK in lines and TEST_COMMAND in lines, first_block.group(0)


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_points_to_a_file_and_heading_that_exist(page):
    broken = []
    for target in filter(_local, _links(page)):
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor} in {resolved.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_every_docs_page_is_reachable_from_the_readme():
    reached, todo = set(), [README.resolve()]
    while todo:
        page = todo.pop()
        if page in reached or page.suffix != ".md" or not page.is_file():
            continue
        reached.add(page)
        for target in filter(_local, _links(page)):
            path_part = target.partition("#")[0]
            if path_part:
                todo.append((page.parent / path_part).resolve())
    orphans = [str(p.relative_to(REPO)) for p in DOCS.rglob("*.md") if p.resolve() not in reached]
    assert not orphans, f"docs pages no link leads to from README.md: {orphans}"


def test_the_readmes_python_example_runs():
    """The README's Python example, run as written but with the no-model baseline in place of the hosted LM."""
    text = README.read_text(encoding="utf-8")
    example = re.search(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert example is not None, "README.md has no Python example"
    code = example.group(1)
    assert '"openai/gpt-4o-mini"' in code
    done = subprocess.run([sys.executable, "-c", code.replace('"openai/gpt-4o-mini"', '"none"')], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    printed = done.stdout.strip().splitlines()[-1]
    assert printed.startswith("[") and printed.endswith("]"), done.stdout


def test_the_slugs_match_githubs():
    assert _slug("`ppoga ask`, cold and warm") == "ppoga-ask-cold-and-warm"
    assert _slug("Paper concept -> code") == "paper-concept---code"
    assert _slug("Speed and accuracy: whole questions") == "speed-and-accuracy-whole-questions"
