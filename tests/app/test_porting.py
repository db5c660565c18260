"""The aimc side of docs/porting.md runs (examples/port_from_aihwkit.py, shortened), and the API reference
builds from the docstrings (scripts/build_api_reference.py, pdoc from the dev extra)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "scripts"))

import build_api_reference  # noqa: E402
import port_from_aihwkit  # noqa: E402


def test_port_from_aihwkit_example_trains_and_round_trips():
    """50 Analog SGD steps of batch 10 lift the test accuracy far above chance (10 digits: 10%); writing
    the read-back weights again keeps it, and a reloaded state dict reads bit-identical outputs."""
    out = port_from_aihwkit.main(["--epochs", "1", "--n-train", "500"])
    assert out["accuracy"] > 0.4
    assert abs(out["rewritten_accuracy"] - out["accuracy"]) <= 0.02
    assert out["same_after_reload"] is True


def test_api_reference_builds(tmp_path):
    pytest.importorskip("pdoc")
    pages = build_api_reference.build(tmp_path)
    names = {p.relative_to(tmp_path).with_suffix("").as_posix().replace("/", ".") for p in pages}
    assert set(build_api_reference.modules()) <= names
    layers = (tmp_path / "aimc" / "trainers" / "layers.html").read_text()
    assert "AnalogConv1d" in layers and "AnalogLinear" in layers
