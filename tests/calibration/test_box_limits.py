"""Box limits: aihwkit 1.1.0's PCM preset element (ExpStep, A_up = -27.2 with gamma_up = -5 in the fitted
parameterisation a = 0.5, b = 0) lies inside the ExpStep box; a population of those elements comes back as
ExpStep, or flagged noise-dominated (its warnings, which the device file and the report carry)."""

import pytest

from aimc.calibration.families import expstep_canonical, families
from aimc.devices import load_device

PCM = load_device("aihwkit_pcm").device


def test_expstep_box_holds_aihwkit_pcm():
    truth = expstep_canonical(PCM.model_dump())
    fam = families()["ExpStep"]
    lo, hi = fam.box(type("D", (), {"lo": 0.0, "hi": 2.0, "dw0": 0.01})())
    for p in ("A_up", "A_down", "gamma_up", "gamma_down"):
        k = fam.params.index(p)
        assert lo[k] < truth[p] < hi[k], p


@pytest.mark.slow
def test_aihwkit_pcm_population_is_exp_step_or_flagged():
    """8 aihwkit PCM preset elements, 2 cycles: the complex cycle noise (dw_min_std 0.6, add 0.042 = 4.2
    dw_min) leaves the mean response under 10% of the increment variance, so LinearStep's fit of the binned
    means (lack-of-fit p 0.64) beats ExpStep's by BIC; the result, its device file and its report must then say
    the fit is noise-dominated."""
    from aimc.calibration import fit, measure_cycles
    from aimc.calibration.report import fit_flags
    from aimc.calibration.response_numbers import device_numbers

    res = fit(measure_cycles(PCM, n_cycles=2, n_devices=8, seed=0), kinds=["LinearStep", "ExpStep"], spread=False)
    if res.best.kind != "ExpStep":
        assert any(w.startswith("noise-dominated fit") for w in res.warnings), (res.ranking_table(), res.warnings)
        assert res.device_file()["fit"]["warnings"] == res.warnings
        report = fit_flags(res.summary(), device_numbers(res.device, n_elements=4))
        assert any(w.startswith("noise-dominated fit") for w in report), report
