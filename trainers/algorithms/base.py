"""The base of the analog training algorithms: digital parameters, per-tile updates, costs, state.

An analog optimizer follows torch.optim conventions (`opt.zero_grad(); loss.backward(); opt.step()`).
Its `step()`:

1. updates the digital parameters (digital biases, output scales, layers left digital) by plain SGD with
   `lr`;
2. hands every tile of every analog layer its slice of the layer's saved (x, d) through `update_block`
   (each algorithm decides which array gets the gradient pulses);
3. runs the algorithm's transfer schedule (`after_step`).

Rates convention: `lr` is always the gradient step in weight units per unit gradient, W <- W - lr * d^T x
for the array that takes the gradient; `transfer_lr` the transfer step, W <- W + transfer_lr * read(P).
Neither is scaled by the other.

Each algorithm is one module with its config (an `AlgorithmConfig` whose `algorithm` Literal names it) and
its optimizer (whose `config` class attribute is that config); `registry.py` lists the optimizers.
"""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import torch
from pydantic import Field
from torch import nn

from aimc.common.validation import Float32Config
from aimc.trainers.algorithms.latency import LatencyModel
from aimc.trainers.layers import AnalogLayer, TileBlock, analog_layers
from aimc.trainers.state import state_to_numpy, state_to_torch

GAIN_MAX = 2.0**24
"""The largest gain of a second array in a mixed weight W + gamma P: beyond 2^24 (float32's 24-bit
significand) W, on the scale of P, is below the resolution of the mixed weight and stops mattering."""

PERIOD_MAX = 2.0**53
"""The largest count of updates a float field gives (a period): the integers a float64 holds exactly."""


class AlgorithmConfig(Float32Config):
    """What the config of every training algorithm has; each adds `algorithm: Literal[name]`, its tag."""

    lr: float = Field(0.05, gt=0, description="gradient step (weight units per unit gradient)")


def algorithm_name(config: type[AlgorithmConfig]) -> str:
    """The name of the algorithm a config class is for: the default of its `algorithm` Literal."""
    return config.model_fields["algorithm"].default


class AnalogOptimizer(torch.optim.Optimizer):
    """Base class; subclasses set `config` (their config class, which names the algorithm) and
    `update_block`, and where they differ `gains()`, `init_block`, `after_step` and `update_latency`.

    `tile_state[layer][tile]` is each tile's algorithm state (buffers, column pointers); keys that start
    with "_" are scratch space, left out of the checkpoint."""

    config: type[AlgorithmConfig]
    algorithm = "base"
    runs_on_gpu = False  # whether its steps run on GPU tiles (trainers.layers.AnalogLayer.move_tiles)

    def __init_subclass__(cls, **kwargs):
        """An optimizer class that sets `config` is the algorithm of that config's name."""
        super().__init_subclass__(**kwargs)
        if "config" in cls.__dict__:
            cls.algorithm = algorithm_name(cls.config)

    def __init__(self, model: nn.Module, cfg):
        self.cfg = cfg
        self.model_names = {id(m): n for n, m in model.named_modules()}
        self.param_names = {id(p): n for n, p in model.named_parameters()}
        self.layers: list[AnalogLayer] = analog_layers(model)
        if not self.layers:
            raise ValueError(
                f"{type(self).__name__} needs a model with analog layers: call trainers.convert(model, tile_cfg) first"
            )
        params = [p for p in model.parameters() if p.requires_grad]
        self._dummy = None
        if not params:  # torch refuses an empty parameter list
            self._dummy = nn.Parameter(torch.zeros(0))
            params = [self._dummy]
        super().__init__(params, dict(lr=float(cfg.lr)))
        self.steps = 0
        self.counts = {
            "update_pulses": 0,
            "transfer_pulses": 0,
            "setup_pulses": 0,
            "transfers": 0,
            "transferred_columns": 0,
            "transfer_reads": 0,
        }
        self.tile_state: list[list[dict]] = [[{} for _ in layer.blocks] for layer in self.layers]
        self.setup_seconds = 0.0  # wall-clock time of the preparation (zero shift)
        for li, layer in enumerate(self.layers):
            fresh = layer.algorithm != self.algorithm
            layer.set_gains(self.gains())
            for bi, b in enumerate(layer.blocks):
                self.init_block(li, bi, b, fresh)
            layer.algorithm = self.algorithm
        self.report_setup()

    # -- hooks ------------------------------------------------------------------------------------------
    def gains(self) -> list[float]:
        """Forward gains of each tile's arrays."""
        return [1.0]

    def init_block(self, li: int, bi: int, block: TileBlock, fresh: bool) -> None:
        """Prepare a tile (fresh: first time this algorithm sees it, e.g. zero-shift) and its state."""

    def report_setup(self) -> None:
        """Say what the preparation of the tiles cost, where it cost anything."""

    def update_block(self, li: int, bi: int, block: TileBlock, x: np.ndarray, d: np.ndarray) -> None:
        """Apply the tile's part of a batch: x (n, in) its inputs, d (n, out) its output gradients."""
        raise NotImplementedError

    def after_step(self) -> None:
        """Transfers and other periodic work, once per step after all gradient updates."""

    def end_epoch(self, train_loss: float) -> None:
        """Called by a training loop after each epoch with the epoch's mean training loss (nats)."""

    # -- torch.optim API --------------------------------------------------------------------------------
    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if not self.runs_on_gpu and any(layer.gpu_tiles for layer in self.layers):
            raise ValueError(f"{self.algorithm} trains on the CPU only (docs/gpu.md): keep the model on the CPU")
        batches = [layer.pop_batch() for layer in self.layers]
        self._check_finite(batches)
        for group in self.param_groups:
            lr = group["lr"]
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-lr)
        for li, (layer, batch) in enumerate(zip(self.layers, batches)):
            if batch is None:
                continue
            for bi, block, x, d in layer.block_batches(*batch):
                self.update_block(li, bi, block, x, d)
        self.steps += 1
        self.after_step()
        for layer in self.layers:  # the devices' once-per-step effects (diffusion, decay), as aihwkit
            for tile in layer.tiles:
                tile.post_update_step()
        return loss

    def _check_finite(self, batches: list[tuple[np.ndarray, np.ndarray] | None]) -> None:
        """Refuse a step, before any parameter or array changes, where a digital gradient or an analog
        layer's saved input x or gradient d holds a NaN or an infinity. A NaN or an infinity makes the sum
        non-finite, so an element-wise test runs only where the sum is (an overflowing sum of finite values
        passes it)."""
        for group in self.param_groups:
            for p in group["params"]:
                if (
                    p.grad is not None
                    and not math.isfinite(float(p.grad.sum()))
                    and not bool(torch.isfinite(p.grad).all())
                ):
                    name = self.param_names.get(id(p), "a parameter")
                    raise ValueError(
                        f"step refused: the gradient of {name} holds NaN or infinity; no parameter or array was changed"
                    )
        for layer, batch in zip(self.layers, batches):
            for what, v in zip(("input x", "gradient d"), batch or ()):
                finite = torch.isfinite(v) if isinstance(v, torch.Tensor) else np.isfinite(v)  # GPU tiles: tensors
                if not math.isfinite(float(v.sum())) and not finite.all():
                    raise ValueError(
                        f"step refused: the {what} of analog layer "
                        f"{self.model_names.get(id(layer), '?')!r} holds NaN or infinity; no "
                        "parameter or array was changed"
                    )

    @property
    def lr(self) -> float:
        return float(self.param_groups[0]["lr"])

    def gradient_update(
        self, block: TileBlock, x: np.ndarray, d: np.ndarray, index: int, lr: float | None = None
    ) -> int:
        """W_index -= lr d^T x (lr: the group's lr unless given) through the tile's pulsed/expected update;
        counts the pulses."""
        n = block.tile.update(x, d, self.lr if lr is None else lr, index)
        self.counts["update_pulses"] += n
        return n

    # -- costs ------------------------------------------------------------------------------------------
    def costs(self) -> dict:
        """What training cost on the chip so far: pulses (all arrays, setup included), reads (vector
        MVMs: forward, backward, column reads), transfers (transfer events), steps, and the breakdown. (The
        wall-clock time of the preparation is `setup_seconds`, not a cost: costs are reproducible.)"""
        pulses = sum(t.pulses for layer in self.layers for t in layer.tiles)
        reads = sum(t.reads for layer in self.layers for t in layer.tiles)
        weights = sum(layer.out_features * layer.in_ext for layer in self.layers)
        out = {
            "steps": self.steps,
            "pulses": int(pulses),
            "reads": int(reads),
            "transfers": int(self.counts["transfers"]),
            "weights": int(weights),
            "pulses_per_weight": float(self.counts["update_pulses"] + self.counts["transfer_pulses"]) / max(weights, 1),
        }
        out.update({k: int(v) for k, v in self.counts.items() if k != "transfers"})
        return out

    def update_latency(self, lm: LatencyModel) -> float:
        """Mean update time of one layer per step (ns); here one pulsed update."""
        return lm.t_update

    def latency_estimate(self, model: LatencyModel | None = None) -> dict:
        """R1 Table 3 cost model: ns per step of each layer's forward, backward and update (the update
        amortizes transfers over their period). Tiles of one layer work in parallel."""
        lm = model or LatencyModel()
        upd = float(self.update_latency(lm))
        layers = {}
        for layer in self.layers:
            name = self.model_names.get(id(layer), "?")
            layers[name] = {
                "forward_ns": lm.t_mvm,
                "backward_ns": lm.t_mvm,
                "update_ns": upd,
                "tiles": len(layer.blocks),
            }
        return {
            "algorithm": self.algorithm,
            "forward_ns": lm.t_mvm,
            "backward_ns": lm.t_mvm,
            "update_ns": upd,
            "step_ns": len(self.layers) * (2 * lm.t_mvm + upd),
            "layers": layers,
            "model": asdict(lm),
        }

    # -- state ------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        sd = super().state_dict()
        sd["analog"] = {
            "algorithm": self.algorithm,
            "steps": self.steps,
            "counts": dict(self.counts),
            "tile_state": state_to_torch(
                [[{k: v for k, v in st.items() if not k.startswith("_")} for st in layer] for layer in self.tile_state]
            ),
        }
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        analog = state_dict.pop("analog", None)
        super().load_state_dict(state_dict)
        if analog is None:
            return
        if analog["algorithm"] != self.algorithm:
            raise ValueError(f"checkpoint is for {analog['algorithm']!r}, optimizer is {self.algorithm!r}")
        self.steps = int(analog["steps"])
        self.counts = {k: int(v) for k, v in analog["counts"].items()}
        ts = state_to_numpy(analog["tile_state"])
        if len(ts) != len(self.tile_state) or any(len(a) != len(b) for a, b in zip(ts, self.tile_state)):
            raise ValueError("checkpoint optimizer state does not match the model's tiles")
        self.tile_state = ts
