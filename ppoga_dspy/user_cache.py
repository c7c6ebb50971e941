"""Where the user's caches live: one rule for every folder the package keeps between runs.

The converted embedded model (`PPOGA_MODEL_CACHE`) and the imported KG stores (`PPOGA_KG_CACHE`) each have a
variable that names their folder or turns them off (`off`, `0`, `false`, `no`, `none`); unset, they live under
`$XDG_CACHE_HOME/ppoga-dspy/` (default `~/.cache/ppoga-dspy/`). Imports nothing of ours, so that every room
(`inference` included) may use it.
"""

from __future__ import annotations

import os
from pathlib import Path

OFF_VALUES = ("off", "0", "false", "no", "none")


def cache_folder(variable: str, name: str) -> Path | None:
    """The folder `$variable` names, None when it says off, else `$XDG_CACHE_HOME/ppoga-dspy/<name>`."""
    value = os.environ.get(variable, "").strip()
    if value.lower() in OFF_VALUES and value:
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ppoga-dspy" / name
