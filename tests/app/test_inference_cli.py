"""`aimc inference` and the `[inference]` table: a trained run programmed onto inference tiles and read at
times after programming, over noise draws."""

from __future__ import annotations

import csv

import pytest

from aimc.commands.cli import main
from aimc.config import validate_config
from aimc.runs.inference import COLUMNS, DRAW_COLUMNS
from aimc.runs.training import train_run
from aimc.trainers import InferenceTileConfig, inference_layers

TINY = {
    "name": "r",
    "epochs": 1,
    "batch_size": 10,
    "model": {"hidden": [8], "activation": "relu"},
    "data": {"n_train": 100, "n_test": 50},
    "trainer": {"algorithm": "sgd", "lr": 0.1},
}
EXACT = '[inference]\nnoise_model = "none"\ndrift_compensation = "none"\nforward = { ideal = true }\n'


@pytest.fixture(scope="module")
def digital_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("inference") / "digital"
    final = train_run(validate_config(TINY), root)
    return root, final


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_exact_tiles_keep_the_digital_accuracy_at_every_time(digital_run, tmp_path, capsys):
    root, final = digital_run
    (tmp_path / "exact.toml").write_text(EXACT)
    code = main(
        [
            "inference",
            str(root),
            "--times",
            "1s",
            "1y",
            "--repeats",
            "2",
            "--quiet",
            "--config",
            str(tmp_path / "exact.toml"),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 0
    rows = _rows(tmp_path / "out" / "inference.csv")
    assert list(rows[0]) == list(COLUMNS) and [r["time"] for r in rows] == ["1s", "1y"]
    for r in rows:
        assert float(r["accuracy_mean"]) == pytest.approx(final["test_accuracy"])
        assert float(r["accuracy_std"]) == 0.0 and r["repeats"] == "2"
    draws = _rows(tmp_path / "out" / "inference_draws.csv")
    assert list(draws[0]) == list(DRAW_COLUMNS) and len(draws) == 4
    assert (tmp_path / "out" / "inference.png").is_file()
    assert "digital" in capsys.readouterr().out


def test_a_checkpoint_file_is_a_source(digital_run, tmp_path):
    root, _ = digital_run
    (tmp_path / "exact.toml").write_text(EXACT)
    ckpt = sorted((root / "checkpoints").glob("epoch-*.pt"))[-1]
    assert (
        main(
            [
                "inference",
                str(ckpt),
                "--times",
                "1h",
                "--repeats",
                "1",
                "--quiet",
                "--config",
                str(tmp_path / "exact.toml"),
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert len(_rows(tmp_path / "inference.csv")) == 1


def test_bad_input_is_one_line_and_status_2(digital_run, tmp_path, capsys):
    root, _ = digital_run
    assert main(["inference", str(tmp_path / "nowhere"), "--quiet"]) == 2
    assert main(["inference", str(root), "--times=0s", "--quiet"]) == 2
    (tmp_path / "bad.toml").write_text('[inference]\nnoise_model = "pcmm"\n')
    assert main(["inference", str(root), "--config", str(tmp_path / "bad.toml"), "--quiet"]) == 2
    assert "inference.noise_model" in capsys.readouterr().err


def test_inference_table_trains_on_inference_tiles(tmp_path):
    cfg = validate_config(
        {
            **TINY,
            "inference": {
                "noise_model": "none",
                "drift_compensation": "none",
                "modifier": {"type": "add_normal", "std_dev": 0.05},
            },
        }
    )
    assert cfg.hash() != validate_config(TINY).hash()
    from aimc.runs.network import build

    model, _ = build(cfg)
    assert len(inference_layers(model)) == 2
    train_run(cfg, tmp_path / "hwa")
    assert main(["inference", str(tmp_path / "hwa"), "--times", "1d", "--repeats", "1", "--quiet"]) == 0


def test_inference_table_needs_digital_sgd():
    with pytest.raises(Exception, match="trainer.algorithm = 'sgd'"):
        validate_config({**TINY, "trainer": {"algorithm": "analog_sgd"}, "inference": {}})


def test_an_analog_run_is_programmed_from_its_digital_weights(tmp_path):
    analog = {**TINY, "trainer": {"algorithm": "analog_sgd", "lr": 0.1}, "tile": {"device": "r1_power_1"}}
    train_run(validate_config(analog), tmp_path / "analog")
    from aimc.runs.inference import inference_evaluation

    rows, digital = inference_evaluation(
        tmp_path / "analog", ["1y"], repeats=1, tile_config=None, out_dir=tmp_path / "a"
    )
    assert 0.0 <= rows[0]["accuracy_mean"] <= 1.0
    exact = InferenceTileConfig(noise_model="none", drift_compensation="none", forward={"ideal": True})
    rows, digital = inference_evaluation(tmp_path / "analog", ["1y"], repeats=1, tile_config=exact, out_dir=tmp_path)
    assert rows[0]["accuracy_mean"] == pytest.approx(digital)
