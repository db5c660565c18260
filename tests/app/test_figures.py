"""Figures a paper can use (PDF beside every PNG, words and units on the axes, log axes for log-spaced
sweeps, integer epoch ticks, plain loss ticks, the Okabe-Ito palette, titles naming device and algorithm),
the sweep's HTML page (checked in headless Chromium where installed) and TensorBoard logging."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_hex

import aimc.runs.curves as curves
import aimc.sweeps.summary as sweep_summary
from aimc.common import figures
from aimc.config import validate_config
from aimc.runs.experiment import run_experiment
from aimc.sweeps.sweep_file import parse_sweep

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
BASE = {
    "name": "tiny",
    "epochs": 1,
    "batch_size": 10,
    "model": {"name": "fcn", "hidden": [8]},
    "data": {"name": "mnist_small", "n_train": 30, "n_test": 30},
    "tile": {"device": "r1_exp_2", "update": {"mode": "expected"}},
    "trainer": {"algorithm": "analog_sgd"},
}


@pytest.fixture
def captured(monkeypatch):
    """The figures that the run curves and the sweep summary save, drawn, before they are closed."""
    found = []

    def capture(fig, path, dpi=120):
        fig.canvas.draw()
        found.append((Path(path).name, fig))
        return figures.save_figure(fig, path, dpi)

    monkeypatch.setattr(curves, "save_figure", capture)
    monkeypatch.setattr(sweep_summary, "save_figure", capture)
    return found


def test_pdf_text_is_truetype():
    assert figures.STYLE["pdf.fonttype"] == 42  # Type 42 (TrueType), editable; matplotlib's default is Type 3


def test_save_figure_writes_a_png_and_a_reproducible_pdf(tmp_path):
    plt = figures.pyplot()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    png, pdf = figures.save_figure(fig, tmp_path / "a.png")
    first = pdf.read_bytes()
    figures.save_figure(fig, tmp_path / "a.png")
    plt.close(fig)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and first[:5] == b"%PDF-"
    assert pdf.read_bytes() == first  # no creation date: the same figure, the same bytes


def test_log_axis_where_numpy_would_space_the_values_in_log():
    assert figures.log_spaced(list(np.logspace(-3, -1, 3)))
    assert figures.log_spaced(list(np.geomspace(0.05, 0.4, 4)))
    assert not figures.log_spaced(list(np.linspace(0.1, 0.5, 5)))
    assert figures.log_spaced([0.01, 1.0]) and not figures.log_spaced([1.0, 2.0])
    assert not figures.log_spaced([0.0, 1.0, 2.0])


def test_axis_labels_are_words_with_units():
    assert figures.label("trainer.lr") == "learning rate (gradient step)"
    assert figures.label("test_accuracy") == "test accuracy (%)"
    assert figures.label("residual.test_loss") == "residual: test loss (nats)"
    assert figures.label("tile.forward.max_bm_reads") == "max bm reads (tile.forward.max_bm_reads)"
    assert figures.scale("sgd.test_accuracy") == 100.0 and figures.scale("test_loss") == 1.0


def test_learning_curves(tmp_path, captured):
    hist = [
        {
            "epoch": e,
            "test_accuracy": 0.1 + 0.2 * e,
            "test_loss": 2.3 / (1 + e),
            "train_loss": None if e == 0 else 2.2 / (1 + e),
        }
        for e in range(4)
    ]
    cfg = validate_config({**BASE, "compare": [{"algorithm": "sgd"}, {"algorithm": "residual"}], "trainer": None})
    curves.write_curves({"sgd": hist, "residual": hist}, tmp_path / "curves", f"tiny: {curves.describe(cfg)}")
    assert (tmp_path / "curves.pdf").read_bytes()[:5] == b"%PDF-"
    ((_, fig),) = captured
    acc, loss = fig.axes
    assert fig.get_size_inches()[0] == figures.COLUMN_WIDTH == 3.5  # one column of a two-column paper
    assert fig._suptitle.get_text() == "tiny: device r1_exp_2, sgd vs residual"
    for ax in (acc, loss):
        ticks = [t for t in ax.get_xticks() if 0 <= t <= 3]
        assert ticks and all(float(t).is_integer() for t in ticks)
    shown = [t.get_text() for t in loss.get_yticklabels() + loss.get_yticklabels(minor=True) if t.get_text()]
    assert loss.get_yscale() == "log" and "1" in shown and "0.5" in shown  # a factor 4: log, plain labels
    assert not any("$" in t or "^" in t for t in shown)  # no 10^x
    narrow = [{**r, "test_loss": 2.30 - 0.01 * r["epoch"], "train_loss": None} for r in hist]
    curves.write_curves({"analog_sgd": narrow}, tmp_path / "narrow")
    loss = captured[1][1].axes[1]
    shown = [t.get_text() for t in loss.get_yticklabels() if t.get_text()]
    assert loss.get_yscale() == "linear" and len(shown) >= 3 and "2.3" in shown  # no log tick in 2.27..2.30
    assert [to_hex(line.get_color()).upper() for line in acc.get_lines()] == OKABE_ITO[:2]


def _fake_sweep(tmp_path: Path):
    """A two-axis sweep (log-spaced rates x devices) with result files of made-up metrics."""
    sweep = parse_sweep(
        {
            "name": "grid",
            "base": BASE,
            "seeds": [0, 1],
            "axes": [
                {"field": "trainer.lr", "values": [0.01, 0.1, 1.0]},
                {"field": "tile.device", "values": ["r1_exp_2", "r1_power_1"]},
            ],
        }
    )
    rng = np.random.default_rng(0)
    for r in sweep.runs:
        folder = tmp_path / r.folder
        folder.mkdir(parents=True)
        metrics = {"test_accuracy": float(rng.uniform(0.1, 0.9)), "test_loss": float(rng.uniform(0.2, 2.0))}
        (folder / "result.json").write_text(json.dumps({"config_hash": r.config_hash, "metrics": metrics}))
    return sweep


def test_sweep_figures(tmp_path, captured):
    sweep = _fake_sweep(tmp_path)
    sweep_summary.write_summary(sweep, tmp_path)
    figs = dict(captured)
    ax = figs["test_accuracy_vs_trainer.lr.png"].axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "learning rate (gradient step)"
    assert ax.get_ylabel() == "test accuracy (%)"
    assert ax.get_title().splitlines()[1:] == [
        "devices: see the axes, analog_sgd",
        "error bars: \u00b1 1 sample std over the 2 seeds of a point",
    ]
    assert [to_hex(c.lines[0].get_color()).upper() for c in ax.containers] == OKABE_ITO[:2]  # one per device
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.01", "0.1", "1"]
    assert figs["test_accuracy_vs_tile.device.png"].axes[0].get_xlabel() == "device"
    for name in figs:
        assert (tmp_path / "figures" / name).with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"


def _page_rows(dom: str) -> list[list[str]]:
    body = dom.split("<tbody>")[1].split("</tbody>")[0]
    return [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in body.split("</tr>") if "<td" in row]


def test_sweep_page_is_self_contained_and_sorts(tmp_path):
    sweep = _fake_sweep(tmp_path)
    sweep_summary.write_summary(sweep, tmp_path)
    page = (tmp_path / "summary.html").read_text()
    assert 'src="http' not in page and "<link" not in page  # nothing fetched
    assert page.count("data:image/png;base64,") == len(list((tmp_path / "figures").glob("*.png"))) == 3
    rows = _page_rows(page)
    assert len(rows) == len(sweep.points)
    assert "<th>test_accuracy mean (%)</th>" in page  # in %, as the figures show it
    with open(tmp_path / "summary.csv", newline="") as fh:
        csv_means = [r["test_accuracy_mean"] for r in csv.DictReader(fh)]
    assert [r[4] for r in rows] == [f"{100 * float(v):.4g}" for v in csv_means]  # csv: fractions
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        pytest.skip("no headless Chromium (apt-get install chromium) to render the page")
    column = 4  # test_accuracy mean: click its header twice (ascending, then descending)
    probe = tmp_path / "probe.html"
    probe.write_text(
        page.replace(
            "</body>",
            f"<script>const th = document.querySelectorAll('th')[{column}]; th.click(); th.click();</script></body>",
        )
    )
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", probe.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    shown = [float(r[column]) for r in _page_rows(dom)]
    means = sorted((float(r[column]) for r in rows), reverse=True)
    assert shown == means and '<th class="desc">' in dom


def test_tensorboard_logs_the_epoch_metrics(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = validate_config({**BASE, "log": {"tensorboard": True}})
    assert cfg.hash() == validate_config(BASE).hash()  # where metrics go changes no result
    run_experiment(cfg, tmp_path / "run")
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    for key in ("test_accuracy", "test_loss", "pulses"):
        logged = [(e.step, e.value) for e in events.Scalars(key)]
        assert logged == [(r["epoch"], pytest.approx(r[key], rel=1e-6)) for r in records]
