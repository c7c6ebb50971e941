"""Delimited KB files (IRN's tab-separated, MetaQA's `head|relation|tail`) read as N-Triples lines.

One reader for both, so that both give a bad line, a name the dialect refuses and a file that is not UTF-8 the
same one-line error with its `PATH:LINE`; each format says only how a line splits and how names become IRIs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ppoga_dspy.kg.base import InvalidIdentifier, KGLoadError
from ppoga_dspy.kg.dialects import RDFS_LABEL
from ppoga_dspy.kg.terms import escape_string
from ppoga_dspy.text import TEXT_ENCODING


def delimited_ntriples(
    path: Path,
    seen: set[str],
    *,
    split: Callable[[str], list[str]],
    shape: str,
    iris: Callable[[str, str, str], tuple[str, str, str]],
    kind: str,
) -> Iterator[str]:
    """One N-Triples line per fact and an rdfs:label line per entity not in `seen` (which carries them across files).

    `split` cuts a line into fields, `shape` says what a line must hold (for the error), `iris` turns
    (head, relation, tail) into three IRIs or raises InvalidIdentifier, `kind` names the format in errors.
    """
    label = f"<{RDFS_LABEL}>"
    with path.open(encoding=TEXT_ENCODING, errors="strict", newline="\n") as handle:  # a BOM is not a name
        try:
            for number, line in enumerate(handle, 1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                parts = [p.strip() for p in split(line)]
                if len(parts) != 3 or not all(parts):
                    raise KGLoadError(f"{path}:{number}: {shape}; got {line[:120]!r} (the file was read as a {kind} "
                                      "KB; pass --format irn|pipe to read it as the other)")
                head, relation, tail = parts
                try:  # what the dialect would refuse at query time is refused here, with its line
                    s, r, o = iris(head, relation, tail)
                except InvalidIdentifier as exc:
                    raise KGLoadError(f"{path}:{number}: {exc}") from None
                yield f"<{s}> <{r}> <{o}> .\n"
                for name, iri in ((head, s), (tail, o)):
                    if name not in seen:
                        seen.add(name)
                        yield f'<{iri}> {label} "{escape_string(name)}" .\n'
        except UnicodeDecodeError as exc:
            raise KGLoadError(f"{path} is not UTF-8 text ({exc}); {kind} KBs are UTF-8 files") from exc
