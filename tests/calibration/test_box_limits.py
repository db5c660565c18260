"""Box limits: aihwkit 1.1.0's PCM preset element (ExpStep, A_up = -27.2 with gamma_up = -5 in the fitted
parameterisation a = 0.5, b = 0) lies inside the ExpStep box."""

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
