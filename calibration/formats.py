"""Other layouts of pulse data people have, read into a TraceSet (docs/calibration.md, `aimc fit --format`):

- runs: files of one potentiation or depression run each, two columns `pulse,conductance [UNIT]` (pulse
  numbers increasing, gaps allowed: reads k pulses apart); the run's direction is `# polarity: +1` / `-1`
  (or `up` / `down`) from the file's metadata, else the sign of its last read minus its first; the device is
  `# device: LABEL`, else the file name's stem up to its first '_' (D1_up.csv and D1_down.csv: device D1).
  Every read of a run is marked with its direction; a device's runs are joined in the order given, two
  pulse numbers apart, so that no increment spans two runs (their pulses in between are unknown): the pair
  across two runs of opposite direction is skipped, and the first read of a run after one of the same
  direction is marked as following no pulse (polarity 0). Data-quality lines name the file of each read.
- matrix: one row per read, header `pulse,polarity,LABEL,...` and `# unit: UNIT` metadata (default a.u.):
  one column of conductance per device or cycle; polarity as in the trace format.

Errors name the file, the line and the column, as for the trace format.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import numpy as np

from aimc.calibration.traces import (
    MAX_PULSE,
    UNITS,
    TraceFormatError,
    TraceSet,
    parse_unit,
    read_csv,
    read_text,
    read_value,
)

FORMATS = ("traces", "runs", "matrix")
_POLARITY = {"+1": 1, "1": 1, "up": 1, "-1": -1, "down": -1, "0": 0, "none": 0}


def _rows(path: Path) -> tuple[dict[str, str], list[tuple[int, list[str]]]]:
    """(metadata, [(line, cells)]) of a CSV file with `# key: value` lines before its header."""
    meta: dict[str, str] = {}
    rows = []
    for lineno, line in enumerate(io.StringIO(read_text(path), newline=""), start=1):
        text = line.strip()
        if not text:
            continue
        if "\0" in text:
            raise TraceFormatError(f"{path}: line {lineno}: contains a NUL character (not a text CSV line)")
        if text.startswith("#"):
            if not rows and ":" in text:
                key, value = text[1:].split(":", 1)
                meta[key.strip().lower()] = value.strip()
            continue
        rows.append((lineno, next(csv.reader([text]))))
    if len(rows) < 2:
        raise TraceFormatError(f"{path}: line {max(len(rows), 1)}: a header and at least one data row needed")
    return meta, rows


def _pulse(cell: str, where: str, column: int) -> int:
    try:
        p = int(cell)
    except ValueError:
        raise TraceFormatError(f"{where}, column {column} (pulse): {cell!r} is not an integer") from None
    if not 0 <= p < MAX_PULSE:
        raise TraceFormatError(f"{where}, column {column} (pulse): {p} is outside 0 .. 2^53")
    return p


def read_runs(paths: list[str | os.PathLike]) -> TraceSet:
    """Potentiation / depression runs, one two-column file each (module docstring)."""
    by_device: dict[str, list[tuple[int, int, float, int, int]]] = {}
    direction: dict[str, int] = {}  # each device's direction of its last run
    unit = None
    for n_file, path in enumerate(map(Path, paths)):
        meta, rows = _rows(path)
        (hline, head), data = rows[0], rows[1:]
        if len(head) != 2 or head[0].strip().lower() != "pulse":
            raise TraceFormatError(f"{path}: line {hline}: header must be 'pulse,conductance [UNIT]'")
        u = parse_unit(head[1], f"{path}: line {hline}", 2)
        if unit is not None and u != unit:
            raise TraceFormatError(f"{path}: line {hline}, column 2: unit {u} differs from {unit} of the other runs")
        unit = u
        reads = []
        for lineno, cells in data:
            where = f"{path}: line {lineno}"
            if len(cells) != 2:
                raise TraceFormatError(f"{where}: expected 2 columns (pulse, conductance), found {len(cells)}")
            reads.append((_pulse(cells[0], where, 1), read_value(cells[1], where, 2, "conductance"), lineno))
        for (p0, _, _), (p1, _, lineno) in zip(reads, reads[1:]):
            if p1 <= p0:
                raise TraceFormatError(f"{path}: line {lineno}, column 1 (pulse): {p1} does not increase")
        if "polarity" in meta:
            sign = _POLARITY.get(meta["polarity"].lower())
            if sign not in (1, -1):
                raise TraceFormatError(f"{path}: metadata 'polarity: {meta['polarity']}' is not +1 or -1")
        else:
            sign = 1 if reads[-1][1] >= reads[0][1] else -1
        label = meta.get("device") or path.stem.split("_")[0]
        dev = by_device.setdefault(label, [])
        offset = dev[-1][0] + 2 if dev else 0  # a gap after the previous run: no increment across runs
        start = reads[0][0]
        first = 0 if direction.get(label) == sign else sign  # a same-direction pair across runs would join them
        direction[label] = sign
        dev += [(offset + p - start, sign if j else first, g, ln, n_file) for j, (p, g, ln) in enumerate(reads)]
    rows = [(d, *r) for d, runs in enumerate(by_device.values()) for r in runs]
    fields = [("d", np.int64), ("p", np.int64), ("s", np.int8), ("g", float), ("n", np.int64), ("f", np.int64)]
    arr = np.array(rows, dtype=fields)
    return TraceSet(
        tuple(by_device),
        arr["d"],
        arr["p"],
        arr["s"],
        arr["g"],
        unit,
        {"format": "runs", "files": ", ".join(map(str, paths))},
        arr["n"],
        tuple(str(p) for p in paths),
        arr["f"],
    )


def read_matrix(path: str | os.PathLike) -> TraceSet:
    """A matrix of reads, one row per read and one column per device or cycle (module docstring)."""
    path = Path(path)
    meta, rows = _rows(path)
    (hline, head), data = rows[0], rows[1:]
    if len(head) < 3 or [c.strip().lower() for c in head[:2]] != ["pulse", "polarity"]:
        raise TraceFormatError(f"{path}: line {hline}: header must be 'pulse,polarity,LABEL,...'")
    unit = meta.get("unit", "a.u.").replace("µ", "u")
    if unit not in UNITS:
        raise TraceFormatError(f"{path}: metadata 'unit: {unit}' is not one of {', '.join(UNITS)}")
    labels = [c.strip() for c in head[2:]]
    if len(set(labels)) < len(labels) or not all(labels):
        raise TraceFormatError(f"{path}: line {hline}: column labels must be non-empty and distinct")
    pulses, pols, g, lines = [], [], [], []
    for lineno, cells in data:
        where = f"{path}: line {lineno}"
        if len(cells) != len(head):
            raise TraceFormatError(f"{where}: expected {len(head)} columns, found {len(cells)}")
        p = _pulse(cells[0], where, 1)
        if pulses and p <= pulses[-1]:
            raise TraceFormatError(f"{where}, column 1 (pulse): {p} does not increase")
        pol = _POLARITY.get(cells[1].strip().lower())
        if pol is None:
            raise TraceFormatError(f"{where}, column 2 (polarity): {cells[1]!r} is not +1, -1 or 0")
        pulses.append(p)
        pols.append(pol)
        g.append([read_value(c, where, k, labels[k - 3]) for k, c in enumerate(cells[2:], start=3)])
        lines.append(lineno)
    n_dev = len(labels)
    return TraceSet(
        tuple(labels),
        np.repeat(np.arange(n_dev), len(pulses)),
        np.tile(pulses, n_dev),
        np.tile(np.array(pols, np.int8), n_dev),
        np.asarray(g, float).T.ravel(),
        unit,
        {**meta, "format": "matrix"},
        np.tile(lines, n_dev),
    )


def read_traces(paths: list[str | os.PathLike] | str | os.PathLike, fmt: str = "traces") -> TraceSet:
    """Read pulse data in layout `fmt` (FORMATS): traces and matrix take one file, runs one or more."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    if fmt == "runs":
        return read_runs(paths)
    if len(paths) != 1:
        raise ValueError(f"format {fmt!r} takes one file, got {len(paths)}")
    return read_csv(paths[0]) if fmt == "traces" else read_matrix(paths[0])
