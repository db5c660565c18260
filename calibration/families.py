"""The families a fit can choose from: for every device family of the device layer (the tabulated one
non-parametric), its free parameters, their box and starting points, the fields held fixed, and how each
device-to-device spread is measured. Each family module of aimc.devices.families holds them beside its configs
(`fit_families`); this module gathers them and holds the fixed cycle noise of a fit (`with_noise`)."""

from __future__ import annotations

import math
from dataclasses import replace

from aimc.devices import DEVICE_KINDS, ExpStep
from aimc.devices.families import FAMILY_MODULES
from aimc.devices.families.fitting import Family


def families(n_nodes: int = 6, dw0: float = 1e-3) -> dict[str, Family]:
    """Fit specifications of every parametric family of the device layer, in the order of FAMILY_KINDS;
    PiecewiseStep with n_nodes nodes and its dw_min fixed to dw0 (the nodes carry the step size)."""
    found = {f.kind: f for m in FAMILY_MODULES for f in m.fit_families(n_nodes, dw0)}
    return {k: found[k] for k in FAMILY_KINDS if k in found}


def with_noise(fam: Family, noise: dict) -> Family:
    """`fam` with the cycle noise of `noise` (`variation.estimate_noise`) held fixed in its configs, so that its
    increment model is the mean of the clipped noisy step (`pulse_data.predict`): the estimated form where the
    family has a choice (`noise` or `mult_noise` field), else multiplicative (aihwkit 1.1.0's other families)."""
    form = noise["form"]
    extra: dict = {}
    if "noise" in fam.cls.model_fields:
        extra["noise"] = form
    elif "mult_noise" in fam.cls.model_fields:
        extra["mult_noise"] = form == "multiplicative"
    else:
        form = "multiplicative"
    extra["dw_min_std"] = float(noise[f"sigma_{form}"])
    return replace(fam, fixed={**fam.fixed, **extra})


def expstep_canonical(fields: dict) -> dict:
    """The fields of an aihwkit ExpStep device (any a != 0, b; aihwkit 1.1.0's ExpStepDevice) rewritten with
    the fitted family's a = 0.5, b = 0 and the same response: with z = 2 a w / span + b, gamma_up z =
    (2 a gamma_up) w / span + gamma_up b, so gamma_up' = 2 a gamma_up, A_up' = A_up e^(gamma_up b),
    gamma_down' = 2 a gamma_down, A_down' = A_down e^(-gamma_down b). Missing fields take the device defaults."""
    f = ExpStep(**fields).model_dump()
    a, b = f["a"], f["b"]
    if a == 0:
        raise ValueError("ExpStep with a = 0 has a constant step: fit ConstantStep instead")
    return {
        **f,
        "A_up": f["A_up"] * math.exp(f["gamma_up"] * b),
        "A_down": f["A_down"] * math.exp(-f["gamma_down"] * b),
        "gamma_up": 2 * a * f["gamma_up"],
        "gamma_down": 2 * a * f["gamma_down"],
        "a": 0.5,
        "b": 0.0,
    }


_FITTED = {f.kind for m in FAMILY_MODULES for f in m.fit_families(6, 1e-3)}
FAMILY_KINDS = tuple(k for d in DEVICE_KINDS for k in (d, f"{d}_ud") if k in _FITTED or k == "tabulated")
"""Every family of the device layer, the tabulated (non-parametric) one included, and R1's power and exponential
families with a depression exponent of their own (power_ud, exponential_ud); a reference device is fitted as its
element's family (its module's `fit_families`): a reference only shifts the weight that is read."""
