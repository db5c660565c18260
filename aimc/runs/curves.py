"""Learning curves of runs (test accuracy, train and test loss per epoch) and the words that title a run's
figures: its device and algorithm."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from aimc.common.figures import COLUMN_WIDTH, PALETTE, figure_style, integer_ticks, loss_axis, pyplot, save_figure
from aimc.common.files import atomic_write_text
from aimc.config import ExperimentConfig


def device_words(cfg: ExperimentConfig) -> str:
    """The device of a config in words: its preset name or file, or for a table its kind and the fields
    that differ from the family's defaults (`power (gamma=2, tau=0.7)`)."""
    dev = cfg.tile.device
    if isinstance(dev, str):
        return dev
    fields = ", ".join(
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in dev.model_dump(exclude_defaults=True).items()
        if k != "kind"
    )
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
        fig, (ax_acc, ax_loss) = plt.subplots(2, 1, figsize=(COLUMN_WIDTH, 5.5), sharex=True)  # one column
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
        ax_acc.set(ylabel="test accuracy (%)")
        ax_loss.set(xlabel="epoch", ylabel="cross-entropy loss (nats)")
        loss_axis(ax_loss, losses)
        for ax in (ax_acc, ax_loss):
            integer_ticks(ax.xaxis)
            ax.legend(fontsize=6)
        if title:
            fig.suptitle(title, fontsize=8)
        fig.tight_layout()
        save_figure(fig, stem.with_suffix(".png"))
        plt.close(fig)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["algorithm", "epoch", "train_loss", "test_loss", "test_accuracy"])
    for label, hist in histories.items():
        for r in hist:
            w.writerow(
                [
                    label,
                    r["epoch"],
                    "" if r["train_loss"] is None else r["train_loss"],
                    r["test_loss"],
                    r["test_accuracy"],
                ]
            )
    atomic_write_text(stem.with_suffix(".csv"), buf.getvalue())
