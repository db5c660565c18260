"""NeuroSim's normalised non-linearity A / P_max of the report (docs/calibration.md, crossing): the least-squares
r of y = (1 - e^(-x/r)) / (1 - e^(-1/r)) returns r on NeuroSim's own curves (A / P_max of its label table,
MLP_NeuroSim V3.0 documents/Nonlinearity-NormA.htm), 1 / ln 400 on a soft-bounds device (closed form: its curve
from -1 to within dw_min/2 of 1 is 1 - e^(-dw_min P), P_total = ln(400) / dw_min) and its upper limit on a
constant step."""

import math

import numpy as np
import pytest

from aimc.calibration.response_numbers import crossing, neurosim_a
from aimc.devices import ConstantStep, SoftBounds

NO_SPREAD = dict(dw_min_dtod=0.0, up_down_dtod=0.0, w_max_dtod=0.0, w_min_dtod=0.0, dw_min_std=0.0)


@pytest.mark.parametrize("label, a_norm", [(1.51, 0.8195), (3.01, 0.3853), (4.51, 0.2266), (7.51, 0.0702)])
def test_neurosim_curve_gives_its_a_back(label, a_norm):
    x = np.arange(101) / 100  # 100 pulses, read after each
    y = np.expm1(-x / a_norm) / math.expm1(-1 / a_norm)
    assert neurosim_a(x, y) == pytest.approx(a_norm, rel=1e-6), label


def test_soft_bounds_a_over_pmax_is_one_over_ln_400():
    c = crossing(SoftBounds(dw_min=0.01, up_down=0.0, w_max=1.0, w_min=-1.0, **NO_SPREAD))
    assert c["A_over_Pmax_LTP"] == pytest.approx(1 / math.log(400), rel=1e-3)
    assert c["A_over_Pmax_LTD"] == pytest.approx(c["A_over_Pmax_LTP"], rel=1e-6)


def test_constant_step_is_linear():
    c = crossing(ConstantStep(dw_min=0.01, up_down=0.0, w_max=1.0, w_min=-1.0, **NO_SPREAD))
    assert c["A_over_Pmax_LTP"] > 100 and c["A_over_Pmax_LTD"] > 100
