"""Recurrent layers on analog tiles: `AnalogRNN`, `AnalogLSTM`, `AnalogGRU`, with torch's arguments, shapes and
gate arithmetic (nn.RNN / nn.LSTM / nn.GRU).

Each layer l and direction holds two `AnalogLinear`s: `ih`, the input projection W_ih (G*H, in) with bias
b_ih, and `hh`, the hidden projection W_hh (G*H, H) with bias b_hh, the G gates stacked in torch's order
(LSTM: i, f, g, o; GRU: r, z, n; RNN: one). Both are ordinary analog layers, so the optimizers of
`trainers.algorithms` find and update them as any other (`trainers.analog_layers`): the input projection
reads the whole sequence in one batch (T*B rows), the hidden projection one batch of B rows per time step,
and the optimizer's step takes the sum of their outer products over all time steps (the gradient of W).
The time loop and the gate non-linearities run in torch, so autograd carries the gradient through time.
"""

from __future__ import annotations

import torch
from torch import nn

from aimc.common import seeds
from aimc.trainers.config import TileConfig
from aimc.trainers.layers import AnalogLinear, refuse_unmappable


class AnalogRNNBase(nn.Module):
    """The stack of (layer, direction) cells shared by the three recurrent layers; subclasses set `gates`
    (G), `digital` (the torch class) and `cell` (one time step)."""

    gates = 1
    digital: type[nn.RNNBase] = nn.RNN
    proj_size = 0  # the LSTM's projection of h (0: none)

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        tile_config: TileConfig | None = None,
        seed: int = 0,
        *,
        init: bool = True,
    ):
        super().__init__()
        self.input_size, self.hidden_size, self.num_layers = int(input_size), int(hidden_size), int(num_layers)
        if self.num_layers < 1:
            raise ValueError(f"{type(self).__name__}: num_layers must be >= 1 (got {num_layers})")
        if not 0 <= float(dropout) < 1:
            raise ValueError(f"{type(self).__name__}: dropout must be in [0, 1) (got {dropout})")
        self.bias, self.batch_first, self.dropout = bool(bias), bool(batch_first), float(dropout)
        self.bidirectional = bool(bidirectional)
        self.seed = int(seed)
        cfg = tile_config or TileConfig()
        h, g = self.hidden_size, self.gates * self.hidden_size
        out = self.proj_size or h  # the width of the hidden state h (LSTM: its projection W_hr c-part)
        self.ih, self.hh, self.hr = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        cells = self.cells()
        for j, (layer, _) in enumerate(cells):
            n_in = self.input_size if layer == 0 else out * self.directions
            sub = seeds.layer_seed(self.seed, seeds.RECURRENT_SUB_LAYERS + 2 * j)
            self.ih.append(AnalogLinear(n_in, g, self.bias, cfg, sub, init=False))
            self.hh.append(AnalogLinear(out, g, self.bias, cfg, sub + 1, init=False))
            if self.proj_size:  # after the 2 per cell above
                sub = seeds.layer_seed(self.seed, seeds.RECURRENT_SUB_LAYERS + 2 * len(cells) + j)
                self.hr.append(AnalogLinear(h, self.proj_size, False, cfg, sub, init=False))
        if init:
            self.reset_parameters()

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    def cells(self) -> list[tuple[int, int]]:
        """(layer, direction) of each cell, in torch's order of weights and of h_n."""
        return [(layer, d) for layer in range(self.num_layers) for d in range(self.directions)]

    def label(self) -> str:
        return f"{type(self).__name__}({self.input_size}, {self.hidden_size}, num_layers={self.num_layers})"

    # -- weights ----------------------------------------------------------------------------------------
    def _suffixes(self) -> list[str]:
        return [f"_l{layer}" + ("_reverse" if d else "") for layer, d in self.cells()]

    def digital_twin(self) -> nn.RNNBase:
        """A fresh torch module of this layer's type and shape, initialised by torch."""
        extra = self.digital_options(self)
        return self.digital(
            self.input_size,
            self.hidden_size,
            self.num_layers,
            bias=self.bias,
            batch_first=self.batch_first,
            dropout=self.dropout,
            bidirectional=self.bidirectional,
            **extra,
        )

    def reset_parameters(self) -> None:
        """Weights drawn as torch draws them (uniform in +-1/sqrt(hidden_size)), from torch's generator."""
        self.set_weights(self.digital_twin())

    def set_weights(self, rnn: nn.RNNBase) -> None:
        """Write a torch recurrent module's weights and biases into the tiles and digital biases."""
        for k, (s, ih, hh) in enumerate(zip(self._suffixes(), self.ih, self.hh)):
            ih.set_weights(getattr(rnn, "weight_ih" + s), getattr(rnn, "bias_ih" + s, None))
            hh.set_weights(getattr(rnn, "weight_hh" + s), getattr(rnn, "bias_hh" + s, None))
            if self.proj_size:
                self.hr[k].set_weights(getattr(rnn, "weight_hr" + s))

    def to_digital(self) -> nn.RNNBase:
        """The equivalent torch module (effective weights, output scales folded in, noiseless)."""
        rnn = self.digital_twin()
        with torch.no_grad():
            for s, ih, hh in zip(self._suffixes(), self.ih, self.hh):
                for name, sub in (("ih", ih), ("hh", hh)):
                    w, b = sub.get_weights()
                    getattr(rnn, f"weight_{name}{s}").copy_(w)
                    if b is not None:
                        getattr(rnn, f"bias_{name}{s}").copy_(b)
                if self.proj_size:
                    getattr(rnn, f"weight_hr{s}").copy_(self.hr[self._suffixes().index(s)].get_weights()[0])
        return rnn

    @classmethod
    def unsupported(cls, rnn: nn.Module) -> str | None:
        """Why a torch recurrent module cannot become this layer, or None where it can."""
        return None

    @classmethod
    def digital_options(cls, rnn: nn.RNNBase) -> dict:
        """The constructor options of this kind that the torch module carries beyond the shared ones."""
        return {}

    @classmethod
    def from_digital(cls, rnn: nn.RNNBase, cfg: TileConfig, seed: int = 0) -> AnalogRNNBase:
        refuse_unmappable(cls, rnn)
        m = cls(
            rnn.input_size,
            rnn.hidden_size,
            rnn.num_layers,
            bias=rnn.bias,
            batch_first=rnn.batch_first,
            dropout=rnn.dropout,
            bidirectional=rnn.bidirectional,
            tile_config=cfg,
            seed=seed,
            init=False,
            **cls.digital_options(rnn),
        )
        m.set_weights(rnn)
        return m

    # -- forward ----------------------------------------------------------------------------------------
    def cell(self, gi: torch.Tensor, gh: torch.Tensor, state):
        """One time step: the new state from the input projection gi and hidden projection gh (B, G*H)."""
        raise NotImplementedError

    def _initial_state(self, hx, batch: int, x: torch.Tensor):
        """The initial state of each cell: a (B, H) tensor (LSTM: a pair), zeros where hx is None."""
        cells = self.num_layers * self.directions
        shapes = [(cells, batch, self.proj_size or self.hidden_size), (cells, batch, self.hidden_size)]  # h, c
        if hx is None:
            h, c = (x.new_zeros(s) for s in shapes)
            return [(h[k], c[k]) if self.gates == 4 else h[k] for k in range(cells)]
        parts = hx if self.gates == 4 else (hx,)
        for p, shape in zip(parts, shapes):
            if p.shape != shape:
                raise ValueError(f"{self.label()}: the initial state has shape {tuple(p.shape)}, expected {shape}")
        if self.gates == 4:
            return [(parts[0][k], parts[1][k]) for k in range(shape[0])]
        return [parts[0][k] for k in range(shape[0])]

    def forward(self, x: torch.Tensor, hx=None):
        """x (T, B, in), (B, T, in) with batch_first, or (T, in) unbatched; hx as torch's (h_0, or (h_0, c_0)
        for the LSTM). Returns (output, h_n) or (output, (h_n, c_n)), shaped as torch's."""
        if not isinstance(x, torch.Tensor) or x.dim() not in (2, 3) or x.shape[-1] != self.input_size:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"{self.label()}: got an input of shape {shape}, expected 2-D or 3-D input with "
                f"{self.input_size} features in its last dimension"
            )
        unbatched = x.dim() == 2
        if unbatched:
            x = x.unsqueeze(1)
            hx = None if hx is None else tuple(h.unsqueeze(1) for h in hx) if self.gates == 4 else hx.unsqueeze(1)
        elif self.batch_first:
            x = x.transpose(0, 1)
        steps, batch = x.shape[0], x.shape[1]
        state = self._initial_state(hx, batch, x)
        final = []
        seq = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(self.directions):
                k = layer * self.directions + d
                gi = self.ih[k](seq.reshape(steps * batch, -1)).reshape(steps, batch, -1)
                s = state[k]
                ys = [None] * steps
                for t in range(steps - 1, -1, -1) if d else range(steps):
                    h = s[0] if self.gates == 4 else s
                    s = self.cell(gi[t], self.hh[k](h), s)
                    if self.proj_size:  # h = W_hr (o tanh c)
                        s = (self.hr[k](s[0]), s[1])
                    ys[t] = s[0] if self.gates == 4 else s
                outs.append(torch.stack(ys))
                final.append(s)
            seq = torch.cat(outs, 2) if self.directions == 2 else outs[0]
            if self.dropout and self.training and layer < self.num_layers - 1:
                seq = nn.functional.dropout(seq, self.dropout, True)
        if self.gates == 4:
            h_n = (torch.stack([s[0] for s in final]), torch.stack([s[1] for s in final]))
        else:
            h_n = torch.stack(final)
        if unbatched:
            return seq[:, 0], (tuple(h[:, 0] for h in h_n) if self.gates == 4 else h_n[:, 0])
        return (seq.transpose(0, 1) if self.batch_first else seq), h_n

    def extra_repr(self) -> str:
        proj = f", proj_size={self.proj_size}" if self.proj_size else ""
        return (
            f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, bias={self.bias}, "
            f"batch_first={self.batch_first}, bidirectional={self.bidirectional}{proj}"
        )


class AnalogRNN(AnalogRNNBase):
    """Elman RNN on analog tiles (nn.RNN): h' = act(W_ih x + b_ih + W_hh h + b_hh), act tanh or relu."""

    gates = 1
    digital = nn.RNN

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh", *args, **kw):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"AnalogRNN: nonlinearity must be 'tanh' or 'relu' (got {nonlinearity!r})")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, num_layers, *args, **kw)

    @classmethod
    def digital_options(cls, rnn: nn.RNNBase) -> dict:
        return {"nonlinearity": rnn.nonlinearity}

    def cell(self, gi, gh, h):
        return torch.tanh(gi + gh) if self.nonlinearity == "tanh" else torch.relu(gi + gh)


class AnalogLSTM(AnalogRNNBase):
    """LSTM on analog tiles (nn.LSTM): gates i, f, g, o of W_ih x + b_ih + W_hh h + b_hh; c' = f c + i g,
    h' = o tanh(c'), and with proj_size > 0 h' = W_hr o tanh(c'), W_hr (proj_size, hidden) on tiles of its own
    (no bias, as torch's)."""

    gates = 4
    digital = nn.LSTM

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, *args, proj_size: int = 0, **kw):
        if not 0 <= int(proj_size) < int(hidden_size):
            raise ValueError(f"AnalogLSTM: proj_size must be in [0, hidden_size) (got {proj_size})")
        self.proj_size = int(proj_size)
        super().__init__(input_size, hidden_size, num_layers, *args, **kw)

    @classmethod
    def digital_options(cls, rnn) -> dict:
        return {"proj_size": rnn.proj_size}

    def cell(self, gi, gh, state):
        i, f, g, o = (gi + gh).chunk(4, 1)
        c = torch.sigmoid(f) * state[1] + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class AnalogGRU(AnalogRNNBase):
    """GRU on analog tiles (nn.GRU): r, z = sigmoid(W_i{r,z} x + b_i{r,z} + W_h{r,z} h + b_h{r,z}),
    n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = (1 - z) n + z h."""

    gates = 3
    digital = nn.GRU

    def cell(self, gi, gh, h):
        ir, iz, i_n = gi.chunk(3, 1)
        hr, hz, h_n = gh.chunk(3, 1)
        r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
        n = torch.tanh(i_n + r * h_n)
        return (1 - z) * n + z * h
