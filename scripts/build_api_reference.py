"""Build the API reference (HTML, from the docstrings) with pdoc: one page per module of every layer.

    pip install -e ".[dev]"          # pdoc is in the dev extra
    python scripts/build_api_reference.py [OUT]     # default build/api; open OUT/index.html

A module that fails to import, or a docstring pdoc cannot render, stops the build with an error (pdoc's
warnings are errors here); tests/app/test_porting.py builds it into a temporary folder.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings
from pathlib import Path

PACKAGES = ("aimc", "aimc.common", "aimc.devices", "aimc.trainers", "aimc.trainers.algorithms", "aimc.calibration")
"""The import packages of the project (pyproject.toml's `packages`)."""

SKIPPED = ("aimc.__main__",)
"""Modules left out: `python -m aimc` runs the command line when imported."""


def modules() -> list[str]:
    """Every module of the project's packages, packages first, in import-name order."""
    names = set(PACKAGES)
    for package in PACKAGES:
        path = importlib.import_module(package).__path__
        names.update(f"{package}.{m.name}" for m in pkgutil.iter_modules(path) if not m.ispkg)
    return sorted(n for n in names if n not in SKIPPED)


def build(out: str | Path) -> list[Path]:
    """Write the reference into `out`; returns the module pages written. Raises RuntimeError on any warning."""
    import pdoc

    out = Path(out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*modules(), output_directory=out)
    problems = [
        str(w.message)
        for w in caught
        if ("pdoc" in w.filename or issubclass(w.category, RuntimeWarning))
        and "has already been added" not in str(w.message)
    ]  # a package's __all__ names a submodule
    if problems:
        raise RuntimeError("API reference: " + "; ".join(problems))
    return sorted(out.rglob("*.html"))


if __name__ == "__main__":
    pages = build(sys.argv[1] if len(sys.argv) > 1 else "build/api")
    print(f"{len(pages)} pages in {pages[0].parent if pages else '-'}")
