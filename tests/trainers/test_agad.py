"""AGAD (aihwkit 1.1.0 DynamicTransferCompound): the recursion against a numpy re-implementation of its
equations (docs/trainers.md), offset immunity, costs, checkpoint/resume and refused settings."""

import numpy as np
import pytest
from optimizer_helpers import DW, drive, dyadic_batches, exact_model, straight_and_resumed
from state_helpers import same_state

from aimc import trainers as T

F32 = np.float32


def _next_column(k, sweeps, n_in, n_s, c_in, switched):
    """After column k's read: its input chopper flips in the last sweep of every n_s (and is marked for the
    reference latch), then the next column, and the next sweep after the last column."""
    if sweeps % n_s + 1 == n_s:
        c_in[k] *= -1
        switched[k] = True
    k += 1
    return (0, sweeps + 1) if k == n_in else (k, sweeps)


def _reference(batches, n_in, n_out, eta, s, n_s, beta, correct=False):
    """AGAD for one tile, in float32 where the buffer and the running mean are: per rank-1 update
    A -= eta d (c_in x)^T; per update, read column k: latch Pref = M if its chopper switched since the last
    read, H += c_in[k] s (v - Pref), M = (1 - beta) M + beta v, pulses where |H| >= 1 (H reset) written into C
    only after N_s sweeps; the chopper switches in the last sweep of every N_s. `correct`: aihwkit 1.1.0's
    experimental_correct_accumulation, s / min(sweeps mod N_s + 1, 1 / dw)."""
    a = np.zeros((n_out, n_in))
    c = np.zeros((n_out, n_in))
    h, m, pref = (np.zeros((n_out, n_in), F32) for _ in range(3))
    c_in = np.ones(n_in)
    switched = np.zeros(n_in, bool)
    k = sweeps = 0
    for xb, db in batches:
        for x, d in zip(xb, db):
            a -= eta * np.outer(d, c_in * x)
            v = a[:, k].astype(F32)
            if switched[k]:
                pref[:, k], switched[k] = m[:, k], False
            s_k = s / min(sweeps % n_s + 1, 1 / DW) if correct else s
            hk = h[:, k] + F32(s_k) * (F32(c_in[k]) * (v - pref[:, k]))
            m[:, k] = (F32(1) - F32(beta)) * m[:, k] + F32(beta) * v
            hit = np.abs(hk) >= 1
            n = np.where(hit, np.clip(np.trunc(hk), -1, 1), 0)
            hk[hit] = 0
            h[:, k] = hk
            if sweeps > n_s:
                c[:, k] += n * DW
            k, sweeps = _next_column(k, sweeps, n_in, n_s, c_in, switched)
    return a, c, h, m, pref


@pytest.mark.parametrize(
    "tail, in_chop_prob, n_s, correct", [(2.0, 0.5, 2, False), (1.0, 0.5, 2, False), (1.0, 0.25, 4, True)]
)
def test_recursion_matches_a_numpy_reimplementation(tail, in_chop_prob, n_s, correct):
    n_in, n_out = 4, 3
    batches = dyadic_batches(24, 4, n_in, n_out)
    model = exact_model(n_in, n_out)
    lr, fast_lr, transfer_lr = 2.0**-4, 2.0**-4, 2.0
    opt = T.build_optimizer(
        model,
        T.AGADConfig(
            lr=lr,
            fast_lr=fast_lr,
            auto_scale=False,
            transfer_lr=transfer_lr,
            in_chop_prob=in_chop_prob,
            tail_weightening=tail,
            experimental_correct_accumulation=correct,
        ),
    )
    drive(model, opt, batches)
    a, c, h, m, pref = _reference(
        batches, n_in, n_out, fast_lr, transfer_lr * lr / DW, n_s=n_s, beta=tail / n_s, correct=correct
    )
    tile, st = model[0].tiles[0], opt.tile_state[0][0]
    assert np.abs(c).max() > 0 and np.abs(pref).max() > 0
    np.testing.assert_array_equal(tile.arrays[1].w, a.astype(F32))
    np.testing.assert_array_equal(tile.arrays[0].w, c.astype(F32))
    for key, ref in (("H", h), ("M", m), ("Pref", pref)):
        np.testing.assert_array_equal(st[key], ref, err_msg=key)


def _feedback_reference(a0, batches, eta, n_s, beta, target, period):
    """A, the fast-step scale, its estimate and its last update index of AGAD with
    experimental_fast_lr_feedback (aihwkit 1.1.0, rpu_dynamic_transfer_device.cpp) for one tile with A starting
    at a0, a read per update: before the update with t updates done (the last one taken as 0 while t <= the
    batch size), once t - last >= period, scale *= target / estimate (where nonzero), estimate = 0, last = t;
    the update A -= eta scale d (c_in x)^T; at a reference latch the estimate becomes the largest
    |Pref - M| seen."""
    n_out, n_in = a0.shape
    a = a0.astype(float)
    m, pref = np.zeros((n_out, n_in), F32), np.zeros((n_out, n_in), F32)
    c_in, switched = np.ones(n_in), np.zeros(n_in, bool)
    t = k = sweeps = last = 0
    scale, est = 1.0, 0.0
    for xb, db in batches:
        for x, d in zip(xb, db):
            if t <= len(xb):
                last = 0
            if t - last >= period:
                scale, est, last = scale * target / est if est else scale, 0.0, t
            a -= eta * scale * np.outer(d, c_in * x)
            t += 1
            v = a[:, k].astype(F32)
            if switched[k]:
                est = max(est, float(np.abs(pref[:, k] - m[:, k]).max()))
                pref[:, k], switched[k] = m[:, k], False
            m[:, k] = (F32(1) - F32(beta)) * m[:, k] + F32(beta) * v
            k, sweeps = _next_column(k, sweeps, n_in, n_s, c_in, switched)
    return a, scale, est, last


def test_fast_lr_feedback_follows_its_recursion():
    """aihwkit 1.1.0's C++-only experimental_fast_lr_feedback on an offset A (no gradient for 4 batches, so A and
    the scale are exact), then one sample with a gradient: its step is eta times the scale, here 18 (expected
    mode: the pulses round the step to a whole dw_min per element). Ideal device tau 8: w_max = n_states dw / 2 = 8,
    target = 0.1 (8 - dw); period = n_in |transfer_every| N_s = 2 * 1 * 2 updates."""
    a0 = np.array([[0.5, -0.25], [0.125, 0.375]])
    rest = [(np.ones((3, 2)) / 4, np.zeros((3, 2))) for _ in range(4)]
    batches = rest + [(np.array([[1.0, 0.5]]), np.array([[0.5, -1.0]]))]
    eta = 2.0**-9
    model = exact_model(2, 2)
    opt = T.build_optimizer(
        model,
        T.AGADConfig(
            fast_lr=eta, auto_scale=False, in_chop_prob=0.5, tail_weightening=1.0, experimental_fast_lr_feedback=True
        ),
    )
    model[0].tiles[0].arrays[1].w[...] = a0
    model[0].tiles[0].invalidate()
    drive(model, opt, rest)
    a, scale, est, last = _feedback_reference(a0, rest, eta, 2, 0.5, 0.1 * (8.0 - DW), 4)
    fb = opt.tile_state[0][0]["fb"]
    assert scale > 2  # the scale did change
    np.testing.assert_allclose(fb[:3], [scale, est, last], rtol=1e-12)
    np.testing.assert_array_equal(model[0].tiles[0].arrays[1].w, a.astype(F32))
    drive(model, opt, batches[-1:])
    a, scale, _, _ = _feedback_reference(a0, batches, eta, 2, 0.5, 0.1 * (8.0 - DW), 4)
    assert scale > 18 and np.abs(model[0].tiles[0].arrays[1].w - a).max() <= DW  # eta alone: 17 dw_min less


def test_an_offset_of_the_fast_array_is_not_transferred():
    """NC24 Eq. 12-13: with no gradient, A held at a large offset (0.5) moves nothing into C, even with a
    single read period (every sweep a chopper phase is too short for c-TTv2 to average out)."""
    model = exact_model(2, 2)
    opt = T.build_optimizer(model, T.AGADConfig(lr=0.05, auto_scale=False, fast_lr=DW, in_chop_prob=0.5))
    model[0].tiles[0].arrays[1].w[...] = 0.5
    model[0].tiles[0].invalidate()
    for _ in range(40):
        drive(model, opt, [(np.ones((2, 2)) / 4, np.zeros((2, 2)))])
    # before the first latch Pref = 0 fills H, but those sweeps (<= N_s) write nothing; afterwards v - Pref = 0
    assert np.abs(model[0].tiles[0].arrays[0].w).max() == 0
    assert opt.costs()["transfer_pulses"] == 0


@pytest.mark.parametrize(
    "cfg",
    [
        T.AGADConfig(lr=0.2, in_chop_prob=0.5, in_chop_random=True, forget_buffer=False, buffer_cap=2.0),
        T.AGADConfig(
            lr=0.2,
            in_chop_prob=0.5,
            step=0.5,
            experimental_correct_accumulation=True,
            experimental_fast_lr_feedback=True,
        ),
    ],
)
def test_checkpoint_resume_is_bit_exact_and_costs_add_up(cfg):
    (model, opt), (model2, opt2) = straight_and_resumed(cfg)
    c = opt.costs()
    assert c["pulses"] == c["update_pulses"] + c["transfer_pulses"] and c["transfer_pulses"] > 0
    tiles = sum(len(layer.tiles) for layer in T.analog_layers(model))
    assert c["transfer_reads"] == c["transfers"] == tiles * 8 * 4
    assert same_state((model.state_dict(), opt.state_dict()), (model2.state_dict(), opt2.state_dict()))


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"in_chop_prob": 0.0}, "agad.in_chop_prob"),
        ({"tail_weightening": -1.0}, "agad.tail_weightening"),
        ({"buffer_cap": float("inf")}, "agad.buffer_cap"),
        ({"experimental_correct_accumulation": "often"}, "agad.experimental_correct_accumulation"),
        ({"step": -1.0}, "agad.step"),
        ({"experimental_feedback_mod": 0}, "agad.experimental_feedback_mod"),
        ({"experimental_feedback_target": 0.0}, "agad.experimental_feedback_target"),
    ],
)
def test_bad_settings_are_refused_by_name(bad, field):
    with pytest.raises(ValueError, match=r"^trainer\." + field.split(".")[1] + ":"):
        T.build_optimizer(exact_model(), {"algorithm": "agad", **bad})
