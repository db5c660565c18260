"""Pulse traces: conductance read after every pulse, for one or many devices, and their CSV file format.

A trace file is CSV with optional `# key: value` metadata lines first, then the header
`device,pulse,polarity,conductance [UNIT]`, then one row per read (docs/calibration.md):

- device: a label (any text without commas); rows of one device form its trace;
- pulse: the read index, integer >= 0, strictly increasing within a device; the read with index n follows
  the n-th pulse, so index 0 is usually the read before any pulse;
- polarity: the pulse fired just before this read: +1 (or `up`), -1 (or `down`), 0 (or `none`: no pulse);
- conductance: the read value, in the unit named in the header (S, mS, uS, nS, pS, or a.u.).
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from aimc.common.errors import ConfigError
from aimc.common.files import atomic_write_text

UNITS = ("S", "mS", "uS", "nS", "pS", "a.u.")
COLUMNS = ("device", "pulse", "polarity", "conductance")
_POLARITY = {"+1": 1, "1": 1, "up": 1, "-1": -1, "down": -1, "0": 0, "none": 0}
_CONDUCTANCE = re.compile(r"^conductance\s*\[\s*([^\]]+?)\s*\]$")


# The largest read magnitude accepted: the fit squares differences of reads and sums them over up to ~1e6
# increments, so values near float64's limit (1.8e308) would overflow it; 1e150 leaves room for both.
MAX_ABS_READ = 1e150
MAX_PULSE = 2**53  # pulse indices are exact integers in float64 below this


class TraceFormatError(ConfigError):
    """A malformed trace file; the message names the file, the line and the column."""


@dataclass(frozen=True)
class Increments:
    """Per-pulse changes of a trace set, one entry per pair of consecutive reads with a pulse between them.

    g: conductance midway between the two reads, dg: change of conductance (both in the set's unit);
    polarity: +1 up, -1 down; device: index into TraceSet.devices; follows: True where this increment starts
    at the read where the previous one ended; n_pulses: pulses between the two reads (1, or k > 1 when reads
    were skipped and both reads follow pulses of the same polarity); row: row of the second read in the
    TraceSet; skipped: pairs of consecutive reads not used, by reason.
    """

    g: np.ndarray
    dg: np.ndarray
    polarity: np.ndarray
    device: np.ndarray
    follows: np.ndarray
    n_pulses: np.ndarray
    row: np.ndarray
    skipped: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TraceSet:
    """Reads of one or many devices, rows grouped by device in order of first appearance, then by pulse.

    devices: the device labels; device: index of each row's device; pulse: read index; polarity: pulse
    before the read (+1, -1, 0); conductance: read value in `unit`; meta: the file's metadata lines; line:
    the file line of each row (None when the set was not read from a file); files, file: where the rows come
    from several files (`formats.read_runs`), their names and each row's index into them.
    """

    devices: tuple[str, ...]
    device: np.ndarray
    pulse: np.ndarray
    polarity: np.ndarray
    conductance: np.ndarray
    unit: str = "uS"
    meta: dict[str, str] = field(default_factory=dict)
    line: np.ndarray | None = None
    files: tuple[str, ...] = ()
    file: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.conductance)
        for name in ("device", "pulse", "polarity"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"TraceSet.{name} has {len(getattr(self, name))} rows, conductance has {n}")
        if self.unit not in UNITS:
            raise ValueError(f"unknown conductance unit {self.unit!r}; known: {', '.join(UNITS)}")
        if n and (self.device.min() < 0 or self.device.max() >= len(self.devices)):
            raise ValueError("TraceSet.device indices must point into TraceSet.devices")
        if not np.all(np.isin(self.polarity, (-1, 0, 1))):
            raise ValueError("TraceSet.polarity must be -1, 0 or +1")
        if not np.all(np.isfinite(self.conductance)):
            raise ValueError("TraceSet.conductance must be finite")
        same = self.device[1:] == self.device[:-1]
        if np.any(same & (np.diff(self.pulse) <= 0)):
            raise ValueError("pulse indices must increase strictly within each device")
        if np.any(np.diff(self.device) < 0):
            raise ValueError("rows must be grouped by device in increasing device index")

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    def trace(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(pulse, polarity, conductance) of device k."""
        sel = self.device == k
        return self.pulse[sel], self.polarity[sel], self.conductance[sel]

    def increments(self) -> Increments:
        """Changes between consecutive reads of a device with pulses between them: reads n-1 and n with a
        pulse (polarity != 0) before read n, and reads k > 1 pulses apart when both follow pulses of the same
        polarity (then all k pulses are taken to have it); other pairs are counted in `skipped`."""
        same = self.device[1:] == self.device[:-1]
        gap = np.diff(self.pulse)
        pol0, pol1 = self.polarity[:-1], self.polarity[1:]
        single = same & (gap == 1) & (pol1 != 0)
        multi = same & (gap > 1) & (pol1 != 0) & (pol0 == pol1)
        skipped = {
            "no pulse before the read (polarity 0)": int(np.sum(same & (pol1 == 0))),
            "reads k > 1 pulses apart after pulses of different polarity": int(
                np.sum(same & (gap > 1) & (pol1 != 0) & (pol0 != pol1))
            ),
        }
        idx = np.flatnonzero(single | multi)
        g0, g1 = self.conductance[idx], self.conductance[idx + 1]
        follows = np.zeros(len(idx), bool)
        follows[1:] = idx[1:] == idx[:-1] + 1
        return Increments(
            0.5 * (g0 + g1),
            g1 - g0,
            self.polarity[idx + 1].astype(np.int8),
            self.device[idx].astype(np.int64),
            follows,
            gap[idx].astype(np.int64),
            idx + 1,
            {k: v for k, v in skipped.items() if v},
        )

    def where(self, row: int) -> str:
        """Where a row came from: 'line N' of the file (of several files: 'FILE: line N'), else 'row N', with its
        device and pulse index."""
        place = f"line {int(self.line[row])}" if self.line is not None else f"row {row}"
        if self.file is not None:
            place = f"{self.files[int(self.file[row])]}: {place}"
        return f"{place} (device {self.devices[int(self.device[row])]}, pulse {int(self.pulse[row])})"


def from_arrays(
    conductance: np.ndarray,
    polarity: np.ndarray,
    unit: str = "uS",
    labels: list[str] | None = None,
    meta: dict[str, str] | None = None,
) -> TraceSet:
    """A trace set from reads of shape (n_reads, n_devices) and the polarity of the pulse before each read
    (shape (n_reads,) shared by all devices, or (n_reads, n_devices)); read k has pulse index k."""
    g = np.asarray(conductance, float)
    if g.ndim != 2:
        raise ValueError(f"conductance must have shape (n_reads, n_devices), got {g.shape}")
    n_reads, n_dev = g.shape
    pol = np.broadcast_to(np.asarray(polarity, np.int8).reshape(n_reads, -1), g.shape)
    labels = [str(k) for k in range(n_dev)] if labels is None else [str(s) for s in labels]
    if len(labels) != n_dev:
        raise ValueError(f"{len(labels)} labels for {n_dev} devices")
    return TraceSet(
        tuple(labels),
        np.repeat(np.arange(n_dev), n_reads),
        np.tile(np.arange(n_reads), n_dev),
        np.ascontiguousarray(pol.T).ravel(),
        np.ascontiguousarray(g.T).ravel(),
        unit,
        dict(meta or {}),
    )


def write_csv(traces: TraceSet, path: str | os.PathLike) -> Path:
    """Write `traces` to `path` in the trace format (atomically: temp file, then rename)."""
    buf = io.StringIO()
    buf.write("# aimc pulse traces, format 1\n")
    for key, value in traces.meta.items():
        if "\n" in str(value) or ":" in key:
            raise ValueError(f"metadata {key!r} must be one line and its key must not contain ':'")
        buf.write(f"# {key}: {value}\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["device", "pulse", "polarity", f"conductance [{traces.unit}]"])
    labels = traces.devices
    for d, p, s, g in zip(traces.device, traces.pulse, traces.polarity, traces.conductance):
        writer.writerow([labels[d], int(p), ("+1", "0", "-1")[1 - int(s)], repr(float(g))])
    return atomic_write_text(path, buf.getvalue())


def read_text(path: Path) -> str:
    """The file's text: UTF-8, a leading byte-order mark (spreadsheet exports) dropped; a file that is not
    UTF-8 raises TraceFormatError naming the line and byte offset of the first bad byte."""
    if not path.is_file():
        raise FileNotFoundError(f"trace file {str(path)!r} does not exist")
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise TraceFormatError(
            f"{path}: line {line}: byte {raw[err.start]:#04x} at offset {err.start} is not "
            "UTF-8 (save the file as UTF-8 text)"
        ) from None


def read_value(cell: str, where: str, column: int, name: str) -> float:
    """A finite read within +-MAX_ABS_READ, else TraceFormatError naming line and column."""
    try:
        g = float(cell)
    except ValueError:
        raise TraceFormatError(f"{where}, column {column} ({name}): {cell!r} is not a number") from None
    if not np.isfinite(g):
        raise TraceFormatError(f"{where}, column {column} ({name}): {cell!r} is not finite")
    if abs(g) > MAX_ABS_READ:
        raise TraceFormatError(
            f"{where}, column {column} ({name}): {cell!r} is beyond +-{MAX_ABS_READ:g} "
            "(the fit would overflow; choose a smaller unit)"
        )
    return g


def read_csv(path: str | os.PathLike) -> TraceSet:
    """Read a trace file; a malformed file raises TraceFormatError naming the line and the column."""
    path = Path(path)
    meta: dict[str, str] = {}
    lineno = 0
    unit = None
    labels: dict[str, int] = {}
    rows: list[tuple[int, int, int, float]] = []
    last: dict[int, int] = {}
    content = read_text(path)
    with io.StringIO(content, newline="") as fh:
        for lineno, line in enumerate(fh, start=1):
            text = line.strip()
            if not text:
                continue
            if text.startswith("#"):
                if unit is None and ":" in text:
                    key, value = text[1:].split(":", 1)
                    meta[key.strip()] = value.strip()
                continue
            where = f"{path}: line {lineno}"
            if "\0" in text:
                raise TraceFormatError(f"{where}: contains a NUL character (not a text CSV line)")
            cells = next(csv.reader([text]))
            if unit is None:
                unit = _parse_header(cells, where)
                continue
            if len(cells) != 4:
                raise TraceFormatError(f"{where}: expected 4 columns ({', '.join(COLUMNS)}), found {len(cells)}")
            label = cells[0].strip()
            if not label:
                raise TraceFormatError(f"{where}, column 1 (device): empty device label")
            try:
                pulse = int(cells[1])
            except ValueError:
                raise TraceFormatError(f"{where}, column 2 (pulse): {cells[1]!r} is not an integer") from None
            if not 0 <= pulse < MAX_PULSE:
                raise TraceFormatError(f"{where}, column 2 (pulse): {pulse} is outside 0 .. 2^53")
            pol = _POLARITY.get(cells[2].strip().lower())
            if pol is None:
                raise TraceFormatError(f"{where}, column 3 (polarity): {cells[2]!r} is not +1, -1 or 0")
            g = read_value(cells[3], where, 4, "conductance")
            d = labels.setdefault(label, len(labels))
            if d in last and pulse <= last[d]:
                raise TraceFormatError(
                    f"{where}, column 2 (pulse): index {pulse} of device {label!r} does not "
                    f"increase (previous {last[d]})"
                )
            last[d] = pulse
            rows.append((d, pulse, pol, g, lineno))
    end = f"{path}: line {max(lineno, 1)} (end of file)"
    if unit is None:
        raise TraceFormatError(f"{end}: no header line (expected 'device,pulse,polarity,conductance [uS]')")
    if not rows:
        raise TraceFormatError(f"{end}: no data rows after the header")
    arr = np.array(rows, dtype=[("d", np.int64), ("p", np.int64), ("s", np.int8), ("g", float), ("n", np.int64)])
    arr = arr[np.argsort(arr["d"], kind="stable")]
    return TraceSet(tuple(labels), arr["d"], arr["p"], arr["s"], arr["g"], unit, meta, arr["n"])


def _parse_header(cells: list[str], where: str) -> str:
    """Check the header row, return the conductance unit."""
    names = [c.strip() for c in cells]
    if len(names) != 4:
        raise TraceFormatError(f"{where}: header needs 4 columns ({', '.join(COLUMNS)}), found {len(names)}")
    for k, (got, want) in enumerate(zip(names[:3], COLUMNS[:3]), start=1):
        if got.lower() != want:
            raise TraceFormatError(f"{where}, column {k}: header {got!r}, expected {want!r}")
    return parse_unit(names[3], where, 4)


def parse_unit(cell: str, where: str, column: int) -> str:
    """The unit of a 'conductance [UNIT]' header cell, else TraceFormatError naming line and column."""
    m = _CONDUCTANCE.match(cell.strip())
    if not m:
        raise TraceFormatError(f"{where}, column {column}: header {cell!r}, expected 'conductance [UNIT]'")
    unit = m.group(1).replace("µ", "u")
    if unit not in UNITS:
        raise TraceFormatError(f"{where}, column {column}: unknown unit {m.group(1)!r}; known: {', '.join(UNITS)}")
    return unit
