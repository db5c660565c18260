"""The experiment config: one validated pydantic model per run, loaded from TOML.

A run is fully described by its `ExperimentConfig` and seed. Every section forbids unknown keys, and a
wrong key or value fails before any work with an error naming the dotted field path, for example
`trainer.lr: Input should be greater than 0 (got -1)`. `apply_overrides` sets fields by dotted path on the
plain dict of a config (the sweep engine uses it for its axes).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from aimc.common.errors import ConfigError
from aimc.common.validation import STRICT, format_validation_error
from aimc.data_config import DataConfig
from aimc.devices import DEVICE_TAGS, load_device
from aimc.devices.drift import DriftParameter
from aimc.devices.periphery import PeripheryConfig
from aimc.model_config import (  # noqa: F401 (the model sections are public names of aimc.config too)
    MODEL_NAMES,
    CifarResNetConfig,
    FCNConfig,
    ImportedModelConfig,
    LeNet5Config,
    MobileNetV2Config,
    ModelConfig,
    R1CNNConfig,
    ResNetConfig,
    VGG8Config,
)
from aimc.trainers import ALGORITHMS, AnalogSGDConfig, InferenceTileConfig, TileConfig, TrainerConfig


class CheckpointConfig(BaseModel):
    """Checkpoints in the run folder, written at the end of an epoch."""

    model_config = STRICT
    every: int = Field(1, ge=1, description="epochs between two checkpoints")
    keep: int = Field(1, ge=1, description="newest checkpoints kept on disk")


class LogConfig(BaseModel):
    """Where a run's metrics go besides metrics.jsonl; no effect on results (left out of the config hash)."""

    model_config = STRICT
    tensorboard: bool = Field(
        False,
        description="also write each epoch's metrics as TensorBoard events into "
        "<run folder>/tensorboard (the `tensorboard` extra)",
    )


TIME_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "mo": 30 * 86400.0, "y": 365.25 * 86400.0}
"""Time units of `parse_time`: second, minute, hour, day, month (30 days), year (365.25 days)."""
DEFAULT_TIMES = ("1s", "1min", "1h", "1d", "1mo", "1y", "10y")


def parse_time(text: str) -> float:
    """Seconds of a time such as `3600`, `1h`, `2.5d` or `10y` (units: TIME_UNITS); > 0 and finite."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-z]*)\s*", str(text))
    value, unit = (float(m.group(1)), m.group(2) or "s") if m else (0.0, "s")
    if unit not in TIME_UNITS or not math.isfinite(value * TIME_UNITS[unit]) or value <= 0:
        raise ConfigError(
            f"time {text!r}: expected a positive number with an optional unit "
            f"({', '.join(TIME_UNITS)}), e.g. 3600 or 1h"
        )
    return value * TIME_UNITS[unit]


class RetentionConfig(BaseModel):
    """Retention after training (aimc.runs.retention): run by `aimc train` once the run is finished, with the
    same meaning as `aimc retention`'s options. Changes no training result (left out of the config hash)."""

    model_config = STRICT
    times: list[str] = Field(
        list(DEFAULT_TIMES),
        min_length=1,
        description="idle times after training: seconds or with a unit (s, min, h, d, mo = 30 d, y = 365.25 d)",
    )
    drift: DriftParameter | None = Field(
        None, description="drift of every tile instead of its device's own (DriftParameter fields; none: the device's)"
    )
    step_time_s: float = Field(1.0, gt=0, description="seconds of idle time per decay/diffusion step")
    seed: int = Field(0, ge=0, description="seed of the idle draws (drift exponents, noise)")

    @field_validator("times")
    @classmethod
    def _times(cls, times: list[str]) -> list[str]:
        for t in times:
            try:
                parse_time(t)
            except ConfigError as err:
                raise ValueError(str(err)) from None
        return times


class LrDecayConfig(BaseModel):
    """Step decay of the gradient rate, as torch's StepLR: in epoch e the trainer's `lr` times
    factor^floor((e - 1) / every). R1's code halves its rate every 15 epochs. Transfer rates stay fixed."""

    model_config = STRICT
    every: int = Field(..., ge=1, description="epochs between two decays")
    factor: float = Field(0.5, gt=0, le=1, description="multiplier of lr at each decay")

    def rate(self, lr: float, epoch: int) -> float:
        """The gradient rate of epoch `epoch` (1-based)."""
        return lr * self.factor ** ((epoch - 1) // self.every)


class ExperimentConfig(BaseModel):
    """One training run: model, data, tiles, trainer and schedule; or, with `compare`, one run per trainer."""

    model_config = STRICT
    name: str = Field("run", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="run name (folder-safe)")
    seed: int = Field(0, ge=0, description="seed of model init, data order and every device draw")
    tile: TileConfig = Field(default_factory=TileConfig, description="device and periphery of the tiles")
    trainer: TrainerConfig | None = Field(
        None, description="training algorithm (default: analog_sgd; none when `compare` is given)"
    )
    compare: list[TrainerConfig] = Field(
        default_factory=list,
        description="trainers to compare on the same model, data and tiles, one run each (replaces `trainer`)",
    )
    model: ModelConfig = Field(default_factory=FCNConfig, description="network architecture")
    data: DataConfig = Field(default_factory=DataConfig, description="data set")
    epochs: int = Field(10, ge=1, description="passes over the training set")
    batch_size: int = Field(10, ge=1, description="training mini-batch (samples)")
    eval_batch_size: int = Field(1000, ge=1, description="test-set mini-batch (samples); no effect on results")
    max_loss: float = Field(
        1e3, gt=0, description="divergence guard: stop when a mini-batch loss is not finite or above this (nats)"
    )
    lr_decay: LrDecayConfig | None = Field(None, description="step decay of the gradient rate (none: constant)")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig, description="checkpoint schedule")
    log: LogConfig | None = Field(None, description="metric logging besides metrics.jsonl (TensorBoard)")
    retention: RetentionConfig | None = Field(None, description="retention after training (none: not run)")
    inference: InferenceTileConfig | None = Field(
        None,
        description="hardware-aware training: the model's layers on inference tiles of this config, trained by "
        "digital SGD (trainer.algorithm = 'sgd') with its weight modifier; evaluate with `aimc inference`",
    )
    device: str = Field(
        "cpu",
        pattern=r"^(cpu|cuda(:[0-9]+)?)$",
        description="where the model trains: 'cpu', or a CUDA GPU ('cuda', 'cuda:1'; needs pip install "
        "'aimc[gpu]'; docs/gpu.md). Checkpoints "
        "load on either",
    )
    threads: int = Field(
        1,
        ge=1,
        description="threads of torch and of the Numba kernels (results do not "
        "depend on it); 1 suits small batches and parallel sweep workers",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_trainer(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if not data.get("compare") and data.get("trainer") is None:
            data = {**data, "trainer": AnalogSGDConfig().model_dump()}
        if isinstance(data.get("model"), dict) and "name" not in data["model"]:
            data = {**data, "model": {"name": "fcn", **data["model"]}}
        return data

    @field_validator("tile")
    @classmethod
    def _known_device(cls, tile: TileConfig) -> TileConfig:
        if isinstance(tile.device, str):
            try:
                load_device(tile.device)
            except ConfigError as err:
                raise ValueError(f"tile.device: {err}") from None
        return tile

    @model_validator(mode="after")
    def _check(self) -> ExperimentConfig:
        if self.compare and self.trainer is not None:
            raise ValueError("trainer: give either `trainer` or `compare`, not both")
        if self.inference is not None and any(t.algorithm != "sgd" for t in self.compare or [self.trainer]):
            raise ValueError("inference: inference tiles are trained digitally; set trainer.algorithm = 'sgd'")
        return self

    def runs(self) -> list[tuple[str, ExperimentConfig]]:
        """(label, single-trainer config) of every run: one per `compare` entry, or this config itself.
        Labels are the algorithm names, with `-2`, `-3`... on repeats."""
        if not self.compare:
            return [(self.trainer.algorithm, self)]
        out, seen = [], {}
        for t in self.compare:
            seen[t.algorithm] = seen.get(t.algorithm, 0) + 1
            label = t.algorithm if seen[t.algorithm] == 1 else f"{t.algorithm}-{seen[t.algorithm]}"
            out.append((label, self.model_copy(update={"trainer": t, "compare": []})))
        return out

    def hash(self) -> str:
        """First 16 hex digits of the SHA-256 of the canonical JSON of the config."""
        return hashlib.sha256(canonical_json(self).encode()).hexdigest()[:16]


# Fields added after runs existed, left out of the canonical JSON while unset: the runs made before them keep
# their hash (a sweep folder does not rerun them).
_ADDED_LATER = ("lr_decay", "inference")
_ADDED_LATER_IN = {
    "data": ("source", "options", "augment", "crop_padding", "normalize"),
    "model": ("pretrained", "analog_layers", "analog_types"),
}
_ADDED_LATER_PERIPHERY = ("nm_assumed_wmax", "nm_decay")  # in every read periphery, while at their defaults


def _drop_periphery_defaults(node: Any) -> None:
    """Remove _ADDED_LATER_PERIPHERY's keys at their defaults from every periphery (a dict with
    noise_management) in the dumped config."""
    if isinstance(node, dict):
        if "noise_management" in node:
            for key in _ADDED_LATER_PERIPHERY:
                if key in node and node[key] == _default(PeripheryConfig.model_fields[key]):
                    del node[key]
        for value in node.values():
            _drop_periphery_defaults(value)
    elif isinstance(node, list):
        for value in node:
            _drop_periphery_defaults(value)


def canonical_json(cfg: BaseModel) -> str:
    """The config as JSON with sorted keys and no whitespace (what `hash` digests)."""
    data = cfg.model_dump(mode="json")
    for key in _ADDED_LATER:
        if data.get(key, 0) is None:
            del data[key]
    for section, keys in _ADDED_LATER_IN.items():
        fields = type(getattr(cfg, section)).model_fields
        for key in keys:
            if key in data[section] and data[section][key] == _default(fields[key]):
                del data[section][key]
    _drop_periphery_defaults(data)
    if data.get("device") == "cpu":  # added later; a GPU run keeps it (its sums may round apart from the CPU's)
        del data["device"]
    data["data"].pop("workers", None)  # who draws the batches changes no result
    data.pop("log", None)  # where metrics are logged changes no result
    data.pop("retention", None)  # evaluated after training
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _default(field: Any) -> Any:
    """A pydantic field's default in JSON form."""
    value = field.get_default(call_default_factory=True)
    return list(value) if isinstance(value, tuple) else value


# -- validation with dotted-path errors ------------------------------------------------------------------
UNION_TAGS = frozenset(ALGORITHMS) | frozenset(MODEL_NAMES) | frozenset(DEVICE_TAGS)
"""The tags of the config's tagged unions, left out of error paths (`trainer.lr`, not `trainer.residual.lr`)."""


def validate_config(data: dict[str, Any], where: str = "config") -> ExperimentConfig:
    """An `ExperimentConfig` from a plain dict; raises `ConfigError` naming every bad field."""
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"invalid {where}:\n{format_validation_error(err, hidden=UNION_TAGS)}") from None


def read_toml(path: str | Path) -> dict[str, Any]:
    """The table of a TOML file; raises `ConfigError` for a missing or malformed file."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config file {str(path)!r} is a directory, not a TOML file")
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark (editors on Windows write one) is not TOML
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ConfigError(
            f"config file {str(path)!r} is not UTF-8 text (TOML is): byte {err.start} on line {line}"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {err}") from None


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """Read a TOML experiment config, apply dotted-path overrides, validate."""
    data = apply_overrides(read_toml(path), overrides or {})
    return validate_config(data, where=str(path))


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of `data` with each `dotted.path: value` of `overrides` set, e.g.
    `{"tile.device.gamma": 2, "compare.1.lr": 0.1}`. Missing tables are created; an integer part indexes a
    list. A device given as a preset name is expanded into its table before one of its fields is set, so
    `tile.device.gamma` works on `tile.device = "r1_power_1"`. Validation happens afterwards."""
    out = copy.deepcopy(data)
    for path, value in overrides.items():
        parts = path.split(".")
        if not all(parts):
            raise ConfigError(f"override {path!r}: empty part in the dotted path")
        node: Any = out
        for i, key in enumerate(parts[:-1]):
            node = _child(node, key, path, ".".join(parts[: i + 1]))
        _set(node, parts[-1], copy.deepcopy(value), path)
    return out


def _child(node: Any, key: str, path: str, here: str) -> Any:
    if isinstance(node, list):
        idx = _index(node, key, path)
        return node[idx]
    if not isinstance(node, dict):
        raise ConfigError(f"override {path!r}: {here.rsplit('.', 1)[0]} is {node!r}, not a table")
    if key not in node:
        node[key] = {}
    elif isinstance(node[key], str) and here == "tile.device":
        node[key] = load_device(node[key]).model_dump(mode="json")
    return node[key]


def _set(node: Any, key: str, value: Any, path: str) -> None:
    if isinstance(node, list):
        node[_index(node, key, path)] = value
    elif isinstance(node, dict):
        node[key] = value
    else:
        raise ConfigError(f"override {path!r}: the parent is {node!r}, not a table")


def _index(node: list, key: str, path: str) -> int:
    if not key.lstrip("-").isdigit() or not -len(node) <= int(key) < len(node):
        raise ConfigError(f"override {path!r}: {key!r} is not an index of a list of {len(node)}")
    return int(key)


def config_schema() -> dict:
    """JSON schema of `ExperimentConfig`."""
    return ExperimentConfig.model_json_schema()


def default_job() -> ExperimentConfig:
    """What `aimc train` runs without a config: R1's FCN on the shipped MNIST subset, digital SGD against
    Analog SGD and residual learning on the strongly asymmetric exponential device (R1 Table 8, g = 2).

    To fit a few minutes on 2 cores (6000 steps instead of R1's 180000) the rates are 4x R1's (digital 0.4,
    analog 0.2), the transfer rate equals the gradient rate (0.2; R1: 0.01, a fifth of it) so that W keeps
    up with one column read per step, and the update is the expected one. The preset has no device-to-device
    variation, so its symmetric point is exactly 0 where the arrays start: zero shifting P would change
    nothing and is skipped (it costs about 2400 pulses per element)."""
    return validate_config(
        {
            "name": "default",
            "tile": {"device": "r1_exp_2", "update": {"mode": "expected"}},
            "compare": [
                {"algorithm": "sgd", "lr": 0.4},
                {"algorithm": "analog_sgd", "lr": 0.2},
                {"algorithm": "residual", "lr": 0.2, "transfer_lr": 0.2, "gamma": 0.5, "zero_shift": False},
            ],
            "data": {"name": "mnist_small"},
            "epochs": 10,
            "batch_size": 10,
        },
        where="the default job",
    )
