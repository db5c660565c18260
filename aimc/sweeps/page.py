"""A sweep's summary as one self-contained HTML page (summary.html): the summary table, sortable by any
column with a click on its header, and every figure inline (PNG as base64), no file or network needed."""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

from aimc.common.files import atomic_write_text

_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #bbb;padding:.3em .6em;text-align:right}
th{background:#eef;cursor:pointer;user-select:none}th.asc::after{content:" \\25B2"}th.desc::after{content:" \\25BC"}
td:first-child,th:first-child{text-align:left}figure{display:inline-block;margin:.5em}img{max-width:560px}
.note{color:#555}"""

_SORT = """document.querySelectorAll("table.sortable th").forEach((th, col) => th.addEventListener("click", () => {
  const table = th.closest("table"), body = table.tBodies[0], asc = !th.classList.contains("asc");
  table.querySelectorAll("th").forEach(h => h.classList.remove("asc", "desc"));
  th.classList.add(asc ? "asc" : "desc");
  const key = td => td.dataset.sort === undefined ? td.textContent : td.dataset.sort;
  const rows = Array.from(body.rows).sort((a, b) => {
    const x = key(a.cells[col]), y = key(b.cells[col]), nx = parseFloat(x), ny = parseFloat(y);
    const c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
    return asc ? c : -c;
  });
  rows.forEach(r => body.appendChild(r));
}));"""


def _cell(v: Any) -> str:
    """A table cell; numbers carry their exact value in data-sort, NaN sorts last."""
    if isinstance(v, float):
        if math.isnan(v):
            return '<td data-sort="Infinity">-</td>'
        return f'<td data-sort="{v!r}">{v:.4g}</td>'
    if isinstance(v, int) and not isinstance(v, bool):
        return f'<td data-sort="{v}">{v}</td>'
    return f"<td>{html.escape(str(v))}</td>"


def write_page(
    path: str | Path,
    title: str,
    subtitle: str,
    columns: list[str],
    rows: list[list[Any]],
    figures: list[Path],
    note: str = "",
) -> Path:
    """Write the page to `path`: `title`, `subtitle`, a sortable table (`columns`, `rows` of values), the
    PNG `figures` inline with their file names as captions, and `note` below the table."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    figs = []
    for fig in figures:
        data = base64.b64encode(Path(fig).read_bytes()).decode()
        figs.append(
            f'<figure><img alt="{html.escape(fig.stem)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(fig.name)} (PDF beside it)</figcaption></figure>"
        )
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p>"
        f'<table class="sortable" id="summary"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
        f'<p class="note">{html.escape(note)}</p>'
        f"<h2>Figures</h2>{''.join(figs) or '<p>none (no numeric metric finished yet)</p>'}"
        f"<script>{_SORT}</script></body></html>\n"
    )
    atomic_write_text(path, page)
    return Path(path)
