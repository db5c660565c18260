"""Multi-tile residual learning's cascade against aihwkit 1.1.0's TransferCompound with N devices, where a venv with
aihwkit exists (skipped otherwise; `AIMC_AIHWKIT_PYTHON` names its interpreter, default ~/aihwkit-venv/bin/python).

R3's least-squares problem (examples/r3_least_squares.py: 256 independent scalar weights, 4-state soft-bounds
devices, R3's gains, periods and transfer rate, aihwkit's default fast step 1.0), 4000 steps, two seeds: the mean
squared error of the last quarter for 2, 3 and 4 tiles agrees with aihwkit's within 25% (one seed's error
spreads by about 5% for 2 tiles and up to 20% for 4 in either simulator; without transfers the error of 2 tiles
would be about 4x larger), and grows with the number of tiles in both.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from aihwkit_helpers import PYTHON

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
from r3_least_squares import aihwkit_errors, tracking_error  # noqa: E402

pytestmark = pytest.mark.skipif(not PYTHON.exists(), reason=f"no aihwkit interpreter at {PYTHON}")

TILES = (2, 3, 4)
SEEDS = (0, 1)


def test_multi_tile_cascade_matches_aihwkit_transfer_compound():
    runs = [aihwkit_errors(str(PYTHON), 1.0, 4000, tiles=TILES, seed=s) for s in SEEDS]
    theirs = {n: sum(r[n] for r in runs) / len(SEEDS) for n in TILES}
    ours = {n: sum(tracking_error(n, 1.0, 4000, seed=s) for s in SEEDS) / len(SEEDS) for n in TILES}
    for n in TILES:
        assert ours[n] == pytest.approx(theirs[n], rel=0.25), (ours, theirs)
    assert ours[2] < ours[3] < ours[4] and theirs[2] < theirs[3] < theirs[4]
