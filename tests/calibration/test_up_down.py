"""Up/down families (power_ud, exponential_ud): traces of a device whose depression is far more non-linear
than its potentiation give both exponents back inside their intervals, and the criterion chooses the up/down
family; a device with one exponent keeps the shared family (the extra parameter pays its BIC cost). Truths
are the simulated configs."""

import pytest

from aimc.calibration import fit, measure_cycles
from aimc.devices import Exponential, Power

ASYMMETRIC = {
    "power": Power(tau=0.6, c=0.1, gamma=1.0, gamma_down=3.0, dw_min=0.01, dw_min_std=0.3),
    "exponential": Exponential(tau=0.6, c=-0.1, gamma=0.5, gamma_down=2.0, dw_min=0.01, dw_min_std=0.3),
}


def _fit(truth, kind):
    traces = measure_cycles(truth, n_cycles=2, n_devices=4, read_noise=0.005, seed=1)
    return fit(traces, kinds=[kind, f"{kind}_ud"], spread=False)


@pytest.mark.parametrize("kind", list(ASYMMETRIC))
def test_up_down_family_recovers_both_exponents(kind):
    truth = ASYMMETRIC[kind]
    res = _fit(truth, kind)
    assert res.best.kind == f"{kind}_ud", res.ranking_table()
    f = res.best
    for p, true in (("gamma", truth.gamma), ("gamma_down", truth.gamma_down), ("c", truth.c)):
        lo, hi = f.ci95[p]
        assert lo < true < hi, f"{kind}_ud.{p}: 95% interval ({lo:.4g}, {hi:.4g}), true {true}"
    assert f.ci95["gamma_down"][0] > f.ci95["gamma"][1]  # the two exponents are told apart
    assert res.device.kind == kind and res.device.gamma_down == f.params["gamma_down"]


def test_one_exponent_keeps_the_shared_family():
    res = _fit(Power(tau=0.6, c=0.1, gamma=2.0, dw_min=0.01, dw_min_std=0.3), "power")
    assert res.best.kind == "power", res.ranking_table()
    assert res.fits["power_ud"].k == res.fits["power"].k + 1
    # power is power_ud with gamma_down = gamma: the larger family's fit must fit at least as well (else the
    # criterion would compare a fit stopped short with the nested family's optimum)
    assert res.fits["power_ud"].rss <= res.fits["power"].rss
    assert res.device.gamma_down is None
