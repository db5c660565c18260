"""Check the import contracts of pyproject.toml (import-linter) from the repository root:

    python scripts/check_layers.py

import-linter builds its import graph from the one folder a package is found in, while aimc's layers live in
the repository's top-level folders, joined by setuptools' package-dir; `lint-imports` alone therefore sees
only `aimc/`. This script copies every package folder to where pyproject's package-dir puts it in the
installed `aimc` (a temporary folder), runs `lint-imports` on that copy, prints its report and exits with its
status. `--plant MODULE=SOURCE` adds a module to the copy first (the tests plant an upward import with it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def installed_layout(dest: Path) -> Path:
    """Copy every package folder to where pyproject's package-dir puts it in the installed `aimc`."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package, folder in sorted(setup["package-dir"].items()):
        shutil.copytree(
            ROOT / folder,
            dest / package.replace(".", "/"),
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", "data"),
        )
    return dest


def check(plants: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """lint-imports over the installed layout (with `plants`, module path -> source, added)."""
    lint = shutil.which("lint-imports")
    if lint is None:
        raise SystemExit("lint-imports is not installed: pip install -e '.[dev]'")
    with tempfile.TemporaryDirectory() as tmp:
        site = installed_layout(Path(tmp))
        for module, source in (plants or {}).items():
            (site / (module.replace(".", "/") + ".py")).write_text(source)
        env = dict(os.environ, PYTHONPATH=str(site))
        return subprocess.run(
            [lint, str(ROOT / "pyproject.toml")], capture_output=True, text=True, cwd=site, env=env, timeout=300
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plant", action="append", default=[], metavar="MODULE=SOURCE")
    args = p.parse_args(argv)
    out = check(dict(item.split("=", 1) for item in args.plant))
    sys.stdout.write(out.stdout)
    sys.stderr.write(out.stderr)
    return out.returncode


if __name__ == "__main__":
    sys.exit(main())
