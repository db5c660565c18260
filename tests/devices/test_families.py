"""Every response family of the device union has its pieces in its family module (aimc.devices.families): the
config, the step element_step dispatches to, its derivative for the calibration's Jacobian and its fit
specifications; a family added without one of them fails here."""

import typing

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

from aimc.devices import DEVICE_KINDS, DeviceConfig
from aimc.devices.families import FAMILY_API, FAMILY_MODULES
from aimc.devices.families.fitting import Family

CLASSES = {cls.model_fields["kind"].default: cls for cls in typing.get_args(typing.get_args(DeviceConfig)[0])}
MODULES = {m.__name__: m for m in FAMILY_MODULES}
FITTED_OTHERWISE = {
    "tabulated": "calibration.fit_tabulated, no parameters",
    "SoftBoundsReference": "as SoftBounds",
    "PowStepReference": "as PowStep",
}
"""Families without a parametric fit of their own, and how they are fitted."""
TABLE = {"w": [-1.0, 0.0, 1.0], "q_plus_values": [1.0, 0.5, 0.0], "q_minus_values": [0.0, 0.5, 1.0]}


def _nominal(kind: str):
    return CLASSES[kind](**TABLE) if kind == "tabulated" else CLASSES[kind]()


def test_every_family_module_defines_the_family_api():
    for m in FAMILY_MODULES:
        missing = [name for name in FAMILY_API if not hasattr(m, name)]
        assert not missing, f"{m.__name__} lacks {missing}"
        assert isinstance(m.step, CPUDispatcher) and isinstance(m.step_derivative, CPUDispatcher), m.__name__
        assert m.step.targetoptions.get("inline") == "always", f"{m.__name__}.step is not inlined"
        assert all(isinstance(f, Family) for f in m.fit_families(6, 1e-3)), m.__name__
    codes = [m.CODE for m in FAMILY_MODULES]
    assert sorted(codes) == list(range(len(codes))), "the family codes are 0, 1, ... one per module"


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_every_family_of_the_union_lives_in_a_family_module_with_its_step(kind):
    cls = CLASSES[kind]
    module = MODULES.get(cls.__module__)
    assert module is not None, f"{kind}: {cls.__module__} is not in FAMILY_MODULES"
    assert _nominal(kind).nominal().code == module.CODE, f"{kind}: its step is not that of {cls.__module__}"


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_every_family_of_the_union_has_its_fit_beside_it(kind):
    cls = CLASSES[kind]
    fits = [f for f in MODULES[cls.__module__].fit_families(6, 1e-3) if f.cls is cls]
    if kind in FITTED_OTHERWISE:
        assert not fits
    else:
        assert fits and all(f.kind in (kind, f"{kind}_ud") for f in fits), f"{kind} has no fit in its module"


def test_union_and_family_list_agree():
    cells = {"OneSided", "VectorUnitCell", "ReferenceUnitCell"}
    assert set(CLASSES) == {*DEVICE_KINDS, *cells}
    modules = {cls.__module__ for kind, cls in CLASSES.items() if kind not in cells}
    assert modules == set(MODULES), "a family module whose configs are not in the union, or the other way round"


@pytest.mark.parametrize("kind", [k for k in DEVICE_KINDS if k != "tabulated"])
def test_step_derivative_matches_the_step(kind):
    """element_step_derivatives' s equals the device's own mean step, and ds/dw its central difference."""
    from aimc.calibration.increment_kernels import element_args
    from aimc.devices.response_step import element_step_derivatives

    device = _nominal(kind)
    lo, hi = device.bounds
    w = np.linspace(lo + 0.05 * (hi - lo), hi - 0.05 * (hi - lo), 41)
    for up in (True, False):
        ups = np.full(len(w), up)
        er, code, consts, grid, tab_up, tab_dn, dw_min = element_args(device)
        g = np.zeros((len(w), 6 + len(consts) + 2 * len(tab_up)))
        s, ds_dw = element_step_derivatives(w, ups, er, code, consts, grid, tab_up, tab_dn, g)
        q = device.q_plus if up else device.q_minus
        np.testing.assert_allclose(s, q(w) * dw_min, rtol=1e-12, atol=1e-15)
        h = 1e-6 * (hi - lo)
        np.testing.assert_allclose(ds_dw, (q(w + h) - q(w - h)) * dw_min / (2 * h), rtol=1e-4, atol=1e-9)
