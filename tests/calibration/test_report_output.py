"""What the report and fit commands write and refuse: TrueType fonts in the PDFs, labelled axes, a one-line
refusal of an element count beyond MAX_ELEMENTS, no folder left by a failed report, help texts, short output
names for many run files, and runs of one direction kept apart."""

import re
from pathlib import Path

import numpy as np
import pytest

from aimc.calibration import measure_cycles, read_runs, write_report
from aimc.calibration.report import MAX_ELEMENTS
from aimc.calibration.report_figures import fig_penalty, fig_response
from aimc.calibration.response_numbers import device_numbers
from aimc.commands.cli import main
from aimc.devices import SoftBounds, Tabulated

NO_SPREAD = dict(dw_min_dtod=0.0, up_down_dtod=0.0, w_max_dtod=0.0, w_min_dtod=0.0)
TRUTH = SoftBounds(dw_min=0.02, up_down=0.1, w_max=0.7, w_min=-0.5, dw_min_std=0.2, **NO_SPREAD)


def test_pdfs_embed_no_type3_font(tmp_path):
    write_report(["ideal"], tmp_path, n_elements=4)
    pdfs = sorted(tmp_path.glob("*.pdf"))
    assert pdfs
    for pdf in pdfs:
        fonts = set(re.findall(rb"/Subtype /(\w+)", pdf.read_bytes())) - {b"Form", b"Image"}
        # TrueType glyphs: simple (/TrueType) or, for text beyond Latin-1, composite (/Type0 over /CIDFontType2)
        assert fonts and b"Type3" not in fonts and fonts <= {b"TrueType", b"Type0", b"CIDFontType2"}, pdf.name


def test_response_figures_label_their_axes():
    num = device_numbers(TRUTH, n_elements=4)
    for fig in (fig_response(num), fig_penalty(num)):
        assert all(ax.get_ylabel() for ax in fig.axes)


def test_too_many_elements_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["report", "ideal", "--out", str(out), "--elements", str(10**9)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"between 1 and {MAX_ELEMENTS}" in err
    assert not out.exists()


def test_failed_report_leaves_no_folder(tmp_path):
    out = tmp_path / "rep"
    with pytest.raises((FileNotFoundError, ValueError)):
        write_report(["ideal", str(tmp_path / "no_such_device.json")], out, n_elements=4)
    assert not out.exists()


@pytest.mark.parametrize("command, needle", [("fit", "PDF"), ("report", "PDF")])
def test_help_describes_the_command(capsys, command, needle):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    usage, _, rest = text.partition("\n\n")
    assert rest.strip() and not rest.lstrip().startswith("positional") and needle in text


def _runs(folder, n_devices):
    tr = measure_cycles(TRUTH, n_pulses=60, n_cycles=1, n_devices=n_devices, read_noise=0.004, seed=3)
    paths = []
    for d in range(n_devices):
        g = tr.trace(d)[2]
        for name, idx in (("up", np.arange(0, 61)), ("down", np.arange(60, 121))):
            body = "".join(f"{k},{float(g[j])!r}\n" for k, j in enumerate(idx))
            path = folder / f"D{d}_{name}.csv"
            path.write_text(f"# polarity: {name}\npulse,conductance [uS]\n{body}")
            paths.append(str(path))
    return paths


def test_many_run_files_give_short_names(tmp_path):
    paths = _runs(tmp_path, 8)  # 16 files
    out = tmp_path / "fit"
    args = ["fit", *paths, "--format", "runs", "--out", str(out), "--families", "SoftBounds", "--no-spread"]
    assert main([*args, "--quiet", "--elements", "4"]) == 0
    assert max(len(p.name) for p in out.iterdir()) < 60
    page = (out / "report.html").read_text()
    assert "D0_up +15 files" in page and all(Path(p).name in page for p in paths)


def test_runs_of_one_direction_are_not_joined(tmp_path):
    a, b = tmp_path / "D1_a.csv", tmp_path / "D1_b.csv"
    a.write_text("# polarity: up\npulse,conductance [uS]\n0,1.0\n1,1.1\n2,1.2\n")
    b.write_text("# polarity: up\npulse,conductance [uS]\n0,1.05\n1,1.15\n3,1.3\n")
    tr = read_runs([a, b])
    inc = tr.increments()
    # 2 increments in the first run, 2 in the second (one of 2 pulses): none from 1.2 to 1.05 across them
    np.testing.assert_allclose(inc.dg, [0.1, 0.1, 0.1, 0.15], atol=1e-12)
    np.testing.assert_array_equal(inc.n_pulses, [1, 1, 1, 2])
    assert re.match(rf"{re.escape(str(b))}: line 4 \(device D1", tr.where(int(inc.row[2])))


def test_drift_note_says_when_the_symmetric_point_repels(tmp_path):
    # steps that grow toward the bound they move to: G/F = -w / 2, (G/F)' = -1/2 at w_sym = 0 (repelling)
    rep = Tabulated(w=[-1.0, 0.0, 1.0], q_plus_values=[0.5, 1.0, 1.5], q_minus_values=[1.5, 1.0, 0.5], dw_min=0.01)
    assert device_numbers(rep, n_elements=2)["penalty"]["stiffness_at_symmetric_point"] == pytest.approx(-0.5)
    page = write_report([rep, TRUTH], tmp_path, n_elements=4).read_text()
    assert page.count("away from the symmetric point, which repels") == 1
    assert page.count("largest drift per step toward the symmetric point") == 1
