"""The optimizer base of the analog algorithms: digital parameters, per-tile updates, costs, state.

An analog optimizer follows torch.optim conventions (`opt.zero_grad(); loss.backward(); opt.step()`).
Its `step()`:

1. updates the digital parameters (digital biases, output scales, layers left digital) by plain SGD with
   `lr`;
2. hands every tile of every analog layer its slice of the layer's saved (x, d) through `update_block`
   (each algorithm decides which array gets the gradient pulses);
3. runs the algorithm's transfer schedule (`after_step`).

Rates convention (trainers/config.py): `lr` is the gradient step, W <- W - lr * d^T x for the array that
takes the gradient; `transfer_lr` the transfer step, W <- W + transfer_lr * read(P). Neither is scaled by
the other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from aimc.trainers.layers import _AnalogBase, _Block, _to_numpy, _to_torch, analog_layers


@dataclass(frozen=True)
class LatencyModel:
    """R1 Table 3's cost model of one layer (ns): an MVM (forward, backward or one column read) takes
    t_mvm; a pulsed update takes bl pulse cycles of t_pulse plus t_pre of MVM pre-processing."""

    t_mvm: float = 40.0
    t_pulse: float = 5.0
    t_pre: float = 5.9
    bl: int = 32

    @property
    def t_update(self) -> float:
        """One pulsed rank-update: 32 * 5 + 5.9 = 165.9 ns (R1 Table 3: 166 ns)."""
        return self.bl * self.t_pulse + self.t_pre


class AnalogOptimizer(torch.optim.Optimizer):
    """Base class; subclasses set `algorithm`, `gains()` and override `update_block` / `after_step`."""

    algorithm = "base"

    def __init__(self, model: nn.Module, cfg):
        self.cfg = cfg
        self.model_names = {id(m): n for n, m in model.named_modules()}
        self.layers: list[_AnalogBase] = analog_layers(model)
        if not self.layers:
            raise ValueError(f"{type(self).__name__} needs a model with analog layers: call "
                             "trainers.convert(model, tile_cfg) first")
        params = [p for p in model.parameters() if p.requires_grad]
        self._dummy = None
        if not params:  # torch refuses an empty parameter list
            self._dummy = nn.Parameter(torch.zeros(0))
            params = [self._dummy]
        super().__init__(params, dict(lr=float(cfg.lr)))
        self.steps = 0
        self.counts = {"update_pulses": 0, "transfer_pulses": 0, "setup_pulses": 0, "transfers": 0,
                       "transferred_columns": 0, "transfer_reads": 0}
        self.tile_state: list[list[dict]] = [[{} for _ in layer.blocks] for layer in self.layers]
        for li, layer in enumerate(self.layers):
            fresh = layer.algorithm != self.algorithm
            layer.set_gains(self.gains())
            for bi, b in enumerate(layer.blocks):
                self.init_block(li, bi, b, fresh)
            layer.algorithm = self.algorithm
            layer.invalidate(layout=True)

    # -- hooks ------------------------------------------------------------------------------------------
    def gains(self) -> list[float]:
        return [1.0]

    def init_block(self, li: int, bi: int, block: _Block, fresh: bool) -> None:
        """Prepare a tile (fresh: first time this algorithm sees it, e.g. zero-shift) and its state."""

    def update_block(self, li: int, bi: int, block: _Block, x: np.ndarray, d: np.ndarray) -> None:
        raise NotImplementedError

    def after_step(self) -> None:
        """Transfers and other periodic work, once per step after all gradient updates."""

    # -- torch.optim API --------------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = group["lr"]
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-lr)
        for li, layer in enumerate(self.layers):
            batch = layer.pop_batch()
            if batch is None:
                continue
            x, d = batch
            if len(layer.blocks) == 1:
                self.update_block(li, 0, layer.blocks[0], x, d)
            else:
                for bi, b in enumerate(layer.blocks):
                    xb = x if layer.n_col_blocks == 1 else x[:, b.c0:b.c1]
                    db = d if layer.n_row_blocks == 1 else d[:, b.r0:b.r1]
                    self.update_block(li, bi, b, xb, db)
            layer.invalidate()
        self.steps += 1
        self.after_step()
        return loss

    @property
    def lr(self) -> float:
        return float(self.param_groups[0]["lr"])

    # -- shared pieces ----------------------------------------------------------------------------------
    def gradient_update(self, block: _Block, x: np.ndarray, d: np.ndarray, index: int) -> int:
        """W_index -= lr d^T x through the tile's pulsed/expected update; counts the pulses."""
        n = block.tile.update(x, d, self.lr, index)
        self.counts["update_pulses"] += n
        return n

    def read_columns(self, block: _Block, index: int, cols: np.ndarray) -> np.ndarray:
        """Noisy read of columns `cols` of array `index` (AnalogTile.read_columns); counts the reads."""
        self.counts["transfer_reads"] += len(cols)
        return block.tile.read_columns(index, cols)

    def transfer_update(self, block: _Block, index: int, cols: np.ndarray, values: np.ndarray,
                        lr: float) -> int:
        """W_index[:, cols] += lr * values.T as a pulsed/expected update with one-hot inputs (one sample
        per column), the way the hardware transfers a column. values: (n, out)."""
        t = block.tile
        onehot = np.zeros((len(cols), t.in_size), np.float32)
        onehot[np.arange(len(cols)), cols] = 1.0
        n = t.update(onehot, -values, lr, index, self.transfer_update_cfg(block))
        self.counts["transfer_pulses"] += n
        return n

    def transfer_bl(self, block: _Block) -> int:
        """Longest pulse train of a transfer: cfg.transfer_bl, else the tile's update BL."""
        bl = getattr(self.cfg, "transfer_bl", None)
        return int(bl) if bl is not None else int(block.tile.update_cfg.desired_bl)

    def transfer_update_cfg(self, block: _Block):
        """The tile's update settings with the transfer's BL."""
        cfg = block.tile.update_cfg
        bl = self.transfer_bl(block)
        return cfg if bl == cfg.desired_bl else cfg.model_copy(update={"desired_bl": bl})

    def next_columns(self, state: dict, key: str, n_cols: int, in_size: int) -> np.ndarray:
        """The next n_cols column indices of a cyclic pointer stored in state[key]."""
        ptr = state.get(key, 0)
        cols = (ptr + np.arange(n_cols)) % in_size
        state[key] = int((ptr + n_cols) % in_size)
        return cols

    # -- costs ------------------------------------------------------------------------------------------
    def costs(self) -> dict:
        """What training cost on the chip so far: pulses (all arrays, setup included), reads (vector
        MVMs: forward, backward, column reads), transfers (transfer events), steps, and the breakdown."""
        pulses = sum(a.pulses for layer in self.layers for t in layer.tiles for a in t.arrays)
        reads = sum(t.reads for layer in self.layers for t in layer.tiles)
        weights = sum(layer.out_features * layer.in_ext for layer in self.layers)
        out = {"steps": self.steps, "pulses": int(pulses), "reads": int(reads),
               "transfers": int(self.counts["transfers"]), "weights": int(weights),
               "pulses_per_weight": float(self.counts["update_pulses"] + self.counts["transfer_pulses"])
               / max(weights, 1)}
        out.update({k: int(v) for k, v in self.counts.items() if k != "transfers"})
        return out

    def update_latency(self, lm: LatencyModel) -> float:
        """Mean update time of one layer per step (ns); Analog SGD: one pulsed update."""
        return lm.t_update

    def latency_estimate(self, model: LatencyModel | None = None) -> dict:
        """R1 Table 3 cost model: ns per step of each layer's forward, backward and update (the update
        amortizes transfers over their period). Tiles of one layer work in parallel."""
        lm = model or LatencyModel()
        upd = float(self.update_latency(lm))
        layers = {}
        for layer in self.layers:
            name = self.model_names.get(id(layer), "?")
            layers[name] = {"forward_ns": lm.t_mvm, "backward_ns": lm.t_mvm, "update_ns": upd,
                            "tiles": len(layer.blocks)}
        return {"algorithm": self.algorithm, "forward_ns": lm.t_mvm, "backward_ns": lm.t_mvm, "update_ns": upd,
                "step_ns": len(self.layers) * (2 * lm.t_mvm + upd), "layers": layers, "model": asdict(lm)}

    # -- state ------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        sd = super().state_dict()
        sd["analog"] = {"algorithm": self.algorithm, "steps": self.steps, "counts": dict(self.counts),
                        "tile_state": _to_torch([[{k: v for k, v in st.items() if not k.startswith("_")}
                                                  for st in layer] for layer in self.tile_state])}
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
        ts = _to_numpy(analog["tile_state"])
        if len(ts) != len(self.tile_state) or any(len(a) != len(b) for a, b in zip(ts, self.tile_state)):
            raise ValueError("checkpoint optimizer state does not match the model's tiles")
        self.tile_state = ts
