"""ExperimentConfig: validation errors name the dotted field, TOML loading, overrides, schema, the default job."""

import math
import tomllib
from pathlib import Path

import pytest

from aimc.common.errors import ConfigError
from aimc.config import ExperimentConfig, apply_overrides, config_schema, default_job, load_config, validate_config
from aimc.toml_writer import to_toml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "configs"


def _error(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        validate_config(data)
    return str(info.value)


def test_out_of_range_value_names_the_field():
    assert "trainer.lr: Input should be greater than 0 (got -1)" in _error({"trainer": {"algorithm": "sgd", "lr": -1}})
    assert "compare.1.lr: Input should be greater than 0" in _error(
        {"compare": [{"algorithm": "sgd"}, {"algorithm": "analog_sgd", "lr": 0}]}
    )
    assert "model.hidden.0: Input should be greater than or equal to 1" in _error({"model": {"hidden": [0]}})


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize(
    "field,data",
    [
        ("trainer.lr", lambda v: {"trainer": {"algorithm": "analog_sgd", "lr": v}}),
        ("trainer.transfer_lr", lambda v: {"trainer": {"algorithm": "residual", "transfer_lr": v}}),
        ("tile.device.dw_min", lambda v: {"tile": {"device": {"kind": "power", "dw_min": v}}}),
        ("tile.device.gamma", lambda v: {"tile": {"device": {"kind": "power", "gamma": v}}}),
        ("tile.forward.out_noise", lambda v: {"tile": {"forward": {"out_noise": v}}}),
    ],
)
def test_non_finite_numbers_are_refused_by_field(field, data, value):
    """JSON (config.json, which --resume reads) has no NaN or infinity, and no device or rate means one."""
    assert f"{field}: Input should be a finite number" in _error(data(value))


@pytest.mark.parametrize(
    "field,data",
    [
        ("trainer.lr", {"trainer": {"algorithm": "analog_sgd", "lr": 1e300}}),
        ("compare.0.transfer_lr", {"compare": [{"algorithm": "residual", "transfer_lr": 1e39}]}),
        ("tile.device.w_max", {"tile": {"device": {"kind": "SoftBounds", "w_max": 3.5e38}}}),
        (
            "tile.device.w",
            {
                "tile": {
                    "device": {
                        "kind": "tabulated",
                        "w": [-1e300, 1.0],
                        "q_plus_values": [1, 1],
                        "q_minus_values": [1, 1],
                    }
                }
            },
        ),
    ],
)
def test_numbers_beyond_float32_are_refused_by_field(field, data):
    """The arrays and torch compute in float32, whose largest finite value is 3.4028235e38 (IEEE 754)."""
    msg = _error(data)
    assert field.rsplit(".", 1)[0] in msg and "beyond float32's range" in msg


@pytest.mark.parametrize(
    "field,data",
    [
        ("epochs", {"epochs": True}),
        ("trainer.lr", {"trainer": {"algorithm": "sgd", "lr": True}}),
        ("model.hidden.0", {"model": {"hidden": [False, 10]}}),
        ("batch_size", {"batch_size": "10"}),
        ("tile.device.dw_min", {"tile": {"device": {"kind": "power", "dw_min": "0.1"}}}),
    ],
)
def test_no_coercion_across_types(field, data):
    """`epochs = true` is not one epoch and a quoted number is not a number."""
    msg = _error(data)
    assert msg.splitlines()[1].startswith(f"{field}: Input should be a valid")


def test_wrong_key_names_the_field():
    msg = _error({"trainer": {"algorithm": "residual", "gama": 1}, "epoch": 3})
    assert "trainer.gama: Extra inputs are not permitted" in msg
    assert "epoch: Extra inputs are not permitted" in msg
    assert "model.hidden: Extra inputs are not permitted" in _error({"model": {"name": "lenet5", "hidden": [3]}})


def test_unknown_device_preset_and_bad_device_field():
    msg = _error({"tile": {"device": "r1_power_7"}})
    assert msg.splitlines()[1].startswith("tile.device: unknown device 'r1_power_7'") and "r1_power_1" in msg
    msg = _error({"tile": {"device": {"kind": "power", "gamma": -1, "tau": 0.6, "dw_min": 1e-3}}})
    assert "tile.device.gamma: Input should be greater than 0 (got -1)" in msg


def test_cross_field_rules():
    assert "trainer: give either `trainer` or `compare`" in _error(
        {"trainer": {"algorithm": "sgd"}, "compare": [{"algorithm": "sgd"}]}
    )
    assert "data.path: mnist_small is shipped" in _error({"data": {"name": "mnist_small", "path": "/x"}})


def test_toml_errors_name_the_file_and_field(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[trainer]\nalgorithm = 'analog_sgd'\nlr = 0\n")
    with pytest.raises(ConfigError, match=r"(?s)bad\.toml.*trainer\.lr: Input should be greater than 0"):
        load_config(bad)
    bad.write_text("epochs = = 3\n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match=r"config file '.*' is a directory, not a TOML file"):
        load_config(tmp_path)


def test_apply_overrides():
    base = {"tile": {"device": "r1_power_1"}, "compare": [{"algorithm": "sgd"}, {"algorithm": "residual"}]}
    out = apply_overrides(base, {"tile.device.gamma": 2, "compare.1.gamma": 0.3, "data.n_train": 100})
    assert base["tile"]["device"] == "r1_power_1"  # the input is not modified
    assert out["tile"]["device"]["kind"] == "power" and out["tile"]["device"]["gamma"] == 2
    assert out["compare"][1]["gamma"] == 0.3 and out["data"] == {"n_train": 100}
    cfg = validate_config(out)
    assert cfg.tile.resolved_device().gamma == 2 and cfg.compare[1].gamma == 0.3
    with pytest.raises(ConfigError, match="'5' is not an index of a list of 2"):
        apply_overrides(base, {"compare.5.lr": 1})
    with pytest.raises(ConfigError, match="not a table"):
        apply_overrides({"epochs": 3}, {"epochs.x": 1})


def test_schema_and_hash():
    schema = config_schema()
    assert {"tile", "trainer", "compare", "model", "data", "epochs"} <= set(schema["properties"])
    a, b = validate_config({"seed": 1}), validate_config({"seed": 2})
    assert a.hash() != b.hash() and a.hash() == validate_config({"seed": 1}).hash()


def test_fields_added_later_keep_the_hash_of_existing_runs():
    """Runs written before the noise-management fields nm_assumed_wmax and nm_decay existed resume and are not
    rerun by sweeps: at their defaults the fields stay out of the hash (the values below are the hashes of
    these configs as the code before them computed), and set to another value they enter it."""
    assert load_config(EXAMPLES / "default.toml").hash() == "08811ba2b3757454"
    assert load_config(EXAMPLES / "inference_hwa.toml").hash() == "7714f700933788dc"
    base = validate_config({"tile": {"forward": {}}})
    for key, value in (("nm_decay", 0.01), ("nm_assumed_wmax", 1.0)):
        assert validate_config({"tile": {"forward": {key: value}}}).hash() != base.hash(), key


def test_resolved_config_round_trips_through_toml():
    cfg = default_job()
    again = validate_config(tomllib.loads(to_toml(cfg.model_dump(mode="json"))))
    assert again == cfg and again.hash() == cfg.hash()


def test_default_job_matches_its_example_and_examples_validate():
    assert load_config(EXAMPLES / "default.toml").hash() == default_job().hash()
    labels = [label for label, _ in default_job().runs()]
    assert labels == ["sgd", "analog_sgd", "residual"]
    for path in sorted(EXAMPLES.glob("*.toml")):
        assert isinstance(load_config(path), ExperimentConfig), path


def test_a_device_table_can_start_from_a_preset():
    """`{preset = ..., field = ...}` is the preset with that field changed and every other field the preset's;
    a `kind` beside it, an unknown preset or a field the family lacks is refused by name."""
    from aimc.devices import get_preset

    cfg = validate_config({"tile": {"device": {"preset": "aihwkit_reram_es", "write_noise_std": 0.0}}})
    expected = get_preset("aihwkit_reram_es").model_copy(update={"write_noise_std": 0.0})
    assert cfg.tile.device == expected and get_preset("aihwkit_reram_es").write_noise_std == 75.0
    for device, message in [
        ({"preset": "r1_exp_9"}, "tile.device: unknown device preset 'r1_exp_9'"),
        ({"preset": "ideal", "kind": "ideal"}, "give either preset ('ideal') or kind"),
        ({"preset": "aihwkit_ecram", "gama": 1.0}, "tile.device.gama: Extra inputs"),
    ]:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            validate_config({"tile": {"device": device}})


def test_the_toml_writer_leaves_out_none_and_names_it():
    text = to_toml({"a": 1, "b": None, "t": {"c": None, "d": [1.5, float("inf")]}, "l": [{"e": None, "f": "x"}]})
    assert text.splitlines()[0] == "# none (TOML has no null; see config.json): b, l.0.e, t.c"
    assert tomllib.loads(text) == {"a": 1, "t": {"d": [1.5, float("inf")]}, "l": [{"f": "x"}]}
