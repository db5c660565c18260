"""A conductance array's state on a GPU and its update protocol there.

`GpuArray(array, device)` holds the weights (the hidden ones under write noise), the apparent weights, the
reference and the element parameters of a `ConductanceArray` (devices.array) as tensors on `device`, and
keeps the array itself as its host copy: the seed, the call counter and the pulse count stay host integers
(they key each launch's random streams), in the same order as devices.array_update advances them, so a
seeded update on the GPU draws what the CPU update draws.
"""

from __future__ import annotations

import numpy as np
import torch

from aimc.devices.array import ConductanceArray
from aimc.devices.array_update import COUNTER, PULSES
from aimc.devices.gpu import runtime
from aimc.devices.gpu.effects import decay, redraw_all
from aimc.devices.gpu.expected_update import expected_update
from aimc.devices.gpu.pulsed_update import plan, pulsed_update
from aimc.devices.gpu.pulses import pulse_all
from aimc.devices.kernel_bundles import update_settings
from aimc.devices.update import UpdateConfig


class GpuArray:
    """The state of `host` (a ConductanceArray) on `device`; `to_host` writes it back."""

    def __init__(self, host: ConductanceArray, device: torch.device):
        if type(host) is not ConductanceArray:
            raise ValueError(
                f"{type(host).__name__} (one-sided and multi-device unit cells) trains on the CPU only: "
                "keep the model on the CPU"
            )
        self.host = host
        self.device = device
        self.shape = host.shape
        put = lambda a: runtime.to_device(a, device)  # noqa: E731
        self.w = put(host.w)  # the apparent weights reads see
        self.hidden = None if host.hidden is None else put(host.hidden)  # the weights pulses move
        self.reference = put(host.reference)
        self.write_std = None if host.write_std is None else put(host.write_std)
        p = host.params
        self.params = (put(p.ep), p.code, put(p.consts), put(p.grid), put(p.tab_up), put(p.tab_dn), p.sigma, p.additive)
        self.granularity = float(p.granularity)

    @property
    def target(self) -> torch.Tensor:
        """The weights pulses and effects change: the hidden ones under write noise, else w."""
        return self.w if self.hidden is None else self.hidden

    @property
    def counter(self) -> int:
        return self.host.counter

    @property
    def pulses(self) -> int:
        return self.host.pulses

    def to_host(self, host: ConductanceArray) -> None:
        """Copy the device state into `host` (the array this one was made from)."""
        host.w[...] = self.w.cpu().numpy()
        host.reference[...] = self.reference.cpu().numpy()
        if self.hidden is not None:
            host.hidden[...] = self.hidden.cpu().numpy()

    def _redraw_written(self, pulsed) -> None:
        """Write noise after a call: w = hidden + std xi for the pulsed elements (`pulsed`: the kernels' set)."""
        redraw_all(self.w, self.hidden, pulsed, self.write_std, self.host.seed, self.host.next_counter())

    def update(self, x: torch.Tensor, d: torch.Tensor, lr: float, cfg: UpdateConfig) -> int:
        """W -= lr d^T x (ConductanceArray.update) for x (B, in), d (B, out) float32 on the device; returns
        pulses fired. A NaN or infinity in x or d raises ValueError and changes nothing."""
        x = x.detach().to(torch.float32).reshape(-1, self.shape[1]).contiguous()
        d = d.detach().to(torch.float32).reshape(-1, self.shape[0]).contiguous()
        if x.shape[0] != d.shape[0]:
            raise ValueError(f"x has {x.shape[0]} samples, d has {d.shape[0]}")
        settings = update_settings(lr, self.granularity, cfg)
        h = self.host
        if cfg.mode == "pulsed":
            counter = h.next_counter()
            wn_counter = h.next_counter() if self.hidden is not None else 0
            wn = self.write_std if self.hidden is not None else None
            n = pulsed_update(self.target, x, d, settings, self.params, h.seed, counter, self.w, wn, wn_counter)
        else:
            _, x_scale, d_scale = plan(x, d, settings)
            xs = _clip_to_probability(x, x_scale)
            ds = _clip_to_probability(d, d_scale)
            dw = (np.float32(-lr) * (ds.T @ xs)).to(torch.float64)
            n, pulsed = expected_update(self.target, dw, self.granularity, self.params, h.seed, h.next_counter())
            if self.hidden is not None:
                self._redraw_written(pulsed)
        h.add_pulses(n)
        return n

    def pulse(self, counts: torch.Tensor) -> int:
        """Fire counts[i, j] signed pulses (> 0 up) into each element (ConductanceArray.pulse)."""
        counts = counts.to(device=self.device, dtype=torch.int64).contiguous()
        if tuple(counts.shape) != self.shape:
            raise ValueError(f"counts has shape {tuple(counts.shape)}, array is {self.shape}")
        h = self.host
        n = pulse_all(self.target, counts, self.params, h.seed, h.next_counter())
        if self.hidden is not None:
            self._redraw_written(counts != 0)
        h.add_pulses(n)
        return n

    def post_update_step(self) -> bool:
        """aihwkit's once-per-step diffusion and decay (ConductanceArray.post_update_step) on the device."""
        h = self.host
        fx = h.effects
        if fx is None or (fx.diffusion_rate is None and fx.decay_scale is None):
            return False
        return decay(self, fx)


def _clip_to_probability(v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Row b of v clipped to +-1 / scale[b] (devices.pulse_trains.clip_to_probability), in float32."""
    lim = torch.where(scale > 0, 1.0 / scale.to(torch.float32), torch.full_like(scale, torch.inf, dtype=torch.float32))
    return torch.clamp(v, -lim[:, None], lim[:, None])


__all__ = ["COUNTER", "PULSES", "GpuArray"]
