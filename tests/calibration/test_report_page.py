"""The report page rendered from its template: well-formed HTML with every section of a fit, the fitted numbers
as the tables format them, and labels from user files (trace and device file names, the conductance unit of a
device file) escaped."""

import json
from html.parser import HTMLParser

from aimc.calibration import fit, measure_cycles, write_report
from aimc.devices import Linear

VOID = {"meta", "img", "br", "hr", "link", "input"}


class Page(HTMLParser):
    """The tags of a page checked for nesting (every end tag closes the innermost open one), its headings
    (h1 to h4) and table cells as text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open, self.tags, self.headings, self.cells, self.text = [], [], [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in VOID:
            self.open.append(tag)
        if tag in ("h1", "h2", "h3", "h4", "td"):
            self.text = ""

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, f"</{tag}> closes <{self.open[-1] if self.open else None}>"
        self.open.pop()
        if tag == "td":
            self.cells.append(self.text)
        elif tag in ("h1", "h2", "h3", "h4"):
            self.headings.append(self.text)
        if tag in ("h1", "h2", "h3", "h4", "td"):
            self.text = None

    def handle_data(self, data):
        if self.text is not None:
            self.text += data


def test_fit_report_page_parses_with_its_sections_numbers_and_escaped_labels(tmp_path):
    traces = measure_cycles(Linear(tau=0.6, c=0.1, dw_min=0.03, dw_min_std=0.2), n_devices=4, read_noise=0.003, seed=5)
    res = fit(traces, kinds=["linear", "ideal"], source="runs/<script>alert(1).csv")
    other = tmp_path / "<i>dev.json"
    wmap = {"g_mid": 20.0, "g_scale": 10.0, "unit": "<b>uS</b>", "origin": "datasheet"}
    device = {"kind": "linear", "tau": 0.6, "c": 0.1, "dw_min": 0.03}
    other.write_text(json.dumps({"device": device, "weight_map": wmap}))
    raw = write_report([res, str(other)], tmp_path / "report", n_elements=4).read_text()
    page = Page()
    page.feed(raw)
    page.close()
    assert page.open == [] and page.tags.count("img") == 13  # 4 figures a device, 4 of the fit, the overlay figure
    assert not {"script", "i", "b"} & set(page.tags)  # labels from user files are text, not tags
    assert "<h2>&lt;script&gt;alert(1) (linear)</h2>" in raw and "(&lt;b&gt;uS&lt;/b&gt;)" in raw
    n = res.summary()["data"]["n_increments"]
    assert page.headings[:4] == [
        "aimc device report",
        "Side by side",
        "<script>alert(1) (linear)",
        f"Fit: best family linear (by BIC), {n} increments from 4 devices",
    ]
    for section in (
        "Data quality",
        "Family ranking",
        "Residual diagnostics",
        "Noise",
        "Device-to-device spread",
        "The fitted device in IBM aihwkit 1.1.0",
        "<i>dev",
    ):
        assert section in page.headings
    assert any(h.startswith("Parameters (per-device fit; 95% intervals:") for h in page.headings)
    # the fitted c (truth 0.1) and read noise, and the device file's range in its unit, as the tables format them
    assert f"{res.best.params['c']:.4g}" in page.cells and f"{res.noise['read_noise']:.4g}" in page.cells
    assert "dynamic range (<b>uS</b>)" in page.cells and "G = 20 + 10 w (<b>uS</b>)" in page.cells
