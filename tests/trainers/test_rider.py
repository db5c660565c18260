"""RIDER / E-RIDER (arXiv:2602.21321): one transfer against its equations, the symmetric-point tracking the
paper proves (toy least squares on a device whose symmetric point is not 0), costs, checkpoint/resume,
refused settings; the zero shift's random mode and its setup report."""

import logging

import numpy as np
import pytest
import torch
from optimizer_helpers import exact_model, straight_and_resumed
from state_helpers import same_state

from aimc import trainers as T
from aimc.devices import Ideal, Linear
from aimc.devices.response_step import DW_DOWN, DW_UP


def test_one_transfer_follows_the_equations():
    """No gradient, P = 1/4, Q = Q~ = 0: a transfer reads v = P - Q~ = 1/4, Q <- Q + eta (P - Q) and
    W <- W + beta c v (Eq. 11b/18b); RIDER then sets Q~ = Q, E-RIDER keeps Q~ until its chopper switches,
    and the switch reprograms Q~ = Q and flips the sign of P's forward gain."""
    eta, beta, gamma = 0.25, 2.0**-3, 0.5
    for cfg in (
        T.RiderConfig(tracking_rate=eta, transfer_lr=beta, gamma=gamma, n_columns=2),
        T.ERiderConfig(tracking_rate=eta, transfer_lr=beta, gamma=gamma, n_columns=2, chop_prob=0.5, chop_random=False),
    ):
        model = exact_model(2, 1)
        opt = T.build_optimizer(model, cfg)
        tile = model[0].tiles[0]
        tile.arrays[1].w[...] = 0.25
        tile.invalidate()
        opt.step()  # no saved batch: no gradient, one transfer of both columns
        st = opt.tile_state[0][0]
        np.testing.assert_array_equal(st["Q"], np.full((1, 2), eta * 0.25, np.float32))
        np.testing.assert_array_equal(tile.arrays[0].w, np.full((1, 2), beta * 0.25, np.float32))
        expect_ref = st["Q"] if cfg.algorithm == "rider" else np.zeros((1, 2), np.float32)
        np.testing.assert_array_equal(tile.arrays[1].reference, expect_ref)
        assert list(tile.gains) == [1.0, gamma]
        if cfg.algorithm == "e_rider":
            opt.step()  # step 2: the regular chopper (period 2) switches after it
            np.testing.assert_array_equal(tile.arrays[1].reference, st["Q"])
            assert st["c"] == -1.0 and list(tile.gains) == [1.0, -gamma]
            assert opt.costs()["reference_writes"] == 2
        else:
            assert opt.costs()["reference_writes"] == 2


def test_buffered_transfer_fires_whole_pulses_of_the_accumulated_reads():
    """With a threshold, each read adds transfer_lr c (P - Q~) to the buffer H and W moves only by whole pulses
    where |H| >= threshold dw_min, H keeping the rest (TT-v2's rule): P = 1/4, transfer_lr 1/8 and dw_min DW
    give H = k / 32 after k reads; with threshold 3 the first pulses fire at the read where k / 32 >= 3 DW, as
    floor(H / DW) pulses."""
    beta, thr = 2.0**-3, 3.0
    model = exact_model(1, 2)
    opt = T.build_optimizer(
        model, T.ERiderConfig(tracking_rate=1e-6, transfer_lr=beta, chop_prob=1e-6, chop_random=False, threshold=thr)
    )
    tile = model[0].tiles[0]
    tile.arrays[1].w[...] = 0.25
    tile.invalidate()
    dw = tile.arrays[0].params.granularity
    h = 0.0
    for _ in range(12):
        opt.step()  # no gradient: one read and transfer of the column
        h += beta * 0.25
        n = np.floor(h / dw) if h >= thr * dw else 0.0
        h -= n * dw
        np.testing.assert_allclose(opt.tile_state[0][0]["H"], np.full((2, 1), h), rtol=1e-5)
        assert tile.arrays[0].w[0, 0] == pytest.approx(dw * round((0.25 * beta * (_ + 1) - h) / dw), abs=1e-6)
    assert opt.costs()["transfer_pulses"] == 2 * round((12 * beta * 0.25 - h) / dw)


def _linear_symmetric_points(array, tau: float) -> np.ndarray:
    """Closed form of a linear device (bounds +-tau, no bound spread): q+ = dw_up (1 - w / tau) / dw_min and
    q- = dw_down (1 + w / tau) / dw_min are equal at w = tau (dw_up - dw_down) / (dw_up + dw_down), per element
    from its drawn steps."""
    ep = array.params.ep.astype(float)
    up, down = ep[..., DW_UP], ep[..., DW_DOWN]
    return tau * (up - down) / (up + down)


def test_rider_reference_converges_to_the_symmetric_point_of_the_device():
    """arXiv:2602.21321 Lemma 3.5 / Theorem 3.7 on a toy: a zero-mean gradient (random signs, independent of the
    weights) drives P by the Analog Update P <- P - lr g F(P) - lr |g| G(P), whose mean drift -lr G(P) leads to
    the symmetric point, and the EMA Q follows it; w_sp of the linear device in closed form
    (_linear_symmetric_points; c_dtod spreads it about 0.3 tau). Q starts at 0 (no zero shift); its mean
    over the last 750 of 1500 steps sits at w_sp: P's time average scatters by about 1 / sqrt(750 steps) = 0.04
    (in units of tau, whatever lr) per element, so the test takes 64 independent rows and bounds the mean
    error (0.004 expected) and the mean absolute error (0.03 expected), against the 0.3 of a reference at 0."""
    model = exact_model(2, 64, Linear(tau=1.0, dw_min=1e-3, c=0.3, c_dtod=0.1))
    opt = T.build_optimizer(model, T.RiderConfig(lr=0.01, gamma=0.5, transfer_lr=0.01, n_columns=2, tracking_rate=0.05))
    w_sp = _linear_symmetric_points(model[0].tiles[0].arrays[1], 1.0)
    signs = np.random.default_rng(4).choice([-1.0, 1.0], (1500, 1, 64))
    x = torch.ones(1, 2)
    q_tail = []
    for k, g in enumerate(signs):
        opt.zero_grad()
        (model(x) * torch.tensor(g, dtype=torch.float32)).sum().backward()
        opt.step()
        if k >= 750:
            q_tail.append(opt.tile_state[0][0]["Q"].astype(float))
    err = np.mean(q_tail, axis=0) - w_sp
    assert np.abs(w_sp).mean() > 0.25
    assert abs(err.mean()) < 0.015 and np.abs(err).mean() < 0.05, (err.mean(), np.abs(err).mean())


@pytest.mark.slow  # 2 x 4000 steps: 15 s on an idle core
def test_e_rider_tracks_the_symmetric_point_and_learns_where_analog_sgd_is_biased():
    """arXiv:2602.21321 Theorem 3.7 / Lemma 3.10 on a toy: least squares with gradient noise (batch 1) on a
    linear device whose symmetric point is 0.3 +- 0.1 per element (c_dtod), no zero shift. The reference Q
    converges to each element's symmetric point, and W to the least-squares solution much closer than
    Analog SGD, which the device's asymmetry pulls toward the symmetric point."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (16, 2)).astype(np.float32)
    y = x @ np.array([[0.5], [-0.4]], np.float32) + rng.uniform(-0.5, 0.5, (16, 1)).astype(np.float32)
    w_ls = np.linalg.lstsq(x, y, rcond=None)[0].T
    device = Linear(tau=1.0, dw_min=1e-3, c=0.3, c_dtod=0.1)
    errs = {}
    for cfg in (
        T.ERiderConfig(lr=0.005, gamma=0.5, transfer_lr=0.02, n_columns=2, tracking_rate=0.1, chop_prob=0.02),
        T.AnalogSGDConfig(lr=0.005),
    ):
        model = exact_model(2, 1, device)
        opt = T.build_optimizer(model, cfg)
        order = np.random.default_rng(1).integers(0, 16, 4000)
        tail = []
        for k, i in enumerate(order):
            opt.zero_grad()
            (0.5 * (model(torch.from_numpy(x[i : i + 1])) - torch.from_numpy(y[i : i + 1])) ** 2).sum().backward()
            opt.step()
            if k >= 2000:
                tail.append(
                    model[0].tiles[0].arrays[0].weights if cfg.algorithm == "e_rider" else model[0].analog_weight()
                )
        errs[cfg.algorithm] = np.abs(np.mean(tail, axis=0) - w_ls).max()
        if cfg.algorithm == "e_rider":
            sp = _linear_symmetric_points(model[0].tiles[0].arrays[1], device.tau)
            assert np.abs(sp).min() > 0.15  # far from 0: a reference at 0 would be wrong by that much
            assert np.abs(opt.tile_state[0][0]["Q"] - sp).max() < 0.06, (opt.tile_state[0][0]["Q"], sp)
    assert errs["e_rider"] < 0.5 * errs["analog_sgd"], errs


@pytest.mark.parametrize(
    "cfg",
    [
        T.RiderConfig(lr=0.2, transfer_lr=0.3, n_columns=2),
        T.ERiderConfig(lr=0.2, transfer_lr=0.3, chop_prob=0.4),
        T.ERiderConfig(lr=0.2, transfer_lr=0.3, chop_prob=0.4, threshold=1.0),
        T.ERiderConfig(
            lr=0.2, zero_shift=True, zero_shift_mode="random", zero_shift_cycles=6, chop_prob=0.5, chop_random=False
        ),
    ],
)
def test_checkpoint_resume_is_bit_exact_and_costs_add_up(cfg):
    (model, opt), (model2, opt2) = straight_and_resumed(cfg)
    c = opt.costs()
    assert c["pulses"] == c["update_pulses"] + c["transfer_pulses"] + c["setup_pulses"]
    assert c["transfer_pulses"] > 0 and c["reference_writes"] > 0
    assert c["setup_pulses"] == (6 * (5 * 6 + 3 * 5) if cfg.zero_shift else 0)
    assert same_state((model.state_dict(), opt.state_dict()), (model2.state_dict(), opt2.state_dict()))


@pytest.mark.parametrize(
    "algorithm, bad, field",
    [
        ("rider", {"tracking_rate": 2.0}, "rider.tracking_rate"),
        ("e_rider", {"chop_prob": 0.0}, "e_rider.chop_prob"),
        ("e_rider", {"threshold": 0.0}, "e_rider.threshold"),
        ("rider", {"zero_shift_mode": "fast"}, "rider.zero_shift_mode"),
    ],
)
def test_bad_settings_are_refused_by_name(algorithm, bad, field):
    with pytest.raises(ValueError, match=r"^trainer\." + field.split(".")[1] + ":"):
        T.build_optimizer(exact_model(2, 1, Ideal()), {"algorithm": algorithm, **bad})


def test_random_zero_shift_lands_near_the_symmetric_point_and_is_reported(caplog):
    """arXiv:2602.21321 Algorithm 1: after n random-sign pulses the mean squared distance to the symmetric point
    is within Theorem C.2's floor dw_min q_max^2 / mu_q (here q_max <= 1.5 near the symmetric points,
    mu_q >= 0.6), far below the distance a reference at 0 would leave; the pulses are counted and reported."""
    device = Linear(tau=1.0, dw_min=1e-2, c=0.3, c_dtod=0.1)
    model = exact_model(8, 8, device)
    with caplog.at_level(logging.WARNING, logger="aimc.trainers"):
        opt = T.build_optimizer(model, T.ResidualConfig(zero_shift_mode="random", zero_shift_cycles=1000))
    a = model[0].tiles[0].arrays[1]
    sp = _linear_symmetric_points(a, device.tau)
    assert ((a.reference - sp) ** 2).mean() < 1e-2 * 1.5**2 / 0.6 < (sp**2).mean()
    assert opt.costs()["setup_pulses"] == 1000 * 64 and opt.setup_seconds > 0
    assert len(caplog.records) == 1 and "64000 setup pulses (1000 per weight" in caplog.records[0].getMessage()
