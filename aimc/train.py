"""The training loop: one run per config, checkpoints every epoch, resume, divergence guard, comparisons.

`run_experiment(cfg, out_dir)` is the entry point of `aimc train` and of the sweep workers. A run is a pure
function of its config: the model init comes from `seed`, the data order of epoch e from (seed, e), and
every device draw from RNGs that live in the model and optimizer state. Resuming from the checkpoint of
epoch e therefore continues bit-exactly as the uninterrupted run would have.
"""

from __future__ import annotations

import csv
import io
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

from aimc import trainers
from aimc.common.figures import PALETTE, figure_style, integer_ticks, loss_axis, pyplot, save_figure
from aimc.common.files import atomic_write_text
from aimc.config import ExperimentConfig
from aimc.datasets import Dataset, load_dataset
from aimc.devices import check_kernel_threads, set_kernel_threads
from aimc.folder_lock import folder_lock
from aimc.interrupts import caused_by_interrupt, steps_interruptible
from aimc.metric_log import MetricLog, wanted
from aimc.models import build_model
from aimc.results import RunFolder, write_json

_LAST_GOOD = ("epoch", "train_loss", "test_loss", "test_accuracy", "saturated_fraction", "pulses_per_weight")


class TrainingDiverged(RuntimeError):
    """The loss became non-finite or exceeded `max_loss`; the message names the epoch and step."""


# -- model and optimizer -----------------------------------------------------------------------------------
def build(cfg: ExperimentConfig) -> tuple[nn.Module, Any]:
    """The model (analog unless the trainer is digital SGD) and its optimizer, initialised from cfg.seed."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model)
    if cfg.trainer.algorithm != "sgd":
        model = trainers.convert(model, cfg.tile, seed=cfg.seed)
    return model, trainers.build_optimizer(model, cfg.trainer)


def analog_tiles(model: nn.Module) -> list:
    """Every tile of every analog layer of the model."""
    return [t for m in model.modules() if getattr(m, "is_analog", False) for t in m.tiles]


def saturated_fraction(tiles: list) -> float | None:
    """Fraction of analog elements (all arrays) within dw_min / 2 of their own bounds; None without tiles."""
    counts = [tile.saturation() for tile in tiles]
    hit, total = sum(c[0] for c in counts), sum(c[1] for c in counts)
    return hit / total if total else None


def costs_of(opt: Any) -> dict[str, Any]:
    """The optimizer's chip costs so far (pulses, reads, transfers, steps, pulses per weight...) and its
    R1 Table 3 latency estimate per training step: update_ns (one layer) and step_ns (the whole model)."""
    costs = dict(opt.costs())
    latency = opt.latency_estimate()
    costs.update(update_ns=latency["update_ns"], step_ns=latency["step_ns"])
    return costs


# -- one epoch -----------------------------------------------------------------------------------------------
@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int) -> tuple[float, float]:
    """(mean cross-entropy loss in nats, accuracy in [0, 1]) on (x, y)."""
    model.eval()
    loss, correct = 0.0, 0
    for i in range(0, len(y), batch):
        out = model(x[i:i + batch])
        loss += float(F.cross_entropy(out, y[i:i + batch], reduction="sum"))
        correct += int((out.argmax(1) == y[i:i + batch]).sum())
    return loss / len(y), correct / len(y)


def epoch_order(seed: int, epoch: int, n: int) -> torch.Tensor:
    """The sample order of an epoch: a permutation drawn from (seed, epoch) alone."""
    return torch.from_numpy(np.random.default_rng([seed, epoch]).permutation(n))


def _rng_state() -> dict:
    """The generators a run draws from and does not own: torch's global one (model init, dropout). Sample
    orders and device draws come from seeded generators of their own, and nothing draws from numpy's
    global generator."""
    return {"torch": torch.get_rng_state()}


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])


def _finite_params(model: nn.Module, tiles: list) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters()) and all(
        bool(np.isfinite(t.weight()).all()) for t in tiles)


# -- one run ------------------------------------------------------------------------------------------------
@contextmanager
def _end_recorded(run: RunFolder, where: Callable[[], str] = lambda: "") -> Iterator[None]:
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


def train_run(cfg: ExperimentConfig, out_dir: str | Path, progress: bool = False,
              data: Dataset | None = None) -> dict[str, Any]:
    """Train one config (`cfg.trainer`) into `out_dir`, resuming from its newest checkpoint if the folder
    holds an unfinished run of the same config; a finished one is not rerun. `data`: the data set of
    `cfg.data` if already loaded. Returns the final metrics. Ctrl-C (SIGINT) stops the run before its next
    step (`aimc.interrupts.steps_interruptible`), the run recorded as interrupted and resumable."""
    if cfg.compare:
        raise ValueError("train_run takes a single-trainer config; use run_experiment for `compare`")
    check_kernel_threads(cfg.threads)  # before anything is written
    wanted(cfg)  # TensorBoard asked for without its package: refused before anything is written
    run = RunFolder(out_dir)
    if (done := run.finished(cfg)) is not None:
        return done
    data = data or _load(cfg)  # a bad data set fails before the folder exists
    with folder_lock(run.root, "training run"):
        run.start(cfg)
        t0 = time.perf_counter()
        try:
            with _end_recorded(run), steps_interruptible() as held:  # Ctrl-C taken between two steps
                final = _train(cfg, data, run, progress, held.check)
        finally:
            timings = run.manifest.setdefault("timings", {})
            timings["wall_s"] = timings.get("wall_s", 0.0) + time.perf_counter() - t0
            run.save_manifest()
        run.finish("finished", final=final)
    return final


def _load(cfg: ExperimentConfig) -> Dataset:
    d = cfg.data
    return load_dataset(d.name, d.path, d.n_train, d.n_test)


def _train(cfg: ExperimentConfig, data: Dataset, run: RunFolder, progress: bool,
           between_steps: Callable[[], None]) -> dict[str, Any]:
    """The training loop of train_run; `between_steps` is called before every step (it raises
    KeyboardInterrupt for a held Ctrl-C)."""
    torch.set_num_threads(cfg.threads)
    set_kernel_threads(cfg.threads)
    x_train, y_train, x_test, y_test = data.tensors()
    model, opt = build(cfg)
    tiles = analog_tiles(model)
    label = f"{cfg.name}/{cfg.trainer.algorithm}"
    log = MetricLog(cfg, run.root)  # flushed after every record, closed when the run ends

    def record(epoch: int, train_loss: float | None, seconds: float) -> dict[str, Any]:
        test_loss, acc = evaluate(model, x_test, y_test, cfg.eval_batch_size)
        rec = {"epoch": epoch, "train_loss": train_loss, "test_loss": test_loss, "test_accuracy": acc,
               "saturated_fraction": saturated_fraction(tiles), **costs_of(opt), "time_s": seconds}
        if progress:
            tqdm.write(f"{label} epoch {epoch}: train loss {_f(train_loss)}, test loss {test_loss:.4f}, "
                       f"test accuracy {100 * acc:.2f}%", file=sys.stderr)
        log.record(rec)
        return rec

    def checkpoint(epoch: int, history: list[dict]) -> Path:
        state = {"epoch": epoch, "model": model.state_dict(), "optimizer": opt.state_dict(),
                 "rng": _rng_state(), "history": history}
        return run.save_checkpoint(epoch, state, cfg.checkpoint.keep)

    state = run.load_checkpoint()
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
        total = 0.0
        bar = tqdm(range(steps), desc=f"{label} epoch {epoch}/{cfg.epochs}", leave=False, file=sys.stderr,
                   disable=not (progress and sys.stderr.isatty()), mininterval=0.5)
        for step in bar:
            between_steps()
            idx = order[step * cfg.batch_size:(step + 1) * cfg.batch_size]
            opt.zero_grad()
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            value = loss.item()
            if not math.isfinite(value) or value > cfg.max_loss:
                _diverged(run, epoch, step + 1, steps, f"mini-batch loss {value:.4g}"
                          + (" is not finite" if not math.isfinite(value) else f" > max_loss = {cfg.max_loss:g}"))
            loss.backward()
            opt.step()
            total += value * len(idx)
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
    keep = (f"the last good checkpoint is {found[-1]}" if found else "no checkpoint was written")
    raise TrainingDiverged(f"training diverged at epoch {epoch}, step {step} of {steps}: {what}; stopped, "
                           f"{keep}")


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


# -- comparisons and the entry point ------------------------------------------------------------------------
def run_comparison(cfg: ExperimentConfig, out_dir: str | Path, progress: bool = False) -> dict[str, dict]:
    """One run per `compare` entry in out_dir/<label>/, then comparison.{json,csv,md} and curves.{png,csv}.
    A diverged run is reported with its status and error; it does not stop the others."""
    check_kernel_threads(cfg.threads)  # before anything is written
    wanted(cfg)
    run = RunFolder(out_dir)
    if (done := run.finished(cfg)) is not None:
        return done
    data = _load(cfg)
    with folder_lock(run.root, "comparison run"):
        return _compare(cfg, run, data, progress)


def _compare(cfg: ExperimentConfig, run: RunFolder, data: Dataset, progress: bool) -> dict[str, dict]:
    run.start(cfg)
    results: dict[str, dict] = {}
    histories: dict[str, list[dict]] = {}
    label = ""
    with _end_recorded(run, lambda: f"{label}: "):
        for label, sub in cfg.runs():
            try:
                results[label] = {"status": "finished", **train_run(sub, run.root / label, progress, data)}
            except TrainingDiverged as err:
                if progress:
                    print(f"{label}: {err}", file=sys.stderr)
                last = RunFolder(run.root / label).read_metrics()[-1]
                results[label] = {"status": "diverged", "error": str(err),
                                  **{k: v for k, v in last.items() if k in _LAST_GOOD}}
            histories[label] = RunFolder(run.root / label).read_metrics()
    write_json(run.root / "comparison.json", results)
    atomic_write_text(run.root / "comparison.csv", _csv(results))
    atomic_write_text(run.root / "comparison.md", comparison_table(results) + "\n")
    write_curves(histories, run.root / "curves", f"{cfg.name}: {describe(cfg)}")
    run.finish("finished", final=results)
    return results


def run_experiment(cfg: ExperimentConfig, out_dir: str | Path, progress: bool = False) -> dict[str, Any]:
    """Run `cfg` into `out_dir` (resuming an unfinished run there) and return its final metrics: those of
    the single run, or for a `compare` config `{"<label>.<metric>": value}` over all its runs. Raises
    TrainingDiverged for a diverged single run (the folder keeps the last good checkpoint)."""
    if not cfg.compare:
        final = train_run(cfg, out_dir, progress)
    else:
        results = run_comparison(cfg, out_dir, progress)
        final = {f"{label}.{k}": v for label, res in results.items() for k, v in res.items()}
    run_retention(cfg, out_dir, progress)
    return final


def run_retention(cfg: ExperimentConfig, out_dir: str | Path, progress: bool = False) -> None:
    """Retention of the finished run in `out_dir` with the config's `retention` table (nothing without one):
    retention.csv and its figure (aimc.retention)."""
    if cfg.retention is None:
        return
    from aimc.retention import retention  # it evaluates models with this module's build and evaluate

    r = cfg.retention
    say = (lambda line: print(line, file=sys.stderr)) if progress else None
    retention(out_dir, r.times, seed=r.seed, drift=r.drift, step_s=r.step_time_s, progress=say)


# -- reports -----------------------------------------------------------------------------------------------
_COLUMNS = [("algorithm", None), ("status", "status"), ("test acc %", "test_accuracy"),
            ("test loss", "test_loss"), ("train loss", "train_loss"), ("pulses/weight", "pulses_per_weight"),
            ("saturated", "saturated_fraction"), ("step ns", "step_ns"), ("train s", "train_s")]


def _cell(key: str, res: dict) -> str:
    v = res.get(key)
    if key == "test_accuracy" and v is not None:
        return f"{100 * v:.2f}"
    if isinstance(v, float):
        return f"{v:.4g}"
    return "-" if v is None else str(v)


def comparison_table(results: dict[str, dict]) -> str:
    """A Markdown table: one row per run with accuracy, losses, pulses per weight, saturation, latency."""
    rows = [[h for h, _ in _COLUMNS]]
    for label, res in results.items():
        rows.append([label] + [_cell(k, res) for _, k in _COLUMNS[1:]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _csv(results: dict[str, dict]) -> str:
    keys = list(dict.fromkeys(k for res in results.values() for k in res))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["algorithm", *keys])
    for label, res in results.items():
        w.writerow([label, *[res.get(k, "") for k in keys]])
    return buf.getvalue()


def device_words(cfg: ExperimentConfig) -> str:
    """The device of a config in words: its preset name or file, or for a table its kind and the fields
    that differ from the family's defaults (`power (gamma=2, tau=0.7)`)."""
    dev = cfg.tile.device
    if isinstance(dev, str):
        return dev
    fields = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in dev.model_dump(exclude_defaults=True).items() if k != "kind")
    return dev.kind + (f" ({fields})" if fields else "")


def algorithm_words(cfg: ExperimentConfig) -> str:
    """The algorithm of a config, or its comparison's algorithms (`sgd vs residual`)."""
    return " vs ".join(t.algorithm for t in cfg.compare) if cfg.compare else cfg.trainer.algorithm


def describe(cfg: ExperimentConfig) -> str:
    """The device and algorithm of a run or comparison, for figure titles: `device r1_exp_2, residual`."""
    if algorithm_words(cfg) == "sgd":
        return "digital SGD (no device)"
    return f"device {device_words(cfg)}, {algorithm_words(cfg)}"


def write_curves(histories: dict[str, list[dict]], stem: Path, title: str = "") -> None:
    """Learning curves: stem.png and stem.pdf (test accuracy, train and test loss per epoch; `title` above
    both panels) and stem.csv."""
    plt = pyplot()
    with figure_style():
        fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(10, 4))
        losses = []
        for i, (label, hist) in enumerate(histories.items()):
            color = PALETTE[i % len(PALETTE)]
            ep = [r["epoch"] for r in hist]
            ax_acc.plot(ep, [100 * r["test_accuracy"] for r in hist], "o-", color=color, label=label)
            ax_loss.plot(ep, [r["test_loss"] for r in hist], "o-", color=color, label=f"{label} test")
            tr = [(r["epoch"], r["train_loss"]) for r in hist if r["train_loss"] is not None]
            if tr:
                ax_loss.plot(*zip(*tr), "--", color=color, label=f"{label} train")
            losses += [r["test_loss"] for r in hist] + [v for _, v in tr]
        ax_acc.set(xlabel="epoch", ylabel="test accuracy (%)", title="test accuracy")
        ax_loss.set(xlabel="epoch", ylabel="cross-entropy loss (nats)", title="loss")
        loss_axis(ax_loss, losses)
        for ax in (ax_acc, ax_loss):
            integer_ticks(ax.xaxis)
            ax.legend(fontsize=8)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        save_figure(fig, stem.with_suffix(".png"))
        plt.close(fig)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["algorithm", "epoch", "train_loss", "test_loss", "test_accuracy"])
    for label, hist in histories.items():
        for r in hist:
            w.writerow([label, r["epoch"], "" if r["train_loss"] is None else r["train_loss"], r["test_loss"],
                        r["test_accuracy"]])
    atomic_write_text(stem.with_suffix(".csv"), buf.getvalue())
