"""Where the runs of a sweep execute: in this process, a local process pool, or a Dask cluster.

A task is plain data (a JSON-able dict: the resolved config as a dict, its hash, the run folder and the
runner as "module:function"), and the worker function `execute_run` is imported by name, so
any machine with the package can run it; no pickled objects of the driver travel. `execute_run` never
raises for a failing run: it returns an outcome with status "failed", the error and its traceback.
"""

from __future__ import annotations

import abc
import concurrent.futures as cf
import importlib
import json
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aimc.runs.timestamps import timestamp

DEFAULT_RUNNER = "aimc.runs.experiment:run_experiment"


def make_task(config: dict[str, Any], config_hash: str, out_dir: str, runner: str = DEFAULT_RUNNER) -> dict[str, Any]:
    """The payload of one run: a JSON-able dict."""
    return {"config": config, "config_hash": config_hash, "out_dir": out_dir, "runner": runner}


def _resolve(spec: str) -> Callable:
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"runner {spec!r}: expected 'package.module:function'")
    return getattr(importlib.import_module(module), name)


def _jsonable(v: Any) -> Any:
    return json.loads(json.dumps(v, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def execute_run(task: dict[str, Any]) -> dict[str, Any]:
    """Validate the task's config, check its hash, call the runner into the run folder; the outcome
    (status done/failed, final metrics or the error with its traceback, timings, host, pid, version)."""
    import aimc
    from aimc.config import validate_config

    start, t0 = time.time(), time.perf_counter()
    metrics = error = tb = None
    try:
        cfg = validate_config(task["config"], where=f"run {task['config_hash']}")
        if cfg.device == "cuda":
            _pick_gpu()
        if cfg.hash() != task["config_hash"]:
            raise RuntimeError(
                f"this worker's aimc {aimc.__version__} gives the config hash {cfg.hash()}, the "
                f"sweep expects {task['config_hash']}: install the driver's version on the workers"
            )
        metrics = _jsonable(_resolve(task["runner"])(cfg, task["out_dir"]))
    except Exception as err:  # a failed run is an outcome, not a crash of the sweep
        error, tb = f"{type(err).__name__}: {err}", traceback.format_exc()
    return {
        "config_hash": task["config_hash"],
        "status": "failed" if error else "done",
        "metrics": metrics,
        "error": error,
        "traceback": tb,
        "started": timestamp(start),
        "finished": timestamp(),
        "duration_s": time.perf_counter() - t0,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "aimc_version": aimc.__version__,
    }


WORKER_SLOT: int | None = None
"""This process's place in a local pool (0, 1, ...; set by the pool's initializer), None elsewhere."""


def _pick_gpu() -> None:
    """Make GPU (slot mod GPUs) torch's current device, where several are visible: a pool's worker k, or Dask
    worker named k, trains its runs on GPU k mod GPUs, so a sweep uses every GPU of a machine."""
    import torch

    count = torch.cuda.device_count()
    if count < 2:
        return
    slot = WORKER_SLOT
    if slot is None:
        try:
            from distributed import get_worker

            slot = int(get_worker().name)
        except (ImportError, ValueError, TypeError):
            return
    torch.cuda.set_device(slot % count)


def _failed(task: dict[str, Any], error: str) -> dict[str, Any]:
    """The outcome of a task whose worker could not report one."""
    return {
        "config_hash": task["config_hash"],
        "status": "failed",
        "metrics": None,
        "error": error,
        "traceback": None,
        "started": None,
        "finished": timestamp(),
        "duration_s": 0.0,
        "host": None,
        "pid": None,
        "aimc_version": None,
    }


class Executor(abc.ABC):
    """Runs tasks, at most `slots()` at a time, yielding (task, outcome) as they finish."""

    @abc.abstractmethod
    def slots(self) -> int:
        """How many tasks may be in flight now."""

    @abc.abstractmethod
    def describe(self) -> str:
        """Where the tasks run, in words (for the log and the manifest)."""

    @abc.abstractmethod
    def _submit(self, task: dict[str, Any]) -> Any:
        """Start a task; a future of its outcome."""

    @abc.abstractmethod
    def _wait(self, futures: list[Any]) -> list[Any]:
        """The futures among `futures` that finished (at least one, blocking until then)."""

    @abc.abstractmethod
    def _outcome(self, future: Any, task: dict[str, Any]) -> dict[str, Any]:
        """The outcome of a finished future; a failed outcome where the worker could not report one."""

    def close(self) -> None:  # noqa: B027  (a no-op for executors that hold no workers)
        """Release the workers; tasks still queued or running are cancelled."""

    def run(
        self, tasks: list[dict[str, Any]], on_submit: Callable[[dict[str, Any]], None] = lambda t: None
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """Submit the tasks (calling `on_submit` just before each goes out) and yield (task, outcome)."""
        queue, inflight = deque(tasks), {}
        while queue or inflight:
            while queue and len(inflight) < max(1, self.slots()):
                task = queue.popleft()
                on_submit(task)
                inflight[self._submit(task)] = task
            for fut in self._wait(list(inflight)):
                task = inflight.pop(fut)
                yield task, self._outcome(fut, task)

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class InlineExecutor(Executor):
    """Runs each task in this process, one after the other (`--workers 0`: for debugging)."""

    def slots(self) -> int:
        return 1

    def describe(self) -> str:
        return "this process"

    def _submit(self, task: dict[str, Any]) -> cf.Future:
        fut: cf.Future = cf.Future()
        fut.set_result(execute_run(task))
        return fut

    def _wait(self, futures: list[cf.Future]) -> list[cf.Future]:
        return futures

    def _outcome(self, future: cf.Future, task: dict[str, Any]) -> dict[str, Any]:
        return future.result()


def _start_worker(parent: int, slots: Any) -> None:
    """Pool initializer: take the next worker slot (WORKER_SLOT, from the shared counter `slots`), and start a
    daemon thread that ends this worker once its driver (`parent`) is gone. A driver that is killed (SIGKILL,
    out of memory) cannot shut its pool down, and its workers would go on training the runs in flight into
    the folders a rerun uses."""
    global WORKER_SLOT
    with slots.get_lock():
        WORKER_SLOT = slots.value
        slots.value += 1

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="aimc-driver-watch", daemon=True).start()


class LocalExecutor(Executor):
    """A pool of `workers` processes on this machine (spawn context: a fresh interpreter per worker); the
    workers end with their driver, however it ends."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        if self.workers < 1:
            raise ValueError(f"workers = {workers}: need at least 1")
        self._pool: cf.ProcessPoolExecutor | None = None
        self._owner: dict[cf.Future, cf.ProcessPoolExecutor] = {}  # the pool each future was submitted to

    def slots(self) -> int:
        return self.workers

    def describe(self) -> str:
        return f"a local pool of {self.workers} worker process{'es' if self.workers > 1 else ''}"

    def _submit(self, task: dict[str, Any]) -> cf.Future:
        if self._pool is None:
            spawn = multiprocessing.get_context("spawn")
            self._pool = cf.ProcessPoolExecutor(
                self.workers,
                mp_context=spawn,
                initializer=_start_worker,
                initargs=(os.getpid(), spawn.Value("i", 0)),
            )
        fut = self._pool.submit(execute_run, task)
        self._owner[fut] = self._pool
        return fut

    def _wait(self, futures: list[cf.Future]) -> list[cf.Future]:
        return list(cf.wait(futures, return_when=cf.FIRST_COMPLETED).done)

    def _outcome(self, future: cf.Future, task: dict[str, Any]) -> dict[str, Any]:
        pool = self._owner.pop(future)
        try:
            return future.result()
        except cf.process.BrokenProcessPool:
            # a worker died (crash, out of memory, killed): every run in flight is lost; the next submission
            # starts a fresh pool
            if pool is self._pool:
                pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
            return _failed(
                task,
                "the worker process died abruptly (crash, out of memory or killed) while "
                "this run or another one in flight was running",
            )

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored in the body (on the main thread; elsewhere nothing changes). A process started in it
    keeps ignoring it: a Ctrl-C at the terminal, sent to every process of the group, reaches the driver
    alone, not the worker processes, whose KeyboardInterrupt tracebacks would bury the driver's message."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class DaskExecutor(Executor):
    """Dask distributed: a LocalCluster of `workers` single-threaded processes on 127.0.0.1, or the
    existing cluster at `scheduler` (its workers need the package and the sweep folder's filesystem)."""

    def __init__(self, workers: int | None = None, scheduler: str | None = None, timeout_s: float = 60.0):
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise ValueError("the dask executor needs dask distributed: pip install 'aimc[dask]'") from None
        self.cluster = None
        if scheduler:
            if workers is not None:
                raise ValueError("workers: the cluster at --scheduler has its own workers; drop --workers")
            self.client = Client(scheduler, timeout=timeout_s)
            self.client.wait_for_workers(1, timeout=timeout_s)
        else:
            n = workers or os.cpu_count() or 1
            if n < 1:
                raise ValueError(f"workers = {workers}: need at least 1")
            with _sigint_ignored():  # inherited by the worker processes: Ctrl-C stops the driver, which stops them
                self.cluster = LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
                )
            self.client = Client(self.cluster, timeout=timeout_s)
        self.address = self.client.scheduler.address

    def slots(self) -> int:
        return sum(self.client.nthreads().values())

    def describe(self) -> str:
        where = "a local Dask cluster" if self.cluster else "the Dask cluster"
        return f"{where} at {self.address} ({self.slots()} worker threads)"

    def _submit(self, task: dict[str, Any]) -> Any:
        return self.client.submit(execute_run, task, pure=False, key=f"aimc-run-{task['config_hash']}-{time.time_ns()}")

    def _wait(self, futures: list[Any]) -> list[Any]:
        from distributed import wait

        return list(wait(futures, return_when="FIRST_COMPLETED").done)

    def _outcome(self, future: Any, task: dict[str, Any]) -> dict[str, Any]:
        try:
            return future.result()
        except Exception as err:  # e.g. KilledWorker: the run took its workers down more than once
            return _failed(task, f"{type(err).__name__} on the Dask cluster: {err}")

    def close(self) -> None:
        # By now every outcome is recorded: what distributed logs while it tears down (a worker still
        # starting up killed, a heartbeat to a scheduler that is gone) is noise on the sweep's output.
        loggers = [logging.getLogger(n) for n in ("distributed", "tornado")]
        levels = [lg.level for lg in loggers]
        for lg in loggers:
            lg.setLevel(logging.CRITICAL)
        try:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)
