"""Figures a paper can use: one save helper (PNG and PDF side by side, atomic), a colour-blind-safe palette,
integer epoch ticks, plain tick labels on log axes, and axis labels in words with units.

Every layer may use it (matplotlib is imported lazily, with the Agg backend, by `pyplot()`):

    plt = pyplot()
    with figure_style():
        fig, ax = plt.subplots(); ...; save_figure(fig, folder / "curves.png")
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aimc.common.files import atomic_write_bytes

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
"""Okabe and Ito's colour-blind-safe palette (blue, orange, green, vermillion, purple, sky blue, yellow,
black); heatmaps use viridis."""

STYLE = {
    "pdf.fonttype": 42,
    "svg.fonttype": "none",
    "axes.grid": True,
    "grid.alpha": 0.3,
    "savefig.dpi": 120,
    "figure.dpi": 100,
}
"""rcParams of every figure: editable text in the PDF (TrueType fonts), a light grid."""

COLUMN_WIDTH = 3.5
"""Inches: the width of one column of a two-column paper (IEEE, APS: 3.4 to 3.5 in), figures that fit it."""

VECTOR_FORMAT = "pdf"
"""The vector copy written beside every PNG."""


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_style() -> Any:
    """A context in which figures get STYLE and the palette as their colour cycle (matplotlib's rcParams
    outside it are left as they were): create and save a figure inside it."""
    import matplotlib
    from cycler import cycler

    return matplotlib.rc_context({**STYLE, "axes.prop_cycle": cycler(color=PALETTE)})


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> list[Path]:
    """Save a matplotlib figure as PNG at `path` (`dpi`) and as PDF beside it (same stem), atomically;
    returns both paths. The PDF carries no creation date, so the same figure gives the same bytes."""
    path = Path(path).with_suffix(".png")
    vector = path.with_suffix(f".{VECTOR_FORMAT}")
    for target, kwargs in (
        (path, {"format": "png", "dpi": dpi}),
        (vector, {"format": VECTOR_FORMAT, "metadata": {"CreationDate": None}}),
    ):
        buf = io.BytesIO()
        fig.savefig(buf, **kwargs)
        atomic_write_bytes(target, buf.getvalue())
    return [path, vector]


def integer_ticks(axis: Any) -> None:
    """Whole-number ticks on an axis of counts (epochs, steps)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _plain(v: float, _pos: Any = None) -> str:
    return f"{v:g}"


def plain_log_ticks(axis: Any, values: Sequence[float]) -> None:
    """Plain numbers (0.5, 1, 2) instead of powers of ten on a log axis; where `values` span less than two
    decades the 2 and 5 minor ticks are labelled too."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(_plain))
    positive = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    narrow = bool(positive) and max(positive) / min(positive) < 100

    def minor(v: float, _pos: Any = None) -> str:
        mantissa = round(v / 10 ** math.floor(math.log10(v)), 6) if v > 0 else 0
        return _plain(v) if narrow and mantissa in (2.0, 5.0) else ""

    axis.set_minor_formatter(FuncFormatter(minor))


def loss_axis(ax: Any, values: Sequence[float | None]) -> None:
    """The y axis of a loss: log scale with plain labels where the finite positive `values` span a factor of
    3 or more, else linear (a narrow range holds no log tick); plain numbers either way, no 10^x, no offset."""
    from matplotlib.ticker import FuncFormatter

    positive = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if positive and max(positive) / min(positive) >= 3:
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis, positive)
    else:
        ax.yaxis.set_major_formatter(FuncFormatter(_plain))


def log_spaced(values: Sequence[float]) -> bool:
    """Whether swept values call for a log axis: all positive and either spanning two decades or more, or
    (three values or more) evenly spaced in log but not linearly, within 10% of the step."""
    if len(values) < 2 or min(values) <= 0:
        return False
    lo, hi = min(values), max(values)
    if hi / lo >= 100:
        return True
    if len(values) < 3:
        return False
    s = sorted(values)

    def even(xs: list[float]) -> bool:
        steps = [b - a for a, b in zip(xs, xs[1:])]
        mean = sum(steps) / len(steps)
        return mean > 0 and all(abs(st - mean) <= 0.1 * mean for st in steps)

    return even([math.log(v) for v in s]) and not even(s)


LABELS = {
    "epoch": "epoch",
    "epochs": "epochs",
    "seed": "seed",
    "batch_size": "batch size (samples)",
    "threads": "threads",
    "max_loss": "divergence limit (nats)",
    "trainer.algorithm": "algorithm",
    "trainer.lr": "learning rate (gradient step)",
    "trainer.transfer_lr": "transfer rate",
    "trainer.transfer_every": "steps between transfers",
    "trainer.n_columns": "columns per transfer",
    "trainer.transfer_bl": "transfer pulse train length (pulses)",
    "trainer.gamma": "residual gain γ",
    "trainer.n_tiles": "arrays per weight",
    "trainer.threshold": "transfer threshold (Δw_min)",
    "trainer.buffer_beta": "buffer rate β",
    "trainer.zero_shift_cycles": "zero-shift cycles",
    "tile.device": "device",
    "tile.device.gamma": "device exponent γ",
    "tile.device.tau": "device bound τ (weight units)",
    "tile.device.c": "device asymmetry c",
    "tile.device.dw_min": "pulse step Δw_min (weight units)",
    "tile.device.dw_min_std": "cycle-to-cycle noise (relative std)",
    "tile.device.dw_min_dtod": "device-to-device spread (relative std)",
    "tile.update.mode": "update mode",
    "tile.update.desired_bl": "pulse train length BL (pulses)",
    "tile.forward.out_noise": "forward output noise (std)",
    "tile.backward.out_noise": "backward output noise (std)",
    "tile.forward.inp_bits": "DAC resolution (bits)",
    "tile.forward.out_bits": "ADC resolution (bits)",
    "tile.max_in": "tile inputs",
    "tile.max_out": "tile outputs",
    "tile.bias": "bias",
    "model.name": "model",
    "model.width": "network width (channels)",
    "model.hidden": "hidden layers (units)",
    "data.n_train": "training images",
    "data.name": "data set",
    "lr_decay.every": "epochs between rate decays",
    "lr_decay.factor": "rate decay factor",
    "test_accuracy": "test accuracy (%)",
    "test_loss": "test loss (nats)",
    "train_loss": "train loss (nats)",
    "saturated_fraction": "saturated elements (fraction)",
    "pulses_per_weight": "pulses per weight",
    "pulses": "pulses",
    "update_pulses": "update pulses",
    "transfer_pulses": "transfer pulses",
    "setup_pulses": "setup pulses",
    "reads": "reads (vector MVMs)",
    "transfers": "transfers",
    "steps": "steps",
    "update_ns": "update latency per layer (ns)",
    "step_ns": "step latency (ns)",
    "train_s": "training time (s)",
}
"""Axis labels in words with units, by config path or metric name."""

PERCENT = ("test_accuracy",)
"""Metrics stored as fractions (0..1) that figures show in %."""


def label(name: str) -> str:
    """Words and units for a config path or metric (`trainer.lr` -> "learning rate (gradient step)"); a
    comparison's `<run>.<metric>` becomes "<run>: <metric words>"; an unknown path keeps its last part in
    words and the path in parentheses."""
    if name in LABELS:
        return LABELS[name]
    head, _, last = name.rpartition(".")
    if head and last in LABELS:
        return f"{head}: {LABELS[last]}"
    return f"{last.replace('_', ' ')} ({name})" if head else name.replace("_", " ")


def scale(name: str) -> float:
    """The factor a metric's values are shown with (100 for accuracies, in %)."""
    return 100.0 if name.rpartition(".")[2] in PERCENT else 1.0
