#!/usr/bin/env bash
# The GPU checks in one run, from the repository root on a machine with a CUDA GPU, in under 10 minutes
# (installs, then at most 210 s of tests and 300 s of benchmark): the GPU kernels' tests on the GPU
# (tests/gpu, the simulator off), then benchmarks/bench_gpu.py, which writes its JSON after each model, so a
# benchmark cut off at its limit keeps what it measured. Results go to $OUT (default: the current folder):
# gpu-tests.txt, gpu-bench.json, gpu-bench.txt.
# Where the machine has no package index, give wheels of aimc's missing dependencies in $WHEELS
# (pip download pydantic tomli-w joblib --dest wheels --only-binary=:all: --python-version 3.12
#  --platform manylinux_2_17_x86_64: 3 MB with their dependencies).
set -u
out=${OUT:-.}
if [ -n "${WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --find-links "$WHEELS" pydantic tomli-w joblib
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/gpu-tests.txt"
AIMC_GPU_TESTS=1 timeout 210 python3 -m pytest -q -p no:cacheprovider --durations=10 tests/gpu >> "$out/gpu-tests.txt" 2>&1
echo "tests exit $?" >> "$out/gpu-tests.txt"
PYTHONUNBUFFERED=1 timeout 300 python3 benchmarks/bench_gpu.py --json "$out/gpu-bench.json" > "$out/gpu-bench.txt" 2>&1
echo "bench exit $?" >> "$out/gpu-bench.txt"
