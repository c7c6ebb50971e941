"""Where the benchmarks find the data folder: `--data DIR`, else `$PPOGA_DATA`, else `../shared/data` beside the repo.

One helper for every script in benchmarks/, so a fresh clone (which has no `../shared/data`) gets
the same clear message everywhere, naming the flag, the variable and a command to copy.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ENV_VAR = "PPOGA_DATA"
BESIDE_REPO = Path(__file__).resolve().parents[2] / "shared" / "data"


def add_data_option(parser: argparse.ArgumentParser) -> None:
    """`--data DIR` (default: $PPOGA_DATA, else ../shared/data beside the repo)."""
    parser.add_argument("--data", type=Path, default=None, metavar="DIR",
                        help=f"benchmark data folder (default: ${ENV_VAR}, else {BESIDE_REPO})")


def data_dir(given: Path | None, *, needs: str = "", script: str | None = None) -> Path:
    """The data folder to use; exit with one clear line (status 2) when there is none.

    `needs` is a path inside the folder the script reads (e.g. "wc2014/WC2014.txt"), checked too.
    """
    if given is not None:
        where, source = Path(given), "--data"
    elif os.environ.get(ENV_VAR, "").strip():
        where, source = Path(os.environ[ENV_VAR].strip()), f"${ENV_VAR}"
    else:
        where, source = BESIDE_REPO, "the default"
    missing = where if not where.is_dir() else (where / needs if needs and not (where / needs).exists() else None)
    if missing is not None:
        name = script or Path(sys.argv[0]).name
        sys.exit(f"{name}: no benchmark data at {missing} ({source}); pass the folder that holds pathquestion/ and "
                 f"wc2014/: python benchmarks/{name} --data /path/to/data, or {ENV_VAR}=/path/to/data")
    return where
