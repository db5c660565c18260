"""The GPU kernels without a GPU: tests/gpu run in subprocesses, under Numba's CUDA simulator (each kernel
against its CPU twin) and compiled to PTX (each kernel compiles for the GPU target)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run_gpu_tests(simulator: bool, *pytest_args: str) -> None:
    env = dict(os.environ, AIMC_GPU_TESTS="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "gpu"), *pytest_args]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode == 5:  # nothing collected
        pytest.skip("no GPU kernel tests collected")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]


def test_gpu_kernels_equal_their_cpu_twins_in_the_simulator():
    pytest.importorskip("numba.cuda")
    _run_gpu_tests(True)


def test_gpu_kernels_compile_to_ptx():
    pytest.importorskip("numba.cuda")
    _run_gpu_tests(False, "-k", "compiles")
