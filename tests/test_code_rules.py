"""The code's own rules: the import contracts of pyproject.toml (application > trainers | calibration > devices
> common), ruff clean, no private name imported across modules, no module over 500 lines.

import-linter reads a package from one folder, while the layers live in the repository's top-level folders
(setuptools' package-dir); the contract test lays the package out as it installs, then lints that copy."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = ("aimc", "devices", "trainers", "calibration", "benchmarks", "examples", "scripts", "tests")
MAX_MODULE_LINES = 500


def _sources(folders=SOURCE_FOLDERS) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def _installed_layout(dest: Path) -> Path:
    """Copy every package folder to where pyproject's package-dir puts it in the installed `aimc`."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package, folder in sorted(setup["package-dir"].items()):
        shutil.copytree(ROOT / folder, dest / package.replace(".", "/"), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "data"))
    return dest


def test_import_contracts_hold(tmp_path):
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    site = _installed_layout(tmp_path / "site")
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([lint, str(ROOT / "pyproject.toml")], capture_output=True, text=True, cwd=site, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_a_layer_importing_upwards_breaks_the_contract(tmp_path):
    """The same check fails once the device layer imports the trainer layer."""
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    site = _installed_layout(tmp_path / "site")
    (site / "aimc/devices/upward.py").write_text("import aimc.trainers\n")
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([lint, str(ROOT / "pyproject.toml")], capture_output=True, text=True, cwd=site, env=env,
                         timeout=300)
    assert out.returncode != 0 and "aimc.devices.upward -> aimc.trainers" in out.stdout


def test_ruff_is_clean():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    out = subprocess.run([ruff, "check", "--no-cache", str(ROOT)], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert out.returncode == 0, out.stdout[-3000:]


def test_no_private_name_is_imported_across_modules():
    """`from module import _name` reaches into another module's internals; a shared name is a public one."""
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                found += [f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found, "\n".join(found)


def test_no_module_is_over_500_lines():
    long = [f"{p.relative_to(ROOT)}: {n}" for p in _sources(SOURCE_FOLDERS[:4])
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not long, "\n".join(long)
