"""Retention of a trained chip: test accuracy after the analog tiles sat idle for given times after training.

For every run of a finished run folder (each algorithm of a comparison) and every time t, the trained model
is loaded from the run's newest checkpoint, every analog tile reads the drift-compensation probe
(devices.drift_compensation) and is then left idle for t seconds (`AnalogTile.idle`: drift, diffusion and
decay, docs/devices.md), and the test set is read through the forward periphery twice: as the tiles are,
and with aihwkit's global drift compensation (each tile's outputs scaled by its probe readout at the end
of training over its readout now). Every time starts from the trained state, so each row is one idle
interval t, not the sum of the intervals before it. Digital runs (no tiles) are evaluated once and kept
as a flat reference.

Writes RUN_FOLDER/retention.csv (one row per algorithm and time) and retention.png / retention.pdf.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from aimc.common.errors import ConfigError
from aimc.common.figures import COLUMN_WIDTH, PALETTE, figure_style, pyplot, save_figure
from aimc.common.files import atomic_write_csv
from aimc.config import ExperimentConfig, parse_time, validate_config
from aimc.data_sources import load_data
from aimc.devices.drift import DriftParameter
from aimc.devices.drift_compensation import compensate, probe_readout
from aimc.runs.batches import InputPipeline
from aimc.runs.network import analog_tiles, build, evaluate
from aimc.runs.run_folder import RunFolder, read_json

COLUMNS = ("algorithm", "time", "time_s", "test_accuracy", "test_accuracy_compensated", "compensation_scale", "seed")
"""retention.csv's columns: compensation_scale is the mean of the tiles' output scales (1: no drift); seed: the
seed of the idle draws (one per repeat)."""


def finished_config(root: Path) -> ExperimentConfig:
    """The config of the finished run in `root`; ConfigError for a missing folder or an unfinished run."""
    if not root.is_dir():
        raise ConfigError(f"{str(root)!r}: no such run folder")
    manifest = RunFolder(root).read_manifest()
    if manifest is None or not (root / "config.json").is_file():
        raise ConfigError(f"{str(root)!r}: not a run folder (no manifest.json or config.json)")
    if manifest.get("status") != "finished":
        raise ConfigError(
            f"{str(root)!r}: the run is {manifest.get('status')!r}, not finished; finish it with "
            f"`aimc train --resume {root}`"
        )
    return validate_config(read_json(root / "config.json"), where=str(root / "config.json"))


def _accuracies(
    cfg: ExperimentConfig,
    state: dict,
    data: tuple,
    seconds: float,
    drift: DriftParameter | None,
    step_s: float,
    seed: int,
) -> tuple[float, float, float]:
    """(accuracy, compensated accuracy, mean compensation scale) of the trained model idle for `seconds`."""
    x, y, n_classes = data
    model, _ = build(cfg.model_copy(update={"device": "cpu"}), tuple(x.shape[1:]), n_classes)  # idles on the CPU
    model.load_state_dict(state["model"])
    tiles = analog_tiles(model)
    if not tiles:
        acc = evaluate(model, x, y, cfg.eval_batch_size)[1]
        return acc, acc, 1.0
    baselines = [probe_readout(t) for t in tiles]
    for t in tiles:
        t.idle(seconds, step_s, drift, seed)
    acc = evaluate(model, x, y, cfg.eval_batch_size)[1]
    scales = [compensate(t, b) for t, b in zip(tiles, baselines)]
    comp = evaluate(model, x, y, cfg.eval_batch_size)[1]
    return acc, comp, float(np.mean(scales))


def retention(
    root: str | Path,
    times: list[str],
    seed: int = 0,
    drift: DriftParameter | None = None,
    step_s: float = 1.0,
    progress: Any = None,
    repeats: int = 1,
) -> list[dict]:
    """Rows of COLUMNS for every finished run in the run folder `root` and every time in `times` (texts for
    `parse_time`), plus time 0 (right after training). `drift`: the drift of every tile instead of its
    device's own; `step_s`: seconds per decay/diffusion step while idle; `seed`: the idle draws. Writes
    retention.csv and retention.png/.pdf into `root`. `progress`: a callable given one line per row. `repeats`:
    the idle draws repeated with seeds seed, seed + 1, ... (the figure shows their mean and std)."""
    if not (isinstance(repeats, int) and repeats >= 1):
        raise ConfigError(f"--repeats: expected an integer >= 1 (got {repeats!r})")
    root = Path(root)
    cfg = finished_config(root)
    seconds = [(str(t).strip(), parse_time(t)) for t in times]
    if not seconds:
        raise ConfigError("--times: give at least one time")
    if not step_s > 0 or not math.isfinite(step_s):
        raise ConfigError(f"--step-time: expected a positive number of seconds (got {step_s})")
    ds = load_data(cfg.data)
    x_train, _, x_test, y_test = ds.tensors()
    x_test = InputPipeline.of(cfg.data, x_train).normalized(x_test)
    torch.set_num_threads(cfg.threads)
    rows, digital = [], set()
    for label, sub in cfg.runs():
        run = RunFolder(root / label if cfg.compare else root)
        status = (run.read_manifest() or {}).get("status")
        if status != "finished":
            continue  # a diverged run of a comparison has no trained model to keep
        state = run.load_checkpoint()
        if state is None:
            raise ConfigError(
                f"{str(run.root)!r}: the run finished, but {run.checkpoint_dir} holds no checkpoint (removed?); "
                "retention needs the trained model: train the run again into another folder"
            )
        if sub.trainer.algorithm == "sgd":
            digital.add(label)
        for s in range(seed, seed + repeats):
            for name, t in [("0", 0.0), *seconds]:
                acc, comp, scale = _accuracies(sub, state, (x_test, y_test, ds.n_classes), t, drift, step_s, s)
                rows.append(dict(zip(COLUMNS, (label, name, t, acc, comp, scale, s))))
                if progress:
                    progress(f"{label} t={name} seed {s}: accuracy {100 * acc:.2f}%, compensated {100 * comp:.2f}%")
    if not rows:
        raise ConfigError(f"{str(root)!r}: no run of the comparison finished (each diverged): no trained model to keep")
    atomic_write_csv(root / "retention.csv", rows, COLUMNS)
    fields = drift.model_dump(exclude_defaults=True) if drift is not None else None
    how = (
        "the devices' own drift"
        if fields is None
        else "drift " + (", ".join(f"{k} = {v:g}" for k, v in fields.items()) or "off")
    )
    write_figure(rows, root / "retention.png", f"{cfg.name}: retention, {how}", digital)
    return rows


def write_figure(rows: list[dict], path: Path, title: str, digital: set[str]) -> None:
    """Test accuracy against idle time (log axis, t > 0): solid as read, dashed compensated, one colour per
    algorithm, the mean over the seeds of the idle draws with error bars of their sample std (several seeds);
    a thin dotted line at each algorithm's accuracy right after training (t = 0) is its reference; the runs
    labelled in `digital` (no tiles) are flat dotted lines."""
    plt = pyplot()
    n_seeds = len({r["seed"] for r in rows})
    with figure_style():
        fig, ax = plt.subplots(figsize=(2 * COLUMN_WIDTH, 4))
        labels = list(dict.fromkeys(r["algorithm"] for r in rows))
        for i, label in enumerate(labels):
            mine = [r for r in rows if r["algorithm"] == label]
            ts = sorted({r["time_s"] for r in mine if r["time_s"] > 0})
            color = PALETTE[i % len(PALETTE)]

            def stats(key: str, t: float) -> tuple[float, float]:
                v = [100 * r[key] for r in mine if r["time_s"] == t]
                return float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0

            start = stats("test_accuracy", 0.0)[0]
            if label in digital:
                ax.axhline(start, color=color, ls=":", label=f"{label} (digital)")
                continue
            ax.axhline(start, color=color, ls=":", lw=0.8, label=f"{label} right after training")
            for key, style, name in (("test_accuracy", "o-", label), ("test_accuracy_compensated", "s--", None)):
                mean, std = zip(*(stats(key, t) for t in ts))
                ax.errorbar(
                    ts,
                    mean,
                    yerr=std if n_seeds > 1 else None,
                    fmt=style,
                    color=color,
                    capsize=3,
                    label=name or f"{label}, drift compensated",
                )
        ax.set_xscale("log")
        shown = {r["time_s"]: r["time"] for r in rows if r["time_s"] > 0}
        ax.set_xticks(list(shown), [name if name[-1].isalpha() else f"{name} s" for name in shown.values()])
        ax.minorticks_off()
        bars = f"\nmean \u00b1 1 sample std over {n_seeds} seeds of the idle draws" if n_seeds > 1 else ""
        ax.set(xlabel="idle time after training", ylabel="test accuracy (%)")
        ax.set_title(title + bars, fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        save_figure(fig, path)
        plt.close(fig)
