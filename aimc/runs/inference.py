"""The inference life of a trained model: map it onto inference tiles, program it, and read the test set at
times after programming, repeated over noise draws (aihwkit's program_analog_weights / drift_analog_weights
workflow; docs/inference.md).

The source is a finished run folder (digital, analog or hardware-aware) or one of its checkpoint files. A
hardware-aware run (an `[inference]` table) keeps its own inference layers and tile config unless another
config is given; any other run is exported to its digital weights (`trainers.to_digital`) and mapped onto
tiles of the given config (default: `InferenceTileConfig()`, PCM noise with global drift compensation). For
draw r = 0..repeats-1 the model is programmed once (`trainers.program(model, draw=r)`) and, for each time t,
drifted from its programmed state to t (`trainers.drift`) and evaluated. The digital model's accuracy is
the reference.

Writes inference.csv (one row per time: mean, std, min, max of the accuracy over the draws),
inference_draws.csv (every draw) and inference.png / .pdf into the output folder.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from aimc import trainers
from aimc.common.errors import ConfigError
from aimc.common.figures import PALETTE, figure_style, pyplot, save_figure
from aimc.common.files import atomic_write_csv
from aimc.config import ExperimentConfig, parse_time
from aimc.datasets import load_dataset
from aimc.devices import set_kernel_threads
from aimc.runs.network import build, evaluate
from aimc.runs.retention import finished_config
from aimc.runs.run_folder import RunFolder

COLUMNS = ("time", "time_s", "accuracy_mean", "accuracy_std", "accuracy_min", "accuracy_max", "repeats")
"""inference.csv's columns (accuracies in [0, 1]; std: sample standard deviation over the draws)."""
DRAW_COLUMNS = ("time", "time_s", "draw", "test_accuracy")


def _source(path: Path) -> tuple[Path, Path | None]:
    """(run folder, checkpoint file or None for the newest) of a run folder or a checkpoint inside one."""
    if path.is_file():
        return path.parent.parent, path
    return path, None


def trained_model(source: str | Path) -> tuple[ExperimentConfig, nn.Module]:
    """(config, trained model in eval mode) of a finished single-trainer run folder or its checkpoint."""
    root, ckpt = _source(Path(source))
    cfg = finished_config(root)
    if cfg.compare:
        raise ConfigError(f"{str(root)!r}: a comparison; give one of its runs, e.g. {root}/{cfg.runs()[0][0]}")
    state = RunFolder(root).load_checkpoint(ckpt)
    if state is None:
        raise ConfigError(f"{str(root)!r}: the run has no checkpoint")
    model, _ = build(cfg.model_copy(update={"device": "cpu"}))  # evaluated on the CPU
    model.load_state_dict(state["model"])
    return cfg, model.eval()


def digital_model(model: nn.Module) -> nn.Module:
    """The model with analog and inference layers replaced by their exact digital counterparts."""
    out = trainers.to_digital(model)
    for name, m in list(out.named_modules()):
        if isinstance(m, (trainers.InferenceLinear, trainers.InferenceConv2d)):
            parent, _, child = name.rpartition(".")
            setattr(out.get_submodule(parent) if parent else out, child, m.to_digital())
    return out.eval()


def inference_evaluation(
    source: str | Path,
    times: list[str],
    repeats: int = 5,
    tile_config: trainers.InferenceTileConfig | None = None,
    seed: int = 0,
    out_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[dict], float]:
    """(rows of COLUMNS per time, digital accuracy) of the trained model of `source` programmed onto
    inference tiles of `tile_config` (module docstring) and read at each time of `times` (texts for
    `parse_time`), `repeats` draws each; the tiles are seeded from `seed`. Writes the table and figure into
    `out_dir` (default: the run folder)."""
    if repeats < 1:
        raise ConfigError(f"--repeats: expected at least 1 draw (got {repeats})")
    seconds = [(str(t).strip(), parse_time(t)) for t in times]
    if not seconds:
        raise ConfigError("--times: give at least one time")
    cfg, model = trained_model(source)
    root = _source(Path(source))[0]
    x, y = load_dataset(cfg.data.name, cfg.data.path, cfg.data.n_train, cfg.data.n_test).tensors()[2:]
    torch.set_num_threads(cfg.threads)
    set_kernel_threads(cfg.threads)
    digital = digital_model(model)
    reference = evaluate(digital, x, y, cfg.eval_batch_size)[1]
    if tile_config is not None or not trainers.inference_layers(model):
        tile_config = tile_config or cfg.inference or trainers.InferenceTileConfig()
        model = trainers.convert(digital_model(model), tile_config, seed=seed)
    draws = []
    for r in range(repeats):
        trainers.program(model, draw=r)
        for name, t in seconds:
            trainers.drift(model, t)
            acc = evaluate(model, x, y, cfg.eval_batch_size)[1]
            draws.append(dict(zip(DRAW_COLUMNS, (name, t, r, acc))))
            if progress:
                progress(f"draw {r} t={name}: accuracy {100 * acc:.2f}%")
    rows = summary(draws, seconds)
    out = Path(out_dir) if out_dir is not None else root
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_csv(out / "inference.csv", rows, COLUMNS)
    atomic_write_csv(out / "inference_draws.csv", draws, DRAW_COLUMNS)
    write_figure(rows, reference, out / "inference.png", f"{cfg.name}: accuracy after programming ({repeats} draws)")
    return rows, reference


def summary(draws: list[dict], seconds: list[tuple[str, float]]) -> list[dict]:
    """One row of COLUMNS per time: the accuracy's mean, sample std (0 for one draw), min and max."""
    rows = []
    for name, t in seconds:
        accs = [d["test_accuracy"] for d in draws if d["time"] == name]
        std = statistics.stdev(accs) if len(accs) > 1 else 0.0
        rows.append(dict(zip(COLUMNS, (name, t, statistics.fmean(accs), std, min(accs), max(accs), len(accs)))))
    return rows


def write_figure(rows: list[dict], reference: float, path: Path, title: str) -> None:
    """Mean test accuracy against the time after programming (log axis) with the draws' std as error bars
    and min/max as a band; the digital model's accuracy as a dotted line."""
    plt = pyplot()
    with figure_style():
        fig, ax = plt.subplots(figsize=(6.5, 4))
        ts = [r["time_s"] for r in rows]
        mean = [100 * r["accuracy_mean"] for r in rows]
        ax.fill_between(
            ts,
            [100 * r["accuracy_min"] for r in rows],
            [100 * r["accuracy_max"] for r in rows],
            color=PALETTE[0],
            alpha=0.15,
            lw=0,
            label="min - max over draws",
        )
        ax.errorbar(
            ts,
            mean,
            yerr=[100 * r["accuracy_std"] for r in rows],
            fmt="o-",
            color=PALETTE[0],
            capsize=3,
            label="inference tiles (mean +- std)",
        )
        ax.axhline(100 * reference, color=PALETTE[3], ls=":", label="digital")
        ax.set_xscale("log")
        ax.set_xticks(ts, [r["time"] if r["time"][-1].isalpha() else f"{r['time']} s" for r in rows])
        ax.minorticks_off()
        ax.set(xlabel="time after programming", ylabel="test accuracy (%)", title=title)
        ax.legend(fontsize=8)
        fig.tight_layout()
        save_figure(fig, path)
        plt.close(fig)
