"""A run too large for the machine is refused before it starts, naming its largest layer."""

from __future__ import annotations

import resource

import pytest

from aimc.commands.cli import EXIT_BAD_INPUT, main
from aimc.common.errors import ConfigError
from aimc.config import validate_config
from aimc.runs import memory

HUGE = {"name": "huge", "model": {"hidden": [100000, 100000]}, "trainer": {"algorithm": "analog_sgd"}}


def test_the_layers_are_read_without_memory():
    layers = memory.layers_of(validate_config(HUGE))
    assert layers == [
        ("1", "Linear 100000 x 784", 78_400_000),
        ("3", "Linear 100000 x 100000", 10**10),
        ("5", "Linear 10 x 100000", 10**6),
    ]


def test_a_1e5_by_1e5_layer_is_refused_naming_it(tmp_path, capsys):
    args = ["--set", "model.hidden=[100000, 100000]", "--quiet"]  # the default comparison, one layer 1e5 x 1e5
    assert main(["train", "--out", str(tmp_path / "run"), *args]) == EXIT_BAD_INPUT
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("aimc train: error: the model needs about ")
    assert "its largest layer 3 (Linear 100000 x 100000, 1e+10 weights)" in line
    assert not (tmp_path / "run").exists()


def test_the_estimate_against_the_address_space_limit(monkeypatch):
    """need = 1.5 x bytes per weight x weights; the limit left is RLIMIT_AS minus the address space in use."""
    cfg = validate_config({**HUGE, "model": {"hidden": [1000]}})
    per = memory.analog_bytes_per_weight(cfg)
    need = memory.HEADROOM * per * (784 * 1000 + 1000 * 10)
    monkeypatch.setattr(memory, "_system_available", lambda: 10**12)
    monkeypatch.setattr(memory, "_address_space", lambda: 10**9)
    monkeypatch.setattr(resource, "getrlimit", lambda what: (10**9 + int(need) + 1, resource.RLIM_INFINITY))
    memory.check_memory(cfg)  # fits by one byte
    monkeypatch.setattr(resource, "getrlimit", lambda what: (10**9 + int(need) - 1, resource.RLIM_INFINITY))
    with pytest.raises(ConfigError, match=r"more than the address-space limit \(RLIMIT_AS, ulimit -v\)"):
        memory.check_memory(cfg)


def test_the_measurement_leaves_torchs_generator_alone():
    import torch

    state = torch.get_rng_state()
    memory.analog_bytes_per_weight(validate_config(HUGE))
    assert torch.equal(torch.get_rng_state(), state)
