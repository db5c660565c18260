"""Weight modifiers and clipping of inference tiles (hardware-aware training), as aihwkit 1.1.0's
WeightModifierType and WeightClipType (definitions in `WeightModifierParameter` / `WeightClipParameter`).

A modifier returns the perturbed weights W + (W' - W).detach(): the forward and backward reads use W', the
gradient reaches W unchanged (straight-through), as aihwkit's inference tile updates its unperturbed
weights.
"""

from __future__ import annotations

from typing import Any

import torch

from aimc.trainers.inference_config import WeightClipParameter, WeightModifierParameter


def _normal(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(like.shape, generator=generator, dtype=like.dtype, device=like.device)


def _discretize(w: torch.Tensor, amax: torch.Tensor, res: float, sto_round: bool, gen: torch.Generator):
    """amax res round(w / (amax res)): levels res amax apart (stochastic rounding: floor(v + U[0, 1)))."""
    step = amax * res
    v = w / step
    if sto_round:
        v = torch.floor(v + torch.rand(w.shape, generator=gen, dtype=w.dtype, device=w.device))
    else:
        v = torch.round(v)
    return v * step


def _poly_std(w: torch.Tensor, amax: torch.Tensor, cfg: WeightModifierParameter) -> torch.Tensor:
    """std_dev amax sum_k coeffs[k] (|w| / amax)^k."""
    x = w.abs() / amax
    p = torch.zeros_like(w)
    for k, c in enumerate(cfg.coeffs):
        p = p + c * x**k
    return cfg.std_dev * amax * p


@torch.no_grad()
def modified_values(
    w: torch.Tensor, cfg: WeightModifierParameter, generator: torch.Generator, noise_model: Any = None
) -> torch.Tensor:
    """The perturbed weights W' of `cfg` (no gradient); noise_model: the tile's (for pcm_noise)."""
    kind = cfg.type
    if kind == "none" or (kind in ("copy", "drop_connect") and cfg.pdrop <= 0):
        return w
    amax = w.abs().max() if cfg.rel_to_actual_wmax else torch.tensor(cfg.assumed_wmax, dtype=w.dtype)
    amax = torch.where(amax > 0, amax, torch.ones_like(amax))
    out = w
    if kind == "add_normal":
        out = w + cfg.std_dev * amax * _normal(w, generator)
    elif kind == "mult_normal":
        out = w * (1 + cfg.std_dev * amax * _normal(w, generator))
    elif kind in ("discretize", "discretize_add_normal"):
        out = _discretize(w, amax, cfg.res, cfg.sto_round, generator)
        if kind == "discretize_add_normal":
            out = out + cfg.std_dev * amax * _normal(w, generator)
    elif kind == "poly":
        out = w + _poly_std(w, amax, cfg) * _normal(w, generator)
    elif kind == "prog_noise":
        out = torch.sign(w) * (w.abs() + _poly_std(w, amax, cfg) / cfg.g_max * _normal(w, generator)).abs()
    elif kind == "pcm_noise":
        if noise_model is None:
            raise ValueError("modifier.type: pcm_noise needs a noise model on the tile (noise_model = 'pcm')")
        out = noise_model.apply_noise(w, cfg.pcm_t_inference, generator)
    if cfg.pdrop > 0:
        keep = torch.rand(w.shape, generator=generator, dtype=w.dtype, device=w.device) >= cfg.pdrop
        out = out * keep
    return out


def modify(w: torch.Tensor, cfg: WeightModifierParameter, generator: torch.Generator, noise_model: Any = None):
    """W' in the forward pass with the gradient of W (straight-through estimator)."""
    if cfg.type == "none" and cfg.pdrop <= 0:
        return w
    return w + (modified_values(w, cfg, generator, noise_model) - w).detach()


@torch.no_grad()
def clip_bound(w: torch.Tensor, cfg: WeightClipParameter) -> float | None:
    """The symmetric clip bound of `cfg` for weights w (out, in); None: no clipping."""
    if cfg.type == "none":
        return None
    if cfg.type == "fixed_value":
        return float(cfg.fixed_value)
    if cfg.type == "layer_gaussian":
        bound = float(w.std()) * cfg.sigma
    else:
        bound = float(w.abs().amax(dim=1).mean())
    return min(bound, cfg.fixed_value) if cfg.fixed_value > 0 else bound


@torch.no_grad()
def clip_(w: torch.Tensor, cfg: WeightClipParameter) -> None:
    """Clip w in place to +- clip_bound(w, cfg)."""
    bound = clip_bound(w, cfg)
    if bound is not None:
        w.clamp_(-bound, bound)
