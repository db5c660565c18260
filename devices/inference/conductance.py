"""Weight <-> conductance mappings of the inference noise models (aihwkit 1.1.0, inference/converter/
conductance.py: SinglePairConductanceConverter and SingleDeviceConductanceConverter).

A converter maps a weight tensor to the target conductances (in uS) of the devices that store it, with a
per-tensor scale, and maps (noisy) conductances back to weights with the same scale. The scale is fixed by
the tensor itself (its largest |w|, or its range), so converting the same weights twice gives the same
conductances.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

ZERO_CLIP = 1e-7
"""Smallest max|w| used for the scale, so that an all-zero tensor maps to g_min."""

ConversionParams = dict[str, torch.Tensor]
"""What convert_back_to_weights needs of the forward mapping (the scale, and the offset of a single device)."""


def check_conductance_range(owner: str, g_max: float, g_min: float) -> None:
    """Raise a one-line ValueError unless 0 <= g_min < g_max (uS)."""
    if not g_max > 0.0:
        raise ValueError(f"{owner}.g_max: must be positive (uS), got {g_max}")
    if not g_min >= 0.0:
        raise ValueError(f"{owner}.g_min: must be >= 0 (uS), got {g_min}")
    if not g_min < g_max:
        raise ValueError(f"{owner}.g_min: must be smaller than g_max = {g_max} uS, got {g_min}")


class ConductanceConverter:
    """A weight <-> conductance mapping: the device conductances g_max and g_min (uS) bound the targets."""

    g_max: float
    g_min: float

    def convert_to_conductances(self, weights: torch.Tensor) -> tuple[list[torch.Tensor], ConversionParams]:
        """Target conductances (uS), one tensor per device of a cross-point, and the params to map back."""
        raise NotImplementedError

    def convert_back_to_weights(self, conductances: list[torch.Tensor], params: ConversionParams) -> torch.Tensor:
        """Weights of the conductances (uS), with the params of convert_to_conductances."""
        raise NotImplementedError


@dataclass
class SinglePairConductanceConverter(ConductanceConverter):
    """Two devices per cross-point, g+ for positive and g- for negative weights, the other one at g_min.

    scale = (g_max - g_min) / max(max|w|, 1e-7) (uS per weight unit), g+ = clip(scale w, 0, g_max) + g_min,
    g- = clip(-scale w, 0, g_max) + g_min; back: w = ((g+ - g_min) - (g- - g_min)) / scale.
    """

    g_max: float = 25.0
    g_min: float = 0.0

    def __post_init__(self) -> None:
        check_conductance_range(type(self).__name__, self.g_max, self.g_min)

    @torch.no_grad()
    def convert_to_conductances(self, weights: torch.Tensor) -> tuple[list[torch.Tensor], ConversionParams]:
        scale_ratio = (self.g_max - self.g_min) / weights.abs().max().clamp(min=ZERO_CLIP)
        scaled = weights * scale_ratio
        g_plus = scaled.clamp(min=0.0, max=self.g_max) + self.g_min
        g_minus = (-scaled).clamp(min=0.0, max=self.g_max) + self.g_min
        return [g_plus, g_minus], {"scale_ratio": scale_ratio}

    @torch.no_grad()
    def convert_back_to_weights(self, conductances: list[torch.Tensor], params: ConversionParams) -> torch.Tensor:
        if len(conductances) != 2:
            raise ValueError(f"conductances: a single pair needs 2 tensors, got {len(conductances)}")
        g_plus, g_minus = conductances
        return ((g_plus - self.g_min) - (g_minus - self.g_min)) / params["scale_ratio"]


@dataclass
class SingleDeviceConductanceConverter(ConductanceConverter):
    """One bidirectional device per cross-point: the weight range [min w, max w] maps linearly onto
    [g_min, g_max] (defaults 9.0 and 88.199997 uS, aihwkit's CMO/HfOx ReRAM range).

    scale = (g_max - g_min) / max(max w - min w, 1e-7), g = (w - min w) scale + g_min;
    back: w = min w + (g - g_min) / scale.
    """

    g_max: float = 88.199997
    g_min: float = 9.0

    def __post_init__(self) -> None:
        check_conductance_range(type(self).__name__, self.g_max, self.g_min)

    @torch.no_grad()
    def convert_to_conductances(self, weights: torch.Tensor) -> tuple[list[torch.Tensor], ConversionParams]:
        w_min = weights.min()
        scale_ratio = (self.g_max - self.g_min) / (weights.max() - w_min).clamp(min=ZERO_CLIP)
        return [(weights - w_min) * scale_ratio + self.g_min], {"scale_ratio": scale_ratio, "min": w_min}

    @torch.no_grad()
    def convert_back_to_weights(self, conductances: list[torch.Tensor], params: ConversionParams) -> torch.Tensor:
        if len(conductances) != 1:
            raise ValueError(f"conductances: a single device needs 1 tensor, got {len(conductances)}")
        return params["min"] + (conductances[0] - self.g_min) / params["scale_ratio"]


def resolve_converter(
    owner: str, g_converter: ConductanceConverter | None, g_max: float | None
) -> tuple[ConductanceConverter, float]:
    """The converter (a single pair with g_max if none is given) and its g_max (uS)."""
    if g_converter is None:
        g_converter = SinglePairConductanceConverter() if g_max is None else SinglePairConductanceConverter(g_max)
    elif g_max is not None and g_max != g_converter.g_max:
        raise ValueError(f"{owner}.g_max: {g_max} uS differs from g_converter.g_max = {g_converter.g_max} uS")
    return g_converter, float(g_converter.g_max)
