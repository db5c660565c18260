"""The pulsed update of a one-sided cell (devices.one_sided): the mini-batch's pulse trains and coincidences
as devices.pulsed_update draws and walks them, each coincidence routed to the device that moves W its way, as
an up pulse: G+ where the pulse would raise W, G- where it would lower it (aihwkit 1.1.0's OneSidedUnitCell).

Row i draws its cycle-to-cycle noise from stream (seed, counter, i), pulse k of the row (in sample and slot
order, whichever device it goes to) taking normal k (devices.coincidences.coincide_row_routed); the trains
are those of pulsed_update_kernel for the same seed and counter (devices.pulsed_update.draw_trains). The
result does not depend on the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import get_thread_id, njit, prange

from aimc.devices.coincidences import coincide_row_routed, one_piece, ring_size
from aimc.devices.loops import total
from aimc.devices.pulsed_update import draw_trains
from aimc.devices.threads import kernel_thread_count


@njit(cache=True, parallel=True)
def one_sided_update_kernel(w_plus, w_minus, x, d, settings, params_plus, params_minus, seed, counter) -> int:
    """W -= lr d^T x on a one-sided cell: every coincidence of the pulse trains (devices.pulsed_update) is
    one up pulse, into w_plus (G+) where lr d x < 0, into w_minus (G-) where lr d x > 0. w_plus, w_minus
    (out, in) float32 in place, with their own element parameters (params_plus, params_minus:
    ElementKernelParams of the same family and noise); x (B, in), d (B, out) float32; settings the update's
    UpdateSettings (devices.kernel_bundles). Returns pulses fired."""
    x_lists, x_counts, d_masks, _, d = draw_trains(x, d, settings, seed, counter, 0)
    lr = settings[0]
    lr_sign = 1.0 if lr > 0 else (-1.0 if lr < 0 else 0.0)
    rows = w_plus.shape[0]
    pieces = one_piece(counter, d_masks.shape[0])
    fired = np.empty(rows, np.int64)
    rings = np.empty((kernel_thread_count(), ring_size(w_plus.shape[1])), np.float32)
    for i in prange(rows):
        fired[i] = coincide_row_routed(
            i,
            w_plus,
            w_minus,
            (x_lists, x_counts, d_masks),
            d,
            lr_sign,
            params_plus,
            params_minus,
            seed,
            pieces,
            rings[get_thread_id()],
        )
    return total(fired)
