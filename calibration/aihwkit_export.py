"""The fitted device as IBM aihwkit 1.1.0 builds it: Python text for its device class where aihwkit has the family
(the field names are the same), and for R1's families, which aihwkit lacks, a PiecewiseStep device whose node
tables are the family's response sampled at equally spaced weights (`piecewise_table`)."""

from __future__ import annotations

import numpy as np

from aimc.devices import DeviceConfig, PiecewiseStep, parse_device

AIHWKIT_CLASS = {
    "ConstantStep": "ConstantStepDevice",
    "LinearStep": "LinearStepDevice",
    "SoftBounds": "SoftBoundsDevice",
    "ExpStep": "ExpStepDevice",
    "PowStep": "PowStepDevice",
    "PiecewiseStep": "PiecewiseStepDevice",
}
N_NODES = 64  # intervals of the PiecewiseStep tabulation: its linear interpolation is within 1e-3 of a smooth q


def piecewise_table(device: DeviceConfig, n_nodes: int = N_NODES) -> PiecewiseStep:
    """`device` (one element, any family) as a PiecewiseStep: q_plus and q_minus at n_nodes + 1 equally spaced
    weights over its bounds, the same dw_min and bounds, up_down 0 (the tables carry the asymmetry), the same
    cycle noise (aihwkit's PiecewiseStep draws it multiplicatively) and no device-to-device spread (the family's
    spread fields have no PiecewiseStep counterpart)."""
    lo, hi = device.bounds
    w = np.linspace(lo, hi, n_nodes + 1)
    return PiecewiseStep(
        dw_min=float(device.dw_min),
        up_down=0.0,
        w_min=float(lo),
        w_max=float(hi),
        piecewise_up=[float(v) for v in np.maximum(device.q_plus(w), 0.0)],
        piecewise_down=[float(v) for v in np.maximum(device.q_minus(w), 0.0)],
        dw_min_std=float(device.dw_min_std),
        dw_min_dtod=0.0,
        up_down_dtod=0.0,
        w_max_dtod=0.0,
        w_min_dtod=0.0,
    )


def aihwkit_snippet(device: dict) -> str:
    """Python text that builds the device (a config's JSON fields) in IBM aihwkit 1.1.0: its own class where
    aihwkit has the family, else a PiecewiseStepDevice of `piecewise_table`, with a comment saying so."""
    kind = device["kind"]
    head = ""
    if kind not in AIHWKIT_CLASS:
        fields = piecewise_table(parse_device(device, where="aihwkit export")).model_dump(mode="json")
        device = {k: fields[k] for k in ("kind", *PIECEWISE_FIELDS)}
        head = (
            f"# aihwkit 1.1.0 has no {kind!r} family: its response tabulated at {N_NODES + 1} equally spaced weights\n"
            "# as a PiecewiseStepDevice (linear between the nodes; no device-to-device spread)\n"
        )
    cls = AIHWKIT_CLASS[device["kind"]]
    args = ",\n    ".join(f"{k}={v!r}" for k, v in device.items() if k != "kind")
    return f"{head}from aihwkit.simulator.configs.devices import {cls}\n\ndevice = {cls}(\n    {args},\n)"


PIECEWISE_FIELDS = (
    "dw_min",
    "up_down",
    "w_min",
    "w_max",
    "piecewise_up",
    "piecewise_down",
    "dw_min_std",
    "dw_min_dtod",
    "up_down_dtod",
    "w_max_dtod",
    "w_min_dtod",
)
"""The PiecewiseStep fields the tabulation sets (the others keep aihwkit's defaults, which are ours)."""
