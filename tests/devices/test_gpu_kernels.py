"""The GPU kernels without a GPU: tests/gpu run in two subprocesses side by side, one under Numba's CUDA
simulator (each kernel against its CPU twin) and one compiling the kernels to PTX (each kernel compiles for the
GPU target), so that nothing GPU-related loads in this process. They start at the end of collection
(conftest.py beside this file) and run beside the other tests."""

from __future__ import annotations


def test_gpu_kernels_equal_their_cpu_twins_in_the_simulator_and_compile_to_ptx(gpu_runs):
    outputs = {name: proc.communicate(timeout=900)[0] for name, proc in gpu_runs.items()}
    for name, proc in gpu_runs.items():
        assert proc.returncode in (0, 5), f"{name}:\n{outputs[name][-6000:]}"  # 5: nothing collected
    assert gpu_runs["simulator"].returncode == 0, "no GPU kernel test ran under the simulator"
