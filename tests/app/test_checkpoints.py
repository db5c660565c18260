"""Checkpoints that cannot be loaded as they are: of another device, truncated or empty, or gone."""

from __future__ import annotations

import pytest
from torch import nn

from aimc import trainers as T


def _model(device) -> nn.Module:
    return T.convert(nn.Sequential(nn.Linear(4, 3)), T.TileConfig(device=device), seed=0)


def test_a_checkpoint_of_another_device_is_refused_naming_both():
    saved = _model("reram_sb").state_dict()
    with pytest.raises(ValueError) as err:
        _model("ecram").load_state_dict(saved)
    msg = str(err.value)
    assert msg.startswith("AnalogLinear(4, 3): the checkpoint's tiles have device 'reram_sb' (SoftBounds)")
    assert "this layer's device 'ecram' (LinearStep)" in msg
    with pytest.raises(ValueError, match=r"device 'SoftBounds', parameters [0-9a-f]{12}"):  # one field changed
        _model({"preset": "reram_sb", "dw_min": 0.005}).load_state_dict(saved)
    same = _model("reram_sb")
    same.load_state_dict(saved)  # the same device loads
    old = {k: v for k, v in saved.items()}
    old["0._extra_state"] = {k: v for k, v in old["0._extra_state"].items() if k != "device"}
    _model("ecram").load_state_dict(old)  # a checkpoint that names no device is taken as it is
