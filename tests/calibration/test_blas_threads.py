"""The BLAS thread limit reaches scipy's own OpenBLAS, which the calibration layer loads after the device layer
set the limit (`devices.threads.limit_blas_threads`): every BLAS library of a fresh process runs on
AIMC_BLAS_THREADS threads (default 1) once `aimc.calibration` is imported, and a limit the user set on a
library loaded before stays."""

import json
import os
import subprocess
import sys

import pytest

REPORT = (
    "import json, threadpoolctl; "
    "print(json.dumps({i['filepath']: i['num_threads'] for i in threadpoolctl.threadpool_info() "
    "if i['user_api'] == 'blas'}))"
)


def _blas_threads(code: str, **env: str) -> dict[str, int]:
    """BLAS library -> threads in a fresh Python process after `code`."""
    out = subprocess.run(
        [sys.executable, "-c", f"{code}; {REPORT}"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_calibration_limits_scipys_blas_to_one_thread():
    threads = _blas_threads("import aimc.calibration", AIMC_BLAS_THREADS="1")
    assert threads and set(threads.values()) == {1}, threads


def test_limit_of_a_library_seen_before_stays():
    code = (
        "import aimc.devices, threadpoolctl; "
        "threadpoolctl.threadpool_limits(2, user_api='blas'); "  # numpy's BLAS, loaded with the device layer
        "import aimc.calibration"
    )
    threads = _blas_threads(code, AIMC_BLAS_THREADS="1")
    numpy_blas = [n for p, n in threads.items() if "numpy" in p]
    scipy_blas = [n for p, n in threads.items() if "scipy.libs" in p]
    if not (numpy_blas and scipy_blas):
        pytest.skip(f"numpy and scipy do not bring BLAS libraries of their own: {threads}")
    assert numpy_blas == [2] and scipy_blas == [1], threads
