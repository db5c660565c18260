"""c-TTv2 (aihwkit 1.1.0 ChoppedTransferCompound): the recursion against a numpy re-implementation of its
equations (docs/trainers.md), the auto-scaled fast step, chopper statistics, offset cancellation, costs,
checkpoint/resume and refused settings."""

import math

import numpy as np
import pytest
import torch
from optimizer_helpers import DW, drive, dyadic_batches, exact_model, mse_step, small_model, straight_and_resumed
from state_helpers import same_state

from aimc import trainers as T


def _write_pulses(n, step, transfer_bl):
    """Expected pulses of aihwkit 1.1.0's write of -n into a column with lr = step dw and transfer_bl slots, no
    update management: per slot the input fires with probability min(1, sqrt(step / BL)), row i with
    min(1, |n_i| sqrt(step / BL)) (exact where both are 0 or 1)."""
    p = math.sqrt(step / transfer_bl)
    return np.sign(n) * transfer_bl * min(1.0, p) * np.minimum(1.0, np.abs(n) * p)


def _reference(batches, n_in, n_out, eta, s, every, period, momentum, forget, transfer_bl=1, step=1.0):
    """ALGORITHMS of docs/trainers.md (c-TTv2), written out for one tile: per rank-1 update A -= eta (c_out d)
    (c_in x)^T; every `every` updates read column k, H += c_in[k] s A[:, k], fire trunc(H) pulses of dw into C
    where |H| >= 1 (times the write's pulses per unit n for `step`), reset H, regular chopper switch in the
    last sweep of each period. Returns A, C, H and the nonzero n written."""
    a = np.zeros((n_out, n_in))
    c = np.zeros((n_out, n_in))
    h = np.zeros((n_out, n_in))
    c_in = np.ones(n_in)
    t = k = sweeps = writes = 0
    for xb, db in batches:
        for x, d in zip(xb, db):
            a -= eta * np.outer(d, c_in * x)
            t += 1
            if t % every:
                continue
            hk = h[:, k] + c_in[k] * s * a[:, k]
            hit = np.abs(hk) >= 1
            n = np.where(hit, np.clip(np.trunc(hk), -transfer_bl, transfer_bl), 0)
            hk = np.where(hit, momentum * hk if forget else hk - (1 - momentum) * n, hk)
            h[:, k] = hk
            c[:, k] += _write_pulses(n, step, transfer_bl) * DW
            writes += np.count_nonzero(n)
            if sweeps % period + 1 == period:
                c_in[k] *= -1
            k += 1
            if k == n_in:
                k, sweeps = 0, sweeps + 1
    return a, c, h, writes


# (transfer_every, its period in rank-1 updates, batch, momentum, forget_buffer, step, transfer_bl,
# auto_granularity, the buffer threshold's factor G); transfer_every < 0: a sweep per |transfer_every| n_states
# updates, n_states = 2 tau / dw_min = 8192 of the ideal device, so -2^-10 reads every 8192 / 4 / 1024 = 2
# updates, and G = auto_granularity / (n_in |transfer_every|) = 2^-7 * 256 = 2
@pytest.mark.parametrize(
    "every, period, batch, momentum, forget, step, bl, auto_g, g",
    [
        (1, 1, 4, 0.0, True, 1.0, 1, 0.0, 1.0),
        (3, 3, 5, 0.5, False, 1.0, 1, 0.0, 1.0),
        (-(2.0**-10), 2, 4, 0.5, False, 2.0, 2, 2.0**-7, 2.0),
    ],
)
def test_recursion_matches_a_numpy_reimplementation(every, period, batch, momentum, forget, step, bl, auto_g, g):
    """step 2 with two slots: every nonzero n moves C by exactly two pulses (probabilities 1 in both trains)."""
    n_in, n_out = 4, 3
    batches = dyadic_batches(12, batch, n_in, n_out)
    model = exact_model(n_in, n_out)
    lr, fast_lr, transfer_lr = 2.0**-4, 2.0**-4, 2.0
    cfg = T.CTTv2Config(
        lr=lr,
        fast_lr=fast_lr,
        auto_scale=False,
        transfer_lr=transfer_lr,
        transfer_every=every,
        in_chop_prob=0.5,
        in_chop_random=False,
        momentum=momentum,
        forget_buffer=forget,
        step=step,
        transfer_bl=bl,
        auto_granularity=auto_g,
    )
    opt = T.build_optimizer(model, cfg)
    drive(model, opt, batches)
    s = transfer_lr * lr / DW / g  # scale_transfer_lr, buffer granularity 1
    a, c, h, _ = _reference(
        batches, n_in, n_out, fast_lr, s, period, period=2, momentum=momentum, forget=forget, transfer_bl=bl, step=step
    )
    tile = model[0].tiles[0]
    assert np.abs(c).max() > 0 and np.abs(h).max() > 0  # transfers happened and left remainders
    np.testing.assert_array_equal(tile.arrays[1].w, a.astype(np.float32))
    np.testing.assert_array_equal(tile.arrays[0].w, c.astype(np.float32))
    np.testing.assert_array_equal(opt.tile_state[0][0]["H"], h.astype(np.float32))
    assert opt.costs()["transfer_reads"] == 12 * batch // period


def test_a_write_step_below_one_fires_each_pulse_with_that_probability():
    """step 1/4, one slot: each nonzero n of the buffer becomes a pulse with probability 1/4 (aihwkit 1.1.0's
    write lr step dw_C), the buffer and A unchanged (they do not depend on C)."""
    n_in, n_out, step = 4, 3, 0.25
    batches = dyadic_batches(150, 4, n_in, n_out, seed=2)
    model = exact_model(n_in, n_out)
    lr = 2.0**-4
    opt = T.build_optimizer(
        model,
        T.CTTv2Config(
            lr=lr, fast_lr=lr, auto_scale=False, transfer_lr=2.0, step=step, in_chop_prob=0.5, in_chop_random=False
        ),
    )
    drive(model, opt, batches)
    a, _, h, writes = _reference(batches, n_in, n_out, lr, 2.0 * lr / DW, 1, period=2, momentum=0.0, forget=True)
    np.testing.assert_array_equal(opt.tile_state[0][0]["H"], h.astype(np.float32))
    np.testing.assert_array_equal(model[0].tiles[0].arrays[1].w, a.astype(np.float32))
    pulses = opt.costs()["transfer_pulses"]
    assert writes > 300 and abs(pulses - step * writes) < 4 * math.sqrt(writes * step * (1 - step)), (pulses, writes)


def test_auto_scaled_fast_step_follows_the_running_abs_max():
    """eta_A = fast_lr BL dw_A / (m_x m_d), m <- (1 - (1 - 0.99)/m_batch) m + (1 - 0.99)/m_batch max|.| per
    vector, starting at the first value (aihwkit 1.1.0)."""
    n_in, n_out, batch = 4, 3, 5
    batches = dyadic_batches(3, batch, n_in, n_out, seed=1)
    model = exact_model(n_in, n_out)
    opt = T.build_optimizer(model, T.CTTv2Config(fast_lr=0.1, transfer_every=1000))
    drive(model, opt, batches)
    tau = 0.01 / batch
    mx = md = 0.0
    for xb, db in batches:
        for x, d in zip(xb, db):
            vx, vd = np.abs(x).max(), np.abs(d).max()
            if vx > 0:
                mx = vx if mx <= 0 else (1 - tau) * mx + tau * vx
            if vd > 0:
                md = vd if md <= 0 else (1 - tau) * md + tau * vd
    st = opt.tile_state[0][0]
    assert st["m_x"] == pytest.approx(mx, rel=1e-12) and st["m_d"] == pytest.approx(md, rel=1e-12)
    assert st["eta"] == pytest.approx(0.1 * 32 * DW / (mx * md), rel=1e-12)


def test_random_choppers_switch_with_the_given_probability():
    n_in, p, sweeps = 8, 0.1, 250
    model = exact_model(n_in, 2)
    opt = T.build_optimizer(model, T.CTTv2Config(auto_scale=False, fast_lr=DW, in_chop_prob=p))
    st = opt.tile_state[0][0]
    flips, before = 0, st["c_in"].copy()
    for _ in range(sweeps):
        drive(model, opt, [(np.ones((n_in, n_in)) / 4, np.zeros((n_in, 2)))])
        flips += int((st["c_in"] != before).sum())
        before = st["c_in"].copy()
    n = sweeps * n_in  # one read per column and sweep, one switch chance per read
    assert abs(flips - n * p) < 4 * math.sqrt(n * p * (1 - p)), flips


def test_chopping_cancels_a_constant_offset_of_the_fast_array():
    """NC24 Eq. 11: an offset of A enters H with alternating sign. With no gradient and A held at 0.2, TTv2
    (in_chop_prob 0) keeps writing the offset into C, c-TTv2 (regular switching every sweep) does not."""
    drift = {}
    for p in (0.0, 1.0):
        model = exact_model(2, 2)
        opt = T.build_optimizer(
            model, T.CTTv2Config(lr=0.05, auto_scale=False, fast_lr=DW, in_chop_prob=p, in_chop_random=False)
        )
        model[0].tiles[0].arrays[1].w[...] = 0.2
        model[0].tiles[0].invalidate()
        for _ in range(50):
            drive(model, opt, [(np.ones((2, 2)) / 4, np.zeros((2, 2)))])
        drift[p] = np.abs(model[0].tiles[0].arrays[0].w).max()
    # s v = 0.05 * 0.2 / DW = 5.1 per read: TTv2 fires a pulse at each of its 100 reads per element pair
    assert drift[0.0] == pytest.approx(50 * DW, rel=1e-6) and drift[1.0] <= 2 * DW


CFGS = [
    T.CTTv2Config(lr=0.2, in_chop_prob=0.3, out_chop_prob=0.2, transfer_every=3),
    T.CTTv2Config(
        lr=0.2,
        in_chop_prob=0.0,
        gamma=0.3,
        units_in_mbatch=True,
        auto_scale=False,
        scale_fast_lr=True,
        fast_lr=1.0,
        scale_transfer_lr=False,
        transfer_lr=0.2,
        auto_granularity=100,
        momentum=0.9,
    ),
]


@pytest.mark.parametrize("cfg", CFGS)
def test_checkpoint_resume_is_bit_exact(cfg):
    (model, opt), (model2, opt2) = straight_and_resumed(cfg)  # noisy periphery, cycle noise, random choppers
    assert same_state((model.state_dict(), opt.state_dict()), (model2.state_dict(), opt2.state_dict()))


@pytest.mark.parametrize("cfg", CFGS)
def test_costs_add_up(cfg):
    model, opt = small_model(cfg)
    x, y = torch.rand(4, 6), torch.rand(4, 3)
    for _ in range(6):
        mse_step(model, opt, x, y)
    c = opt.costs()
    assert c["pulses"] == c["update_pulses"] + c["transfer_pulses"]
    assert c["transfer_pulses"] > 0 or cfg.auto_granularity > 0  # a 100x threshold needs longer to fill
    tiles = [t for layer in T.analog_layers(model) for t in layer.tiles]
    every = 4 if cfg.units_in_mbatch else round(cfg.transfer_every)
    assert c["transfer_reads"] == c["transfers"] == len(tiles) * (6 * 4 // every)
    lat = opt.latency_estimate()["update_ns"]
    assert lat == pytest.approx(165.9 + (6 * 4 // every) / 6 * (40 + 5 + 5.9))


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"in_chop_prob": 1.5}, "c_ttv2.in_chop_prob"),
        ({"fast_lr": float("nan")}, "c_ttv2.fast_lr"),
        ({"auto_momentum": 1.0}, "c_ttv2.auto_momentum"),
        ({"gamma": 0.2}, "gamma = 0.2 needs in_chop_prob"),
        ({"thres_scale": 0.8}, "c_ttv2.thres_scale"),
        ({"transfer_every": 0.0}, "c_ttv2.transfer_every"),
        ({"step": 0.0}, "c_ttv2.step"),
    ],
)
def test_bad_settings_are_refused_by_name(bad, field):
    model = exact_model()
    path = "." in field.split()[0]  # a field's path, as an experiment config names it, or a message
    with pytest.raises(ValueError, match=r"^trainer\." + field.split(".")[1] + ":" if path else field):
        T.build_optimizer(model, {"algorithm": "c_ttv2", **bad})
