"""Config validation names the field; presets and device files; the CLI."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest
from conftest import FAMILY_CONFIGS

from aimc.common.errors import ConfigError
from aimc.devices import (
    DEVICE_KINDS,
    PRESETS,
    UNIT_CELL_PRESETS,
    PeripheryConfig,
    UpdateConfig,
    device_schema,
    load_device,
    parse_device,
)

# a value out of range (or of the wrong kind) for one field of each family
BAD_VALUES = {
    "ideal": ("tau", -1.0),
    "linear": ("c", 1.5),
    "power": ("gamma", 0.0),
    "exponential": ("gamma_dtod", -0.1),
    "ConstantStep": ("dw_min_dtod", -0.5),
    "LinearStep": ("gamma_up_dtod", -1.0),
    "SoftBounds": ("gamma_up", 2.0),
    "ExpStep": ("up_down", 1.5),
    "PowStep": ("pow_gamma", 0.0),
    "PiecewiseStep": ("piecewise_up", [1.0]),
    "tabulated": ("q_plus_values", "high"),
    "SoftBoundsReference": ("reference_std", -0.1),
    "PowStepReference": ("write_noise_std", 1.0),
}


def test_every_family_has_a_bad_value_case():
    assert set(BAD_VALUES) == set(DEVICE_KINDS)


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_unknown_key_is_named(kind):
    with pytest.raises(ConfigError, match=r"device\..*bogus_field.*Extra inputs"):
        parse_device(dict(FAMILY_CONFIGS[kind], bogus_field=1))


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_out_of_range_value_is_named(kind):
    field, value = BAD_VALUES[kind]
    with pytest.raises(ConfigError) as err:
        parse_device(dict(FAMILY_CONFIGS[kind], **{field: value}))
    assert f".{field}" in str(err.value)
    assert f"\ndevice.{field}: " in str(err.value)  # the path of an experiment config, without the tag


def test_exponential_curvature_beyond_float64_is_named():
    """R1's exponential step expm1(g v) / expm1(g) is inf / inf (NaN weights) once expm1(g) overflows float64,
    g > 709.8 (math.expm1(710) raises OverflowError); the config refuses g > 700."""
    with pytest.raises(OverflowError):
        math.expm1(710.0)
    parse_device(dict(FAMILY_CONFIGS["exponential"], gamma=700.0))
    with pytest.raises(ConfigError, match=r"\ndevice\.gamma: Input should be less than or equal to 700"):
        parse_device(dict(FAMILY_CONFIGS["exponential"], gamma=710.0))


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_negative_granularity_is_named(kind):
    with pytest.raises(ConfigError, match=r"dw_min: Input should be greater than 0"):
        parse_device(dict(FAMILY_CONFIGS[kind], dw_min=-1e-3))


@pytest.mark.parametrize(
    "cfg,names",
    [
        (dict(kind="SoftBounds", w_min=0.5, w_max=0.2), ["w_min", "w_max"]),
        (dict(kind="PiecewiseStep", piecewise_up=[1, 1, 1], piecewise_down=[1, 1]), ["piecewise_up", "piecewise_down"]),
        (dict(kind="PiecewiseStep", piecewise_up=[1, -1], piecewise_down=[1, 1]), ["piecewise"]),
        (dict(kind="tabulated", w=[0, 1, 0.5], q_plus_values=[1, 1, 1], q_minus_values=[1, 1, 1]), ["w must"]),
        (dict(kind="tabulated", w=[0, 1], q_plus_values=[1, 1, 1], q_minus_values=[1, 1]), ["q_plus_values"]),
        (dict(kind="tabulated", w=[0, 1], q_plus_values=[1, -1], q_minus_values=[1, 1]), ["response values"]),
        (dict(kind="tabulated", w=[0, 1], q_plus_values=[1, 1]), ["q_minus_values", "Field required"]),
        (dict(kind="nonsense"), ["kind", "nonsense"]),
        (dict(tau=1.0), ["kind"]),
    ],
)
def test_cross_field_errors_name_the_fields(cfg, names):
    with pytest.raises(ConfigError) as err:
        parse_device(cfg)
    for n in names:
        assert n in str(err.value)


def test_error_path_prefix_is_the_caller_s():
    with pytest.raises(ConfigError, match=r"\ntile\.device\.c: "):  # the family's tag is not a field
        parse_device(dict(kind="linear", c=2.0), where="tile.device")


@pytest.mark.parametrize(
    "model,field,value",
    [
        (UpdateConfig, "desired_bl", 2000),
        (UpdateConfig, "mode", "fast"),
        (PeripheryConfig, "inp_bits", 0),
        (PeripheryConfig, "out_noise", -1),
    ],
)
def test_update_and_periphery_configs_name_the_field(model, field, value):
    with pytest.raises(ValueError, match=field):
        model(**{field: value})
    with pytest.raises(ValueError, match="extra"):
        model(**{"bogus": 1})


def test_schema_lists_every_kind():
    text = json.dumps(device_schema())
    for kind in DEVICE_KINDS:
        assert f'"{kind}"' in text


# -- presets and device files --------------------------------------------------------------------------


def test_presets_cover_the_issue_s_devices():
    names = set(PRESETS)
    for wanted in ("reram", "ecram", "pcm", "capacitor", "r1_", "r3_"):
        assert any(wanted in n for n in names), wanted
    for name, p in PRESETS.items():
        assert p.source and p.description, name


def test_preset_sources_name_every_field_once():
    """`aimc devices --sources`: each field of a preset appears once, under its source or the family defaults."""
    for name, p in PRESETS.items():
        text = p.sources()
        for field in p.device.model_dump():
            if field != "kind":
                assert len(re.findall(rf"(?<![\w]){field}=", text)) == 1, (name, field)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_round_trips_through_a_file(name, tmp_path):
    dev = load_device(name)
    assert dev is PRESETS[name].device
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"device": dev.model_dump()}))
    assert load_device(str(path)) == dev
    assert load_device(dev.model_dump()) == dev
    assert dev.n_states > 1


def test_load_device_toml_and_inline(tmp_path):
    path = tmp_path / "dev.toml"
    path.write_text('kind = "linear"\ntau = 0.8\nc = 0.1\n')
    dev = load_device(str(path))
    assert dev.kind == "linear" and dev.tau == 0.8 and dev.symmetric_point() == pytest.approx(0.08)


def test_load_device_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown device 'no_such_preset'"):
        load_device("no_such_preset")
    with pytest.raises(ConfigError, match="does not exist"):
        load_device(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_device(str(bad))
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("kind = = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_device(str(bad_toml))
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"device": {"kind": "linear", "tua": 1.0}}))
    with pytest.raises(ConfigError, match=r"wrong\.json.*tua"):
        load_device(str(wrong))


# -- CLI -----------------------------------------------------------------------------------------------


def _cli(*args, cwd):
    """The installed `aimc` CLI, run from a folder that is not the repository."""
    return subprocess.run([sys.executable, "-m", "aimc", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_cli_devices_lists_every_preset(tmp_path):
    out = _cli("devices", "--sources", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for name, p in PRESETS.items():
        row = next(line for line in lines if line.split()[:1] == [name])
        assert p.device.kind in row and f"{p.device.n_states:.0f}" in row.split()
        assert f"{name}:\n{p.sources()}" in out.stdout and p.source in p.sources()
    for name, p in UNIT_CELL_PRESETS.items():
        assert any(line.split()[:1] == [name] and p.description in line for line in lines)
        assert f"{name}:\n{p.sources()}" in out.stdout


def test_cli_version(tmp_path):
    import aimc

    out = _cli("--version", cwd=tmp_path)
    assert out.returncode == 0
    assert out.stdout.strip() == f"aimc {aimc.__version__}"


@pytest.mark.parametrize("kind", ["power", "SoftBounds", "PowStep", "tabulated"])
def test_non_finite_numbers_are_refused_by_name(kind):
    with pytest.raises(ConfigError, match=r"dw_min: Input should be a finite number \(got inf\)"):
        parse_device(dict(FAMILY_CONFIGS[kind], dw_min=math.inf))
    with pytest.raises(ValueError, match="out_noise"):
        PeripheryConfig(out_noise=math.nan)
