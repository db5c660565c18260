#!/usr/bin/env python
"""Time one pulsed mini-batch update of an IBM aihwkit analog tile.

Runs inside the separate aihwkit venv (~/aihwkit-venv, built as docs/performance.md says), not the aimc env.
Tile: 512 (out) x 512 (in), SingleRPUConfig(device=SoftBoundsDevice()) with the
default pulsed update (desired_bl 31, update management and BL management on,
stochastic compressed pulses). One call of ``tile.update(x, d)`` with batch 64
is timed in two regimes:

* small: x = x_std * randn, d = d_std_small * randn, lr = lr_small
* large: x = x_std * randn, d = d_std_large * randn, lr = lr_large

Expected pulse (coincidence) count per batch, summed over samples:
    sum_b lr * sum_j |x_bj| * sum_i |d_bi| / dw_min
(the default d_std_large is chosen so that this is about 1e6).

Prints one JSON line to stdout.
"""

import math
import time

import numpy as np
import torch
from aihwkit.simulator.configs import SingleRPUConfig, SoftBoundsDevice
from aihwkit.simulator.tiles import AnalogTile
from harness import emit, parser, set_up


def expected_pulses(x, d, lr, dw_min):
    """Formula count: sum over samples of lr*sum|x|*sum|d|/dw_min."""
    sx = x.abs().sum(dim=1).double()
    sd = d.abs().sum(dim=1).double()
    return float((lr * sx * sd / dw_min).sum())


def analytic_pulses(batch, n_in, n_out, x_std, d_std, lr, dw_min):
    """Same count in expectation over the Gaussian draws (E|N(0,s^2)| = s*sqrt(2/pi))."""
    c = math.sqrt(2.0 / math.pi)
    return batch * lr * (n_in * x_std * c) * (n_out * d_std * c) / dw_min


def bl_ratio(x, d, lr, dw_min):
    """k = lr*max|x|*max|d|/dw_min (batch-wide); > desired_bl means d gets scaled down."""
    return float(lr * x.abs().max() * d.abs().max() / dw_min)


def time_update(tile, w0, x, d, lr, repeats, warmup):
    tile.set_learning_rate(lr)
    for _ in range(warmup):
        tile.set_weights(w0)
        tile.update(x, d)
    times = []
    for _ in range(repeats):
        tile.set_weights(w0)  # same starting state every repeat, outside the timed region
        t0 = time.perf_counter()
        tile.update(x, d)
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times)), float(np.min(times))


def main():
    p = parser(__doc__)
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out-size", type=int, default=512)
    p.add_argument("--in-size", type=int, default=512)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--x-std", type=float, default=0.25)
    p.add_argument("--d-std-small", type=float, default=2e-4)
    p.add_argument("--d-std-large", type=float, default=3.75e-3)
    p.add_argument("--lr-small", type=float, default=0.01)
    p.add_argument("--lr-large", type=float, default=0.1)
    a = p.parse_args()
    set_up(a)

    device = SoftBoundsDevice()
    rpu_config = SingleRPUConfig(device=device)
    dw_min = float(device.dw_min)
    tile = AnalogTile(a.out_size, a.in_size, rpu_config, bias=False)
    w0 = (torch.rand(a.out_size, a.in_size) - 0.5) * 0.2  # uniform in [-0.1, 0.1]
    tile.set_weights(w0)

    x = a.x_std * torch.randn(a.batch, a.in_size)
    d_small = a.d_std_small * torch.randn(a.batch, a.out_size)
    d_large = a.d_std_large * torch.randn(a.batch, a.out_size)

    small_med, small_min = time_update(tile, w0, x, d_small, a.lr_small, a.repeats, a.warmup)
    large_med, large_min = time_update(tile, w0, x, d_large, a.lr_large, a.repeats, a.warmup)

    up = rpu_config.update
    out = {
        "small_ms_median": small_med,
        "large_ms_median": large_med,
        "small_ms_min": small_min,
        "large_ms_min": large_min,
        "small_expected_pulses": expected_pulses(x, d_small, a.lr_small, dw_min),
        "large_expected_pulses": expected_pulses(x, d_large, a.lr_large, dw_min),
        "small_expected_pulses_analytic": analytic_pulses(
            a.batch, a.in_size, a.out_size, a.x_std, a.d_std_small, a.lr_small, dw_min
        ),
        "large_expected_pulses_analytic": analytic_pulses(
            a.batch, a.in_size, a.out_size, a.x_std, a.d_std_large, a.lr_large, dw_min
        ),
        "small_k": bl_ratio(x, d_small, a.lr_small, dw_min),
        "large_k": bl_ratio(x, d_large, a.lr_large, dw_min),
        "out_size": a.out_size,
        "in_size": a.in_size,
        "batch": a.batch,
        "x_std": a.x_std,
        "d_std_small": a.d_std_small,
        "d_std_large": a.d_std_large,
        "lr_small": a.lr_small,
        "lr_large": a.lr_large,
        "dw_min": dw_min,
        "desired_bl": int(up.desired_bl),
        "update_management": bool(up.update_management),
        "update_bl_management": bool(up.update_bl_management),
        "pulse_type": str(up.pulse_type),
        "repeats": a.repeats,
    }
    emit(out, a)


if __name__ == "__main__":
    main()
