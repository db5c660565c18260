"""The networks beyond MNIST (ResNet-18/34/50, VGG-8, MobileNetV2 in their CIFAR forms, the user's own),
pretrained weights, and the choice of the layers that go onto tiles."""

import sys

import pytest
import torch
from torch import nn

from aimc import trainers
from aimc.common.errors import ConfigError
from aimc.config import validate_config
from aimc.models import build_model
from aimc.runs.network import analog_layer_names, build, load_pretrained

CIFAR = (3, 32, 32)


def _n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "name, params",
    # the published parameter counts of the CIFAR-10 forms (10 classes): ResNet-18 11,173,962, ResNet-34
    # 21,282,122, ResNet-50 23,520,842 (e.g. the pytorch-cifar collection); MobileNetV2: torchvision's
    # 3,504,872 at 1000 classes less 990 classes x 1281 classifier weights (the strides change no count)
    [("resnet18", 11_173_962), ("resnet34", 21_282_122), ("resnet50", 23_520_842), ("mobilenet_v2", 2_236_682)],
)
def test_parameter_counts_match_the_published_networks(name, params):
    model = build_model(validate_config({"model": {"name": name}}).model, 10, CIFAR)
    assert _n_params(model) == params
    assert model.eval()(torch.zeros(2, *CIFAR)).shape == (2, 10)


def test_vgg8_is_aihwkits_example_network():
    """Convolutions 3-48-48-96-96-144-144 (3x3, bias), three batch norms, 16 x 144 features to 384 to 10."""
    convs = [(3, 48), (48, 48), (48, 96), (96, 96), (96, 144), (144, 144)]
    expected = sum(9 * a * b + b for a, b in convs) + 2 * (48 + 96 + 144) + (2304 * 384 + 384) + (384 * 10 + 10)
    model = build_model(validate_config({"model": {"name": "vgg8"}}).model, 10, CIFAR)
    assert _n_params(model) == expected
    assert [m.in_features for m in model if isinstance(m, nn.Linear)] == [16 * 144, 384]


def test_resnet_stage_names_and_narrow_width():
    model = build_model(validate_config({"model": {"name": "resnet18", "width": 4}}).model, 100, CIFAR)
    names = dict(model.named_modules())
    assert names["layer3.0.downsample.0"].out_channels == 16 and names["fc"].in_features == 32
    assert model(torch.zeros(1, *CIFAR)).shape == (1, 100)


def test_mnist_networks_keep_their_shapes_and_adapt_to_other_inputs():
    for name, params in (("lenet5", 61706), ("r1_cnn", 80202)):
        cfg = validate_config({"model": {"name": name}}).model
        assert _n_params(build_model(cfg)) == params  # LeNet-5 and R1's CNN on 1x28x28
        assert build_model(cfg, 10, CIFAR)(torch.zeros(2, *CIFAR)).shape == (2, 10)
    assert build_model(validate_config({"model": {"hidden": [8]}}).model, 3, CIFAR)[1].in_features == 3072


def test_analog_layer_selection_by_pattern_and_type():
    cfg = {"model": {"name": "resnet18", "width": 4, "analog_layers": ["layer4.*", "fc"]}, "tile": {"max_in": 4096}}
    c = validate_config(cfg)
    torch.manual_seed(0)
    model = build_model(c.model, 10, CIFAR)
    names = analog_layer_names(model, c.model)
    assert names[0] == "layer4.0.conv1" and names[-1] == "fc" and len(names) == 6  # 4 convs, 1 downsample, fc
    typed = validate_config({"model": {"name": "resnet18", "width": 4, "analog_types": ["linear"]}}).model
    assert analog_layer_names(model, typed) == ["fc"]
    assert analog_layer_names(model, validate_config({"model": {"name": "resnet18"}}).model) is None
    analog, _ = build(c, CIFAR, 10)
    tiled = {id(m) for m in trainers.analog_layers(analog)}
    converted = [n for n, m in analog.named_modules() if id(m) in tiled]
    assert converted == names
    with pytest.raises(ConfigError, match=r"no layer matches; the layers are \['conv1', "):
        analog_layer_names(model, validate_config({"model": {"name": "resnet18", "analog_layers": ["head"]}}).model)


def test_pretrained_weights_load_before_conversion(tmp_path):
    cfg = validate_config({"model": {"name": "resnet18", "width": 4}, "trainer": {"algorithm": "sgd"}})
    torch.manual_seed(123)
    source = build_model(cfg.model, 10, CIFAR)
    torch.save(source.state_dict(), tmp_path / "w.pt")
    torch.save({"epoch": 3, "model": source.state_dict()}, tmp_path / "ckpt.pt")
    for file in ("w.pt", "ckpt.pt"):
        loaded = cfg.model_copy(update={"model": cfg.model.model_copy(update={"pretrained": str(tmp_path / file)})})
        model, _ = build(loaded, CIFAR, 10)
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), source.state_dict().values()))
    # onto tiles: the analog fc holds the pretrained weights (ideal tile, read back exactly enough)
    analog = validate_config(
        {
            "model": {"name": "resnet18", "width": 4, "analog_layers": ["fc"], "pretrained": str(tmp_path / "w.pt")},
            "tile": {"device": "ideal"},
        }
    )
    model, _ = build(analog, CIFAR, 10)
    assert torch.allclose(trainers.to_digital(model).fc.weight, source.fc.weight, atol=1e-2)


def test_pretrained_mismatch_names_the_keys(tmp_path):
    small = nn.Sequential(nn.Linear(4, 3))
    torch.save({"0.weight": torch.zeros(3, 4), "extra": torch.zeros(1)}, tmp_path / "a.pt")
    with pytest.raises(ConfigError, match=r"missing keys \['0.bias'\]; unexpected keys \['extra'\]"):
        load_pretrained(small, str(tmp_path / "a.pt"))
    torch.save({"0.weight": torch.zeros(3, 5), "0.bias": torch.zeros(3)}, tmp_path / "b.pt")
    with pytest.raises(ConfigError, match=r"shapes differ: 0.weight \(3, 5\) \(model \(3, 4\)\)"):
        load_pretrained(small, str(tmp_path / "b.pt"))
    with pytest.raises(ConfigError, match="model.pretrained: .*nowhere.pt' does not exist"):
        load_pretrained(small, str(tmp_path / "nowhere.pt"))


USER_MODEL = """
from torch import nn

def build(num_classes, in_shape, hidden=5):
    return nn.Sequential(nn.Flatten(), nn.Linear(in_shape[0] * in_shape[1] * in_shape[2], hidden), nn.ReLU(),
                         nn.Linear(hidden, num_classes))

def not_a_module(num_classes, in_shape):
    return 3
"""


def test_imported_model_is_built_by_the_users_function(tmp_path, monkeypatch):
    (tmp_path / "user_model_a.py").write_text(USER_MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("user_model_a", None)
    cfg = validate_config({"model": {"name": "import", "source": "user_model_a:build", "options": {"hidden": 7}}})
    model = build_model(cfg.model, 4, (2, 3, 3))
    assert model[1].in_features == 18 and model[1].out_features == 7 and model[3].out_features == 4
    bad = validate_config({"model": {"name": "import", "source": "user_model_a:not_a_module"}})
    with pytest.raises(ConfigError, match="model.source: user_model_a:not_a_module returned int"):
        build_model(bad.model, 4, (2, 3, 3))
    wrong = validate_config({"model": {"name": "import", "source": "user_model_a:build", "options": {"x": 1}}})
    with pytest.raises(ConfigError, match="model.source: user_model_a:build.*failed: .*'x'"):
        build_model(wrong.model, 4, (2, 3, 3))
