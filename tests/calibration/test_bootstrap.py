"""Bootstrap intervals over devices and cycles: the cycle structure comes from the measurement protocol, the
expanded percentile interval of a mean is the t-interval, the device resample of a median has the closed-form
distribution, and on simulated populations of our
own families (truth: the simulated configs) the true nominal value lies inside the 95% interval for at least
90% of the fitted parameters."""

import numpy as np
import pytest
from scipy import stats

from aimc.calibration import fit, measure_cycles, pulse_data, weight_map_for
from aimc.calibration.bootstrap import cycle_ids, percentile_ci, population_samples, resample
from aimc.devices import Exponential, Linear, Power, SoftBounds

SB_SPREAD = dict(dw_min_dtod=0.1, up_down_dtod=0.01, w_max_dtod=0.05, w_min_dtod=0.05, dw_min_std=0.3)
R1_SPREAD = dict(dw_min_dtod=0.1, c_dtod=0.02, tau_dtod=0.05, dw_min_std=0.3)
TRUTHS = {
    "SoftBounds": SoftBounds(dw_min=0.02, up_down=0.1, w_max=0.7, w_min=-0.5, **SB_SPREAD),
    "linear": Linear(dw_min=0.01, c=0.1, tau=0.7, **R1_SPREAD),
    "power": Power(dw_min=0.01, c=0.1, tau=0.7, gamma=2.0, gamma_dtod=0.05, **R1_SPREAD),
    "exponential": Exponential(dw_min=0.01, c=0.0, tau=0.7, gamma=2.0, gamma_dtod=0.05, **R1_SPREAD),
}


def _traces(truth, seed, n_cycles=3, n_devices=16):
    mid = 0.5 * float(truth.q_plus(0.0) + truth.q_minus(0.0)) * truth.dw_min  # mean step at w = 0
    return measure_cycles(truth, n_cycles=n_cycles, n_devices=n_devices, read_noise=0.25 * mid, seed=seed)


def test_cycles_follow_the_protocol_and_resamples_keep_them_whole():
    n_pulses, n_cycles, n_dev = 40, 3, 4
    tr = measure_cycles(TRUTHS["SoftBounds"], n_pulses=n_pulses, n_cycles=n_cycles, n_devices=n_dev, seed=0)
    data = pulse_data(tr, weight_map_for(tr))
    cyc = cycle_ids(data)
    # the protocol: per device n_cycles cycles of n_pulses up then n_pulses down pulses, one increment each
    assert cyc.max() + 1 == n_dev * n_cycles
    assert np.all(np.bincount(cyc) == 2 * n_pulses)
    idx = resample(data, np.random.default_rng(1), cyc)
    assert len(idx) == data.n  # equal cycles: a resample has as many increments as the data
    blocks = idx.reshape(-1, 2 * n_pulses)  # whole cycles, in order
    assert np.all(np.diff(blocks, axis=1) == 1) and np.all(cyc[blocks[:, 0]] != cyc[blocks[:, 0] - 1])
    per_dev = [
        len({int(data.device[b[0]]) for b in blocks[k : k + n_cycles]}) for k in range(0, n_dev * n_cycles, n_cycles)
    ]
    assert per_dev == [1] * n_dev  # a drawn device's cycles come from that device
    follows = data.subset(idx).follows.reshape(blocks.shape)
    assert np.all(follows[:, 1:] == data.follows[blocks[:, 1:]])
    # a cycle follows the one before it only where that is its true predecessor
    assert np.all(follows[1:, 0] == (blocks[1:, 0] == blocks[:-1, -1] + 1)) and not follows[0, 0]


def test_expanded_percentile_interval_of_a_mean_is_the_t_interval():
    theta = np.random.default_rng(0).normal(size=(16, 2)) * [1.0, 0.1] + [5.0, -1.0]
    means = theta[np.random.default_rng(3).integers(0, 16, size=(20000, 16))].mean(axis=1)
    ci = percentile_ci(means, ["a", "b"], 16)
    # the bootstrap distribution of a mean of n draws from the empirical distribution has sd = std(ddof=0) /
    # sqrt(n); the expanded tail stretches its normal quantile by sqrt(n / (n - 1)): the t-interval
    half = 2.131450 * theta.std(axis=0, ddof=1) / 4.0  # t(0.975, 15) = 2.131450
    for j, p in enumerate("ab"):
        lo, hi = ci[p]
        assert 0.5 * (hi - lo) == pytest.approx(half[j], rel=0.05)
        assert abs(0.5 * (hi + lo) - theta[:, j].mean()) < 0.1 * half[j]


def test_device_resample_of_a_median_matches_the_closed_form():
    n, m = 15, 7  # odd n: the median of a resample is its (m + 1)-th smallest value, one of the estimates
    theta = np.random.default_rng(0).normal(size=(n, 2)) * [1.0, 0.1] + [5.0, -1.0]
    samples = population_samples(theta, 20000, seed=3)
    # P(median* <= x_(k)) = P(at least m + 1 of n draws are among the k smallest) = P(Binomial(n, k / n) > m)
    cdf = stats.binom.sf(m, n, np.arange(n + 1) / n)
    for j in range(2):
        ranks = np.searchsorted(np.sort(theta[:, j]), samples[:, j]) + 1
        assert np.all(np.sort(theta[:, j])[ranks - 1] == samples[:, j])  # every resampled median is an estimate
        freq = np.bincount(ranks, minlength=n + 1)[1:] / len(samples)
        np.testing.assert_allclose(freq, np.diff(cdf), atol=0.01)


def test_per_device_bootstrap_covers_the_truth():
    covered = []
    for kind in ("SoftBounds", "linear"):
        res = fit(
            _traces(TRUTHS[kind], 0, n_cycles=2), kinds=[kind], spread=False, method="per-device", intervals="bootstrap"
        )
        f = res.fits[kind]
        assert f.interval.startswith("bootstrap over 16 devices")
        covered += [lo <= getattr(TRUTHS[kind], p) <= hi for p, (lo, hi) in f.ci95.items()]
    assert np.mean(covered) >= 0.9, covered


@pytest.mark.slow
def test_bootstrap_coverage_of_simulated_populations():
    covered = {"per-device": [], "pooled": []}
    for kind, truth in TRUTHS.items():
        for seed in (0, 1):
            tr = _traces(truth, seed)
            for method in covered:
                f = fit(tr, kinds=[kind], spread=False, method=method, intervals="bootstrap", seed=seed).fits[kind]
                covered[method] += [lo <= getattr(truth, p) <= hi for p, (lo, hi) in f.ci95.items()]
    for method, hits in covered.items():
        assert len(hits) == 30 and np.mean(hits) >= 0.9, (method, hits)


def test_pooled_bootstrap_of_the_best_family_only():
    res = fit(
        _traces(TRUTHS["SoftBounds"], 1, n_cycles=2, n_devices=4),
        kinds=["SoftBounds", "ConstantStep"],
        method="pooled",
        intervals="bootstrap",
        n_boot=20,
        seed=2,
    )
    summary = res.summary()
    best = summary["families"][summary["best"]]
    assert best["interval"].startswith("bootstrap over 4 devices and their 8 cycles, 20 refits, expanded")
    other = summary["families"]["ConstantStep" if summary["best"] == "SoftBounds" else "SoftBounds"]
    assert other["interval"].startswith("Jacobian sandwich")
