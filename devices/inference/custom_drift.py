"""The PCM noise model with a drift-exponent table given by the user (aihwkit 1.1.0, inference/noise/pcm.py,
CustomDriftPCMLikeNoiseModel; after N. Li et al., Adv. Electron. Mater. 2023, doi:10.1002/aelm.202201190).

Programming, drift and read noise are PCMLikeNoiseModel's; the drift exponent of a device with target g_T (uS)
is nu = zeta |mu(g_T) + sigma(g_T) xi|, xi ~ N(0, 1), with mu and sigma linearly interpolated in the table
(g_lst, nu_mean_lst, nu_std_lst) at g_T clipped to the table's range, zeta = drift_scale.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from aimc.devices.inference.noise_model import standard_normal
from aimc.devices.inference.pcm import PCMLikeNoiseModel

CUSTOM_DRIFT_KEYS = ("g_lst", "nu_mean_lst", "nu_std_lst")
"""The lists of a custom drift model: conductances (uS, ascending), mean and std of nu at each."""


def check_custom_drift_model(owner: str, table: dict, g_min: float, g_max: float) -> None:
    """Raise a one-line ValueError naming what is wrong in the drift table, or if the conductances g_min..g_max
    (uS) of the converter leave its range."""
    name = f"{owner}.custom_drift_model"
    if not isinstance(table, dict) or sorted(table) != sorted(CUSTOM_DRIFT_KEYS):
        keys = sorted(table) if isinstance(table, dict) else type(table).__name__
        raise ValueError(f"{name}: needs exactly the lists {', '.join(CUSTOM_DRIFT_KEYS)}, got {keys}")
    lengths = {len(table[key]) for key in CUSTOM_DRIFT_KEYS}
    if len(lengths) != 1 or min(lengths) < 2:
        raise ValueError(f"{name}: the three lists need one common length >= 2, got lengths {sorted(lengths)}")
    g_lst, nu_std = np.asarray(table["g_lst"], float), np.asarray(table["nu_std_lst"], float)
    if not (np.all(np.diff(g_lst) >= 0) and g_lst[0] >= 0):
        raise ValueError(f"{name}: g_lst must be ascending conductances >= 0 uS, got {table['g_lst']}")
    if not np.all(nu_std >= 0) or not np.all(np.isfinite(np.asarray(table["nu_mean_lst"], float))):
        raise ValueError(f"{name}: nu_std_lst must be >= 0 and nu_mean_lst finite")
    if g_min < g_lst[0] or g_max > g_lst[-1]:
        raise ValueError(
            f"{name}: the converter's conductances {g_min:.3f}..{g_max:.3f} uS leave the table's "
            f"{g_lst[0]:.3f}..{g_lst[-1]:.3f} uS"
        )


@dataclass(eq=True, init=False)
class CustomDriftPCMLikeNoiseModel(PCMLikeNoiseModel):
    """PCMLikeNoiseModel (same keyword parameters) with drift exponents from the table custom_drift_model, a
    dict of the lists g_lst (uS, ascending, covering the converter's g_min..g_max), nu_mean_lst and nu_std_lst
    (module docstring)."""

    custom_drift_model: dict = field(default_factory=dict)

    def __init__(self, custom_drift_model: dict, **pcm_parameters) -> None:
        self.custom_drift_model = custom_drift_model
        super().__init__(**pcm_parameters)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_custom_drift_model(
            type(self).__name__, self.custom_drift_model, self.g_converter.g_min, self.g_converter.g_max
        )

    @torch.no_grad()
    def generate_drift_coefficients(self, g_target: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        g_lst = torch.tensor(self.custom_drift_model["g_lst"], dtype=torch.float64)
        g = g_target.to(torch.float64).clamp(min=float(g_lst[0]), max=float(g_lst[-1])).cpu().numpy()
        mu = np.interp(g, g_lst.numpy(), np.asarray(self.custom_drift_model["nu_mean_lst"], float))
        sigma = np.interp(g, g_lst.numpy(), np.asarray(self.custom_drift_model["nu_std_lst"], float))
        mu_t = torch.from_numpy(mu).to(g_target)
        sigma_t = torch.from_numpy(sigma).to(g_target)
        return (mu_t + sigma_t * standard_normal(g_target, generator)).abs() * self.drift_scale
