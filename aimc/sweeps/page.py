"""A sweep's summary as one self-contained HTML page (summary.html): the summary table, sortable by any
column with a click on its header, and every figure inline (PNG as base64), no file or network needed.
The page is the jinja2 template templates/summary.html (autoescaped), shipped with the package."""

from __future__ import annotations

import base64
import math
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from aimc.common.files import atomic_write_text


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"), autoescape=True, keep_trailing_newline=True
    )
    return env.get_template("summary.html")


def _cell(v: Any) -> dict[str, str | None]:
    """A table cell: its text, and for a number its exact value to sort by (NaN sorts last)."""
    if isinstance(v, float):
        if math.isnan(v):
            return {"text": "-", "sort": "Infinity"}
        return {"text": f"{v:.4g}", "sort": repr(v)}
    if isinstance(v, int) and not isinstance(v, bool):
        return {"text": str(v), "sort": str(v)}
    return {"text": str(v), "sort": None}


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
    figs = [
        {"stem": Path(f).stem, "name": Path(f).name, "data": base64.b64encode(Path(f).read_bytes()).decode()}
        for f in figures
    ]
    page = _template().render(
        title=title,
        subtitle=subtitle,
        columns=columns,
        rows=[[_cell(v) for v in row] for row in rows],
        figures=figs,
        note=note,
    )
    atomic_write_text(path, page)
    return Path(path)
