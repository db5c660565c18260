"""The base of the statistical inference noise models (aihwkit 1.1.0, inference/noise/base.py).

A noise model acts on the conductances (uS) of a weight tensor's devices in three steps:
programming (g_target -> g_prog, once), the drift coefficients drawn at programming (one per device), and the
drift and accumulated read noise up to the inference time t_inference (s after programming ended). Every draw
takes an explicit torch.Generator, so a seed fixes the result.

On weights the steps go through the model's conductance converter exactly as aihwkit's tile does:
apply_programming_noise converts w to g_target, programs every device and draws its drift coefficients from
g_target, and maps g_prog back to weights; apply_drift_noise converts those programmed weights to
conductances again (a new per-tensor scale) and drifts them with the stored coefficients.
"""

from __future__ import annotations

import math

import torch

from aimc.devices.inference.conductance import ConductanceConverter

DriftState = list[torch.Tensor | None]
"""The drift coefficients drawn at programming, one tensor (or None for a model without drift) per device
tensor of the converter (aihwkit's drift_noise_parameters)."""


def standard_normal(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """N(0, 1) draws of like's shape, dtype and device from generator."""
    return torch.randn(like.shape, generator=generator, dtype=like.dtype, device=like.device)


def polynomial(coeffs: list[float], x: torch.Tensor) -> torch.Tensor:
    """sum_i coeffs[i] x^i, coeffs from the constant term up."""
    result = torch.full_like(x, coeffs[0])
    power = torch.ones_like(x)
    for coeff in coeffs[1:]:
        power = power * x
        result = result + coeff * power
    return result


def one_over_f_factor(t: float, t_read: float) -> float:
    """sqrt(ln((t + t_read) / (2 t_read))), the growth with time t (s) of accumulated 1/f read noise whose
    spectrum is integrated from 1/t to 1/(2 t_read) (t_read: the duration of one read, s); 0 for t < t_read."""
    return math.sqrt(max(math.log((t + t_read) / (2.0 * t_read)), 0.0))


def power_law_drift(g_prog: torch.Tensor, nu: torch.Tensor, t_inference: float, t_0: float) -> torch.Tensor:
    """g_prog ((t_inference + t_0) / t_0)^(-nu); g_prog itself at t_inference = 0."""
    if t_inference <= 0.0:
        return g_prog
    return g_prog * torch.pow((t_inference + t_0) / t_0, -nu)


def check_positive(owner: str, **values: float) -> None:
    """Raise a one-line ValueError naming the first value that is not > 0."""
    for name, value in values.items():
        if not value > 0.0:
            raise ValueError(f"{owner}.{name}: must be positive, got {value}")


def check_non_negative(owner: str, **values: float) -> None:
    """Raise a one-line ValueError naming the first value that is not >= 0."""
    for name, value in values.items():
        if not value >= 0.0:
            raise ValueError(f"{owner}.{name}: must be >= 0, got {value}")


def check_coefficients(owner: str, name: str, coeffs: list[float]) -> None:
    """Raise a one-line ValueError unless coeffs is a non-empty list of finite numbers."""
    if len(coeffs) == 0 or not all(math.isfinite(float(c)) for c in coeffs):
        raise ValueError(f"{owner}.{name}: must be a non-empty list of finite numbers, got {coeffs}")


def check_time(t_inference: float) -> None:
    """Raise a one-line ValueError unless t_inference is a finite time >= 0 (s)."""
    if not (math.isfinite(t_inference) and t_inference >= 0.0):
        raise ValueError(f"t_inference: must be a finite time >= 0 s, got {t_inference}")


class NoiseModel:
    """Programming noise, drift coefficients and drift/read noise of the devices of a conductance converter."""

    g_converter: ConductanceConverter

    def apply_programming_noise_to_conductance(
        self, g_target: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """Programmed conductances g_prog (uS) of the targets g_target (uS)."""
        raise NotImplementedError

    def generate_drift_coefficients(self, g_target: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
        """The per-device parameters of the later drift (e.g. the drift exponents nu), drawn at programming."""
        return None

    def apply_drift_noise_to_conductance(
        self, g_prog: torch.Tensor, drift_coeff: torch.Tensor | None, t_inference: float, generator: torch.Generator
    ) -> torch.Tensor:
        """Conductances (uS) at t_inference (s after programming) of devices programmed to g_prog."""
        raise NotImplementedError

    @torch.no_grad()
    def apply_programming_noise(
        self, weights: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, DriftState]:
        """Programmed weights and the drift coefficients of every device tensor (aihwkit's
        apply_programming_noise): per device tensor, programming noise first, then its drift coefficients."""
        targets, params = self.g_converter.convert_to_conductances(weights)
        programmed, drift_state = [], []
        for g_target in targets:
            programmed.append(self.apply_programming_noise_to_conductance(g_target, generator))
            drift_state.append(self.generate_drift_coefficients(g_target, generator))
        return self.g_converter.convert_back_to_weights(programmed, params), drift_state

    @torch.no_grad()
    def apply_drift_noise(
        self, weights: torch.Tensor, drift_state: DriftState, t_inference: float, generator: torch.Generator
    ) -> torch.Tensor:
        """Weights at t_inference (s) of programmed weights with their drift coefficients (aihwkit's
        apply_drift_noise): the weights are converted to conductances anew, drifted and mapped back."""
        check_time(t_inference)
        conductances, params = self.g_converter.convert_to_conductances(weights)
        if len(drift_state) != len(conductances):
            raise ValueError(
                f"drift_state: needs one entry per device tensor ({len(conductances)}), got {len(drift_state)}"
            )
        drifted = [
            self.apply_drift_noise_to_conductance(g_prog, coeff, t_inference, generator)
            for g_prog, coeff in zip(conductances, drift_state)
        ]
        return self.g_converter.convert_back_to_weights(drifted, params)

    @torch.no_grad()
    def apply_noise(self, weights: torch.Tensor, t_inference: float, generator: torch.Generator) -> torch.Tensor:
        """Weights with programming noise and, for t_inference > 0 s, drift and read noise in one pass over
        the same conversion (aihwkit's apply_noise, used during hardware-aware training): every call draws
        new devices. At t_inference = 0 the programmed weights are returned."""
        check_time(t_inference)
        targets, params = self.g_converter.convert_to_conductances(weights)
        noisy = []
        for g_target in targets:
            g_prog = self.apply_programming_noise_to_conductance(g_target, generator)
            if t_inference > 0.0:
                coeff = self.generate_drift_coefficients(g_target, generator)
                g_prog = self.apply_drift_noise_to_conductance(g_prog, coeff, t_inference, generator)
            noisy.append(g_prog)
        return self.g_converter.convert_back_to_weights(noisy, params)
