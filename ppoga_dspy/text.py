"""Text that crosses the program's edge: one rule for text coming in, one for text going out to a terminal.

Text comes in from places nobody checked: data files (questions, run files, config), the KG (labels,
ids), LM replies, artifacts. It can hold lone surrogates (argv and JSON `\\udXXX` escapes produce
them; UTF-8 cannot encode them, so the first write or print crashes), NUL and other control bytes,
terminal escape sequences (colours, hyperlinks, clear-screen), and, in data, DSPy field headers
(`[[ ## answer ## ]]`) that a prompt would read as structure. So:

* **in** — `clean(text)`: valid Unicode (a lone surrogate becomes U+FFFD), no escape sequences, no control
  characters but tab and newline, no bidirectional overrides. LM replies get this rule (their field
  headers are their format). `from_data(text)` adds `neutralise_fields`: what comes from the KG or a data
  file can never open a prompt field. `decode(data)` is the same for bytes (bad bytes become U+FFFD).
* **out** — `for_terminal(text)`: `clean`, then secrets redacted; `markup_safe(text)` also escapes rich
  markup, for strings that are printed through rich (a `[link=...]` or `[/]` in a label is shown as text).
* **files** — every text file is read with `TEXT_ENCODING` (`utf-8-sig`: a byte-order mark at its head is not
  part of the first name or template) and cut into lines with `lines(text)`: at newlines only, never at the other
  breaks `str.splitlines` knows (U+2028, U+0085, a vertical tab), which are characters inside a question.
* **secrets** — `redact(text)`: credentials in URLs, `key=` parameters, bearer tokens, key-shaped strings
  and the values of the process's `*_API_KEY`/`*_TOKEN` variables become `***`; for every error that is
  stored or printed.

This module imports nothing of ours, so every room may use it (like `errors`).
"""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["TEXT_ENCODING", "clean", "clean_tree", "decode", "for_terminal", "from_data", "lines", "markup_safe",
           "neutralise_fields", "redact"]

#: How every text input is read: UTF-8, a leading byte-order mark dropped (editors on Windows write one).
TEXT_ENCODING = "utf-8-sig"


def lines(text: str) -> list[str]:
    """`text` cut at newlines only (`\n`, with a `\r` before it dropped), without a last empty line.

    `str.splitlines` also cuts at U+2028, U+2029, U+0085, vertical tab, form feed and the file separators: a
    question holding one became two lines (two questions, or a question and a broken answer column)."""
    out = text.split("\n")
    if out and out[-1] == "":
        out.pop()
    return [line[:-1] if line.endswith("\r") else line for line in out]

# ESC-introduced sequences: CSI (colours, cursor, clear-screen), OSC (titles, hyperlinks) up to BEL or ST,
# DCS/SOS/PM/APC strings, and two-character escapes.
_ESCAPES = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?|[ -~]?)"
    r"|\x9b[0-?]*[ -/]*[@-~]?|\x9d[^\x07\x1b\x9c]*[\x07\x9c]?"
)
# C0 controls but tab and newline, DEL, C1 controls, bidirectional embeddings/overrides/isolates.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SURROGATES = re.compile("[\ud800-\udfff]")
# `[[` then optional spaces then `##`: the opening of a DSPy field header (`[[ ## name ## ]]`).
_FIELD_OPEN = re.compile(r"\[\[(\s*)##")


def clean(text: Any) -> str:
    """Text from outside made safe to keep, write and print: valid Unicode, no escapes, no controls.

    A lone surrogate becomes U+FFFD; `\\r\\n` and `\\r` become `\\n`; escape sequences are removed whole,
    other control characters (NUL included) dropped. Idempotent.
    """
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if text.isascii() and text.isprintable():
        return text
    text = _SURROGATES.sub("\ufffd", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _ESCAPES.sub("", text)
    return _CONTROLS.sub("", text)


def decode(data: bytes) -> str:
    """Bytes from outside as clean text: bad UTF-8 becomes U+FFFD, then `clean`."""
    return clean(data.decode(TEXT_ENCODING, errors="replace"))


def neutralise_fields(text: str) -> str:
    """No DSPy field header can be read out of the text: `[[ ## x ## ]]` becomes `[ [ # x ## ]]`."""
    while True:
        changed = _FIELD_OPEN.sub(r"[ [\1#", text)
        if changed == text:
            return text
        text = changed


def from_data(text: Any) -> str:
    """The rule for text from the KG or a data file: `clean`, and no field header can reach a prompt."""
    return neutralise_fields(clean(text))


def clean_tree(value: Any, *, rule=clean, limit: int = 200) -> Any:
    """Every string of a JSON-like value (keys too) through `rule`; deeper than `limit` levels: ValueError."""

    def walk(item: Any, depth: int) -> Any:
        if depth > limit:
            raise ValueError(f"nested deeper than {limit} levels")
        if isinstance(item, str):
            return rule(item)
        if isinstance(item, dict):
            return {rule(k) if isinstance(k, str) else k: walk(v, depth + 1) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v, depth + 1) for v in item]
        return item

    return walk(value, 0)


# -- secrets --------------------------------------------------------------------------------------

_SECRET_PATTERNS = (
    # credentials in a URL: scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]*:[^/\s@]+@"), r"\1***@"),
    # key=, token=, password=... in a query string or a message
    (re.compile(r"(?i)\b((?:api[-_]?key|apikey|access[-_]?token|secret|password|passwd)\"?\s*[=:]\s*\"?)"
                r"(?!\*\*\*)[^\s&'\",;}]+"), r"\1***"),
    (re.compile(r"(?i)((?<![\w-])(?:key|token|auth|sig)=)(?!\*\*\*)[^\s&'\",;]+"), r"\1***"),
    (re.compile(r"(?i)\b(bearer|basic)\s+(?!\*\*\*)[A-Za-z0-9._~+/=-]{6,}"), r"\1 ***"),
    # key-shaped strings of the common providers
    (re.compile(r"\b(sk|pk|rk|sess|xai|gsk|hf|ghp|gho|github_pat|glpat|AKIA)[-_][A-Za-z0-9_-]{12,}"), r"\1-***"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"), "AIza***"),
)
_SECRET_VARIABLES = re.compile(r"(?i)(api_?key|token|secret|password)$")


def _secret_values() -> list[str]:
    values = [v for k, v in os.environ.items() if _SECRET_VARIABLES.search(k) and len(v) >= 8]
    return sorted(set(values), key=len, reverse=True)


def redact(text: Any) -> str:
    """Anything that looks like a credential replaced by `***` (see the module doc)."""
    text = text if isinstance(text, str) else str(text)
    for value in _secret_values():
        text = text.replace(value, "***")
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


# -- out ------------------------------------------------------------------------------------------


def for_terminal(text: Any) -> str:
    """The rule for text leaving for a terminal (or a stored error): clean, secrets redacted."""
    return redact(clean(text))


# rich reads `[` + a tag + `]` as markup (with `\\`s before it halved, an odd count escaping it), and turns
# any other `\\[` into `[`; a trailing backslash would escape the tag that follows in the caller's string.
_TAG_OPEN = re.compile(r"(\\*)\[(?=[a-z#/@][^[]*?\])")
_OTHER_OPEN = re.compile(r"(?<!\x00)\[")
_TRAILING = re.compile(r"(\\+)\Z")


def markup_safe(text: Any) -> str:
    """`for_terminal`, with rich markup escaped, for outside text inside a rich markup string: printed as written.

    (rich's own `escape` misses `\\[` before a non-tag, which rich then prints as `[`.)
    """
    text = for_terminal(text)
    text = _TAG_OPEN.sub(lambda m: m.group(1) * 2 + "\x00[", text)  # NUL marks an escaped `[` (clean removed all)
    text = _OTHER_OPEN.sub("\\\\[", text)
    text = _TRAILING.sub(lambda m: m.group(1) * 2, text)
    return text.replace("\x00[", "\\[")
