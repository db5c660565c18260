"""A conductance array's state on a GPU and its update protocol there.

`GpuArray(array, device)` holds the weights (the hidden ones under write noise), the apparent weights, the
reference and the element parameters of a `ConductanceArray` (devices.array) as tensors on `device`, and
keeps the array itself as its host copy: the seed, the call counter and the pulse count stay host integers
(they key each launch's random streams), advanced in the order of devices.array_update, so a seeded update on
the GPU draws what the CPU update draws.
"""

from __future__ import annotations

import numpy as np
import torch

from aimc.devices.array import ConductanceArray
from aimc.devices.effects import DIFFUSE, WRITE
from aimc.devices.gpu.effects import decay, redraw
from aimc.devices.gpu.expected_update import expected_update
from aimc.devices.gpu.pulsed_update import plan, pulsed_update
from aimc.devices.gpu.pulses import pulse
from aimc.devices.gpu.runtime import to_device
from aimc.devices.kernel_bundles import update_settings
from aimc.devices.pulse_trains import NOT_FINITE
from aimc.devices.update import UpdateConfig

WORD = 64
"""Elements per word of a pulsed set (devices.pulsed_set)."""


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
        self.w = self._put(host.w)  # the apparent weights reads see
        self.hidden = None if host.hidden is None else self._put(host.hidden)  # the weights pulses move
        self.reference = self._put(host.reference)
        self.write_std = None if host.hidden is None else self._put(host.write_std)  # (1, 1)
        p = host.params
        self.params = tuple(self._put(v) if isinstance(v, np.ndarray) else v for v in p.kernel)
        self.granularity = float(p.granularity)
        self.no_set = self._new_set(False)  # every element / no marking
        self.no_noise = torch.zeros((0, 0), dtype=torch.float32, device=device)
        self._effects: dict[str, torch.Tensor] | None = None

    def _put(self, a: np.ndarray) -> torch.Tensor:
        return to_device(a, self.device)

    @property
    def target(self) -> torch.Tensor:
        """The weights pulses and effects change: the hidden ones under write noise, else w."""
        return self.w if self.hidden is None else self.hidden

    @property
    def pulses(self) -> int:
        return self.host.pulses

    def to_host(self, host: ConductanceArray) -> None:
        """Copy the device state into `host` (the array this one was made from)."""
        host.w[...] = self.w.cpu().numpy()
        host.reference[...] = self.reference.cpu().numpy()
        if self.hidden is not None:
            host.hidden[...] = self.hidden.cpu().numpy()

    def _new_set(self, on: bool) -> torch.Tensor:
        """An empty pulsed set (devices.pulsed_set.new_set) on the device; without rows where not `on`."""
        rows, cols = self.shape if on else (0, 0)  # made as int64 and viewed: torch fills few unsigned types
        words = (cols + WORD - 1) // WORD
        return torch.zeros((rows, words), dtype=torch.int64, device=self.device).view(torch.uint64)

    def _set_of_mask(self, mask: torch.Tensor) -> torch.Tensor:
        """The pulsed set of the nonzero elements of mask (devices.pulsed_set.set_of_mask): bit j % 64 of word
        j // 64 of row i for element (i, j), summed as int64 powers of two (bit 63 wraps to the sign bit, the
        same pattern)."""
        rows, cols = self.shape
        words = (cols + WORD - 1) // WORD
        bits = torch.zeros((rows, words * WORD), dtype=torch.int64, device=self.device)
        bits[:, :cols] = (mask != 0).to(torch.int64)
        powers = torch.ones(WORD, dtype=torch.int64, device=self.device) << torch.arange(WORD, device=self.device)
        return (bits.view(rows, words, WORD) * powers).sum(dim=2).view(torch.uint64)

    def _redraw_apparent(self, pulsed: torch.Tensor) -> None:
        """Write noise: w = hidden + std xi for the elements of the set `pulsed` (every element for no_set),
        with a counter of its own (devices.array_update's redraw)."""
        h = self.host
        std = self.write_std.expand(self.shape)
        redraw(self.w, self.hidden, pulsed, std, self.w, self.w, False, h.seed, h.next_counter(), WRITE)

    def update(self, x: torch.Tensor, d: torch.Tensor, lr: float, cfg: UpdateConfig) -> int:
        """W -= lr d^T x (ConductanceArray.update) for x (B, in), d (B, out) on the device; returns pulses
        fired. A NaN or infinity in x or d raises ValueError and changes nothing."""
        x = x.detach().to(torch.float32).reshape(-1, self.shape[1]).contiguous()
        d = d.detach().to(torch.float32).reshape(-1, self.shape[0]).contiguous()
        if x.shape[0] != d.shape[0]:
            raise ValueError(f"x has {x.shape[0]} samples, d has {d.shape[0]}")
        settings = update_settings(lr, self.granularity, cfg)
        h, noisy = self.host, self.hidden is not None
        if cfg.mode == "pulsed":
            counter = h.next_counter()
            wn_counter = h.next_counter() if noisy else 0  # the redraw's counter follows the update's
            wn = self.write_std if noisy else self.no_noise
            n = pulsed_update(self.target, x, d, settings, self.params, h.seed, counter, self.w, wn, wn_counter)
        else:
            if not bool((torch.isfinite(x).all() & torch.isfinite(d).all()).item()):
                raise ValueError(NOT_FINITE)
            _, x_scale, d_scale = plan(x, d, settings)
            dw = (np.float32(-lr) * (_clip(d, d_scale).T @ _clip(x, x_scale))).to(torch.float64)
            marked = self._new_set(noisy)
            n = expected_update(self.target, dw, self.granularity, self.params, h.seed, h.next_counter(), marked)
            if noisy:
                self._redraw_apparent(marked)
        h.add_pulses(n)
        return n

    def skip_update(self) -> None:
        """Advance the call counter as an update that fires no pulse does (devices.array_update.skip_update:
        the update's counter and, under write noise, the redraw's), without running it."""
        self.host.next_counter()
        if self.hidden is not None:
            self.host.next_counter()

    def pulse(self, counts: torch.Tensor) -> int:
        """Fire counts[i, j] signed pulses (> 0 up) into each element (ConductanceArray.pulse)."""
        counts = counts.to(device=self.device, dtype=torch.int64).contiguous()
        if tuple(counts.shape) != self.shape:
            raise ValueError(f"counts has shape {tuple(counts.shape)}, array is {self.shape}")
        h = self.host
        n = pulse(self.target, counts, self.params, h.seed, h.next_counter())
        if self.hidden is not None:
            self._redraw_apparent(self._set_of_mask(counts))
        h.add_pulses(n)
        return n

    def post_update_step(self) -> bool:
        """aihwkit's once-per-step diffusion and decay (ConductanceArray.post_update_step) on the device:
        diffusion w <- clip(w + rate xi), decay w <- b + (w - b) scale, then the apparent weights redrawn."""
        h = self.host
        fx = h.effects
        if fx is None or (fx.diffusion_rate is None and fx.decay_scale is None):
            return False
        if self._effects is None:
            lo, hi = h.contiguous_bounds()
            self._effects = {"lo": self._put(lo), "hi": self._put(hi)}
            for name in ("diffusion_rate", "decay_scale", "reset_bias"):
                v = getattr(fx, name)
                if v is not None:
                    self._effects[name] = self._put(np.broadcast_to(v, self.shape))
        e, w = self._effects, self.target
        if fx.diffusion_rate is not None:
            redraw(w, w, self.no_set, e["diffusion_rate"], e["lo"], e["hi"], True, h.seed, h.next_counter(), DIFFUSE)
        if fx.decay_scale is not None:
            decay(w, e["reset_bias"], e["decay_scale"], e["lo"], e["hi"], h.decay_clips())
        if self.hidden is not None:
            self._redraw_apparent(self.no_set)
        return True


def _clip(v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Row b of v clipped to +-1 / scale[b] in float32 where scale[b] > 0 (devices.pulse_trains.
    clip_to_probability)."""
    lim = torch.where(scale > 0, 1.0 / scale.to(torch.float32), torch.inf).to(torch.float32)[:, None]
    return torch.minimum(torch.maximum(v, -lim), lim)
