"""Paper results that take a while (10 s on a quiet 2-core machine, minutes on a loaded one): marked slow,
run with `python3 -m pytest -m slow`.

R1 Fig. 2 (Wu et al., NeurIPS 2025, arXiv:2502.06309): on the shifted-linear least-squares problem with
c = 0.3, residual learning with a zero-shifted P converges to W* down to the floor set by dw_min (R1: near
1e-5), while Analog SGD's error stays of the order of ||W*||^2 (it settles near the symmetric point c tau).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import r1_fig2_least_squares as fig2  # noqa: E402


@pytest.mark.slow
def test_r1_fig2_residual_learning_reaches_the_floor_where_analog_sgd_fails():
    rl = fig2.run(fig2.ALGORITHMS["Residual learning"], c=0.3, steps=1000)
    sgd = fig2.run(fig2.ALGORITHMS["Analog SGD"], c=0.3, steps=1000)
    assert rl[-1] < 1e-4  # R1: a floor near 1e-5 (dw_min = 1e-4)
    assert sgd[-1] > 1.0  # ||W*||^2 = 50 * 0.25 = 12.5 at the start; Analog SGD does not get close
