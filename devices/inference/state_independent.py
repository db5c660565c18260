"""A generic noise model with conductance-independent drift and read noise (aihwkit 1.1.0,
inference/noise/custom.py, StateIndependentNoiseModel).

Conductances in uS, times in s; g_T the target, g_max the converter's largest conductance.

- programming: g_prog = max(g_T + gamma sum_i c_i (g_T / g_max)^i xi, 0), xi ~ N(0, 1); default c = (0.2, 0, 0)
  uS, a constant 0.2 uS; gamma = prog_noise_scale;
- drift exponent: nu = zeta |nu_mean + nu_std xi| (defaults 0.1 and 0.05), zeta = drift_scale;
- drift and read noise: with t = t_inference + t_0, g_drift = g_prog (t / t_0)^(-nu) (g_prog at t_inference = 0),
  g(t) = max(g_drift + rho (|g_drift| / g_max) sqrt(ln((t + t_read) / (2 t_read))) xi, 0): a read-noise std of
  rho sqrt(ln(...)) uS at g_drift = g_max, rho = read_noise_scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from aimc.devices.inference.conductance import ConductanceConverter, resolve_converter
from aimc.devices.inference.noise_model import (
    NoiseModel,
    check_coefficients,
    check_non_negative,
    check_positive,
    one_over_f_factor,
    polynomial,
    power_law_drift,
    standard_normal,
)


@dataclass(eq=True)
class StateIndependentNoiseModel(NoiseModel):
    """Polynomial programming noise, one drift-exponent distribution for all devices, 1/f read noise
    proportional to the conductance (module docstring).

    g_converter, g_max: the weight <-> conductance mapping and its largest conductance (uS);
    prog_coeff: programming-noise std polynomial (uS) in g_T / g_max, constant term first;
    prog_noise_scale: factor on it; drift_nu_mean, drift_nu_std: mean and device-to-device std of nu before
    drift_scale; t_0: drift reference time (s); read_noise_scale: factor on the read noise; t_read: duration of
    a read (s).
    """

    g_converter: ConductanceConverter | None = None
    g_max: float | None = None
    prog_coeff: list[float] | None = None
    prog_noise_scale: float = 1.0
    drift_nu_mean: float = 0.1
    drift_nu_std: float = 0.05
    drift_scale: float = 1.0
    t_0: float = 20.0
    read_noise_scale: float = 1.0
    t_read: float = 250.0e-9

    def __post_init__(self) -> None:
        owner = type(self).__name__
        self.g_converter, self.g_max = resolve_converter(owner, self.g_converter, self.g_max)
        if self.prog_coeff is None:
            self.prog_coeff = [0.2, 0.0, 0.0]
        check_coefficients(owner, "prog_coeff", self.prog_coeff)
        check_positive(owner, t_read=self.t_read, t_0=self.t_0)
        check_non_negative(
            owner,
            prog_noise_scale=self.prog_noise_scale,
            drift_nu_std=self.drift_nu_std,
            drift_scale=self.drift_scale,
            read_noise_scale=self.read_noise_scale,
        )
        if not abs(self.drift_nu_mean) < float("inf"):
            raise ValueError(f"{owner}.drift_nu_mean: must be finite, got {self.drift_nu_mean}")

    @torch.no_grad()
    def apply_programming_noise_to_conductance(
        self, g_target: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        sigma = self.prog_noise_scale * polynomial(self.prog_coeff, g_target / self.g_max)
        return (g_target + sigma * standard_normal(g_target, generator)).clamp(min=0.0)

    @torch.no_grad()
    def generate_drift_coefficients(self, g_target: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        nu = (self.drift_nu_mean + self.drift_nu_std * standard_normal(g_target, generator)).abs()
        return nu * self.drift_scale

    @torch.no_grad()
    def apply_drift_noise_to_conductance(
        self, g_prog: torch.Tensor, drift_coeff: torch.Tensor | None, t_inference: float, generator: torch.Generator
    ) -> torch.Tensor:
        if drift_coeff is None:
            raise ValueError(f"drift_coeff: {type(self).__name__} needs the drift exponents of programming")
        g_drift = power_law_drift(g_prog, drift_coeff, t_inference, self.t_0)
        sigma = self.read_noise_scale * one_over_f_factor(t_inference + self.t_0, self.t_read)
        return (g_drift + (g_drift / self.g_max).abs() * sigma * standard_normal(g_drift, generator)).clamp(min=0.0)
