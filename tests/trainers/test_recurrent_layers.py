"""Analog RNN / LSTM / GRU against torch's modules on an ideal tile (outputs, state, input, bias and weight
gradients), convert's options, and an LSTM character model trained on analog tiles."""

import numpy as np
import pytest
import torch
from torch import nn

from aimc import trainers as T
from aimc.devices import Ideal, PeripheryConfig

PERFECT = T.TileConfig(
    device=Ideal(tau=2.0, dw_min=1e-3), forward=PeripheryConfig.perfect(), backward=PeripheryConfig.perfect()
)

CASES = [
    (nn.RNN, {}),
    (nn.RNN, {"nonlinearity": "relu", "num_layers": 2}),
    (nn.LSTM, {}),
    (nn.LSTM, {"num_layers": 2, "bidirectional": True, "batch_first": True}),
    (nn.LSTM, {"bias": False}),
    (nn.LSTM, {"proj_size": 4}),
    (nn.LSTM, {"num_layers": 2, "bidirectional": True, "proj_size": 3}),
    (nn.GRU, {}),
    (nn.GRU, {"num_layers": 2, "bidirectional": True}),
]


def _run(rnn, x, hx):
    """Outputs, final state and the gradients of a fixed weighted sum of them."""
    x = x.clone().requires_grad_(True)
    hx = tuple(h.clone().requires_grad_(True) for h in hx) if isinstance(hx, tuple) else hx.clone().requires_grad_(True)
    out, h_n = rnn(x, hx)
    states = h_n if isinstance(h_n, tuple) else (h_n,)
    loss = (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum()
    loss = loss + sum((s * torch.linspace(1, -0.5, s.numel()).reshape(s.shape)).sum() for s in states)
    loss.backward()
    hgrads = [h.grad for h in (hx if isinstance(hx, tuple) else (hx,))]
    return out.detach(), [s.detach() for s in states], x.grad, hgrads


@pytest.mark.parametrize(("kind", "kw"), CASES)
def test_analog_recurrent_layer_matches_torch(kind, kw):
    torch.manual_seed(0)
    rnn = kind(5, 6, **kw)
    model = T.convert(nn.ModuleList([rnn]), PERFECT)
    analog = model[0]
    assert type(analog).__name__ == "Analog" + kind.__name__
    layers = rnn.num_layers * (2 if rnn.bidirectional else 1)
    proj = getattr(rnn, "proj_size", 0)
    assert len(T.analog_layers(model)) == (3 if proj else 2) * layers
    x = torch.randn(4, 3, 5)  # (T, B, in), or (B, T, in) with batch_first
    batch = 4 if rnn.batch_first else 3
    h0 = torch.randn(layers, batch, proj or 6)
    hx = (h0, torch.randn(layers, batch, 6)) if kind is nn.LSTM else h0
    ref = _run(rnn, x, hx)
    got = _run(analog, x, hx)
    assert torch.allclose(got[0], ref[0], atol=2e-6)
    for a, b in zip(got[1], ref[1]):
        assert torch.allclose(a, b, atol=2e-6)
    assert torch.allclose(got[2], ref[2], atol=2e-6)
    for a, b in zip(got[3], ref[3]):
        assert torch.allclose(a, b, atol=2e-6)
    directions = layers // rnn.num_layers
    suffixes = [f"_l{i}" + ("_reverse" if d else "") for i in range(rnn.num_layers) for d in range(directions)]
    for k, (s, ih, hh) in enumerate(zip(suffixes, analog.ih, analog.hh)):
        subs = (("ih", ih), ("hh", hh)) + ((("hr", analog.hr[k]),) if proj else ())
        for name, sub in subs:
            xs, ds = sub.pop_batch()  # the weight gradient the optimizer applies: sum over time of d^T x
            assert np.allclose(ds.T @ xs, getattr(rnn, f"weight_{name}{s}").grad.numpy(), atol=1e-5)
            if rnn.bias and name != "hr":
                assert torch.allclose(sub.bias.grad, getattr(rnn, f"bias_{name}{s}").grad, atol=1e-5)


def test_unbatched_input_and_export():
    torch.manual_seed(1)
    lstm = nn.LSTM(3, 4, num_layers=2)
    analog = T.AnalogLSTM.from_digital(lstm, PERFECT)
    x = torch.randn(5, 3)
    (y0, (_, c0)), (y1, (h1, c1)) = lstm(x), analog(x)
    assert y1.shape == (5, 4) and h1.shape == (2, 4)
    assert torch.allclose(y0, y1, atol=2e-6) and torch.allclose(c0, c1, atol=2e-6)
    back = T.to_digital(nn.Sequential(analog))[0]
    assert isinstance(back, nn.LSTM)
    for name, p in lstm.named_parameters():
        assert torch.allclose(getattr(back, name), p, atol=1e-6)


def test_directly_built_layer_starts_from_torch_initialisation():
    torch.manual_seed(2)
    analog = T.AnalogGRU(3, 5, num_layers=2, tile_config=PERFECT)
    torch.manual_seed(2)
    ref = nn.GRU(3, 5, num_layers=2)
    for name, p in analog.to_digital().named_parameters():
        assert torch.equal(p, getattr(ref, name))


def test_an_lstm_projection_exports_and_its_states_are_checked():
    torch.manual_seed(3)
    lstm = nn.LSTM(3, 4, num_layers=2, proj_size=2)
    analog = T.convert(nn.Sequential(lstm), PERFECT, strict=True)[0]
    assert "proj_size=2" in repr(analog)
    back = T.to_digital(nn.Sequential(analog))[0]
    assert back.proj_size == 2
    for name, p in lstm.named_parameters():
        assert torch.allclose(getattr(back, name), p, atol=1e-6)
    with pytest.raises(ValueError, match=r"AnalogLSTM\(3, 4, num_layers=1\): the initial state has shape"):
        T.AnalogLSTM(3, 4)(torch.zeros(2, 1, 3), (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4)))
    with pytest.raises(ValueError, match=r"initial state has shape \(1, 1, 4\), expected \(1, 1, 2\)"):
        T.AnalogLSTM(3, 4, proj_size=2)(torch.zeros(2, 1, 3), (torch.zeros(1, 1, 4), torch.zeros(1, 1, 4)))
    with pytest.raises(ValueError, match=r"proj_size must be in \[0, hidden_size\)"):
        T.AnalogLSTM(3, 4, proj_size=4)


TEXT = "the cat sat on the mat. the dog sat on the log. the cat and the dog sat on the mat and the log. " * 4
CHARS = sorted(set(TEXT))


class CharModel(nn.Module):
    """Next-character model: one-hot characters -> LSTM(16) -> Linear."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(len(CHARS), 16, batch_first=True)
        self.head = nn.Linear(16, len(CHARS))

    def forward(self, x):
        y, _ = self.lstm(nn.functional.one_hot(x, len(CHARS)).float())
        return self.head(y)


def _batch(step: int, n: int = 8, length: int = 12):
    data = torch.tensor([CHARS.index(c) for c in TEXT])
    starts = torch.randint(0, len(data) - length - 1, (n,), generator=torch.Generator().manual_seed(step))
    x = torch.stack([data[s : s + length] for s in starts])
    return x, torch.stack([data[s + 1 : s + length + 1] for s in starts])


@pytest.mark.parametrize(
    "cfg", [T.AnalogSGDConfig(lr=0.5), T.ResidualConfig(lr=0.5, transfer_lr=0.2, zero_shift=False)]
)
def test_an_lstm_character_model_trains_on_analog_tiles(cfg):
    torch.manual_seed(0)
    model = T.convert(CharModel(), T.TileConfig(), seed=0)  # the default device, pulsed updates
    opt = T.build_optimizer(model, cfg)
    assert len(opt.layers) == 3  # W_ih, W_hh and the head

    def held_out_loss():
        model.eval()
        with torch.no_grad():
            x, y = _batch(10**6, 32)
            loss = nn.functional.cross_entropy(model(x).reshape(-1, len(CHARS)), y.reshape(-1)).item()
        model.train()
        return loss

    before = held_out_loss()
    assert before == pytest.approx(np.log(len(CHARS)), abs=0.1)  # about uniform over the 14 characters
    for step in range(60):
        x, y = _batch(step)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x).reshape(-1, len(CHARS)), y.reshape(-1)).backward()
        opt.step()
    assert held_out_loss() < before - 0.2  # 2.66 -> 2.33 (SGD), 2.32 (residual) nats


def test_a_recurrent_model_round_trips_its_state_dict(tmp_path):
    torch.manual_seed(3)
    model = T.convert(CharModel(), T.TileConfig(), seed=2)
    opt = T.build_optimizer(model, T.TikiTakaConfig(lr=0.1))
    x, y = _batch(0)
    nn.functional.cross_entropy(model(x).reshape(-1, len(CHARS)), y.reshape(-1)).backward()
    opt.step()
    torch.save(model.state_dict(), tmp_path / "m.pt")
    other = T.convert(CharModel(), T.TileConfig(), seed=2)
    other.load_state_dict(torch.load(tmp_path / "m.pt", weights_only=True))
    model.eval(), other.eval()
    with torch.no_grad():
        assert torch.equal(model(x), other(x))
    assert [len(t.arrays) for t in other.lstm.ih[0].tiles] == [2]  # Tiki-Taka's W and P came back
