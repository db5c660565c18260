"""update_array_work (the pulsed update in reused work arrays) against update_array: the same weights, apparent
weights, counters and pulse counts, bit for bit, for updates that fit the work and for those that fall back."""

from __future__ import annotations

import numpy as np
import pytest

from aimc.devices import ConductanceArray, parse_device
from aimc.devices.array_update import update_array, update_array_work
from aimc.devices.kernel_bundles import update_settings
from aimc.devices.pulsed_update import update_work
from aimc.devices.update import UpdateConfig


def _pair(write_noise: float) -> tuple[ConductanceArray, ConductanceArray]:
    """Two identical 16 x 25 SoftBounds arrays (with spread; write noise in units of dw_min)."""
    device = parse_device(dict(kind="SoftBounds", dw_min=0.01, write_noise_std=write_noise))
    return ConductanceArray(16, 25, device, seed=5), ConductanceArray(16, 25, device, seed=5)


@pytest.mark.parametrize("write_noise", [0.0, 2.0])
def test_update_in_work_arrays_equals_update_array(write_noise):
    """Pieces of 1 to 3 samples (the work's capacity) in one reused work, then 4 samples and trains of 40
    slots (beyond the work: the allocating kernel); one-slot trains (small lr) and BL management included."""
    rng = np.random.default_rng(11)
    ref, new = _pair(write_noise)
    work = update_work(3, 25, 16, 9)
    cases = [(1, 0.5, 9), (3, 0.5, 9), (2, -0.3, 5), (1, 1e-3, 9), (4, 0.5, 9), (1, 0.5, 40), (1, 0.5, 9)]
    for batch, lr, bl in cases:
        x = rng.normal(0, 0.5, (batch, 25)).astype(np.float32)
        d = rng.normal(0, 0.05, (batch, 16)).astype(np.float32)
        x[0, :3] = 0.0
        settings = update_settings(lr, float(ref.params.granularity), UpdateConfig(desired_bl=bl))
        n_ref = update_array(ref.handle(), x, d, settings, True)
        n_new = update_array_work(new.handle(), x, d, settings, True, work)
        assert n_new == n_ref
        for a, b in zip(new.handle()[:2] + new.handle()[-1:], ref.handle()[:2] + ref.handle()[-1:], strict=True):
            assert np.array_equal(a, b)  # the weights pulses move, the apparent ones, the counters
    assert ref.pulses > 0
