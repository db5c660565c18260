"""An analog tile on a GPU: the arrays' state in torch CUDA tensors, reads and updates as GPU kernels.

`GpuTile(tile, device)` takes an `AnalogTile` (devices.tile) and keeps it as its host copy: the configs, the
drawn element parameters and the read stream's counters stay there (the counters are host integers that key
each launch's random streams), the weights, references and element parameters go to `device`. What a
training step does runs on the GPU: the forward and backward reads (devices.gpu.periphery), the pulsed or
expected update (devices.gpu.array), the column reads and pulses of the transfers. The rarely called
operations (a new array stack, idling, zero shift, resets, references) run on the host copy: the GPU state is
copied there, the operation runs as on the CPU, and the result is copied back, so every tile method gives
the CPU's result on either device. `state_dict` is the CPU tile's (numpy arrays): a checkpoint written on one
device loads on the other.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from aimc.devices.column_read import one_hot_settings
from aimc.devices.gpu.array import GpuArray
from aimc.devices.gpu.column_read import read_columns
from aimc.devices.gpu.effective_weight import effective_weight
from aimc.devices.gpu.periphery import analog_mvm
from aimc.devices.tile import AnalogTile
from aimc.devices.update import UpdateConfig


class GpuTile:
    """The tile `host` with its arrays on `device` (a torch device: 'cuda', 'cuda:1'; 'cpu' only under
    Numba's CUDA simulator, where the kernels run on the CPU). Reads take and return float32 tensors on
    `device`."""

    def __init__(self, host: AnalogTile, device: torch.device | str):
        self.host = host
        self.torch_device = torch.device(device)
        self._upload()

    def _upload(self) -> None:
        """Copy the host tile's arrays and gains to the device."""
        h = self.host
        self.arrays = [GpuArray(a, self.torch_device) for a in h.arrays]
        self.gains = h.gains.copy()
        self._w: torch.Tensor | None = None

    def _on_host(self, op: Callable[[AnalogTile], object]):
        """Run op on the host tile with the device state, then bring its result back to the device."""
        result = op(self.to_host())
        self._upload()
        return result

    def to_host(self) -> AnalogTile:
        """The host tile with this tile's state (the CPU tile the model holds after `.cpu()`)."""
        for g, a in zip(self.arrays, self.host.arrays):
            g.to_host(a)
        self.host.gains = self.gains.copy()
        self.host.invalidate(layout=True)
        return self.host

    # -- what the layers and optimizers read off a tile --------------------------------------------------
    def __getattr__(self, name: str):
        """The host tile's configuration (out_size, in_size, device, seed, stream, forward_cfg, backward_cfg,
        update_cfg, out_scale, array_devices) and noise-management average (nm_average), shared, not
        copied."""
        if name in _SHARED:
            return getattr(self.__dict__["host"], name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __setattr__(self, name: str, value) -> None:
        if name in _SHARED:
            setattr(self.host, name, value)
        else:
            super().__setattr__(name, value)

    def __repr__(self) -> str:
        return repr(self.host).replace("AnalogTile(", f"GpuTile({self.torch_device}, ", 1)

    # -- the forward weight -----------------------------------------------------------------------------
    def invalidate(self, layout: bool = False) -> None:
        """Mark the cached forward weight stale."""
        self._w = None

    def forward_weight(self) -> torch.Tensor:
        """sum_n gains[n] (w_n - reference_n) as a float32 tensor on the device (cached; not to be written):
        array 0's weights themselves where it alone is live with gain 1 and no reference."""
        if self._w is None:
            live = [n for n, g in enumerate(self.gains) if g != 0]
            a0 = self.arrays[0]
            if live == [0] and self.gains[0] == 1 and not bool(a0.reference.any()):
                self._w = a0.w
            else:
                self._w = self.weight()
        return self._w

    def weight(self) -> torch.Tensor:
        """The effective weight sum_n gains[n] (w_n - reference_n) (float32, out x in) on the device."""
        out = torch.empty(self.out_size, self.in_size, dtype=torch.float32, device=self.torch_device)
        return effective_weight(out, [a.w for a in self.arrays], [a.reference for a in self.arrays], self.gains)

    # -- reads --------------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """y = out_scale W x for x (batch, in) on the device, through the forward periphery."""
        self.stream.count_reads(len(x))
        y = analog_mvm(self.forward_weight(), x, self.forward_cfg, self.stream, self.nm_average)
        return y if self.out_scale == 1.0 else y * np.float32(self.out_scale)

    def backward(self, d: torch.Tensor) -> torch.Tensor:
        """z = W^T d for d (batch, out) on the device, through the backward periphery."""
        self.stream.count_reads(len(d))
        return analog_mvm(self.forward_weight().T, d, self.backward_cfg, self.stream, self.nm_average)

    def read_columns(self, index: int, cols) -> np.ndarray:
        """Columns `cols` of array `index` read through the forward periphery on the device (AnalogTile.
        read_columns): (len(cols), out) float32, returned to the host, where the transfer algorithms keep
        their buffers (a few columns a step)."""
        cols = torch.as_tensor(np.atleast_1d(cols), device=self.torch_device)
        a = self.arrays[index]
        sub = a.w[:, cols] - a.reference[:, cols]
        self.stream.count_reads(len(cols))
        eye = torch.eye(len(cols), dtype=torch.float32, device=self.torch_device)
        return analog_mvm(sub, eye, self.forward_cfg, self.stream).cpu().numpy()

    def read_column(self, index: int, col: int) -> torch.Tensor:
        """Column `col` of array `index` read through the forward periphery as a transfer kernel reads it
        (devices.gpu.column_read, the twin of devices.column_read.read_column): (out,) float32 on the device,
        for kernels that keep their buffers there; counts one read."""
        a = self.arrays[index]
        counts = torch.from_numpy(self.stream.counts).to(self.torch_device)  # advanced there, copied back
        reader = (one_hot_settings(self.forward_cfg), self.stream.seed, counts)
        cols = torch.tensor([col], dtype=torch.int64, device=self.torch_device)
        out = read_columns(a.w, a.reference, cols, reader)[0]
        self.stream.counts[:] = counts.cpu().numpy()
        return out

    # -- updates ------------------------------------------------------------------------------------------
    def granularity(self, index: int) -> float:
        return self.host.granularity(index)

    def bounds(self, index: int) -> tuple[float, float]:
        return self.host.bounds(index)

    def update_settings(self, index: int, lr: float) -> tuple:
        return self.host.update_settings(index, lr)

    def update(
        self, x: torch.Tensor, d: torch.Tensor, lr: float, index: int = 0, cfg: UpdateConfig | None = None
    ) -> int:
        """W_index -= lr d^T x on the device (AnalogTile.update; x, d tensors, or numpy arrays such as a
        transfer's one-hot inputs, copied to the device); returns pulses fired."""
        x, d = (torch.as_tensor(v, device=self.torch_device) for v in (x, d))
        n = self.arrays[index].update(x, d, lr, cfg or self.update_cfg)
        self.invalidate()
        return n

    def pulse(self, counts, index: int = 0) -> int:
        """Fire counts[i, j] signed pulses into array `index` (AnalogTile.pulse); returns pulses fired."""
        n = self.arrays[index].pulse(torch.as_tensor(counts, device=self.torch_device))
        self.invalidate()
        return n

    def threshold_pulses(self, buffer, counts, threshold, max_pulses, index=0, cols=None, single=False) -> int:
        """AnalogTile.threshold_pulses: the counts from the host buffer on the host, the pulses on the device
        (it asks only granularity and pulse of the tile)."""
        return AnalogTile.threshold_pulses(self, buffer, counts, threshold, max_pulses, index, cols, single)

    def post_update_step(self) -> None:
        """The devices' once-per-step effects (diffusion, decay) on the device."""
        if any([a.post_update_step() for a in self.arrays]):
            self.invalidate()

    def skip_update(self, index: int) -> None:
        """Advance array `index`'s counters as an update that fires no pulse does (devices.array_update.
        skip_update), without running it: the weights would not change."""
        self.arrays[index].skip_update()

    def kernel_handles(self, first: int, second: int) -> tuple:
        """Refused: CPU kernels take numpy arrays, and this tile's state is in device tensors (the chopped
        transfers of GPU tiles call the tile's verbs: update, skip_update, read_column, pulse)."""
        raise ValueError(
            "a GpuTile has no CPU kernel handles: its arrays are device tensors (move the model to the CPU to "
            "run a CPU kernel on its tiles)"
        )

    # -- counters and state --------------------------------------------------------------------------------
    @property
    def pulses(self) -> int:
        return sum(a.pulses for a in self.arrays)

    @property
    def reads(self) -> int:
        return self.stream.reads

    def saturation(self) -> tuple[int, int]:
        return self.to_host().saturation()

    def state_dict(self) -> dict:
        """The CPU tile's state (numpy arrays): checkpoints are the same on either device."""
        return self.to_host().state_dict()

    def load_state_dict(self, state: dict) -> None:
        self._on_host(lambda h: h.load_state_dict(state))

    # -- operations that run on the host copy ---------------------------------------------------------------
    def set_stack(self, gains) -> None:
        """AnalogTile.set_stack: new gains for the arrays there on the device (RIDER's chopper switch), a
        stack of another size on the host copy."""
        if 0 < len(gains) == len(self.arrays):
            self.gains = np.asarray([float(g) for g in gains], np.float32)
            self.invalidate()
            return
        self._on_host(lambda h: h.set_stack(gains))

    def set_weight(self, weight) -> None:
        w = weight.detach().cpu().numpy() if isinstance(weight, torch.Tensor) else weight
        self._on_host(lambda h: h.set_weight(w))

    def decay_weights(self, alpha: float = 1.0) -> None:
        self._on_host(lambda h: h.decay_weights(alpha))

    def idle(self, delta_t: float, step_s: float = 1.0, drift=None, seed: int = 0) -> None:
        self._on_host(lambda h: h.idle(delta_t, step_s, drift, seed))

    def zero_shift(self, index: int, n_cycles: int | None = None) -> int:
        return self._on_host(lambda h: h.zero_shift(index, n_cycles))

    def has_reset(self, index: int) -> bool:
        return self.host.has_reset(index)

    def array_seed(self, index: int) -> int:
        return self.host.array_seed(index)

    def reset_columns(self, index: int, cols) -> None:
        self._on_host(lambda h: h.reset_columns(index, np.asarray(cols)))

    def reference(self, index: int, cols=None) -> np.ndarray:
        """A host copy of array `index`'s reference, or of its columns `cols` (AnalogTile.reference)."""
        ref = self.arrays[index].reference
        return (ref if cols is None else ref[:, torch.as_tensor(np.asarray(cols), device=ref.device)]).cpu().numpy()

    def set_reference(self, index: int, values, cols=None) -> None:
        """Program array `index`'s reference, or its columns `cols`, to `values` on the device."""
        ref = self.arrays[index].reference
        v = torch.as_tensor(np.asarray(values, np.float32), device=ref.device)
        if cols is None:
            ref.copy_(v)
        else:
            ref[:, torch.as_tensor(np.asarray(cols), device=ref.device)] = v
        self.invalidate()

    def latch_reference(self, index: int) -> None:
        """Program array `index`'s reference to its present weights on the device."""
        a = self.arrays[index]
        a.reference.copy_(a.w)
        self.invalidate()


_SHARED = frozenset(
    (
        "out_size",
        "in_size",
        "device",
        "array_devices",
        "seed",
        "stream",
        "forward_cfg",
        "backward_cfg",
        "update_cfg",
        "out_scale",
        "nm_average",
    )
)
"""The host tile's attributes a GpuTile shares (GpuTile.__getattr__)."""
