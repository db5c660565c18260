"""The GPU kernels' subprocesses (test_gpu_kernels.py) start as soon as the run is known to include that
test, at the end of collection, so that they run beside the other tests on a second core instead of while
the run waits for them."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GPU_RUNS = pytest.StashKey[dict]()


def _start(simulator: bool, *pytest_args: str) -> subprocess.Popen:
    """pytest on tests/gpu in a subprocess: under Numba's CUDA simulator, or with it off."""
    env = dict(os.environ, AIMC_GPU_TESTS="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "gpu"), *pytest_args]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("numba.cuda") and any("gpu_runs" in getattr(i, "fixturenames", ()) for i in items):
        config.stash[GPU_RUNS] = {"simulator": _start(True), "PTX": _start(False, "-k", "compiles")}


def pytest_unconfigure(config: pytest.Config) -> None:
    for proc in config.stash.get(GPU_RUNS, {}).values():
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.fixture
def gpu_runs(request: pytest.FixtureRequest) -> dict[str, subprocess.Popen]:
    """The subprocesses on tests/gpu by name ("simulator", "PTX"), started at the end of collection."""
    runs = request.config.stash.get(GPU_RUNS, None)
    if runs is None:
        pytest.skip("numba-cuda is not installed")
    return runs
