"""The GPU kernels' tests: collected where kernels can run or compile, skipped in the default test run.

The default run (no GPU) runs this folder in subprocesses (tests/devices/test_gpu_kernels.py): once under
Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1: every kernel against its CPU twin) and once without it (the
kernels compiled to PTX), so the simulator never loads into the main test process. On a GPU machine:
`AIMC_GPU_TESTS=1 python -m pytest tests/gpu` runs the same checks on the GPU.
"""

import os

collect_ignore_glob = [] if os.environ.get("AIMC_GPU_TESTS") == "1" else ["test_*.py"]
