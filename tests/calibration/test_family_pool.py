"""The families fitted in worker processes give the fit of one process, number for number."""

import json

import pytest

from aimc.calibration import fit, measure_cycles
from aimc.devices import SoftBounds

KINDS = ["linear", "SoftBounds", "PowStep", "tabulated"]


def _traces():
    truth = SoftBounds(dw_min=0.02, up_down=0.1, w_max=0.7, w_min=-0.5, dw_min_dtod=0.2, dw_min_std=0.3)
    return measure_cycles(truth, n_cycles=1, n_devices=4, read_noise=0.005, seed=3)


@pytest.mark.parametrize("method, gls", [("pooled", False), ("per-device", True)])
def test_workers_give_the_same_fit(method, gls):
    tr = _traces()
    one = fit(tr, kinds=KINDS, method=method, spread=False, workers=1, gls=gls)
    two = fit(tr, kinds=KINDS, method=method, spread=False, workers=2, gls=gls)
    assert list(two.fits) == KINDS  # the families in the order asked, whichever finished first
    assert json.dumps(two.summary(), sort_keys=True, default=str) == json.dumps(
        one.summary(), sort_keys=True, default=str
    )
    assert one.method == method


def test_workers_must_be_positive():
    with pytest.raises(ValueError, match="workers must be >= 1, got 0"):
        fit(_traces(), kinds=["linear"], workers=0)
