"""Report numbers against closed forms, the written files, and the CLI."""

import json

import numpy as np
import pytest

from aimc.calibration import device_numbers, implicit_penalty, measure_cycles, write_csv, write_report
from aimc.commands.cli import main
from aimc.devices import Linear, load_device


def test_linear_device_numbers_match_closed_forms():
    tau, c = 1.0, 0.2
    num = device_numbers(Linear(tau=tau, c=c, dw_min=0.05), n_elements=4)
    w = np.asarray(num["curves"]["w"])
    u = w / tau
    np.testing.assert_allclose(num["curves"]["F"], 1 - c * u, atol=1e-12)  # R1 Table 1 (c_Lin)
    np.testing.assert_allclose(num["curves"]["G"], u - c, atol=1e-12)
    np.testing.assert_allclose(num["curves"]["drift"], -(u - c), atol=1e-12)
    assert num["symmetric_point"] == pytest.approx(c * tau)
    assert num["n_states"] == pytest.approx(2 * tau / 0.05) and num["dynamic_range"] == pytest.approx(2 * tau)

    def h(x):  # antiderivative of (x - c) / (1 - c x)
        return -x / c - (1 - c * c) / c**2 * np.log(1 - c * x)

    np.testing.assert_allclose(num["curves"]["R_c"], tau * (h(u) - h(c)), atol=1e-4)
    assert num["penalty"]["stiffness_at_symmetric_point"] == pytest.approx(1 / (tau * (1 - c * c)), rel=1e-3)


def test_implicit_penalty_of_soft_bounds_is_quadratic():
    # R1: a linear device with c = 0 gives the weighted L2 penalty w^2 / (2 tau)
    w = np.linspace(-0.6, 0.6, 601)
    np.testing.assert_allclose(implicit_penalty(w, w / 0.6, 0.0), w**2 / 1.2, atol=1e-6)


def test_report_files_for_presets_side_by_side(tmp_path):
    page = write_report(["r1_power_1", "r3_10_states"], tmp_path, n_elements=8)
    text = page.read_text()
    assert "data:image/png;base64," in text and "Side by side" in text and "r3_10_states" in text
    assert (tmp_path / "compare.png").is_file() and (tmp_path / "r1_power_1_response.png").is_file()
    for stem in ("compare", "r1_power_1_response"):  # a vector copy of every figure, for papers
        assert (tmp_path / f"{stem}.pdf").read_bytes().startswith(b"%PDF-")
    nums = json.loads((tmp_path / "report.json").read_text())
    assert nums["r3_10_states"]["numbers"]["n_states"] == pytest.approx(10.0)


def test_cli_fit_then_report(tmp_path, capsys):
    truth = Linear(tau=0.6, c=0.1, dw_min=0.03, dw_min_std=0.2)
    csv = write_csv(measure_cycles(truth, n_devices=4, read_noise=0.003, seed=5), tmp_path / "t.csv")
    out = tmp_path / "fit"
    assert main(["fit", str(csv), "--out", str(out), "--families", "linear,power,ideal", "--elements", "8"]) == 0
    dev = load_device(str(out / "device.json"))
    assert dev.kind == "linear" and dev.c == pytest.approx(0.1, abs=0.03)
    html = (out / "report.html").read_text()
    assert "Family ranking" in html and "Parameters" in html
    assert main(["report", str(out), "ideal", "--out", str(tmp_path / "rep"), "--elements", "8"]) == 0
    assert (tmp_path / "rep" / "report.html").is_file()
    assert main(["fit", str(tmp_path / "missing.csv"), "--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
