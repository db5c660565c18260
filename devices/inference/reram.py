"""Statistical ReRAM noise models of aihwkit 1.1.0 (inference/noise/reram.py).

ReRamWan2022NoiseModel: an approximation to the ReRAM data of Wan et al., Nature 608, 504 (2022),
doi:10.1038/s41586-022-04992-8. The deviation from the target conductance g_T (uS) is Gaussian with a std
given by a 4th-order polynomial in g_T / g_max (uS), fitted at three times after programming (1 s, 1 day and
2 days): g = max(g_T + s sum_i c_i(t) (g_T / g_max)^i xi, 0), xi ~ N(0, 1), s = noise_scale. Programming uses
the earliest time's polynomial; the state at a later time t (one of the fitted times) is drawn anew around g_T
with the polynomial of t. No separate 1/f read noise.

ReRamCMONoiseModel: conductive-metal-oxide (CMO)/HfOx ReRAM of IBM Research Zurich (Falcone et al., in review,
as aihwkit cites it), one device per weight (single-device converter, 9.0..88.199997 uS by default):
- programming: g_prog = g_T + gamma (c_0 + c_1 g_T) xi (uS, g_T in uS, no clipping), with (c_0, c_1) of the
  program-and-verify acceptance range: 0.2 -> (0.00081107, 0.00106879), 2 -> (0.0112185391, 0.01129027418);
  an acceptance_range that is not a key of the table falls back to the smallest key (so aihwkit's default 2e-2
  selects 0.2);
- relaxation at t > 0 s: g_drift = g_prog + zeta m_0 ln t + zeta (s_0 ln t + s_1) xi, with m_0 = -0.08900206,
  (s_0, s_1) = (0.04201137, 0.41183342) uS, zeta = drift_scale (independent of the conductance);
- read noise: g(t) = clip(g_drift + rho K log10(g_drift) sqrt(ln((t + t_r) / (2 t_r))) xi', g_min, g_max), with
  K = 0.0277316483, t_r = 1e-6 s, rho = read_noise_scale; a device with g_drift <= 0 gets no read noise
  (aihwkit's log10 gives NaN there, an event many standard deviations out), nor does one at t < t_r.
At t_inference = 0 the programmed conductances are returned unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from aimc.devices.inference.conductance import (
    ConductanceConverter,
    SingleDeviceConductanceConverter,
    resolve_converter,
)
from aimc.devices.inference.noise_model import (
    NoiseModel,
    check_coefficients,
    check_non_negative,
    check_positive,
    one_over_f_factor,
    polynomial,
    standard_normal,
)

WAN2022_COEFFS = {
    1.0: [0.348, 16.030, -43.853, 45.393, -16.815],
    3600 * 24.0: [0.701, 22.086, -50.773, 47.095, -16.458],
    3600 * 24.0 * 2: [0.782, 20.274, -43.507, 37.062, -11.934],
}
"""Deviation std polynomial c_0..c_4 (uS) in g_T / g_max at 1 s, 1 day and 2 days after programming (aihwkit's
fit to Wan et al. 2022)."""

CMO_PROG_COEFFS = {0.2: [0.00081107, 0.00106879], 2: [0.0112185391, 0.01129027418]}
"""Programming-noise std c_0 (uS) + c_1 g_T per program-and-verify acceptance range (CMO/HfOx)."""
CMO_DECAY = {"mean": [-0.08900206], "std": [0.04201137, 0.41183342]}
"""Conductance relaxation: mean shift m_0 ln t and std s_0 ln t + s_1 (uS, t in s) (CMO/HfOx)."""
CMO_READ = {"K": 0.0277316483, "t_read": 1e-6}
"""1/f read noise: K (uS per decade of g) and the read duration t_read (s) (CMO/HfOx)."""


@dataclass(eq=True)
class ReRamWan2022NoiseModel(NoiseModel):
    """Gaussian deviations of ReRAM conductances at fixed times after programming (module docstring).

    coeff_dic: {time (s): deviation std polynomial c_0.. (uS) in g_T / g_max}; g_converter, g_max: the weight
    <-> conductance mapping and its largest conductance (uS); noise_scale: factor on the std;
    coeff_g_max_reference: the g_max (uS) of the fit, the std scales with g_max / reference (default: g_max, no
    scaling, as aihwkit's code does for its own table too).
    """

    coeff_dic: dict[float, list[float]] | None = None
    g_converter: ConductanceConverter | None = None
    g_max: float | None = None
    noise_scale: float = 1.0
    coeff_g_max_reference: float | None = None

    def __post_init__(self) -> None:
        owner = type(self).__name__
        self.g_converter, self.g_max = resolve_converter(owner, self.g_converter, self.g_max)
        if self.coeff_dic is None:
            self.coeff_dic = {t: list(c) for t, c in WAN2022_COEFFS.items()}
        if not self.coeff_dic:
            raise ValueError(f"{owner}.coeff_dic: needs at least one time, got an empty dict")
        for t, coeffs in self.coeff_dic.items():
            check_coefficients(owner, f"coeff_dic[{t}]", coeffs)
        if self.coeff_g_max_reference is None:
            self.coeff_g_max_reference = self.g_max
        check_positive(owner, coeff_g_max_reference=self.coeff_g_max_reference)
        check_non_negative(owner, noise_scale=self.noise_scale)

    def deviation(self, g_target: torch.Tensor, t: float, generator: torch.Generator) -> torch.Tensor:
        """max(g_T + s sigma_t(g_T) xi, 0) (uS), sigma_t the polynomial of time t (s)."""
        sigma = polynomial(self.coeff_dic[t], g_target / self.g_max) * (self.g_max / self.coeff_g_max_reference)
        return (g_target + self.noise_scale * sigma * standard_normal(g_target, generator)).clamp(min=0.0)

    @torch.no_grad()
    def apply_programming_noise_to_conductance(
        self, g_target: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        return self.deviation(g_target, min(self.coeff_dic), generator)

    @torch.no_grad()
    def generate_drift_coefficients(self, g_target: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The targets g_T themselves: the state at a later time is drawn around them."""
        return g_target.clone()

    @torch.no_grad()
    def apply_drift_noise_to_conductance(
        self, g_prog: torch.Tensor, drift_coeff: torch.Tensor | None, t_inference: float, generator: torch.Generator
    ) -> torch.Tensor:
        """Conductances at t_inference, one of coeff_dic's times (s), drawn around the targets drift_coeff
        (g_prog is not used)."""
        if drift_coeff is None:
            raise ValueError(f"drift_coeff: {type(self).__name__} needs the target conductances of programming")
        if t_inference not in self.coeff_dic:
            raise ValueError(
                f"t_inference: must be one of the fitted times {sorted(self.coeff_dic)} s, got {t_inference}"
            )
        return self.deviation(drift_coeff, t_inference, generator)


@dataclass(eq=True)
class ReRamCMONoiseModel(NoiseModel):
    """CMO/HfOx ReRAM: linear programming noise, conductance-independent log-time relaxation, 1/f read noise
    (module docstring), on one device per weight.

    coeff_dict: {acceptance range: (c_0, c_1)} of the programming-noise std (uS); g_max, g_min: the
    conductance range (uS) the weight range maps onto; prog_noise_scale, read_noise_scale, drift_scale: factors
    on the programming noise, the read noise and the relaxation; decay_dict: {"mean": [m_0], "std": [s_0, s_1]};
    read_dict: {"K": K, "t_read": t_r}; acceptance_range: the key of coeff_dict to program with.
    """

    coeff_dict: dict[float, list[float]] | None = None
    g_max: float | None = None
    g_min: float | None = None
    prog_noise_scale: float = 1.0
    read_noise_scale: float = 1.0
    drift_scale: float = 1.0
    decay_dict: dict[str, list[float]] | None = None
    read_dict: dict[str, float] | None = None
    acceptance_range: float = 2e-2

    def __post_init__(self) -> None:
        owner = type(self).__name__
        defaults = SingleDeviceConductanceConverter()
        self.g_converter = SingleDeviceConductanceConverter(
            defaults.g_max if self.g_max is None else self.g_max, defaults.g_min if self.g_min is None else self.g_min
        )
        self.g_max, self.g_min = self.g_converter.g_max, self.g_converter.g_min
        self.coeff_dict = (
            {k: list(c) for k, c in CMO_PROG_COEFFS.items()} if self.coeff_dict is None else self.coeff_dict
        )
        self.decay_dict = {k: list(c) for k, c in CMO_DECAY.items()} if self.decay_dict is None else self.decay_dict
        self.read_dict = dict(CMO_READ) if self.read_dict is None else self.read_dict
        if not self.coeff_dict:
            raise ValueError(f"{owner}.coeff_dict: needs at least one acceptance range, got an empty dict")
        for key, coeffs in self.coeff_dict.items():
            check_coefficients(owner, f"coeff_dict[{key}]", coeffs)
        if self.acceptance_range not in self.coeff_dict:
            self.acceptance_range = min(self.coeff_dict)
        if len(self.decay_dict.get("mean", [])) != 1 or len(self.decay_dict.get("std", [])) != 2:
            raise ValueError(f"{owner}.decay_dict: needs 'mean': [m_0] and 'std': [s_0, s_1], got {self.decay_dict}")
        if sorted(self.read_dict) != ["K", "t_read"]:
            raise ValueError(f"{owner}.read_dict: needs exactly 'K' and 't_read', got {sorted(self.read_dict)}")
        check_positive(owner, t_read=self.read_dict["t_read"])
        check_non_negative(
            owner,
            prog_noise_scale=self.prog_noise_scale,
            read_noise_scale=self.read_noise_scale,
            drift_scale=self.drift_scale,
        )

    @torch.no_grad()
    def apply_programming_noise_to_conductance(
        self, g_target: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        sigma = polynomial(self.coeff_dict[self.acceptance_range], g_target)
        return g_target + self.prog_noise_scale * sigma * standard_normal(g_target, generator)

    @torch.no_grad()
    def generate_drift_coefficients(self, g_target: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The targets g_T (the relaxation does not depend on them; kept as aihwkit keeps them)."""
        return g_target.clone()

    @torch.no_grad()
    def apply_drift_noise_to_conductance(
        self, g_prog: torch.Tensor, drift_coeff: torch.Tensor | None, t_inference: float, generator: torch.Generator
    ) -> torch.Tensor:
        if t_inference == 0.0:
            return g_prog
        log_t = math.log(t_inference)
        (m_0,), (s_0, s_1) = self.decay_dict["mean"], self.decay_dict["std"]
        g_mean = g_prog + m_0 * log_t * self.drift_scale
        g_drift = g_mean + standard_normal(g_prog, generator) * (s_0 * log_t + s_1) * self.drift_scale
        growth = one_over_f_factor(t_inference, self.read_dict["t_read"])
        log_g = torch.where(g_drift > 0, torch.log10(g_drift.clamp(min=1e-30)), torch.zeros_like(g_drift))
        sigma_read = self.read_dict["K"] * log_g * growth
        g_final = g_drift + sigma_read * standard_normal(g_prog, generator) * self.read_noise_scale
        return g_final.clamp(min=self.g_min, max=self.g_max)
