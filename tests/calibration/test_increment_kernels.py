"""The increment model's kernels against the device layer: the mean steps and the clipped single-pulse increments
of every fitted family equal, bit for bit, those composed in numpy from the family's own `q_plus` / `q_minus`
(`DeviceBase`), at the family's starting points and at random points of its box."""

import numpy as np
import pytest

from aimc.calibration.families import FAMILY_KINDS, families, with_noise
from aimc.calibration.family_fit import JACOBIAN_STEP
from aimc.calibration.increment_kernels import element_args, single_pulse_jacobian, single_pulse_kernel
from aimc.calibration.pulse_data import PulseData, mean_step, predict

N = 3000
RNG = np.random.default_rng(7)
M = RNG.uniform(-1.3, 1.3, N)
UP = RNG.random(N) < 0.5
DATA = PulseData(
    M,
    M,
    UP,
    np.zeros(N, int),
    np.zeros(N, bool),
    1,
    -1.0,
    1.0,
    np.array([-1.0]),
    np.array([1.0]),
    0.01,
    np.ones(N, int),
    np.zeros(N, int),
    {},
)


def _steps(device, w, up):
    """dw_min q_plus(w) up, dw_min q_minus(w) down: the device layer's public response."""
    s = np.empty(len(w))
    s[up] = device.q_plus(w[up])
    s[~up] = device.q_minus(w[~up])
    return s * device.dw_min


def _clipped_increment(device, m, up):
    """The model of docs/calibration.md in numpy: the mean step where the pulse started (m -+ s(m)/2), clipped
    by the room to the bound, 2 (w_max - m)^+ up and 2 (m - w_min)^+ down."""
    lo, hi = device.bounds
    s = _steps(device, m - np.where(up, 0.5, -0.5) * _steps(device, m, up), up)
    mag = np.minimum(s, 2.0 * np.maximum(np.where(up, hi - m, m - lo), 0.0))
    return np.where(up, mag, -mag)


def _points(fam):
    lo, hi = (np.array(v, float) for v in fam.box(DATA))
    starts = [np.clip(np.array(x, float), lo, hi) for x in fam.starts(DATA)]
    return starts + [lo + (hi - lo) * RNG.uniform(0.1, 0.9, len(lo)) for _ in range(3)]


@pytest.mark.parametrize("kind", [k for k in FAMILY_KINDS if k != "tabulated"])
def test_kernels_equal_the_device_response_bit_for_bit(kind):
    fam = families(6, 0.01)[kind]
    for theta in _points(fam):
        device = fam.fast_config(theta)
        np.testing.assert_array_equal(mean_step(device, M, UP), _steps(device, M, UP))
        np.testing.assert_array_equal(predict(device, M, UP), _clipped_increment(device, M, UP))


def _central_differences(f, theta, h):
    cols = []
    for j in range(len(theta)):
        e = np.zeros(len(theta))
        e[j] = h[j]
        cols.append((f(theta + e) - f(theta - e)) / (2 * h[j]))
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("noise", [None, "multiplicative", "additive"])
@pytest.mark.parametrize("anchor", [0.5, 0.2, 0.0])
@pytest.mark.parametrize("kind", [k for k in FAMILY_KINDS if k != "tabulated"])
def test_analytic_jacobian_matches_central_differences(kind, anchor, noise):
    """The fit's analytic Jacobian against scipy's central differences of the increment model, at random
    points of the box (off the kinks of max(., 0) and of the clipping: rows where the two differ by more than
    1e-5 of the column's scale are at most 1%, the increments within a difference step of a kink), for
    increments seen from their midpoint, from their start and from a point between; with cycle noise of 2
    steps the model is the censored mean of the noisy step, in the form the family has (multiplicative only
    for the aihwkit families without a choice: `with_noise`). With noise, rows whose mean step exceeds the
    device's whole range 100 times over are left out (an exponential family's step beyond its bound): there
    the censored mean is a difference of such numbers, and the model's own evaluation loses the digits the
    central differences need."""
    fam = families(6, 0.01)[kind]
    if noise is not None:
        fam = with_noise(fam, {"form": noise, "sigma_additive": 2.0, "sigma_multiplicative": 2.0})
    lo, hi = (np.array(v, float) for v in fam.box(DATA))
    m, up = np.ascontiguousarray(M), np.ascontiguousarray(UP)
    for theta in [lo + (hi - lo) * RNG.uniform(0.1, 0.9, len(lo)) for _ in range(3)]:
        want = _central_differences(
            lambda t: predict(fam.fast_config(t), M, UP, anchor=anchor), theta, 1e-6 * (hi - lo)
        )
        got = single_pulse_jacobian(fam.fast_config, theta, JACOBIAN_STEP * (hi - lo), m, up, anchor)
        off = np.abs(got - want) > 1e-5 * np.abs(want).max(0) + 1e-12  # 1e-12: a bound 30 sd away moves the
        # censored mean by 1e-130, which the model's evaluation leaves out (censored.TAIL) and the kernel keeps
        if noise is not None:
            device = fam.fast_config(theta)
            w_min, w_max = device.bounds
            _, s, _ = single_pulse_kernel(m, up, *element_args(device), w_min, w_max, anchor)
            off = off[s < 100.0 * (w_max - w_min)]
        assert off.mean(0).max() <= 0.01, (kind, theta, off.mean(0))
