"""Results stay bit-identical: the digests of scripts/fingerprints.py (weights, reads, optimizer states after
fixed updates and training steps of every preset and algorithm) against those recorded in
tests/data/fingerprints.json. A change that is meant to change results regenerates the file
(`python scripts/fingerprints.py --write tests/data/fingerprints.json`) and says so in its commit."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_fingerprint_is_unchanged():
    spec = importlib.util.spec_from_file_location("fingerprints", ROOT / "scripts" / "fingerprints.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    want = json.loads((ROOT / "tests" / "data" / "fingerprints.json").read_text())
    got = module.compute()
    assert set(got) == set(want)
    changed = sorted(k for k in want if got[k] != want[k])
    assert not changed, f"{len(changed)} of {len(want)} results changed: {changed[:10]}"
