"""The pulsed update of a one-sided cell (devices.one_sided): the mini-batch's pulse trains and coincidences
as devices.pulsed_update draws them, each coincidence routed to the device that moves W its way, as an up
pulse: G+ where the pulse would raise W, G- where it would lower it (aihwkit 1.1.0's OneSidedUnitCell).

A kernel of its own, so that the update of every other device keeps its kernel unchanged. Row i draws its
cycle-to-cycle noise from stream (seed, counter, i), pulse k of the row (in sample and slot order, whichever
device it goes to) taking normal k; the trains are those of pulsed_update_kernel for the same seed and
counter. The result does not depend on the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, uint32, uint64

from aimc.devices.bits import lowest_bit
from aimc.devices.loops import total
from aimc.devices.normals import BLOCK, fill_normals
from aimc.devices.pulse_trains import INDEX
from aimc.devices.pulsed_update import draw_trains
from aimc.devices.pulses import noisy_pulse
from aimc.devices.rng import stream_seed


@njit(cache=True, parallel=True)
def one_sided_update_kernel(w_plus, w_minus, x, d, settings, params_plus, params_minus, seed, counter) -> int:
    """W -= lr d^T x on a one-sided cell: every coincidence of the pulse trains (devices.pulsed_update) is
    one up pulse, into w_plus (G+) where lr d x < 0, into w_minus (G-) where lr d x > 0. w_plus, w_minus
    (out, in) float32 in place, with their own element parameters (params_plus, params_minus:
    ElementKernelParams of the same family and noise); x (B, in), d (B, out) float32; settings the update's
    UpdateSettings (devices.kernel_bundles). Returns pulses fired."""
    ep_plus, code, consts_plus, grid, tab_up, tab_dn, sigma, additive = params_plus
    ep_minus, _, consts_minus, _, _, _, _, _ = params_minus
    x_lists, x_counts, d_masks, _ = draw_trains(x, d, settings, seed, counter, 0)
    lr = settings[0]
    lr_sign = 1.0 if lr > 0 else (-1.0 if lr < 0 else 0.0)
    rows = w_plus.shape[0]
    fired = np.zeros(rows, np.int64)
    for i in prange(rows):
        need = 0
        for b in range(d_masks.shape[0]):
            md = d_masks[b, i]
            while md != 0:
                need += x_counts[b, lowest_bit(md)]
                md &= md - uint32(1)
        if need == 0:
            continue
        noisy = sigma > 0.0
        xi = np.zeros((need + BLOCK - 1) // BLOCK * BLOCK if noisy else 0, np.float32)
        if noisy:
            fill_normals(xi, 0, xi.shape[0], stream_seed(uint64(seed), uint64(counter), uint64(i)), 0)
        n = 0
        wp, wm, ep_p, ep_m = w_plus[i], w_minus[i], ep_plus[i], ep_minus[i]
        for b in range(d_masks.shape[0]):
            md = d_masks[b, i]
            d_up = uint32(lr_sign * d[b, i] < 0.0)
            while md != 0:
                t = lowest_bit(md)
                md &= md - uint32(1)
                js = x_lists[b, t]
                for a in range(x_counts[b, t]):
                    e = js[a]
                    j = e & INDEX
                    noise = xi[n] if noisy else np.float32(0.0)
                    if (d_up ^ (e >> uint32(31))) != 0:  # W would rise: G+ up
                        wp[j] = noisy_pulse(wp[j], True, ep_p, j, code, consts_plus, grid, tab_up, tab_dn, sigma,
                                            additive, noise, np.float32, noisy)
                    else:  # W would fall: G- up
                        wm[j] = noisy_pulse(wm[j], True, ep_m, j, code, consts_minus, grid, tab_up, tab_dn,
                                            sigma, additive, noise, np.float32, noisy)
                    n += 1
        fired[i] = n
    return total(fired)
