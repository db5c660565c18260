"""Every random stream is named in aimc.common.seeds: its keys are distinct, its seed derivations are the ones
checkpoints record, and no module outside it seeds a numpy generator or a counter-based stream from a literal."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from aimc.common import seeds

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("aimc", "devices", "trainers", "calibration")


def test_stream_keys_are_distinct():
    keys = {n: v for n, v in vars(seeds).items() if n.isupper() and not n.endswith("STRIDE")}
    assert len(set(keys.values())) == len(keys), keys


def test_derived_seeds_follow_the_strides():
    assert seeds.layer_seed(3, 2) == 3002 and seeds.tile_seed(3002, 1) == 3002001
    assert seeds.array_seed(7, 1) == 7 * 1009 + 1
    assert seeds.one_sided_seeds(5) == (10, 11)
    assert seeds.stream_seed(9, seeds.TILE_READS) == (9 << 12) ^ 0x71E
    assert np.array_equal(seeds.generator(1, 2).random(3), np.random.default_rng([1, 2]).random(3))


def _literal_seeding(source: str) -> list[int]:
    """Lines that call default_rng with a list literal (a stream seeded outside the seeds module)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "default_rng"
            and node.args
            and isinstance(node.args[0], ast.List)
        ):
            found.append(node.lineno)
    return found


def test_generators_are_seeded_through_the_seeds_module():
    found = [
        f"{p.relative_to(ROOT)}:{line}"
        for folder in LIBRARY
        for p in sorted((ROOT / folder).rglob("*.py"))
        if p.name != "seeds.py"
        for line in _literal_seeding(p.read_text())
    ]
    assert not found, found


def test_a_literal_seed_list_is_found():
    assert _literal_seeding("import numpy as np\nrng = np.random.default_rng([1, 0x5EC])\n") == [2]
