"""Sweep files: grids, zipped axes and seeds expand into validated runs; errors name the axis and the field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aimc.common.errors import ConfigError
from aimc.config import validate_config
from aimc.sweeps.sweep_file import load_sweep, parse_sweep

ROOT = Path(__file__).resolve().parents[2]
BASE = {
    "trainer": {"algorithm": "analog_sgd", "lr": 0.05},
    "model": {"name": "fcn", "hidden": [8]},
    "tile": {"device": "r1_power_1"},
    "data": {"name": "mnist_small", "n_train": 20, "n_test": 20},
    "epochs": 1,
}


def sweep(**kw):
    return parse_sweep({"base": BASE, **kw})


def errors(**kw) -> str:
    with pytest.raises(ConfigError) as info:
        sweep(**kw)
    return str(info.value)


def test_grids_cross_in_order_with_seeds_innermost():
    s = sweep(
        seeds=[3, 7],
        axes=[
            {"field": "trainer.lr", "values": [0.01, 0.1]},
            {"field": "epochs", "linspace": {"start": 1, "stop": 3, "num": 3}},
        ],
    )
    assert len(s.points) == 6 and len(s.runs) == 12
    got = [(r.config.trainer.lr, r.config.epochs, r.seed) for r in s.runs]
    assert got == [(lr, ep, seed) for lr in (0.01, 0.1) for ep in (1, 2, 3) for seed in (3, 7)]
    assert [r.point for r in s.runs] == [i for i in range(6) for _ in range(2)]
    assert s.runs[0].labels == {"trainer.lr": "0.01", "epochs": "1"}
    assert isinstance(s.dims[1].values[0][0], int)  # an integer span gives integers


def test_linspace_and_logspace_match_numpy():
    s = sweep(axes=[{"field": "trainer.lr", "logspace": {"start": 1e-3, "stop": 1e-1, "num": 5}}])
    np.testing.assert_allclose([r.config.trainer.lr for r in s.runs], np.geomspace(1e-3, 1e-1, 5), rtol=1e-11)
    s = sweep(axes=[{"field": "tile.device.gamma", "linspace": {"start": 0.5, "stop": 2.0, "num": 4}}])
    assert [r.config.tile.resolved_device().gamma for r in s.runs] == [0.5, 1.0, 1.5, 2.0]


def test_zipped_axes_advance_together_and_tables_are_values():
    s = sweep(
        seeds=2,
        axes=[
            {
                "zip": [
                    {"field": "tile.device.kind", "values": ["power", "exponential"]},
                    {"field": "tile.device.gamma", "values": [0.5, 2.0]},
                ],
                "name": "device",
                "labels": ["power 0.5", "exp 2"],
            },
            {"field": "trainer", "values": [{"algorithm": "analog_sgd"}, {"algorithm": "residual", "gamma": 0.3}]},
        ],
    )
    assert len(s.points) == 4 and len(s.runs) == 8 and [r.seed for r in s.runs[:2]] == [0, 1]
    devices = [(r.config.tile.device.kind, r.config.tile.device.gamma) for r in s.runs[::2]]
    assert devices == [("power", 0.5), ("power", 0.5), ("exponential", 2.0), ("exponential", 2.0)]
    assert [r.config.trainer.algorithm for r in s.runs[::2]] == ["analog_sgd", "residual"] * 2
    assert s.dims[0].labels == ("power 0.5", "exp 2")
    assert s.dims[1].labels == ("analog_sgd", "residual(gamma=0.3)")
    assert s.runs[-1].labels == {
        "tile.device.kind": "exponential",
        "tile.device.gamma": "2",
        "trainer": "residual(gamma=0.3)",
    }


def test_run_ids_are_the_config_hash_and_stable():
    a = sweep(seeds=2, axes=[{"field": "trainer.lr", "values": [0.01, 0.1]}])
    b = sweep(seeds=2, axes=[{"field": "trainer.lr", "values": [0.01, 0.1]}])
    assert [r.config_hash for r in a.runs] == [r.config_hash for r in b.runs]
    assert len({r.config_hash for r in a.runs}) == 4
    for r in a.runs:
        assert r.config_hash == validate_config(r.config.model_dump(mode="json")).hash()
        assert r.folder == f"runs/{r.config_hash}"
    # adding a value keeps the ids of the runs that were there
    c = sweep(seeds=2, axes=[{"field": "trainer.lr", "values": [0.01, 0.1, 0.2]}])
    assert {r.config_hash for r in a.runs} < {r.config_hash for r in c.runs}


def test_no_axes_is_one_point_per_seed():
    s = sweep(seeds=3)
    assert [r.seed for r in s.runs] == [0, 1, 2] and s.points == ((),)


def test_every_point_is_validated_and_errors_name_axis_and_field():
    msg = errors(axes=[{"field": "trainer.lr", "values": [0.1, -1]}])
    assert "axis trainer.lr = '-1': trainer.lr: Input should be greater than 0" in msg
    assert "extra" in errors(axes=[{"field": "trainer.lrr", "values": [0.1]}]).lower()
    assert "axis trainer.lrr" in errors(axes=[{"field": "trainer.lrr", "values": [0.1]}])
    msg = errors(axes=[{"zip": [{"field": "trainer.lr", "values": [0.1, 0.2]}, {"field": "epochs", "values": [1, 0]}]}])
    assert "axis trainer.lr+epochs = '0.2, 0': epochs: Input should be greater than or equal to 1" in msg
    msg = errors(axes=[{"field": "trainer", "values": [{"algorithm": "nope"}]}])
    assert msg.splitlines()[1].startswith("axis trainer = 'nope': trainer:")
    msg = errors(axes=[{"field": "epochs", "linspace": {"start": 1, "stop": 2, "num": 3}}])
    assert "axis epochs = '1.5': epochs:" in msg
    assert "base config: epochs:" in parse_error({**BASE, "epochs": 0})
    no_device = {k: v for k, v in BASE.items() if k != "tile"}
    msg = str(
        pytest.raises(
            ConfigError, parse_sweep, {"base": no_device, "axes": [{"field": "tile.device.gamma", "values": [0.5]}]}
        ).value
    )
    assert (
        "axis tile.device.gamma = '0.5': tile.device.kind: Field required (the base config has no table "
        "`tile.device`" in msg
    )


def parse_error(base: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse_sweep({"base": base})
    return str(info.value)


@pytest.mark.parametrize(
    "kw, text",
    [
        (
            {"axes": [{"field": "trainer.lr", "values": [0.1], "linspace": {"start": 0, "stop": 1, "num": 2}}]},
            "axes.0: give exactly one of values, linspace, logspace",
        ),
        (
            {"axes": [{"zip": [{"field": "trainer.lr", "values": [0.1, 0.2]}, {"field": "epochs", "values": [1]}]}]},
            "axes.0: zipped axes need the same number of values",
        ),
        (
            {"axes": [{"field": "trainer.lr", "logspace": {"start": 0, "stop": 1, "num": 3}}]},
            "logspace: start and stop must be non-zero",
        ),
        ({"axes": [{"field": "trainer.lr", "value": [1]}]}, "axes.0.value: Extra inputs are not permitted"),
        ({"axes": [{"field": "trainer.lr", "values": [1, 2], "labels": ["a"]}]}, "1 labels for 2 values"),
        ({"axes": [{"field": "seed", "values": [1, 2]}]}, "axis seed: give the seeds with `seeds`"),
        (
            {"axes": [{"field": "trainer", "values": [{"algorithm": "sgd"}]}, {"field": "trainer.lr", "values": [1]}]},
            "axes trainer and trainer.lr overlap",
        ),
        (
            {"axes": [{"field": "epochs", "values": [1]}, {"field": "epochs", "values": [2]}]},
            "two axes set the config field epochs",
        ),
        ({"axes": [{"field": "trainer.lr", "values": [1, 1.0]}]}, "several values have the label '1'"),
        ({"seeds": [1, 1]}, "seeds: give at least one seed, each once"),
        ({"seeds": 0}, "seeds: a count of seeds must be at least 1"),
        ({"axs": []}, "axs: Extra inputs are not permitted"),
    ],
)
def test_sweep_file_errors(kw, text):
    assert text in errors(**kw)


def test_base_rejects_compare_and_seed():
    assert "put the trainers on an axis over `trainer`" in parse_error({**BASE, "compare": [{"algorithm": "sgd"}]})
    assert "seed is set by the sweep's `seeds`" in parse_error({**BASE, "seed": 1})


def test_base_path_is_relative_to_the_sweep_file(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "base.toml").write_text('epochs = 2\n[trainer]\nalgorithm = "sgd"\n')
    (tmp_path / "s.toml").write_text(
        'base = "configs/base.toml"\nseeds = 2\n[[axes]]\nfield = "trainer.lr"\nvalues = [0.1, 0.2]\n'
    )
    s = load_sweep(tmp_path / "s.toml")
    assert [(r.config.epochs, r.config.trainer.algorithm) for r in s.runs] == [(2, "sgd")] * 4
    (tmp_path / "s.toml").write_text('base = "missing.toml"\n')
    with pytest.raises(ConfigError, match="missing.toml"):
        load_sweep(tmp_path / "s.toml")


def test_examples_expand():
    small = load_sweep(ROOT / "examples/sweeps/small.toml")
    assert len(small.points) == 4 and len(small.runs) == 8
    table8 = load_sweep(ROOT / "examples/sweeps/table8.toml")
    assert len(table8.points) == 10 and len(table8.runs) == 30
    rows = {
        (r.config.tile.device.kind, r.config.tile.device.gamma, r.config.tile.device.tau, r.config.trainer.algorithm)
        for r in table8.runs
    }
    assert ("exponential", 2.0, 0.7, "residual") in rows and ("power", 0.5, 0.6, "analog_sgd") in rows
    assert all(r.config.data.name == "mnist" and r.config.epochs == 30 for r in table8.runs)


def test_every_example_sweep_expands_into_valid_runs():
    for path in sorted((ROOT / "examples/sweeps").glob("*.toml")):
        assert load_sweep(path).runs, path


def test_r1_table7_30ep_example_pairs_each_bound_with_its_step():
    """R1 Table 7's devices (arXiv:2502.06309): 1200 states, so dw_min = 2 tau / 1200 on each bound."""
    s = load_sweep(ROOT / "examples/sweeps/r1_table7_30ep.toml")
    devices = {(r.config.tile.device.tau, r.config.tile.device.dw_min, r.config.tile.device.dw_min_std) for r in s.runs}
    assert len(s.runs) == 24 and len(devices) == 4 and {r.config.seed for r in s.runs} == {0, 1, 2}
    assert all(abs(2 * tau / dw - 1200) < 1e-6 for tau, dw, _ in devices)
    assert {r.config.epochs for r in s.runs} == {30}


def test_table8_gamma_example_sets_the_gain_of_each_point():
    s = load_sweep(ROOT / "examples/sweeps/table8_gamma.toml")
    got = [(r.config.tile.device.kind, r.config.tile.device.gamma, r.config.trainer.gamma) for r in s.runs]
    assert got[2] == ("power", 2.0, 1.0) and got[-1] == ("exponential", 2.0, 4.0) and len(got) == 8
    assert {r.config.trainer.transfer_lr for r in s.runs} == {0.5}


def test_r3_table1_example_has_appendix_k_settings():
    """R3 (arXiv:2510.02516) Appendix K, MNIST: batch 8, lr 0.05, gains 0.5^n, transfer rates 0.1 x 1.2^k, periods
    2 x 5^k mini-batches; 3 / 4 / 6 tiles beside TT-v1, TT-v2 and mixed precision."""
    s = load_sweep(ROOT / "examples/sweeps/r3_table1.toml")
    assert all(r.config.batch_size == 8 and r.config.model.name == "lenet5" for r in s.runs)
    multi = [r.config.trainer for r in s.runs if r.config.trainer.algorithm == "multi_tile"]
    assert [t.n_tiles for t in multi] == [3, 4, 6]
    assert {(t.lr, t.gamma, t.transfer_lr, t.transfer_lr_growth, t.transfer_every, t.period_ratio) for t in multi} == {
        (0.05, 0.5, 0.1, 1.2, 2, 5)
    }
    assert {r.config.trainer.algorithm for r in s.runs} == {"sgd", "tiki_taka", "ttv2", "mixed_precision", "multi_tile"}
