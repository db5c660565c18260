"""update_array_pieces (the updates between a chopped transfer's reads, all in one call) against update_array
called piece by piece with the column read between the pieces: the same weights, apparent weights, counters,
pulse counts and columns, bit for bit, on the one-call path (trains and rows in parallel or not) and on the
piece-by-piece one (write noise, expected mode, trains longer than SLOTS)."""

from __future__ import annotations

import numpy as np
import pytest

from aimc.devices import ConductanceArray, parse_device
from aimc.devices.array_update import update_array, update_array_pieces
from aimc.devices.kernel_bundles import update_settings
from aimc.devices.update import UpdateConfig

DEVICES = {
    "soft_bounds": dict(kind="SoftBounds", dw_min=0.01),  # a LINEAR family with cycle noise
    "linear_quiet": dict(kind="LinearStep", dw_min=0.01, dw_min_std=0.0),  # LINEAR without it
    "pow_step": dict(kind="PowStep", dw_min=0.01),  # every other family
    "write_noise": dict(kind="SoftBounds", dw_min=0.01, write_noise_std=2.0),
}


def _bounds(sizes: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def _run_both(device: dict, rows: int, cols: int, sizes: list[int], lr: float, bl: int, pulsed: bool = True):
    """The batch of len(sizes) pieces through update_array_pieces on one array and update_array piece by
    piece (with the column read after each piece) on its twin. Returns both arrays, both pulse counts and
    both records of columns."""
    rng = np.random.default_rng(3)
    cfg = parse_device(device)
    one, ref = ConductanceArray(rows, cols, cfg, seed=7), ConductanceArray(rows, cols, cfg, seed=7)
    ref.reference[:] = one.reference[:] = rng.normal(0, 0.01, (rows, cols)).astype(np.float32)
    n = sum(sizes)
    x = rng.normal(0, 0.5, (n, cols)).astype(np.float32)
    d = rng.normal(0, 0.05, (n, rows)).astype(np.float32)
    x[1] = 0.0  # a piece of one vector with x = 0 fires nothing and only takes its counter
    bounds = _bounds(sizes)
    read = (np.arange(len(sizes)) * 5 + 3) % cols
    read[-1] = -1  # the last piece is followed by no read
    snap = np.full((rows, len(sizes)), np.nan, np.float32)
    settings = update_settings(lr, float(ref.params.granularity), UpdateConfig(desired_bl=bl, mode="pulsed"))
    n_one = update_array_pieces(one.handle(), x, d, settings, pulsed, bounds, read, snap)
    n_ref = 0
    expect = np.full_like(snap, np.nan)
    for p in range(len(sizes)):
        lo, hi = bounds[p], bounds[p + 1]
        if np.any(x[lo:hi] != 0):
            n_ref += update_array(ref.handle(), x[lo:hi], d[lo:hi], settings, pulsed)
        else:
            ref.handle()[-1][0] += 1 + (ref.handle()[3].shape[0] > 0)  # update_array's counters, no change
        if read[p] >= 0:
            expect[:, p] = ref.w[:, read[p]] - ref.reference[:, read[p]]
    return one, ref, n_one, n_ref, snap, expect


def _assert_same(one, ref, n_one, n_ref, snap, expect) -> None:
    assert n_one == n_ref > 0
    assert np.array_equal(one.w, ref.w)  # the apparent weights
    assert np.array_equal(one.handle()[0], ref.handle()[0])  # the weights pulses move (hidden under write noise)
    assert np.array_equal(one.handle()[-1], ref.handle()[-1])  # counter and pulses
    assert np.array_equal(snap, expect, equal_nan=True)


@pytest.mark.parametrize("device", ["soft_bounds", "linear_quiet", "pow_step"])
def test_pieces_in_one_call_equal_piece_by_piece_updates(device):
    """Small pieces on a 16 x 25 array (R1's first convolution: trains and rows on the calling thread) and
    large ones on a 96 x 200 array (both in parallel), with BL management's short trains and full ones."""
    for rows, cols, sizes, lr in [(16, 25, [1] * 40 + [3, 2], 1.0), (96, 200, [1, 40, 60, 30], 0.5)]:
        for bl in (5, 31):
            _assert_same(*_run_both(DEVICES[device], rows, cols, sizes, lr, bl))


@pytest.mark.parametrize(
    ("device", "bl", "pulsed"), [("write_noise", 5, True), ("soft_bounds", 40, True), ("soft_bounds", 5, False)]
)
def test_pieces_that_need_their_own_calls_give_the_same(device, bl, pulsed):
    """Write noise (redrawn after each piece), trains longer than SLOTS and the expected update run piece by
    piece, with the same result."""
    one, ref, n_one, n_ref, snap, expect = _run_both(DEVICES[device], 16, 25, [1] * 12 + [4], 1.0, bl, pulsed)
    _assert_same(one, ref, n_one, n_ref, snap, expect)


def test_pieces_that_do_not_cover_the_batch_are_refused():
    arr = ConductanceArray(4, 5, parse_device(dict(kind="SoftBounds")), seed=1)
    x, d = np.ones((3, 5), np.float32), np.ones((3, 4), np.float32)
    settings = update_settings(0.1, float(arr.params.granularity), UpdateConfig())
    snap = np.empty((4, 2), np.float32)
    with pytest.raises(ValueError, match="bounds"):
        update_array_pieces(arr.handle(), x, d, settings, True, np.array([0, 1, 2]), np.array([0, 1]), snap)
