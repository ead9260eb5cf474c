"""The import contract: layers only point down.

    magnet.experiments  ->  magnet.replay  ->  magnet.capture  ->  magnetlib

(each may import the ones to its right, never one to its left), and nothing
imports the repository's folders by their own names (`replay`, `experiments`,
`capture`): installed, they exist only as magnet.*.
"""
import ast
from pathlib import Path

import pytest

from .conftest import REPO

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

# Package name -> the folder it is installed from (setup.cfg's package_dir).
LAYERS = [("magnetlib", "magnetlib"), ("magnet.capture", "capture"), ("magnet.replay", "replay"),
          ("magnet.experiments", "experiments")]
RANK = {name: rank for rank, (name, _) in enumerate(LAYERS)}
FOLDER_NAMES = {"replay", "experiments", "capture", "ns3app"}


def modules():
    """(package, module's dotted name, file) of every Python file of every layer."""
    for package, folder in LAYERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            if "results" in path.parts:
                continue
            rel = path.relative_to(REPO / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            yield package, ".".join([package, *parts]), path


def imported(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            found.append((node.lineno, name))
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
    return found


def layer_of(name: str) -> str | None:
    for package in sorted(RANK, key=len, reverse=True):
        if name == package or name.startswith(package + "."):
            return package
    return None


def test_layers_point_down():
    upward = []
    for package, module, path in modules():
        for line, name in imported(module, path):
            target = layer_of(name)
            if target and RANK[target] > RANK[package]:
                upward.append(f"{path.relative_to(REPO)}:{line}: {package} imports {name}")
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_no_import_by_folder_name():
    wrong = [f"{path.relative_to(REPO)}:{line}: import {name}"
             for _, module, path in modules() for line, name in imported(module, path)
             if name.split(".")[0] in FOLDER_NAMES]
    assert not wrong, "use magnet.replay, magnet.experiments, magnet.capture:\n" + "\n".join(wrong)


@pytest.mark.parametrize("source,expected", [
    ("from .. import x", "magnet.replay.x"),
    ("from magnet.experiments import common", "magnet.experiments.common")])
def test_the_checker_sees_upward_imports(tmp_path, source, expected):
    """The contract can fail: a relative import is resolved, an upward one is named."""
    path = tmp_path / "mod.py"
    path.write_text(source + "\n")
    names = [name for _, name in imported("magnet.replay.sub.mod", path)]
    assert expected in names
    assert layer_of("magnet.experiments.common") == "magnet.experiments"
