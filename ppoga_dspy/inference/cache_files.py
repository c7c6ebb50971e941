"""Small files derived from the embedded model and kept in its cache: written whole or not at all.

Why one place: the prompt heads (`inference/prompt_heads.py`) and the decoder's vocabulary marks are both
rebuilt by any process that finds them missing, and read by processes that may run side by side (a
sharded `ppoga eval`). A reader must never see half a file, and a write that fails must leave nothing
behind; both only ever cost time when absent.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)


def write_atomically(target: Path, write: Callable[[str], None]) -> None:
    """`write(path)` into a temporary file beside `target`, then rename it onto `target` (OSError propagates)."""
    handle, tmp = tempfile.mkstemp(prefix=target.name + ".", dir=target.parent)
    os.close(handle)
    try:
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_marks(path: Path) -> dict[str, list[int]]:
    """The decoder marks kept at `path` ({} if there are none or the file is unreadable: they are found again)."""
    try:
        data = json.loads(path.read_text())
        return {str(k): [int(i) for i in v] for k, v in data.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def write_marks(path: Path, marks: dict[str, list[int]]) -> None:
    """Keep the decoder marks at `path`; a cache that cannot be written only costs the next process a pass."""
    try:
        write_atomically(path, lambda tmp: Path(tmp).write_text(json.dumps(marks)))
    except OSError as exc:
        logger.debug("decoder marks not kept at %s (%s)", path, exc)
