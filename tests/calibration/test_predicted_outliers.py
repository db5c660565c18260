"""The outlier rule against the model: real steps of a clean ReRamES simulation (steps that grow steeply toward a
bound, cycle noise 5 steps) that the model-free rule flags are predicted by the true device and so kept; a glitch
read of 2 weight units is not."""

import numpy as np

from aimc.calibration import measure_cycles, pulse_data, weight_map_for
from aimc.calibration.pulse_data import predicted_outliers
from aimc.devices import load_device

TRUTH = load_device("reram_es")


def test_real_steps_flagged_by_the_rule_are_predicted_by_the_model():
    tr = measure_cycles(TRUTH, n_cycles=2, n_devices=16, read_noise=0.0, seed=0)
    wmap = weight_map_for(tr)
    data = pulse_data(tr, wmap)
    assert data.quality["n_outliers"] > 0  # the model-free rule flags real steps
    nominal = TRUTH.model_copy(update=dict(dw_min_dtod=0.0, up_down_dtod=0.0, w_max_dtod=0.0, w_min_dtod=0.0))
    kept = predicted_outliers(tr, wmap, data, nominal, 0.0)
    assert len(kept) >= 0.9 * data.quality["n_outliers"]
    again = pulse_data(tr, wmap, keep=tuple(kept))
    assert again.quality["n_kept_predicted"] == len(kept)
    assert again.n == data.n + len(kept)


def test_glitch_read_is_not_predicted():
    tr = measure_cycles(TRUTH, n_cycles=1, n_devices=4, read_noise=0.0, seed=0)
    g = tr.conductance.copy()
    row = int(np.flatnonzero((tr.device == 1) & (tr.polarity == 1))[200])
    g[row] += 2.0 * 10.0  # 2 weight units (g_scale 10)
    bad = type(tr)(tr.devices, tr.device, tr.pulse, tr.polarity, g, tr.unit, tr.meta)
    wmap = weight_map_for(bad)
    data = pulse_data(bad, wmap)
    nominal = TRUTH.model_copy(update=dict(dw_min_dtod=0.0, up_down_dtod=0.0, w_max_dtod=0.0, w_min_dtod=0.0))
    assert row in data.quality["outlier_rows"]
    assert row not in predicted_outliers(bad, wmap, data, nominal, 0.0)
