"""Worker processes for independent tasks: joblib's reusable loky workers, started once per process and kept
for the next call (a refit, a second fit), one Numba and BLAS thread each where there are as many workers as
cores (joblib sets their thread limits). Every call must build its `Parallel` here: joblib restarts the
workers when a call's settings differ from the last one's."""

from __future__ import annotations

import threading

from joblib import Parallel, delayed


def worker_pool(n_jobs: int) -> Parallel:
    """A call over n_jobs workers: one task at a time each, arguments pickled as they are (no memory maps),
    results as they finish."""
    return Parallel(n_jobs, batch_size=1, max_nbytes=None, return_as="generator_unordered")


def start_workers(n_jobs: int, module: str) -> threading.Thread | None:
    """Start n_jobs workers in a background thread, each importing `module`, so that their start overlaps the
    caller's own work; join the thread before the first real call. None for fewer than two workers."""
    if n_jobs < 2:
        return None
    task = delayed(exec)(f"import {module}")
    thread = threading.Thread(target=lambda: list(worker_pool(n_jobs)(task for _ in range(n_jobs))), daemon=True)
    thread.start()
    return thread
