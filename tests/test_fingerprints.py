"""Results stay bit-identical: the digests of scripts/fingerprints.py (weights, reads, optimizer states after
fixed updates and training steps of every preset and algorithm) against those recorded in
tests/data/fingerprints.json. A change that is meant to change results regenerates the file
(`python scripts/fingerprints.py --write tests/data/fingerprints.json`) and says so in its commit.

The script runs in a subprocess: it pins torch's and MKL's code paths (its PINNED_ENV) before torch loads,
which this process has done long before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_fingerprint_is_unchanged():
    script, recorded = ROOT / "scripts" / "fingerprints.py", ROOT / "tests" / "data" / "fingerprints.json"
    run = subprocess.run(
        [sys.executable, str(script), "--check", str(recorded)], capture_output=True, text=True, timeout=1800
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
