"""The chopper schedules, the buffer cap and the gain's share of the transfer rate of c-TTv2 and AGAD (aihwkit
1.1.0's ChoppedTransferCompound and DynamicTransferCompound, arXiv:2303.04721; docs/trainers.md) against numpy
re-implementations on the exact model (tests/optimizer_helpers.py). The recursions of the buffer are pinned in
test_c_ttv2.py and test_agad.py; these pin what they leave at defaults or draw at random."""

from __future__ import annotations

import numpy as np
import pytest
from optimizer_helpers import DW, drive, dyadic_batches, exact_model

from aimc import trainers as T
from aimc.common import seeds

N_IN, N_OUT = 4, 3
SWEEP = (np.ones((N_IN, N_IN)) / 4, np.zeros((N_IN, N_OUT)))  # one read per vector: a sweep per step, no gradient


def test_random_choppers_switch_where_their_draws_fall_below_the_probabilities():
    """in_chop_random: column k's input chopper flips after its read where that read's uniform is < in_chop_prob;
    after the read of the last column each output chopper flips where its uniform is < out_chop_prob. The
    uniforms of step t come in that order from the tile's stream (seeds.CHOPPERS, t)."""
    p_in, p_out, steps = 0.3, 0.4, 40
    model = exact_model(N_IN, N_OUT)
    opt = T.build_optimizer(model, T.CTTv2Config(auto_scale=False, fast_lr=DW, in_chop_prob=p_in, out_chop_prob=p_out))
    st, seed = opt.tile_state[0][0], model[0].tiles[0].seed & 0x7FFFFFFF
    c_in, c_out = np.ones(N_IN), np.ones(N_OUT)
    flips = 0
    for t in range(steps):
        drive(model, opt, [SWEEP])
        u = seeds.generator(seed, seeds.CHOPPERS, t).random(N_IN + N_OUT)
        c_in[u[:N_IN] < p_in] *= -1
        c_out[u[N_IN:] < p_out] *= -1
        flips += int((u[:N_IN] < p_in).sum() + (u[N_IN:] < p_out).sum())
        np.testing.assert_array_equal(st["c_in"], c_in, err_msg=f"step {t}")
        np.testing.assert_array_equal(st["c_out"], c_out, err_msg=f"step {t}")
    assert flips > 50


@pytest.mark.parametrize("config", [T.CTTv2Config, T.AGADConfig])
@pytest.mark.parametrize("p, period", [(0.24, 5), (0.26, 4)])
def test_regular_choppers_switch_every_ceil_one_over_p_sweeps(config, p, period):
    """in_chop_random false: every column's chopper flips in the last sweep of every max(ceil(1 / p), 2) sweeps
    (aihwkit 1.1.0; AGAD's N_s), so after sweep s the signs are (-1)^floor(s / period). p = 0.24 sits above 1/5
    and 0.26 above 1/4: p 10% higher makes the first period 4, p 10% lower the second 5."""
    model = exact_model(N_IN, N_OUT)
    opt = T.build_optimizer(model, config(auto_scale=False, fast_lr=DW, in_chop_prob=p, in_chop_random=False))
    st = opt.tile_state[0][0]
    for s in range(1, 13):
        drive(model, opt, [SWEEP])
        np.testing.assert_array_equal(st["c_in"], np.full(N_IN, (-1.0) ** (s // period)), err_msg=f"sweep {s}")


@pytest.mark.parametrize("beta, gamma, step, bl", [(2.0, 0.375, 1.0, 1), (2.0**-4, 0.0, 2.0, 4)])
def test_c_ttv2_transfer_rate_gain_and_write_step(beta, gamma, step, bl):
    """The buffer step per unit read is s = transfer_lr lr / dw_A, times gamma where gamma > 0 (later aihwkit's
    reading of ChoppedTransferCompound); a write of n = +-1 into C is aihwkit 1.1.0's pulsed update at lr step
    dw_C with transfer_bl slots, step pulses in expectation (exact in the expected update: 2 of 4 slots at
    probability sqrt(step / bl) on both sides). No choppers. Reference: per rank-1 update A -= eta d x^T, read
    column k (cyclic), H[:, k] += s A[:, k]; where |H| >= 1, n = trunc(H) into C and H reset."""
    lr, eta = 2.0**-4, 2.0**-4
    batches = dyadic_batches(12, 4, N_IN, N_OUT)
    model = exact_model(N_IN, N_OUT)
    cfg = T.CTTv2Config(
        lr=lr, fast_lr=eta, auto_scale=False, transfer_lr=beta, gamma=gamma, in_chop_prob=0.0, step=step, transfer_bl=bl
    )
    opt = T.build_optimizer(model, cfg)
    drive(model, opt, batches)
    s = beta * lr * (gamma if gamma > 0 else 1.0) / DW
    a, c, h = (np.zeros((N_OUT, N_IN)) for _ in range(3))
    k = 0
    for xb, db in batches:
        for x, d in zip(xb, db):
            a -= eta * np.outer(d, x)
            hk = h[:, k] + s * a[:, k]
            n = np.where(np.abs(hk) >= 1, np.clip(np.trunc(hk), -bl, bl), 0)
            assert np.abs(n).max() <= 1  # the expected write is exact for n = +-1 (or step = bl = 1)
            h[:, k] = np.where(n != 0, 0.0, hk)
            c[:, k] += n * step * DW
            k = (k + 1) % N_IN
    tile = model[0].tiles[0]
    assert np.abs(c).max() > 0 and np.abs(h).max() > 0
    np.testing.assert_array_equal(tile.arrays[1].w, a.astype(np.float32))
    np.testing.assert_array_equal(tile.arrays[0].w, c.astype(np.float32))
    np.testing.assert_array_equal(opt.tile_state[0][0]["H"], h.astype(np.float32))


def test_agad_buffer_stays_within_its_cap():
    """buffer_cap b without forget_buffer: after a crossing H <- clip(H - (1 - momentum) n, -b BL, b BL). A
    constant gradient whose reads add far more than 1 per read holds the buffer at the cap."""
    cap = 1.5
    model = exact_model(N_IN, N_OUT)
    opt = T.build_optimizer(
        model,
        T.AGADConfig(
            lr=2.0**-4, fast_lr=2.0**-6, auto_scale=False, transfer_lr=4.0, forget_buffer=False, buffer_cap=cap
        ),
    )
    x, d = np.ones((N_IN, N_IN)) / 2, np.ones((N_IN, N_OUT)) / 2
    drive(model, opt, [(x, d)] * 8)
    h = np.abs(opt.tile_state[0][0]["H"])
    assert h.max() == np.float32(cap) and (h == np.float32(cap)).sum() >= N_OUT
