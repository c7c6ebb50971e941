"""The layout's rules, checked on the source (ARCHITECTURE.md): dependencies point one way, no import cycles,
and the wheel carries every package and the demo data."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "ppoga_dspy"

# room -> the rooms it may import (besides itself). `errors` and `text` (the rules for text crossing the
# program's edge) are the shared leaves every room may use.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "text": set(),
    "user_cache": set(),
    "data": set(),
    "kg": {"errors", "text", "user_cache"},
    "signatures": {"errors", "text"},
    "inference": {"errors", "user_cache"},
    "lm": {"errors", "text", "inference"},
    # the sentence encoder holds the inference room's model-construction lock (`building_model`)
    "method": {"errors", "text", "kg", "signatures", "lm", "inference"},
    # the measuring rooms: datasets are read, runs are scored, runs are shown, scripted planners stand in for a model
    "datasets": {"errors", "text", "kg", "data"},
    "scripted": {"errors", "text", "kg", "signatures", "lm"},
    "evaluation": {"errors", "text", "kg", "signatures", "lm", "method", "datasets"},
    "report": {"errors", "text", "kg", "evaluation"},
    "optimizers": {"errors", "text", "kg", "signatures", "lm", "method", "datasets", "evaluation", "scripted"},
    "testing": {"errors", "text", "kg", "lm", "data"},
    "app": {"errors", "text", "kg", "signatures", "lm", "method", "datasets", "evaluation", "report", "scripted",
            "optimizers", "data"},
    "cli": {"errors", "text", "kg", "signatures", "lm", "method", "datasets", "evaluation", "report", "scripted",
            "optimizers", "app", "data", "__init__"},
    "__main__": {"cli"},
    "__init__": set(),
}


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (data/ is mapped in as ppoga_dspy.data)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    found["ppoga_dspy.data"] = REPO / "data" / "__init__.py"
    return found


def _imports(path: Path, *, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n == "ppoga_dspy" or n.startswith("ppoga_dspy.")}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_dependencies_point_one_way():
    modules = _modules()
    broken = []
    for name, path in modules.items():
        room = _room(name)
        for target in _imports(path, top_level_only=False):
            if target not in modules:  # `from pkg import name` also lists pkg.name: keep real modules only
                continue
            other = _room(target)
            if other != room and other not in ALLOWED[room]:
                broken.append(f"{name} imports {target} ({room} may not import {other})")
    assert not broken, "\n".join(broken)


def test_the_inference_engine_is_used_only_through_its_face():
    """Outside `inference/`, only the package itself is imported (its __init__ names the contract), never a file of
    it: what another engine (llama.cpp, vLLM) must provide is exactly what that face exports."""
    modules = _modules()
    face = "ppoga_dspy.inference"
    users = [f"{name} imports {target}" for name, path in modules.items() if _room(name) != "inference"
             for target in _imports(path, top_level_only=False) if target in modules and target.startswith(face + ".")]
    assert not users, "\n".join(users)
    import ppoga_dspy.inference as inference

    assert set(inference.__all__).isdisjoint(p.stem for p in (PACKAGE / "inference").glob("*.py"))  # names, not files


def test_nothing_imports_the_cli():
    modules = _modules()
    users = [name for name, path in modules.items() if _room(name) not in ("cli", "__main__")
             and any(_room(t) == "cli" for t in _imports(path, top_level_only=False) if t in modules)]
    assert not users


def _fail_on_cycle(graph: dict[str, set[str]], what: str) -> None:
    """Depth-first search over module -> imported modules; fails naming the first cycle found."""
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                pytest.fail(f"{what}: " + " -> ".join([*stack[stack.index(nxt):], nxt]))
            if nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for name in graph:
        if name not in state:
            visit(name, [name])


def test_no_import_cycles():
    modules = _modules()
    graph = {name: {t for t in _imports(path, top_level_only=True) if t in modules and t != name}
             for name, path in modules.items()}
    _fail_on_cycle(graph, "import cycle")


MEASURING_ROOMS = ("datasets", "evaluation", "report", "scripted")


def test_measuring_rooms_have_no_circle_even_through_deferred_imports():
    """The four rooms that measure the method import each other one way, counting imports made inside functions
    too (the loaders once imported each other in a circle through deferred imports)."""
    modules = _modules()
    graph = {name: {t for t in _imports(path, top_level_only=False) if t in modules and t != name
                    and _room(t) in MEASURING_ROOMS}
             for name, path in modules.items() if _room(name) in MEASURING_ROOMS}
    _fail_on_cycle(graph, "import circle")


def test_each_measuring_room_says_what_it_holds():
    import importlib

    for room in MEASURING_ROOMS:
        face = importlib.import_module(f"ppoga_dspy.{room}").__doc__ or ""
        assert "May import" in face, f"ppoga_dspy/{room}/__init__.py must say what it holds and what it may import"


def test_package_top_level_holds_only_the_entry_points():
    files = {p.name for p in PACKAGE.glob("*.py")}
    assert files <= {"__init__.py", "errors.py", "text.py", "user_cache.py", "__main__.py"}  # entry points and leaves


def test_pyproject_lists_every_package():
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.relative_to(REPO).parts[:-1]) for p in PACKAGE.rglob("__init__.py")} | {"ppoga_dspy.data"}
    assert listed == on_disk


@pytest.mark.slow
def test_the_wheel_carries_the_demo(tmp_path):
    """A non-editable install must answer the demo question, so the wheel must hold the demo KG and questions."""
    import subprocess
    import sys
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(REPO)], check=True, timeout=300, capture_output=True)
    wheel = next(tmp_path.glob("ppoga_dspy-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"ppoga_dspy/data/demo/demo-kg.nt", "ppoga_dspy/data/demo/questions.jsonl",
            "ppoga_dspy/data/__init__.py", "ppoga_dspy/method/program.py", "ppoga_dspy/__main__.py"} <= names
