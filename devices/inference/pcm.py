"""The statistical PCM noise model of aihwkit 1.1.0 (inference/noise/pcm.py, PCMLikeNoiseModel), fitted to
measured doped-Ge2Sb2Te5 mushroom PCM devices: Nandakumar et al., ICECS 2019 (programming noise, drift,
1/f read noise), the model used by Joshi et al., Nat. Commun. 11, 2473 (2020), arXiv:1906.03138.

Conductances in uS, times in s; g_T the target, g_max the converter's largest conductance.

- programming: g_prog = max(g_T + gamma sigma_prog(g_T) xi, 0), xi ~ N(0, 1), with
  sigma_prog = (g_max / g_ref) sum_i c_i (g_T / g_max)^i; defaults c = (0.26348, 1.9650, -1.1731) uS at
  g_ref = 25 uS, gamma = prog_noise_scale;
- drift exponent: nu = zeta |mu_nu + sigma_nu xi|, with g_r = max(|g_T| / g_max, 1e-7),
  mu_nu = clip(-0.0155 ln g_r + 0.0244, 0.049, 0.1), sigma_nu = clip(-0.0125 ln g_r - 0.0059, 0.008, 0.045),
  zeta = drift_scale;
- drift and read noise at t_inference: with t = t_inference + t_0,
  g_drift = g_prog (t / t_0)^(-nu) (g_prog itself at t_inference = 0),
  Q_s = min(0.0088 / max((|g_prog| / g_max)^0.65, 1e-3), 0.2),
  g(t) = max(g_drift + |g_drift| rho Q_s sqrt(ln((t + t_read) / (2 t_read))) xi, 0), rho = read_noise_scale.
  The read-noise term includes t_0, so it is present at t_inference = 0 already.
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

PCM_PROG_COEFF = [0.26348, 1.9650, -1.1731]
"""Programming-noise std polynomial c_0, c_1, c_2 (uS) in g_T / g_max (Nandakumar et al. 2019, aihwkit)."""
PCM_PROG_COEFF_G_MAX_REFERENCE = 25.0
"""The g_max (uS) the default programming coefficients were fitted at."""
RELATIVE_G_FLOOR = 1e-7
"""Smallest |g_T| / g_max in the drift-exponent fit (its log)."""


def pcm_drift_exponent_stats(g_target: torch.Tensor, g_max: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of the PCM drift exponent nu (before |.| and drift_scale) at the targets g_target (uS)."""
    log_g = torch.log((g_target / g_max).abs().clamp(min=RELATIVE_G_FLOOR))
    mu = (-0.0155 * log_g + 0.0244).clamp(min=0.049, max=0.1)
    sigma = (-0.0125 * log_g - 0.0059).clamp(min=0.008, max=0.045)
    return mu, sigma


@dataclass(eq=True)
class PCMLikeNoiseModel(NoiseModel):
    """PCM programming noise, conductance-dependent drift and accumulated 1/f read noise (module docstring).

    prog_coeff: programming-noise std polynomial (uS) in g_T / g_max, constant term first (default:
    Nandakumar et al. 2019's fit); g_converter: weight <-> conductance mapping (default: a single pair with
    g_max); g_max: largest conductance (uS, default 25 or the converter's); t_read: duration of a read (s);
    t_0: time of the first read after programming (s), the drift's reference; prog_noise_scale,
    read_noise_scale, drift_scale: factors on the programming-noise std, the read-noise std and nu;
    prog_coeff_g_max_reference: the g_max (uS) prog_coeff was fitted at, sigma_prog scales with
    g_max / reference (default: 25 uS for the default coefficients, g_max for given ones).
    """

    prog_coeff: list[float] | None = None
    g_converter: ConductanceConverter | None = None
    g_max: float | None = None
    t_read: float = 250.0e-9
    t_0: float = 20.0
    prog_noise_scale: float = 1.0
    read_noise_scale: float = 1.0
    drift_scale: float = 1.0
    prog_coeff_g_max_reference: float | None = None

    def __post_init__(self) -> None:
        owner = type(self).__name__
        self.g_converter, self.g_max = resolve_converter(owner, self.g_converter, self.g_max)
        if self.prog_coeff is None:
            self.prog_coeff = list(PCM_PROG_COEFF)
            if self.prog_coeff_g_max_reference is None:
                self.prog_coeff_g_max_reference = PCM_PROG_COEFF_G_MAX_REFERENCE
        elif self.prog_coeff_g_max_reference is None:
            self.prog_coeff_g_max_reference = self.g_max
        check_coefficients(owner, "prog_coeff", self.prog_coeff)
        check_positive(
            owner, t_read=self.t_read, t_0=self.t_0, prog_coeff_g_max_reference=self.prog_coeff_g_max_reference
        )
        check_non_negative(
            owner,
            prog_noise_scale=self.prog_noise_scale,
            read_noise_scale=self.read_noise_scale,
            drift_scale=self.drift_scale,
        )

    def programming_noise_std(self, g_target: torch.Tensor) -> torch.Tensor:
        """sigma_prog(g_T) (uS), before prog_noise_scale."""
        return polynomial(self.prog_coeff, g_target / self.g_max) * (self.g_max / self.prog_coeff_g_max_reference)

    @torch.no_grad()
    def apply_programming_noise_to_conductance(
        self, g_target: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        sigma = self.prog_noise_scale * self.programming_noise_std(g_target)
        return (g_target + sigma * standard_normal(g_target, generator)).clamp(min=0.0)

    @torch.no_grad()
    def generate_drift_coefficients(self, g_target: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        mu, sigma = pcm_drift_exponent_stats(g_target, self.g_max)
        return (mu + sigma * standard_normal(g_target, generator)).abs() * self.drift_scale

    def read_noise_std(self, g_prog: torch.Tensor, t_inference: float) -> torch.Tensor:
        """Relative std Q_s sqrt(ln((t + t_read) / (2 t_read))) of the read noise at t_inference (s), before
        read_noise_scale (g(t) = g_drift + |g_drift| rho std xi)."""
        q_s = (0.0088 / (g_prog.abs() / self.g_max).pow(0.65).clamp(min=1e-3)).clamp(max=0.2)
        return q_s * one_over_f_factor(t_inference + self.t_0, self.t_read)

    @torch.no_grad()
    def apply_drift_noise_to_conductance(
        self, g_prog: torch.Tensor, drift_coeff: torch.Tensor | None, t_inference: float, generator: torch.Generator
    ) -> torch.Tensor:
        if drift_coeff is None:
            raise ValueError(f"drift_coeff: {type(self).__name__} needs the drift exponents of programming")
        g_drift = power_law_drift(g_prog, drift_coeff, t_inference, self.t_0)
        sigma = self.read_noise_scale * self.read_noise_std(g_prog, t_inference)
        return (g_drift + g_drift.abs() * sigma * standard_normal(g_prog, generator)).clamp(min=0.0)
