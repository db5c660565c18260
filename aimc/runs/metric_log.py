"""Optional TensorBoard logging of a run's per-epoch metrics (`[log] tensorboard = true` in the config).

The events go to `<run folder>/tensorboard` (`tensorboard --logdir RUN_OR_COMPARISON_FOLDER`), one scalar per
numeric metric of each epoch record (the names of metrics.jsonl: test_accuracy, train_loss, pulses, ...),
at step = epoch. A resumed run appends the epochs it trains. Needs the `tensorboard` package
(`pip install "aimc[tensorboard]"`); asking for it without the package is refused before the run starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aimc.common.errors import ConfigError
from aimc.config import ExperimentConfig


def wanted(cfg: ExperimentConfig) -> bool:
    """Whether the config asks for TensorBoard events; raises ConfigError where the package is missing."""
    if cfg.log is None or not cfg.log.tensorboard:
        return False
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise ConfigError(
            'log.tensorboard = true needs the tensorboard package: pip install "aimc[tensorboard]" '
            "(or set log.tensorboard = false)"
        ) from None
    return True


class MetricLog:
    """Writes epoch records as TensorBoard scalars into folder/tensorboard; does nothing when not wanted."""

    def __init__(self, cfg: ExperimentConfig, folder: str | Path):
        self.writer = None
        if wanted(cfg):
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(Path(folder) / "tensorboard"))

    def record(self, rec: dict[str, Any]) -> None:
        """One epoch record: every int or float value except the epoch itself, at step = epoch."""
        if self.writer is None:
            return
        for key, value in rec.items():
            if key != "epoch" and isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(key, value, rec["epoch"])
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
