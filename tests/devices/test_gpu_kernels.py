"""The GPU kernels without a GPU: tests/gpu run in two subprocesses side by side, one under Numba's CUDA
simulator (each kernel against its CPU twin) and one compiling the kernels to PTX (each kernel compiles for the
GPU target), so that nothing GPU-related loads in this process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _start(simulator: bool, *pytest_args: str) -> subprocess.Popen:
    env = dict(os.environ, AIMC_GPU_TESTS="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "gpu"), *pytest_args]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_gpu_kernels_equal_their_cpu_twins_in_the_simulator_and_compile_to_ptx():
    pytest.importorskip("numba.cuda")
    runs = {"simulator": _start(True), "PTX": _start(False, "-k", "compiles")}
    outputs = {name: proc.communicate(timeout=900)[0] for name, proc in runs.items()}
    for name, proc in runs.items():
        assert proc.returncode in (0, 5), f"{name}:\n{outputs[name][-6000:]}"  # 5: nothing collected
    assert runs["simulator"].returncode == 0, "no GPU kernel test ran under the simulator"
