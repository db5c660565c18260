"""The steps of the single-array algorithms and the mixed weights of all, against their papers' equations on the
exact model (ideal device, expected update, perfect reads; tests/optimizer_helpers.py): the gains of the
forward weight (residual learning's W + gamma P, arXiv:2502.06309 Eq. 8; the multi-tile sum_n gamma^n W_n,
arXiv:2510.02516; RIDER's W + gamma c (P - Q~), arXiv:2602.21321), Analog SGD and the digital parameters'
SGD, mixed precision (Nandakumar et al. 2020), digital SGD and the random zero shift (arXiv:2602.21321
Algorithm 1). Rates are powers of two and inputs lie on a grid of 1/4, so results are exact; a rate, gain or
threshold off by 10% changes them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from optimizer_helpers import DW, PERFECT, drive, dyadic_batches, exact_model
from torch import nn

from aimc import trainers as T
from aimc.common import seeds
from aimc.devices import Ideal, UpdateConfig

F32 = np.float32
G = 0.375  # a gain that is exact in float32 and not a power of two

# (config, the gains of arrays 0..N in the forward weight, the sign c the fast array's reference enters with)
MIXED = [
    (T.AnalogSGDConfig(), [1.0]),
    (T.MixedPrecisionConfig(), [1.0]),
    (T.TikiTakaConfig(), [1.0, 0.0]),
    (T.TTv2Config(), [1.0, 0.0]),
    (T.ResidualConfig(gamma=G, zero_shift=False), [1.0, G]),
    (T.ResidualV2Config(gamma=G, zero_shift=False), [1.0, G]),
    (T.MultiTileConfig(n_tiles=4, gamma=G, zero_shift=False), [1.0, G, G**2, G**3]),
    (T.RiderConfig(gamma=G), [1.0, G]),
    (T.ERiderConfig(gamma=G), [1.0, G]),
    (T.CTTv2Config(gamma=G, in_chop_prob=0.0), [1.0, G]),
    (T.AGADConfig(), [1.0, 0.0]),
]


@pytest.mark.parametrize("cfg, gains", MIXED, ids=[c.algorithm for c, _ in MIXED])
def test_forward_and_backward_use_the_mixed_weight(cfg, gains):
    """y = x W_bar^T and grad_x = d W_bar with W_bar = sum_n gains_n (W_n - R_n), R_n each array's reference
    (the zero shift's or RIDER's Q~): the gradient is taken at the mixed weight."""
    n_in, n_out = 4, 3
    model = exact_model(n_in, n_out)
    T.build_optimizer(model, cfg)
    tile = model[0].tiles[0]
    rng = np.random.default_rng(0)
    w_bar = np.zeros((n_out, n_in))
    for a, g in zip(tile.arrays, gains, strict=True):
        a.w[...] = rng.integers(-8, 9, a.w.shape) * 2.0**-5
        a.reference[...] = rng.integers(-8, 9, a.w.shape) * 2.0**-6
        w_bar += g * (a.w.astype(float) - a.reference)
    tile.invalidate(layout=True)
    x = torch.tensor(rng.integers(-4, 5, (2, n_in)) / 4.0, dtype=torch.float32, requires_grad=True)
    d = rng.integers(-4, 5, (2, n_out)) / 4.0
    y = model(x)
    (y * torch.tensor(d, dtype=torch.float32)).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy() @ w_bar.T, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(x.grad.numpy(), d @ w_bar, rtol=1e-6, atol=1e-7)


def test_analog_sgd_and_the_digital_bias_take_lr():
    """Analog SGD (arXiv:2502.06309 Eq. 5 on an ideal device): W <- W - lr sum_b d_b x_b^T; the digital bias
    b <- b - lr sum_b d_b (plain SGD)."""
    lr, n_in, n_out = 2.0**-4, 4, 3
    lin = nn.Linear(n_in, n_out)
    with torch.no_grad():
        lin.weight.zero_()
        lin.bias.zero_()
    tile = T.TileConfig(
        device=Ideal(tau=8.0, dw_min=DW),
        forward=PERFECT,
        backward=PERFECT,
        update=UpdateConfig(mode="expected", desired_bl=32),
    )
    model = T.convert(nn.Sequential(lin), tile)
    opt = T.build_optimizer(model, T.AnalogSGDConfig(lr=lr))
    batches = dyadic_batches(10, 4, n_in, n_out)
    drive(model, opt, batches)
    w = -lr * sum(db.T @ xb for xb, db in batches)
    b = -lr * sum(db.sum(0) for _, db in batches)
    np.testing.assert_array_equal(model[0].tiles[0].arrays[0].w, w.astype(F32))
    np.testing.assert_array_equal(model[0].bias.detach().numpy(), b.astype(F32))


def test_digital_sgd_takes_lr():
    lr = 2.0**-3
    lin = nn.Linear(4, 3)
    w0, b0 = lin.weight.detach().clone(), lin.bias.detach().clone()
    opt = T.build_optimizer(nn.Sequential(lin), T.DigitalSGDConfig(lr=lr))
    x, g = dyadic_batches(1, 4, 4, 3)[0]
    (lin(torch.tensor(x, dtype=torch.float32)) * torch.tensor(g, dtype=torch.float32)).sum().backward()
    opt.step()
    torch.testing.assert_close(lin.weight.detach(), w0 - lr * torch.tensor(g.T @ x, dtype=torch.float32))
    torch.testing.assert_close(lin.bias.detach(), b0 - lr * torch.tensor(g.sum(0), dtype=torch.float32))


@pytest.mark.parametrize("threshold", [1.0, 2.5])
def test_mixed_precision_accumulates_and_fires_whole_pulses(threshold):
    """Nandakumar et al. 2020: X <- X - lr d^T x (digital); where |X| >= threshold dw_min, n = sign(X)
    min(floor(|X| / dw_min), BL) pulses into W and X -= n dw_min."""
    n_in, n_out, lr = 4, 3, 2.0**-7
    batches = dyadic_batches(30, 2, n_in, n_out, seed=3)
    model = exact_model(n_in, n_out)
    opt = T.build_optimizer(model, T.MixedPrecisionConfig(lr=lr, threshold=threshold))
    drive(model, opt, batches)
    w, acc = np.zeros((n_out, n_in)), np.zeros((n_out, n_in), F32)
    for xb, db in batches:
        acc -= F32(lr) * (db.T @ xb).astype(F32)
        n = np.where(np.abs(acc) >= threshold * DW, np.sign(acc) * np.minimum(np.floor(np.abs(acc) / DW), 32), 0)
        w += n * DW
        acc -= (n * DW).astype(F32)
    assert np.abs(w).max() >= 4 * DW
    np.testing.assert_array_equal(model[0].tiles[0].arrays[0].w, w.astype(F32))
    np.testing.assert_array_equal(opt.tile_state[0][0]["X"], acc)


def test_random_zero_shift_fires_n_states_pulses_of_its_stream():
    """arXiv:2602.21321 Algorithm 1: n = (w_max - w_min) / dw_min single pulses of random sign per element (its
    default count), drawn from the array's zero-shift stream; the reference is latched at the point reached."""
    tau = 2.0**-4
    model = exact_model(3, 2, device=Ideal(tau=tau, dw_min=DW))
    opt = T.build_optimizer(model, T.ResidualConfig(zero_shift_mode="random", zero_shift_cycles=None))
    tile = model[0].tiles[0]
    n = round(2 * tau / DW)
    rng = seeds.generator(tile.seed & 0x7FFFFFFF, seeds.ZERO_SHIFT, 1)
    w = np.zeros((2, 3))
    for _ in range(n):
        w = np.clip(w + (rng.integers(0, 2, (2, 3)) * 2 - 1) * DW, -tau, tau)
    assert opt.costs()["setup_pulses"] == n * 6
    np.testing.assert_array_equal(tile.arrays[1].w, w.astype(F32))
    np.testing.assert_array_equal(tile.arrays[1].reference, w.astype(F32))
