"""Multi-tile residual learning's warm start (R3, arXiv:2510.02516, Algorithm 1 lines 1-18): the loss-plateau
rule, the one-array-at-a-time transfers, the switch to the cascade, checkpoint/resume and the training loop's
epoch hook."""

import io
import logging

import numpy as np
import pytest
import torch
from optimizer_helpers import exact_model

from aimc import trainers as T
from aimc.config import validate_config
from aimc.runs.run_folder import RunFolder, read_jsonl
from aimc.runs.training import train_run
from aimc.trainers.algorithms.multi_tile import loss_plateau


@pytest.mark.parametrize(
    "losses, switches, plateau",
    [
        ([1.0], 0, False),  # aggressive: one loss is not enough history
        ([1.0, 0.9], 0, False),  # the loss fell
        ([1.0, 0.9, 0.9], 3, False),  # equal is not a rise
        ([1.0, 0.9, 0.95], 3, True),  # a rise, before the fifth switch
        ([1.0, 0.9, 0.95, 0.8, 0.85], 4, False),  # mild: fewer than 6 losses
        ([1.0, 0.9, 0.95, 0.8, 0.85, 0.7], 4, True),  # 2 rises among the last 5 changes
        ([1.0, 1.1, 0.95, 0.8, 0.85, 0.7, 0.6], 4, False),  # the first rise lies before the last 5 changes
        ([1.0, 0.9, 0.8, 0.7, 0.6, 0.65], 5, False),  # one rise
    ],
)
def test_loss_plateau_follows_r3_algorithm_1(losses, switches, plateau):
    assert loss_plateau(losses, switches) is plateau


def _warm_opt(**kw):
    model = exact_model(4, 3)
    cfg = T.MultiTileConfig(
        n_tiles=3,
        lr=0.1,
        zero_shift=False,
        warm_start=True,
        transfer_every=1,
        period_ratio=2,
        n_columns=4,
        transfer_lr=0.5,
        **kw,
    )
    return model, T.build_optimizer(model, cfg)


def _moves(model, opt) -> list[bool]:
    """Which arrays one step without a gradient (transfers only) moves, with the fastest array held at 1/16
    (a transfer at rate 0.5 moves 16 dw_min, within one pulse train of BL 32)."""
    tile = model[0].tiles[0]
    tile.arrays[2].set_weights(np.full((3, 4), 1 / 16, np.float32))
    tile.invalidate()
    before = [a.weights.copy() for a in tile.arrays]
    opt.step()  # no saved batch: no gradient pulses, only the transfers due at this step
    return [not np.array_equal(b, a.weights) for b, a in zip(before, tile.arrays)]


def test_warm_start_fills_the_arrays_one_at_a_time_then_cascades(caplog):
    model, opt = _warm_opt()
    assert opt.warm_array == 0 and opt.costs()["warm_start_array"] == 0
    assert _moves(model, opt) == [True, False, False]  # array 2 -> array 0 at every step (T_N = 1)
    np.testing.assert_allclose(model[0].tiles[0].arrays[0].weights, 0.5 / 16)  # transfer_lr * read
    opt.end_epoch(1.0)
    opt.end_epoch(0.9)
    assert opt.warm_array == 0 and _moves(model, opt) == [True, False, False]
    with caplog.at_level(logging.WARNING, logger="aimc.trainers"):
        opt.end_epoch(0.95)  # the loss rose: switch to array 1
    assert opt.warm_array == 1 and "plateaued after epoch 3" in caplog.text and "array 1" in caplog.text
    assert _moves(model, opt) == [False, True, False]
    opt.end_epoch(0.96)  # rose again: the warm start is over
    assert opt.warm_array == 2 and opt.costs()["warm_start_array"] == 2 and "warm start is over" in caplog.text
    assert opt.steps == 3  # the cascade: 2 -> 1 every step, 1 -> 0 every second step (periods [2, 1])
    assert opt.periods() == [2, 1]
    assert _moves(model, opt) == [True, True, False]  # step 4
    assert _moves(model, opt) == [False, True, False]  # step 5
    opt.end_epoch(2.0)  # no more switches
    assert opt.warm_array == 2 and opt.epoch_losses == [1.0, 0.9, 0.95, 0.96]


def test_without_warm_start_the_cascade_runs_from_the_first_step():
    model = exact_model(4, 3)
    opt = T.build_optimizer(
        model,
        T.MultiTileConfig(n_tiles=3, zero_shift=False, transfer_every=1, period_ratio=1, n_columns=4, transfer_lr=0.5),
    )
    assert "warm_start_array" not in opt.costs()
    assert _moves(model, opt) == [True, True, False]
    opt.end_epoch(1.0)
    opt.end_epoch(2.0)
    assert opt.warm_array == 2 and opt.epoch_losses == []


def test_warm_start_state_survives_a_checkpoint():
    model, opt = _warm_opt()
    for loss in (1.0, 1.1, 1.0):
        opt.end_epoch(loss)
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=False)
    model2, opt2 = _warm_opt()
    model2.load_state_dict(state["model"])
    opt2.load_state_dict(state["opt"])
    assert opt2.warm_array == 1 and opt2.epoch_losses == [1.0, 1.1, 1.0]
    assert _moves(model2, opt2) == _moves(model, opt) == [False, True, False]
    opt2.end_epoch(1.05)
    assert opt2.warm_array == 2


def test_the_training_loop_hands_each_epoch_loss_to_the_warm_start(tmp_path):
    """A run's metrics: the array of each epoch is the one R3's rule picks from the recorded training losses
    (at this rate the loss rises after epoch 4 here, so the run switches once)."""
    cfg = validate_config(
        {
            "name": "w",
            "epochs": 5,
            "batch_size": 10,
            "model": {"hidden": [8]},
            "data": {"n_train": 100, "n_test": 50},
            "tile": {"device": "r3_10_states"},
            "trainer": {
                "algorithm": "multi_tile",
                "n_tiles": 3,
                "lr": 4.0,
                "transfer_lr": 1.0,
                "zero_shift": False,
                "warm_start": True,
            },
        }
    )
    train_run(cfg, tmp_path / "run")
    records = read_jsonl(RunFolder(tmp_path / "run").metrics_path)[1:]
    losses, target = [], 0
    for rec in records:
        assert rec["warm_start_array"] == target, records
        losses.append(rec["train_loss"])
        target += int(target < 2 and loss_plateau(losses, target))
