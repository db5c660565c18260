"""The distribution installs one import package, `aimc`, and its layers import without the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("aimc.devices", "aimc.trainers", "aimc.calibration", "aimc.common")


def _source_packages() -> set[str]:
    """Every folder with an `__init__.py` under the package-dir folders of pyproject.toml, as its import name."""
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {
        ".".join((package, *init.parent.relative_to(ROOT / folder).parts))
        for package, folder in package_dir.items()
        for init in (ROOT / folder).rglob("__init__.py")
    }


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_layers_import_from_outside_the_repository(tmp_path):
    out = _python("import " + ", ".join(LAYERS) + "; import aimc.commands.cli", tmp_path)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("name", ["devices", "trainers", "calibration"])
def test_layer_folders_are_not_top_level_packages(tmp_path, name):
    out = _python(f"import {name}", tmp_path)
    assert out.returncode != 0 and f"No module named '{name}'" in out.stderr


def test_wheel_holds_one_import_package(tmp_path):
    """A regular (non-editable) build: every file of the wheel is under `aimc/` or its dist-info, every
    package of the source folders (the layers, the application's sub-packages) lands as aimc's subpackage,
    and the package data and type marker ship. Built from a copy, so that
    the build leaves nothing in the repository."""
    src = tmp_path / "src"
    for name in ("aimc", "devices", "trainers", "calibration"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0 and "No module named" in out.stderr:
        pytest.skip(f"no build backend here: {out.stderr.strip().splitlines()[-1]}")
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp_path.glob("aimc-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"aimc", wheel.name.split("-py3")[0] + ".dist-info"}
    for package in _source_packages():  # a sub-package left out of [tool.setuptools] packages is missing
        assert f"{package.replace('.', '/')}/__init__.py" in names, package
    shipped = ["aimc/py.typed", "aimc/data/mnist_small.npz", "aimc/devices/response.py"]
    shipped.append("aimc/sweeps/templates/summary.html")
    for data in shipped:
        assert data in names


def test_atomic_writes_get_the_mode_of_a_plain_open(tmp_path):
    """Result files are readable as any file the user's umask allows (mkstemp alone makes them 0600)."""
    from aimc.common.files import atomic_write_text

    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    atomic = atomic_write_text(tmp_path / "atomic.txt", "x")
    assert atomic.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777
