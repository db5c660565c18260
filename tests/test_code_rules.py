"""The code's own rules: the import contracts of pyproject.toml (application > trainers | calibration > devices
> common), ruff clean and formatted, no private name imported across modules, no module over 500 lines, code outside the
device layer asks a tile through its methods (never its arrays, counters or private state), and no optimizer
class chain deeper than three below torch's Optimizer.

The contracts run through scripts/check_layers.py (`python scripts/check_layers.py` from the root), which lays
the package out as it installs and lints that copy."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = ("aimc", "devices", "trainers", "calibration", "benchmarks", "examples", "scripts", "tests")
MAX_MODULE_LINES = 500
TILE_CLIENT_FOLDERS = ("aimc", "trainers", "calibration", "examples", "benchmarks")  # outside aimc.devices
TILE_COUNTERS = frozenset({"counter", "pulses", "reads", "stream"})  # the tile's and arrays' own counts
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make"})  # public despite the underscore
MAX_OPTIMIZER_DEPTH = 3  # classes from AnalogOptimizer (level 1) down to an algorithm


def _sources(folders=SOURCE_FOLDERS) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def _check_layers():
    """scripts/check_layers.py, the documented contract check, as a module."""
    spec = importlib.util.spec_from_file_location("check_layers", ROOT / "scripts" / "check_layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_import_contracts_hold():
    if shutil.which("lint-imports") is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    out = _check_layers().check()
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_a_layer_importing_upwards_breaks_the_contract():
    """The same check fails once the device layer imports the trainer layer."""
    if shutil.which("lint-imports") is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    out = _check_layers().check({"aimc.devices.upward": "import aimc.trainers\n"})
    assert out.returncode != 0 and "aimc.devices.upward -> aimc.trainers" in out.stdout


def test_ruff_is_clean():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    out = subprocess.run(
        [ruff, "check", "--no-cache", str(ROOT)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert out.returncode == 0, out.stdout[-3000:]


def test_ruff_format_is_applied():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    out = subprocess.run(
        [ruff, "format", "--check", "--no-cache", str(ROOT)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert out.returncode == 0, "run `ruff format`:\n" + out.stdout[-3000:]


def test_no_private_name_is_imported_across_modules():
    """`from module import _name` reaches into another module's internals; a shared name is a public one."""
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                found += [
                    f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not found, "\n".join(found)


def test_no_module_is_over_500_lines():
    long = [
        f"{p.relative_to(ROOT)}: {n}"
        for p in _sources(SOURCE_FOLDERS[:4])
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert not long, "\n".join(long)


def _own_private_names(tree: ast.Module) -> set[str]:
    """The `_names` a module defines itself: functions, classes, names, and attributes of `self` it assigns."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return {n for n in names if n.startswith("_")}


def _imported_modules(tree: ast.Module) -> set[str]:
    return {
        (a.asname or a.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for a in node.names
    }


def tile_state_reaches(source: str, where: str) -> list[str]:
    """Where `source` touches a tile's state from outside the device layer: any `.arrays`, a write to a
    counter (`x.reads += 1`, `x.stream.counter = k`) of an object other than `self`, or a `_name` attribute
    of another object that the module does not define itself (modules' and named tuples' names aside)."""
    tree = ast.parse(source, where)
    own, modules = _own_private_names(tree), _imported_modules(tree)
    found = []
    for node in ast.walk(tree):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, (ast.AugAssign, ast.AnnAssign))
            else []
        )
        for t in targets:
            if (
                isinstance(t, ast.Attribute)
                and t.attr in TILE_COUNTERS
                and not (isinstance(t.value, ast.Name) and t.value.id == "self")
            ):
                found.append(f"{where}:{t.lineno} writes {ast.unparse(t)}")
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        if node.attr == "arrays":
            found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
        elif (
            node.attr.startswith("_")
            and not node.attr.startswith("__")
            and node.attr not in own
            and node.attr not in NAMEDTUPLE_API
            and not (isinstance(base, ast.Name) and base.id in {"self", "cls", *modules})
            and not (isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super")
        ):
            found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
    return found


def test_code_outside_the_devices_asks_the_tile_not_its_arrays():
    """Algorithms, the application and calibration use AnalogTile's methods; its arrays, counters and
    private state are the device layer's."""
    found = []
    for path in _sources(TILE_CLIENT_FOLDERS):
        found += tile_state_reaches(path.read_text(), path.relative_to(ROOT).as_posix())
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "v = block.tile.arrays[1].reference[:, cols]",
        "tile.reads += 3",
        "tile.stream.counter = 0",
        "tile._dirty = True",
        "w = layer.tiles[0]._w",
    ],
)
def test_a_reach_into_a_tile_is_found(line):
    assert tile_state_reaches(f"def f(block, tile, layer, cols):\n    {line}\n", "planted.py")


def test_own_private_names_and_modules_are_not_reaches():
    source = (
        "import os\nclass A:\n    def _x(self):\n        self.reads = 0\n\n"
        "def f(a, t):\n    a._x()\n    os._exit(0)\n    return t._replace(k=1)\n"
    )
    assert tile_state_reaches(source, "fine.py") == []


def test_no_optimizer_class_chain_is_deeper_than_three():
    """AnalogOptimizer is level 1, a shared base (TransferOptimizer) level 2, an algorithm at most level 3."""
    from aimc.trainers import OPTIMIZERS, AnalogOptimizer

    deep = {
        name: [c.__name__ for c in cls.__mro__ if issubclass(c, AnalogOptimizer)] for name, cls in OPTIMIZERS.items()
    }
    assert {n: m for n, m in deep.items() if len(m) > MAX_OPTIMIZER_DEPTH} == {}
