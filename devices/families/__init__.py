"""The response families of one resistive element, one module per step law, each holding side by side: the
configs whose elements take that step, the step (`step`, the mean change of one pulse that
devices.response_step.element_step dispatches to on the family's `CODE`), its derivative with respect to the
element's parameters (`step_derivative`, the analytic Jacobian of the calibration's increment model) and the
configs' fit specifications (`fit_families`: free parameters, boxes, starting points, fixed fields).

What the families share lives beside them: devices.device_base (the parameter layout, the codes, DeviceBase),
`paper` (R1's fields and fits), `pulsed` (aihwkit's), `reference` (aihwkit's reference devices) and `fitting`
(the fit specification, `Family`).
"""

from aimc.devices.families import constant, exp_step, exponential, linear, power, soft_bounds_reference, table

FAMILY_MODULES = (constant, linear, power, exponential, exp_step, table, soft_bounds_reference)
"""Every family module, in the order of its CODE; each has CODE, step, step_derivative and fit_families."""
FAMILY_API = ("CODE", "step", "step_derivative", "fit_families")
"""The names every family module defines."""
