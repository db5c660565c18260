"""Shared test set-up: the repository on sys.path, and independent numpy references of the device families.

The references below are written from the published formulas, for elements without device-to-device
spread: R1's families from [R1] Wu et al., NeurIPS 2025, arXiv:2502.06309, Table 1 (on [-tau, tau], with the
up/down asymmetry c scaling q_plus by 1 + c and q_minus by 1 - c), aihwkit's from the update equations of
IBM aihwkit 1.1.0's pulsed devices. They never call the code under test: tests compare the code against
them.
"""

from __future__ import annotations

import numpy as np

# Spread- and noise-free aihwkit fields (its defaults draw device-to-device variation and cycle noise).
NO_SPREAD = dict(dw_min_dtod=0.0, w_max_dtod=0.0, w_min_dtod=0.0, up_down_dtod=0.0, dw_min_std=0.0)

# 800 pulses of mixed direction: up to the upper bound, random, down to the lower bound (the traces compared
# with aihwkit's)
TRACE_SIGNS = np.concatenate([np.ones(300), np.random.default_rng(1).choice([-1, 1], 200), -np.ones(300)]).astype(int)


def one_element_traces(dev) -> tuple[np.ndarray, np.ndarray]:
    """The weight of a 1x1 array of `dev` after each pulse of TRACE_SIGNS, fired through `pulse` and through
    a one-pulse `update` (BL 1, managements off, lr 4 granularities: the probability clips at 1)."""
    from aimc.devices import ConductanceArray, UpdateConfig

    one = UpdateConfig(desired_bl=1, update_management=False, update_bl_management=False)
    by_pulse, by_update = ConductanceArray(1, 1, dev), ConductanceArray(1, 1, dev)
    w_pulse, w_update = [], []
    for s in TRACE_SIGNS:
        by_pulse.pulse(np.array([[s]]))
        by_update.update(np.ones((1, 1)), np.full((1, 1), -s), 4 * dev.granularity, one)
        w_pulse.append(float(by_pulse.w[0, 0]))
        w_update.append(float(by_update.w[0, 0]))
    return np.array(w_pulse), np.array(w_update)


# One asymmetric, non-trivial configuration per family, without device-to-device spread.
FAMILY_CONFIGS: dict[str, dict] = {
    "ideal": dict(kind="ideal", tau=0.6, c=0.2, dw_min=1e-3),
    "linear": dict(kind="linear", tau=0.6, c=0.2, dw_min=1e-3),
    "power": dict(kind="power", tau=0.7, c=0.1, gamma=2.0, dw_min=1e-3),
    "exponential": dict(kind="exponential", tau=0.7, c=-0.1, gamma=2.0, dw_min=1e-3),
    "ConstantStep": dict(kind="ConstantStep", up_down=0.1, dw_min=1e-3, **NO_SPREAD),
    "LinearStep": dict(
        kind="LinearStep",
        up_down=-0.05,
        gamma_up=0.3,
        gamma_down=0.7,
        w_max=0.8,
        w_min=-0.5,
        gamma_up_dtod=0.0,
        gamma_down_dtod=0.0,
        dw_min=1e-3,
        **NO_SPREAD,
    ),
    "SoftBounds": dict(kind="SoftBounds", up_down=0.1, w_max=0.8, w_min=-0.5, dw_min=1e-3, **NO_SPREAD),
    "ExpStep": dict(kind="ExpStep", dw_min=1e-3, **NO_SPREAD),
    "PowStep": dict(kind="PowStep", pow_gamma=1.5, pow_up_down=0.2, pow_gamma_dtod=0.0, dw_min=1e-3, **NO_SPREAD),
    "PiecewiseStep": dict(
        kind="PiecewiseStep",
        piecewise_up=[1.2, 1.0, 0.6, 0.2],
        piecewise_down=[0.3, 0.7, 1.0, 1.3],
        dw_min=1e-3,
        **NO_SPREAD,
    ),
    "tabulated": dict(
        kind="tabulated",
        w=[-0.5, -0.1, 0.3, 0.6],
        q_plus_values=[1.5, 1.1, 0.6, 0.1],
        q_minus_values=[0.2, 0.8, 1.2, 1.4],
        dw_min=1e-3,
    ),
    "SoftBoundsReference": dict(
        kind="SoftBoundsReference", up_down=0.1, w_max=0.8, w_min=-0.5, reference_mean=0.1, dw_min=1e-3, **NO_SPREAD
    ),
    "PowStepReference": dict(
        kind="PowStepReference",
        pow_gamma=1.5,
        pow_up_down=0.2,
        pow_gamma_dtod=0.0,
        reference_mean=-0.1,
        dw_min=1e-3,
        **NO_SPREAD,
    ),
}

# The same families with every device-to-device spread the family has switched on.
SPREAD_CONFIGS: dict[str, dict] = {
    "ideal": dict(kind="ideal", tau=0.6, c=0.1, c_dtod=0.1, tau_dtod=0.2, dw_min_dtod=0.3, dw_min=1e-2, dw_min_std=0.5),
    "linear": dict(
        kind="linear", tau=0.6, c=0.1, c_dtod=0.1, tau_dtod=0.2, dw_min_dtod=0.3, dw_min=1e-2, dw_min_std=0.5
    ),
    "power": dict(
        kind="power",
        tau=0.7,
        gamma=2.0,
        gamma_dtod=0.2,
        c_dtod=0.1,
        tau_dtod=0.2,
        dw_min=1e-2,
        dw_min_std=0.5,
        noise="multiplicative",
    ),
    "exponential": dict(
        kind="exponential", tau=0.7, gamma=2.0, gamma_dtod=0.2, c_dtod=0.1, tau_dtod=0.2, dw_min=1e-2, dw_min_std=0.5
    ),
    "ConstantStep": dict(kind="ConstantStep", dw_min=1e-2, dw_min_std=0.5),
    "LinearStep": dict(
        kind="LinearStep",
        gamma_up=0.3,
        gamma_down=0.7,
        mean_bound_reference=False,
        dw_min=1e-2,
        dw_min_std=0.5,
        mult_noise=False,
    ),
    "SoftBounds": dict(kind="SoftBounds", up_down=0.1, dw_min=1e-2, dw_min_std=0.5),
    "ExpStep": dict(kind="ExpStep", dw_min=1e-2, dw_min_std=0.5),
    "PowStep": dict(kind="PowStep", pow_gamma=1.5, pow_up_down=0.2, pow_up_down_dtod=0.1, dw_min=1e-2, dw_min_std=0.5),
    "PiecewiseStep": dict(
        kind="PiecewiseStep",
        piecewise_up=[1.2, 1.0, 0.6, 0.2],
        piecewise_down=[0.3, 0.7, 1.0, 1.3],
        dw_min=1e-2,
        dw_min_std=0.5,
    ),
    "tabulated": dict(
        kind="tabulated",
        w=[-0.5, -0.1, 0.3, 0.6],
        q_plus_values=[1.5, 1.1, 0.6, 0.1],
        q_minus_values=[0.2, 0.8, 1.2, 1.4],
        w_bound_dtod=0.2,
        up_down_dtod=0.1,
        dw_min_dtod=0.3,
        dw_min=1e-2,
        dw_min_std=0.5,
    ),
    "SoftBoundsReference": dict(
        kind="SoftBoundsReference",
        up_down=0.1,
        slope_up_dtod=0.1,
        slope_down_dtod=0.1,
        reference_std=0.05,
        subtract_symmetry_point=True,
        dw_min=1e-2,
        dw_min_std=0.5,
    ),
    "PowStepReference": dict(
        kind="PowStepReference",
        pow_gamma=1.5,
        pow_up_down=0.2,
        pow_up_down_dtod=0.1,
        reference_std=0.05,
        subtract_symmetry_point=True,
        dw_min=1e-2,
        dw_min_std=0.5,
    ),
}


def ref_bounds(cfg: dict) -> tuple[float, float]:
    """Nominal (w_min, w_max) of a family config dict."""
    kind = cfg["kind"]
    if kind in ("ideal", "linear", "power", "exponential"):
        tau = cfg.get("tau", 0.6)
        return -tau, tau
    if kind == "tabulated":
        return cfg.get("w_min", cfg["w"][0]), cfg.get("w_max", cfg["w"][-1])
    ref = cfg.get("reference_mean", 0.0)  # reference devices store w = g - ref (no symmetric point here)
    return cfg.get("w_min", -0.6) - ref, cfg.get("w_max", 0.6) - ref


def ref_q(cfg: dict, w, up: bool) -> np.ndarray:
    """q_plus(w) (up) or q_minus(w) of a spread-free element: the mean step divided by dw_min."""
    w = np.asarray(w, dtype=float)
    kind = cfg["kind"]
    lo, hi = ref_bounds(cfg)
    if kind in ("ideal", "linear", "power", "exponential"):
        tau, c, g = cfg.get("tau", 0.6), cfg.get("c", 0.0), cfg.get("gamma", 1.0)
        amp = (1 + c) if up else (1 - c)
        u = (1 - w / tau) if up else (1 + w / tau)
        if kind == "ideal":
            return amp * np.ones_like(w)
        if kind == "linear":
            return amp * u
        if kind == "power":
            return amp * u**g
        return amp * (np.exp(g * u) - 1) / (np.exp(g) - 1)
    if kind == "tabulated":
        return np.interp(w, cfg["w"], cfg["q_plus_values"] if up else cfg["q_minus_values"])
    # aihwkit families: dw_up = (up_bias + 1) dw_min, dw_down = (down_bias + 1) dw_min without spread;
    # reference devices: the family's step at g = w + ref, g within the unshifted bounds
    ref = cfg.get("reference_mean", 0.0)
    w, lo, hi = w + ref, lo + ref, hi + ref
    kind = {"SoftBoundsReference": "SoftBounds", "PowStepReference": "PowStep"}.get(kind, kind)
    ud = cfg.get("up_down", 0.0)
    amp = (1 + min(ud, 0.0)) if up else (1 - max(ud, 0.0))
    if kind == "ConstantStep":
        return amp * np.ones_like(w)
    if kind in ("LinearStep", "SoftBounds"):
        gu, gd = (1.0, 1.0) if kind == "SoftBounds" else (cfg.get("gamma_up", 0.0), cfg.get("gamma_down", 0.0))
        return amp * np.maximum(1 - abs(gu) * w / hi, 0) if up else amp * np.maximum(1 - abs(gd) * w / lo, 0)
    if kind == "ExpStep":
        a, b = cfg.get("a", 0.244), cfg.get("b", 0.2425)
        z = 2 * a * w / (hi - lo) + b
        if up:
            return amp * np.maximum(1 - cfg.get("A_up", 0.00081) * np.exp(cfg.get("gamma_up", 12.44625) * z), 0)
        return amp * np.maximum(1 - cfg.get("A_down", 0.36833) * np.exp(-cfg.get("gamma_down", 12.78785) * z), 0)
    if kind == "PowStep":
        g, split = cfg.get("pow_gamma", 1.0), cfg.get("pow_up_down", 0.0)
        r = hi - lo
        if up:  # aihwkit 1.1.0's binary lowers one exponent only
            return amp * np.clip((hi - w) / r, 0, None) ** (g * (1 + min(split, 0.0)))
        return amp * np.clip((w - lo) / r, 0, None) ** (g * (1 - max(split, 0.0)))
    if kind == "PiecewiseStep":
        nodes = cfg["piecewise_up"] if up else cfg["piecewise_down"]
        return amp * np.interp(w, np.linspace(lo, hi, len(nodes)), nodes)
    raise KeyError(kind)


def ref_multiplicative(cfg: dict) -> bool:
    """Whether the family's cycle noise multiplies the step (else additive sigma * dw * xi)."""
    kind = cfg["kind"]
    if kind in ("ideal", "linear", "power", "exponential", "tabulated"):
        return cfg.get("noise", "additive") == "multiplicative"
    if kind in ("LinearStep", "SoftBounds"):
        return cfg.get("mult_noise", True)
    if kind == "SoftBoundsReference":
        return cfg.get("mult_noise", False)
    return True


def ref_step_scale(cfg: dict, up: bool) -> float:
    """The element's step at its reference point, dw_up or dw_down (weight units), without spread."""
    kind = cfg["kind"]
    dw = cfg.get("dw_min", 1e-3)
    if kind in ("ideal", "linear", "power", "exponential"):
        c = cfg.get("c", 0.0)
        return dw * ((1 + c) if up else (1 - c))
    if kind == "tabulated":
        return dw
    ud = cfg.get("up_down", 0.0)
    return dw * ((1 + min(ud, 0.0)) if up else (1 - max(ud, 0.0)))
