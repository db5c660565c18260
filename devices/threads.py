"""Thread settings shared by numpy's BLAS and the Numba kernels.

OpenBLAS worker threads keep spinning for a while after each call; a parallel Numba kernel started right
after a BLAS call then shares the cores with them and runs up to 10x slower (measured on 2 cores: a
512x512 expected update took 15.7 ms instead of 1.3 ms). The device layer therefore limits BLAS to
`AIMC_BLAS_THREADS` threads (default 1) when it is imported; the kernels use Numba's threads.

torch and Numba each run an OpenMP thread pool (GNU libgomp); by default an idle thread spins for
300,000 rounds before it sleeps, so on 2 cores each pool starves the other (R1's FCN step took 45x the
digital step under load). Passive pools (no spinning) cure that but pay a wake-up at every kernel start;
a short spin keeps back-to-back kernels fast (FCN step, Analog SGD / digital in one run on 2 cores: 4.3x
passive, 3.7x with 100,000 rounds, 3.3x with 30,000; benchmarks/bench_fcn.py). Importing `aimc` (any of
its layers) therefore sets GOMP_SPINCOUNT=30000 unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set already
(`aimc/__init__.py`); a runtime reads it when it starts, so import `aimc` before torch (the `aimc` command
does).
"""

from __future__ import annotations

import os

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from threadpoolctl import ThreadpoolController, threadpool_limits

from aimc.common.errors import ConfigError

_BLAS_LIMITED: set[str] = set()  # file paths of the BLAS libraries the limit was applied to


def limit_blas_threads() -> None:
    """Apply the BLAS thread limit (AIMC_BLAS_THREADS, default 1; 0 leaves BLAS alone) to each BLAS library
    loaded since the last call, once per library: scipy loads an OpenBLAS of its own with its first import
    (`calibration.family_fit` calls this after it), and a limit set by the user on a library seen before stays."""
    n = int(os.environ.get("AIMC_BLAS_THREADS", "1"))
    if n <= 0:
        return
    found = ThreadpoolController().select(user_api="blas").lib_controllers
    new = [lib.filepath for lib in found if lib.filepath not in _BLAS_LIMITED]
    if new:
        threadpool_limits(limits=dict.fromkeys(new, n))
        _BLAS_LIMITED.update(new)


def check_kernel_threads(n: int, field: str = "threads") -> None:
    """Raise ConfigError, naming `field` and the variable, where n exceeds the threads Numba was started
    with (NUMBA_NUM_THREADS, default the CPU count): Numba cannot start more after import."""
    if int(n) > numba.config.NUMBA_NUM_THREADS:
        raise ConfigError(
            f"{field} = {int(n)} exceeds the {numba.config.NUMBA_NUM_THREADS} threads Numba was "
            "started with (NUMBA_NUM_THREADS); lower it or raise the variable"
        )


def set_kernel_threads(n: int) -> None:
    """Number of threads the Numba kernels use (results do not depend on it); `check_kernel_threads` first."""
    check_kernel_threads(n)
    numba.set_num_threads(int(n))


@intrinsic
def kernel_thread_count(typingctx):
    """numba.get_num_threads() for kernels kept in Numba's on-disk cache: Numba's own version reads a
    ctypes pointer, which keeps a kernel out of the cache. This calls the threading layer's C function
    `get_num_threads` by name, as Numba's get_thread_id calls `get_thread_id` (the layer is started by
    the numba.get_num_threads() call below, so the name resolves). Thread ids in a parallel loop lie in
    [0, kernel_thread_count())."""

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(cgutils.intp_t, []), "get_num_threads")
        return builder.call(fn, [])

    return types.intp(), codegen


numba.get_num_threads()  # starts Numba's threading layer, which defines get_num_threads for the kernels
