"""The training loop of one run: checkpoints every epoch, resume, divergence guard.

`train_run(cfg, out_dir)` trains a single-trainer config into its run folder. A run is a pure function of
its config: the model init comes from `seed`, the data order of epoch e from (seed, e), and every device
draw from RNGs that live in the model and optimizer state. Resuming from the checkpoint of epoch e
therefore continues bit-exactly as the uninterrupted run would have.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from aimc.common import seeds
from aimc.config import ExperimentConfig
from aimc.data_sources import load_data as load_data_section
from aimc.datasets import Dataset
from aimc.devices import check_kernel_threads, set_kernel_threads
from aimc.runs.batches import EpochBatches, InputPipeline, epoch_batches
from aimc.runs.curves import describe, write_curves
from aimc.runs.folder_lock import folder_lock
from aimc.runs.interrupts import caused_by_interrupt, steps_interruptible
from aimc.runs.memory import check_memory
from aimc.runs.metric_log import MetricLog, wanted
from aimc.runs.network import analog_tiles, build, costs_of, evaluate, saturated_fraction
from aimc.runs.run_folder import RunFolder


class TrainingDiverged(RuntimeError):
    """The loss became non-finite or exceeded `max_loss`; the message names the epoch and step."""


def epoch_order(seed: int, epoch: int, n: int) -> torch.Tensor:
    """The sample order of an epoch: a permutation drawn from (seed, epoch) alone."""
    return torch.from_numpy(seeds.generator(seed, epoch).permutation(n))


def _rng_state() -> dict:
    """The generators a run draws from and does not own: torch's global one (model init, dropout). Sample
    orders and device draws come from seeded generators of their own, and nothing draws from numpy's
    global generator."""
    return {"torch": torch.get_rng_state()}


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])


def _finite_params(model: nn.Module, tiles: list) -> bool:
    def finite(w) -> bool:  # a CPU tile's weight is numpy, a GPU tile's a tensor
        return bool(torch.isfinite(w).all()) if isinstance(w, torch.Tensor) else bool(np.isfinite(w).all())

    return all(finite(p) for p in model.parameters()) and all(finite(t.weight()) for t in tiles)


# -- one run ------------------------------------------------------------------------------------------------
@contextmanager
def end_recorded(run: RunFolder, where: Callable[[], str] = lambda: "") -> Iterator[None]:
    """Record in `run`'s manifest how its body ended when it raises ("diverged", "interrupted" or "failed"
    with the error, behind `where()`), then re-raise (an error caused by a KeyboardInterrupt as the
    KeyboardInterrupt)."""
    try:
        yield
    except TrainingDiverged as err:
        run.finish("diverged", str(err))
        raise
    except KeyboardInterrupt:
        run.finish("interrupted", "interrupted by the user (KeyboardInterrupt)")
        raise
    except Exception as err:
        if caused_by_interrupt(err):
            run.finish("interrupted", "interrupted by the user (KeyboardInterrupt)")
            raise KeyboardInterrupt from err
        run.finish("failed", f"{where()}{type(err).__name__}: {err}")
        raise


def train_run(
    cfg: ExperimentConfig, out_dir: str | Path, progress: bool = False, data: Dataset | None = None
) -> dict[str, Any]:
    """Train one config (`cfg.trainer`) into `out_dir`, resuming from its newest checkpoint if the folder
    holds an unfinished run of the same config; a finished one is not rerun. `data`: the data set of
    `cfg.data` if already loaded. Returns the final metrics. Ctrl-C (SIGINT) stops the run before its next
    step (`aimc.runs.interrupts.steps_interruptible`), the run recorded as interrupted and resumable."""
    if cfg.compare:
        raise ValueError("train_run takes a single-trainer config; use run_experiment for `compare`")
    check_kernel_threads(cfg.threads)  # before anything is written
    wanted(cfg)  # TensorBoard asked for without its package: refused before anything is written
    check_memory(cfg)  # a model too large for this machine: refused before anything is written
    run = RunFolder(out_dir)
    if (done := run.finished(cfg)) is not None:
        return done
    data = data or load_data(cfg)  # a bad data set fails before the folder exists
    with folder_lock(run.root, "training run"):
        run.start(cfg)
        t0 = time.perf_counter()
        try:
            with end_recorded(run), steps_interruptible() as held:  # Ctrl-C taken between two steps
                final = _train(cfg, data, run, progress, held.check)
        finally:
            timings = run.manifest.setdefault("timings", {})
            timings["wall_s"] = timings.get("wall_s", 0.0) + time.perf_counter() - t0
            run.save_manifest()
        run.finish("finished", final=final)
    return final


def load_data(cfg: ExperimentConfig) -> Dataset:
    """The data set of `cfg.data`."""
    return load_data_section(cfg.data)


def _train(
    cfg: ExperimentConfig, data: Dataset, run: RunFolder, progress: bool, between_steps: Callable[[], None]
) -> dict[str, Any]:
    """The training loop of train_run; `between_steps` is called before every step (it raises
    KeyboardInterrupt for a held Ctrl-C)."""
    torch.set_num_threads(cfg.threads)
    set_kernel_threads(cfg.threads)
    x_train, y_train, x_test, y_test = data.tensors()
    pipeline = InputPipeline.of(cfg.data, x_train)
    x_test = pipeline.normalized(x_test)
    model, opt = build(cfg, data.image_shape, data.n_classes)
    tiles = analog_tiles(model)
    label = f"{cfg.name}/{cfg.trainer.algorithm}"
    log = MetricLog(cfg, run.root)  # flushed after every record, closed when the run ends

    def record(epoch: int, train_loss: float | None, seconds: float) -> dict[str, Any]:
        test_loss, acc = evaluate(model, x_test, y_test, cfg.eval_batch_size, cfg.device)
        rec = {
            "epoch": epoch,
            "train_loss": train_loss,
            "test_loss": test_loss,
            "test_accuracy": acc,
            "saturated_fraction": saturated_fraction(tiles),
            **costs_of(opt),
            "time_s": seconds,
        }
        if progress:
            tqdm.write(
                f"{label} epoch {epoch}: train loss {_f(train_loss)}, test loss {test_loss:.4f}, "
                f"test accuracy {100 * acc:.2f}%",
                file=sys.stderr,
            )
        log.record(rec)
        return rec

    def checkpoint(epoch: int, history: list[dict]) -> Path:
        state = {
            "epoch": epoch,
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "rng": _rng_state(),
            "history": history,
        }
        return run.save_checkpoint(epoch, state, cfg.checkpoint.keep)

    state = run.load_checkpoint(say=lambda line: print(f"warning: {line}", file=sys.stderr))
    if state is None:
        history = [record(0, None, 0.0)]
        checkpoint(0, history)
    else:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        _set_rng_state(state["rng"])
        history = state["history"]
    run.write_metrics(history)

    n = len(y_train)
    steps = math.ceil(n / cfg.batch_size)
    for epoch in range(history[-1]["epoch"] + 1, cfg.epochs + 1):
        t0 = time.perf_counter()
        if cfg.lr_decay is not None:
            for group in opt.param_groups:
                group["lr"] = cfg.lr_decay.rate(cfg.trainer.lr, epoch)
        model.train()
        order = epoch_order(cfg.seed, epoch, n)
        batches = EpochBatches(x_train, y_train, order, cfg.batch_size, pipeline, cfg.seed, epoch)
        total = 0.0
        bar = tqdm(
            enumerate(epoch_batches(batches, cfg.data.workers)),
            total=steps,
            desc=f"{label} epoch {epoch}/{cfg.epochs}",
            leave=False,
            file=sys.stderr,
            disable=not (progress and sys.stderr.isatty()),
            mininterval=0.5,
        )
        for step, (xb, yb) in bar:
            between_steps()
            opt.zero_grad()
            xb, yb = xb.to(cfg.device), yb.to(cfg.device)
            loss = F.cross_entropy(model(xb), yb)
            value = loss.item()
            if not math.isfinite(value) or value > cfg.max_loss:
                _diverged(
                    run,
                    epoch,
                    step + 1,
                    steps,
                    f"mini-batch loss {value:.4g}"
                    + (" is not finite" if not math.isfinite(value) else f" > max_loss = {cfg.max_loss:g}"),
                )
            loss.backward()
            opt.step()
            total += value * len(yb)
            if step % 50 == 0:
                bar.set_postfix(loss=f"{value:.3f}")
        bar.close()
        rec = record(epoch, total / n, time.perf_counter() - t0)
        if not math.isfinite(rec["test_loss"]) or not _finite_params(model, tiles):
            _diverged(run, epoch, steps, steps, "the weights or the test loss are not finite")
        history.append(rec)
        opt.end_epoch(rec["train_loss"])
        run.write_metrics(history)
        if epoch % cfg.checkpoint.every == 0 or epoch == cfg.epochs:
            checkpoint(epoch, history)
    write_curves({cfg.trainer.algorithm: history}, run.root / "curves", f"{cfg.name}: {describe(cfg)}")
    run.manifest["latency"] = opt.latency_estimate()
    final = {k: v for k, v in history[-1].items() if k not in ("epoch", "time_s")}
    final.update(epochs=cfg.epochs, train_s=sum(r["time_s"] for r in history))
    log.close()
    return final


def _diverged(run: RunFolder, epoch: int, step: int, steps: int, what: str) -> None:
    found = run.checkpoints()
    keep = f"the last good checkpoint is {found[-1]}" if found else "no checkpoint was written"
    raise TrainingDiverged(f"training diverged at epoch {epoch}, step {step} of {steps}: {what}; stopped, {keep}")


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"
