"""The transfer algorithms' recursions against numpy re-implementations of their papers' equations, on the exact
model (ideal device, expected update, perfect reads; tests/optimizer_helpers.py): Tiki-Taka (arXiv:1909.07908,
aihwkit's TransferCompound), TT-v2's buffer (arXiv:2011.10576), residual learning v1 and v2 (arXiv:2502.06309
Sec. 4-5), the multi-tile cascade (arXiv:2510.02516) and RIDER / E-RIDER with a buffer (arXiv:2602.21321).

Every rate is a power of two and every input lies on a grid of 1/4, so each product is a whole number of
dw_min (or, in the float32 buffers, an exact float32 operation): the arrays must equal the references bit
for bit, and a rate, gain or threshold off by 10% leaves a value off the grid or a pulse fired at another
read. The mixed weights' gains are pinned in test_equations_steps.py."""

from __future__ import annotations

import numpy as np
import pytest
from optimizer_helpers import DW, drive, exact_model

from aimc import trainers as T
from aimc.common import seeds
from aimc.devices import ConstantStep

F32 = np.float32
BL = 32  # the exact model's update BL: one sample or one read moves an element by at most BL dw_min


def small_batches(n_batches: int, batch: int, n_in: int, n_out: int, seed: int = 0) -> list:
    """Inputs and output gradients in {-1/2, -1/4, 0, 1/4, 1/2}: d x on a grid of 1/16, small enough that the
    fast array stays within a few dozen dw_min of 0 and a transfer never asks for more than BL pulses."""
    rng = np.random.default_rng(seed)
    return [
        (rng.integers(-2, 3, (batch, n_in)) / 4.0, rng.integers(-2, 3, (batch, n_out)) / 4.0) for _ in range(n_batches)
    ]


def pulsed_write(w: np.ndarray, cols: np.ndarray, change: np.ndarray) -> None:
    """W[:, cols] += change, where the expected update is exact: a whole number of dw_min per element, at most
    BL of them (the reference refuses other cases: the test's rates would be wrong for its purpose)."""
    steps = change / DW
    assert np.all(steps == np.round(steps)) and np.abs(steps).max() <= BL, "reference leaves the exact grid"
    w[:, cols] += change


def fire(h: np.ndarray, w: np.ndarray, cols: np.ndarray, threshold: float, most: int) -> None:
    """TT-v2's threshold transfer (arXiv:2011.10576): where |H| >= threshold dw_min, n = sign(H) min(floor(|H| /
    dw_min), most) pulses into W and H -= n dw_min (float32 buffer)."""
    hc = h[:, cols]
    hit = np.abs(hc) >= threshold * DW
    n = np.where(hit, np.sign(hc) * np.minimum(np.floor(np.abs(hc) / DW), most), 0.0)
    w[:, cols] += n * DW
    h[:, cols] = hc - (n * DW).astype(F32)


class Cycle:
    """A cyclic column pointer: the next n of n_in columns."""

    def __init__(self, n_in: int, n: int):
        self.n_in, self.n, self.at = n_in, n, 0

    def next(self) -> np.ndarray:
        cols = (self.at + np.arange(self.n)) % self.n_in
        self.at = (self.at + self.n) % self.n_in
        return cols


def two_array_reference(batches, n_in, n_out, eta, every, n_columns, write):
    """Tiki-Taka's schedule: per step P -= eta d^T x (summed over the batch), and after every `every`-th step
    the next n_columns columns J are read (v = P[:, J]) and handed to write(W, v, J)."""
    w, p = np.zeros((n_out, n_in)), np.zeros((n_out, n_in))
    cycle = Cycle(n_in, n_columns)
    for step, (xb, db) in enumerate(batches, 1):
        p -= eta * db.T @ xb
        if step % every == 0:
            cols = cycle.next()
            write(w, p[:, cols].astype(F32), cols)
    return w, p


def run(cfg, batches, n_in=3, n_out=2):
    model = exact_model(n_in, n_out)
    opt = T.build_optimizer(model, cfg)
    drive(model, opt, batches)
    return model[0].tiles[0], opt


N_IN, N_OUT = 3, 2


@pytest.mark.parametrize(
    "cfg, eta",
    [  # Tiki-Taka: P gets fast_lr (lr only steps digital parameters); residual v1: P gets lr (fast_lr None)
        (T.TikiTakaConfig(lr=2.0**-2, fast_lr=2.0**-4, transfer_lr=2.0**-1, transfer_every=2, n_columns=2), 2.0**-4),
        (T.ResidualConfig(lr=2.0**-4, gamma=0.375, transfer_lr=2.0**-1, transfer_every=3, zero_shift=False), 2.0**-4),
    ],
)
def test_direct_transfer_moves_w_by_transfer_lr_times_the_read(cfg, eta):
    """Tiki-Taka / residual learning v1: W[:, J] <- W[:, J] + transfer_lr P[:, J] every transfer_every steps
    (arXiv:1909.07908 Sec. 3; arXiv:2502.06309 Eq. 9), P not reset."""
    batches = small_batches(14, 2, N_IN, N_OUT)
    tile, opt = run(cfg, batches)
    beta = cfg.transfer_lr

    def write(w, v, cols):
        pulsed_write(w, cols, beta * v.astype(float))

    w, p = two_array_reference(batches, N_IN, N_OUT, eta, cfg.transfer_every, cfg.n_columns, write)
    assert np.abs(w).max() > 4 * DW
    np.testing.assert_array_equal(tile.arrays[1].w, p.astype(F32))
    np.testing.assert_array_equal(tile.arrays[0].w, w.astype(F32))
    assert opt.costs()["transfer_reads"] == (14 // cfg.transfer_every) * cfg.n_columns


def test_ttv2_buffer_sums_the_reads_and_fires_at_its_threshold():
    """TT-v2 (arXiv:2011.10576): H[:, J] += transfer_lr P[:, J]; whole pulses where |H| >= threshold dw_min."""
    cfg = T.TTv2Config(lr=2.0**-4, fast_lr=2.0**-5, transfer_lr=2.0**-2, threshold=2.5, transfer_bl=2)
    batches = small_batches(40, 2, N_IN, N_OUT, seed=1)
    tile, opt = run(cfg, batches)
    h = np.zeros((N_OUT, N_IN), F32)

    def write(w, v, cols):
        h[:, cols] += F32(cfg.transfer_lr) * v
        fire(h, w, cols, cfg.threshold, cfg.transfer_bl)

    w, p = two_array_reference(batches, N_IN, N_OUT, cfg.fast_lr, 1, 1, write)
    assert np.abs(w).max() >= 3 * DW
    np.testing.assert_array_equal(tile.arrays[1].w, p.astype(F32))
    np.testing.assert_array_equal(tile.arrays[0].w, w.astype(F32))
    np.testing.assert_array_equal(opt.tile_state[0][0]["H"], h)


def test_residual_v2_buffer_is_an_ema_of_the_reads_with_single_pulses():
    """Residual learning v2 (arXiv:2502.06309 Sec. 5): H[:, J] <- (1 - beta) H[:, J] + beta P[:, J]; one pulse
    of sign(H) where |H| >= threshold dw_min, H -= sign(H) dw_min."""
    cfg = T.ResidualV2Config(
        lr=2.0**-4, gamma=0.375, buffer_beta=0.375, threshold=1.5, n_columns=2, transfer_every=1, zero_shift=False
    )
    batches = small_batches(40, 2, N_IN, N_OUT, seed=2)
    tile, opt = run(cfg, batches)
    h = np.zeros((N_OUT, N_IN), F32)
    b = F32(cfg.buffer_beta)

    def write(w, v, cols):
        h[:, cols] = (F32(1.0) - b) * h[:, cols] + b * v
        fire(h, w, cols, cfg.threshold, 1)

    w, p = two_array_reference(batches, N_IN, N_OUT, cfg.lr, cfg.transfer_every, cfg.n_columns, write)
    assert np.abs(w).max() >= 3 * DW
    np.testing.assert_array_equal(tile.arrays[1].w, p.astype(F32))
    np.testing.assert_array_equal(tile.arrays[0].w, w.astype(F32))
    np.testing.assert_array_equal(opt.tile_state[0][0]["H"], h)


def test_tiki_taka_resets_follow_their_draws():
    """with_reset_prob p: after each read, the read columns of P are reset where a draw of the array's reset
    stream (aimc.common.seeds.RESET_DRAWS) is < p; the count of resets is that of the reference draws."""
    p, steps = 0.5, 60
    device = ConstantStep(dw_min=DW, dw_min_dtod=0.0, dw_min_std=0.0, up_down_dtod=0.0, reset=0.0)
    model = exact_model(N_IN, N_OUT, device=device)
    opt = T.build_optimizer(model, T.TikiTakaConfig(lr=2.0**-4, transfer_lr=2.0**-1, with_reset_prob=p))
    drive(model, opt, small_batches(steps, 1, N_IN, N_OUT))
    seed = model[0].tiles[0].array_seed(1)
    expect = sum(bool((seeds.generator(seed, k, seeds.RESET_DRAWS).uniform(size=1) < p).any()) for k in range(steps))
    assert 10 < opt.costs()["resets"] == expect


# -- the multi-tile cascade (arXiv:2510.02516) ---------------------------------------------------------------


def cascade_reference(arrays, steps, periods, rates, n_in):
    """No gradient: after step s, for n = N..1 (fastest first) where s % T_n == 0, the next column j of array n
    (its own pointer) moves array n - 1 by rate_n * W_n[:, j]."""
    cycles = [Cycle(n_in, 1) for _ in arrays]
    for s in range(1, steps + 1):
        for n in range(len(arrays) - 1, 0, -1):
            if s % periods[n - 1] == 0:
                cols = cycles[n].next()
                pulsed_write(arrays[n - 1], cols, rates[n - 1] * arrays[n][:, cols])
    return arrays


@pytest.mark.parametrize(
    "n_tiles, gamma, period_ratio, growth, periods",
    [
        (4, 0.5, None, 2.0, [4, 2, 1]),  # T_n = round(gamma^-(N - n)) (R3: period ratio 1 / gamma)
        (3, 0.5, 5.0, 2.0, [5, 1]),  # R3 Appendix K: period ratio 5
    ],
)
def test_multi_tile_cascade_follows_its_periods_and_rates(n_tiles, gamma, period_ratio, growth, periods):
    """Array n into n - 1 every T_n = round(r^(N - n)) steps at transfer_lr growth^(N - n) (R3 Algorithm 1 with
    Appendix K's rate growth); started from hand-set arrays, one step without a gradient at a time."""
    n_in, n_out, beta, steps = 2, 2, 2.0**-1, 12
    cfg = T.MultiTileConfig(
        n_tiles=n_tiles,
        gamma=gamma,
        period_ratio=period_ratio,
        transfer_lr=beta,
        transfer_lr_growth=growth,
        zero_shift=False,
    )
    model = exact_model(n_in, n_out)
    opt = T.build_optimizer(model, cfg)
    tile = model[0].tiles[0]
    rng = np.random.default_rng(4)
    start = [rng.integers(-4, 5, (n_out, n_in)) * DW for _ in range(n_tiles - 1)]
    start.append(rng.integers(-1, 2, (n_out, n_in)) * 2 * DW)  # the fastest: what beta moves by whole pulses
    for a, w in zip(tile.arrays, start):
        a.w[...] = w
    tile.invalidate()
    for _ in range(steps):
        opt.step()  # no saved batch: transfers only
    rates = [beta * growth ** (n_tiles - 1 - n) for n in range(1, n_tiles)]
    expect = cascade_reference([w.copy() for w in start], steps, periods, rates, n_in)
    assert (expect[0] != start[0]).any()
    for n, (a, w) in enumerate(zip(tile.arrays, expect)):
        np.testing.assert_array_equal(a.w, w.astype(F32), err_msg=f"array {n}")
    assert opt.periods() == periods


def test_multi_tile_gradient_goes_into_the_fastest_array():
    """The gradient step lr d^T x lands in array N alone (transfers far apart)."""
    batches = small_batches(6, 2, N_IN, N_OUT, seed=5)
    tile, _ = run(T.MultiTileConfig(lr=2.0**-4, n_tiles=3, transfer_every=100, zero_shift=False), batches)
    p = -(2.0**-4) * sum(db.T @ xb for xb, db in batches)
    np.testing.assert_array_equal(tile.arrays[2].w, p.astype(F32))
    assert not tile.arrays[0].w.any() and not tile.arrays[1].w.any()


# -- RIDER / E-RIDER with a buffer (arXiv:2602.21321 Algorithms 2 and 3) ------------------------------------


def rider_reference(batches, eta, tracking, beta, threshold, every_read, chop=None, layer_seed=0):
    """Per step P -= eta c d^T x; then read column j: v = P[:, j] - Q~[:, j], Q[:, j] += tracking (v + Q~[:, j] -
    Q[:, j]), H[:, j] += beta c v, threshold pulses into W; RIDER: Q~[:, j] = Q[:, j]. E-RIDER: after the
    step the chopper switches where the step's draw of seeds.E_RIDER_CHOPPER is < chop; then c = -c, Q~ = Q."""
    w = np.zeros((N_OUT, N_IN))
    p = np.zeros((N_OUT, N_IN))
    q, ref, h = (np.zeros((N_OUT, N_IN), F32) for _ in range(3))
    c, cycle = 1.0, Cycle(N_IN, 1)
    for step, (xb, db) in enumerate(batches, 1):
        p -= eta * c * db.T @ xb
        cols = cycle.next()
        v = p[:, cols].astype(F32) - ref[:, cols]
        q[:, cols] += F32(tracking) * (v + ref[:, cols] - q[:, cols])
        h[:, cols] += F32(beta) * (F32(c) * v)
        fire(h, w, cols, threshold, BL)
        if every_read:
            ref[:, cols] = q[:, cols]
        elif seeds.generator(seeds.E_RIDER_CHOPPER, layer_seed, step).random(1)[0] < chop:
            c, ref = -c, q.copy()
    return w, p, q, ref, h, c


@pytest.mark.parametrize("algorithm", ["rider", "e_rider"])
def test_rider_tracks_its_reference_and_buffers_the_chopped_reads(algorithm):
    eta, tracking, beta, thr = 2.0**-4, 0.375, 0.75, 1.5
    common = dict(lr=eta, tracking_rate=tracking, transfer_lr=beta, threshold=thr, gamma=0.375)
    cfg = T.RiderConfig(**common) if algorithm == "rider" else T.ERiderConfig(chop_prob=0.4, **common)
    batches = small_batches(60, 2, N_IN, N_OUT, seed=6)
    model = exact_model(N_IN, N_OUT)
    opt = T.build_optimizer(model, cfg)
    drive(model, opt, batches)
    tile, st = model[0].tiles[0], opt.tile_state[0][0]
    w, p, q, ref, h, c = rider_reference(
        batches, eta, tracking, beta, thr, algorithm == "rider", getattr(cfg, "chop_prob", None), model[0].seed
    )
    assert np.abs(w).max() >= 3 * DW and np.abs(q).max() > 0
    np.testing.assert_array_equal(tile.arrays[1].w, p.astype(F32))
    np.testing.assert_array_equal(tile.arrays[0].w, w.astype(F32))
    np.testing.assert_array_equal(st["Q"], q)
    np.testing.assert_array_equal(st["H"], h)
    np.testing.assert_array_equal(tile.arrays[1].reference, ref)
    assert st["c"] == c and list(tile.gains) == [1.0, F32(0.375) * c]


@pytest.mark.parametrize(
    "cfg",
    [
        T.TTv2Config(transfer_lr=2.0**-3, threshold=2.5, transfer_bl=1),
        T.ERiderConfig(
            transfer_lr=2.0**-3, threshold=2.5, transfer_bl=1, tracking_rate=0.5, chop_prob=1e-6, chop_random=False
        ),
    ],
    ids=["ttv2", "e_rider"],
)
def test_the_buffer_fires_at_the_first_read_that_reaches_the_threshold(cfg):
    """No gradient and P = dw_min (E-RIDER: Q~ = 0 until a chopper switch, none here): each read adds
    transfer_lr dw_min = dw_min / 8 to H, so a pulse fires at reads 20, 28, 36, ... (H = 2.5 dw_min, then
    1.5 + 8 / 8 = 2.5 again): the threshold decides the read exactly."""
    model = exact_model(1, N_OUT)
    opt = T.build_optimizer(model, cfg)
    tile = model[0].tiles[0]
    tile.arrays[1].w[...] = DW
    tile.invalidate()
    h, w, fired = np.zeros((N_OUT, 1), F32), np.zeros((N_OUT, 1)), []
    for step in range(1, 41):
        opt.step()  # no saved batch: one read and transfer of the column
        h += F32(cfg.transfer_lr) * F32(DW)
        before = w.copy()
        fire(h, w, np.array([0]), cfg.threshold, 1)
        if (w != before).any():
            fired.append(step)
        np.testing.assert_array_equal(tile.arrays[0].w, w.astype(F32), err_msg=f"read {step}")
    assert fired == [20, 28, 36]
