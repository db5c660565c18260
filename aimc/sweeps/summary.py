"""A sweep's summary over seeds (CSV, Markdown, one HTML page) and its figures."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from aimc.common.figures import figure_style, label, log_spaced, pyplot, save_figure, scale
from aimc.common.files import atomic_write_text
from aimc.runs.curves import algorithm_words, device_words
from aimc.sweeps.page import write_page
from aimc.sweeps.sweep_file import Dim, Sweep

RESULT_FILE = "result.json"


def read_result(folder: Path, config_hash: str) -> dict[str, Any] | None:
    """The result file of a finished run in `folder`, or None where there is none for this config hash."""
    path = folder / RESULT_FILE
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return result if result.get("config_hash") == config_hash else None


def _number(v: Any) -> float | None:
    """A metric value as a float (None for a missing or null one); None for non-numbers too."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def summarize(sweep: Sweep, results: dict[str, dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """(metric names, one row per point) from the final metrics of the finished runs (config hash ->
    metrics). A row holds the point's labels, `runs`, `done`, and per metric `<m>_mean` and `<m>_std`: the
    mean and sample standard deviation (ddof 1; NaN for one run) over the seeds that finished, null values
    counted as NaN. Metrics are the numeric ones of any run."""
    metrics = list(dict.fromkeys(k for m in results.values() for k, v in m.items() if _number(v) is not None))
    rows = []
    for point in range(len(sweep.points)):
        runs = [r for r in sweep.runs if r.point == point]
        done = [results[r.config_hash] for r in runs if r.config_hash in results]
        row: dict[str, Any] = {**sweep.point_labels(point), "runs": len(runs), "done": len(done)}
        for m in metrics:
            vals = np.array([math.nan if _number(d.get(m)) is None else _number(d.get(m)) for d in done])
            row[f"{m}_mean"] = float(np.mean(vals)) if len(vals) else math.nan
            row[f"{m}_std"] = float(np.std(vals, ddof=1)) if len(vals) > 1 else math.nan
        rows.append(row)
    return metrics, rows


def collect_results(sweep: Sweep, out: Path) -> dict[str, dict[str, Any]]:
    """config hash -> final metrics of every finished run of the sweep in folder `out`."""
    found = {r.config_hash: read_result(out / r.folder, r.config_hash) for r in sweep.runs}
    return {h: res["metrics"] for h, res in found.items() if res is not None}


def _fmt(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.4g}"


def write_summary(sweep: Sweep, out: str | Path) -> None:
    """summary.csv (every numeric metric), summary.md and summary.html (the sweep's `metrics`; the page
    sortable, with the figures inline) and the figures."""
    out = Path(out)
    metrics, rows = summarize(sweep, collect_results(sweep, out))
    fields = [f for d in sweep.dims for f in d.fields]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    columns = [*fields, "runs", "done", *(f"{m}_{s}" for m in metrics for s in ("mean", "std"))]
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if isinstance(row[c], float) and math.isnan(row[c]) else row[c] for c in columns])
    atomic_write_text(out / "summary.csv", buf.getvalue())

    shown = sweep.config.metrics
    head = [*fields, "runs done", *(f"{m} (mean ± std)" for m in shown)]
    lines = [
        f"# Sweep {sweep.config.name}",
        "",
        f"Mean ± sample standard deviation over the seeds {sweep.config.seeds} of each point (finished runs only).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    for row in rows:
        cells = [row[f] for f in fields] + [f"{row['done']}/{row['runs']}"]
        for m in shown:
            mean, std = row.get(f"{m}_mean", math.nan), row.get(f"{m}_std", math.nan)
            cells.append("-" if math.isnan(mean) else _fmt(mean) + ("" if math.isnan(std) else f" ± {_fmt(std)}"))
        lines.append("| " + " | ".join(cells) + " |")
    missing = [m for m in shown if m not in metrics]
    if missing and any(row["done"] for row in rows):
        lines += ["", f"No finished run reports {', '.join(missing)}; metrics found: {', '.join(metrics)}."]
    atomic_write_text(out / "summary.md", "\n".join(lines) + "\n")
    figures = write_figures(sweep, rows, [m for m in shown if m in metrics], out / "figures")
    table = [
        [
            *(row[f] for f in fields),
            row["done"],
            row["runs"],
            *(scale(m) * row.get(f"{m}_{s}", math.nan) for m in shown for s in ("mean", "std")),
        ]
        for row in rows
    ]  # accuracies in %, as in the figures
    write_page(
        out / "summary.html",
        f"Sweep {sweep.config.name}",
        subtitle(sweep),
        [*fields, "done", "runs", *(f"{m} {s}{_unit(m)}" for m in shown for s in ("mean", "std"))],
        table,
        figures,
        f"Mean and sample standard deviation over the seeds {sweep.config.seeds} of each point (finished runs "
        "only); click a column header to sort. All metrics: summary.csv.",
    )


def _unit(metric: str) -> str:
    """The unit a metric is shown in on the page, as in the figures: " (%)" for accuracies, else none."""
    return " (%)" if scale(metric) == 100 else ""


# -- figures ---------------------------------------------------------------------------------------------
def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _numeric_axis(dim: Dim) -> list[float] | None:
    """The values of a single-field numeric dim (for a numeric x axis), else None."""
    if len(dim.fields) != 1 or not all(_number(v[0]) is not None for v in dim.values):
        return None
    return [float(v[0]) for v in dim.values]


def axis_words(dim: Dim) -> str:
    """An axis in words with units (`trainer.lr` -> "learning rate (gradient step)"); a zipped axis keeps
    its name."""
    return label(dim.fields[0]) if len(dim.fields) == 1 else dim.name


def subtitle(sweep: Sweep) -> str:
    """The device and algorithm of the sweep's runs, or "see the axes" for the one that is swept."""
    devices = {device_words(r.config) for r in sweep.runs}
    algorithms = {algorithm_words(r.config) for r in sweep.runs}
    device = f"device {devices.pop()}" if len(devices) == 1 else "devices: see the axes"
    algorithm = algorithms.pop() if len(algorithms) == 1 else "algorithms: see the axes"
    return f"{device}, {algorithm}"


def write_figures(sweep: Sweep, rows: list[dict[str, Any]], metrics: list[str], folder: Path) -> list[Path]:
    """Per metric: `<metric>_vs_<axis>.png` (and `.pdf`) for each axis (one line per combination of the
    other axes, error bars: std over seeds; a log axis where the values are log-spaced) and, for a sweep of
    exactly two axes, `<metric>_heatmap.png`; a CSV with the plotted numbers beside each (metrics as
    stored: accuracies as fractions, shown in % in the figures). Returns the PNGs written."""
    if not sweep.dims or not metrics:
        return []
    plt = pyplot()
    written = []
    title = subtitle(sweep)
    with figure_style():
        for m in metrics:
            k_m = scale(m)
            for k, dim in enumerate(sweep.dims):
                others = [j for j in range(len(sweep.dims)) if j != k]
                xs = _numeric_axis(dim)
                fig, ax = plt.subplots(figsize=(6, 4))
                buf = io.StringIO()
                writer = csv.writer(buf, lineterminator="\n")
                writer.writerow(["other axes", dim.name, f"{m}_mean", f"{m}_std", "done"])
                groups: dict[tuple, list[int]] = {}
                for i, pos in enumerate(sweep.points):
                    groups.setdefault(tuple(pos[j] for j in others), []).append(i)
                for key, idx in groups.items():
                    name = ", ".join(
                        f"{axis_words(sweep.dims[j])} = {sweep.dims[j].labels[p]}" for j, p in zip(others, key)
                    )
                    pos_k = [sweep.points[i][k] for i in idx]
                    x = [xs[p] for p in pos_k] if xs else pos_k
                    mean = [k_m * rows[i][f"{m}_mean"] for i in idx]
                    std = [0.0 if math.isnan(rows[i][f"{m}_std"]) else k_m * rows[i][f"{m}_std"] for i in idx]
                    ax.errorbar(x, mean, yerr=std, marker="o", capsize=3, label=name or None)
                    for i, p in zip(idx, pos_k):
                        writer.writerow(
                            [name, dim.labels[p], rows[i][f"{m}_mean"], rows[i][f"{m}_std"], rows[i]["done"]]
                        )
                if xs is None:
                    ax.set_xticks(range(len(dim.labels)), dim.labels, rotation=20, ha="right")
                elif log_spaced(xs):
                    ax.set_xscale("log")
                    ax.set_xticks(xs, [f"{v:g}" for v in xs])
                    ax.minorticks_off()
                ax.set(xlabel=axis_words(dim), ylabel=label(m))
                bars = f"error bars: \u00b1 1 sample std over the {len(sweep.config.seeds)} seeds of a point"
                ax.set_title(f"{sweep.config.name}: {label(m)} against {axis_words(dim)}\n{title}\n{bars}", fontsize=9)
                if others and len(groups) <= 10:
                    ax.legend(fontsize=7)
                fig.tight_layout()
                stem = _safe(f"{m}_vs_{dim.name}")
                written.append(save_figure(fig, folder / f"{stem}.png")[0])
                plt.close(fig)
                atomic_write_text(folder / f"{stem}.csv", buf.getvalue())
            if len(sweep.dims) == 2:
                written.append(_heatmap(sweep, rows, m, folder, plt, title))
    return written


def _heatmap(sweep: Sweep, rows: list[dict[str, Any]], m: str, folder: Path, plt: Any, title: str) -> Path:
    a, b = sweep.dims
    grid = np.full((len(a.labels), len(b.labels)), np.nan)
    for i, (p, q) in enumerate(sweep.points):
        grid[p, q] = rows[i][f"{m}_mean"]
    shown = scale(m) * grid
    fig, ax = plt.subplots(figsize=(1.2 * len(b.labels) + 3, 0.8 * len(a.labels) + 2))
    im = ax.imshow(shown, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(b.labels)), b.labels, rotation=20, ha="right")
    ax.set_yticks(range(len(a.labels)), a.labels)
    ax.set(xlabel=axis_words(b), ylabel=axis_words(a))
    ax.set_title(f"{sweep.config.name}: {label(m)}, mean over seeds\n{title}", fontsize=9)
    ax.grid(False)
    finite = shown[np.isfinite(shown)]
    middle = float(finite.mean()) if finite.size else 0.0
    for (p, q), v in np.ndenumerate(shown):
        ax.text(q, p, _fmt(v), ha="center", va="center", fontsize=8, color="white" if v < middle else "black")
    fig.colorbar(im, ax=ax, label=label(m))
    fig.tight_layout()
    stem = _safe(f"{m}_heatmap")
    png = save_figure(fig, folder / f"{stem}.png")[0]
    plt.close(fig)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([f"{a.name} \\ {b.name}", *b.labels])
    for p, lab in enumerate(a.labels):
        writer.writerow([lab, *("" if math.isnan(v) else v for v in grid[p])])
    atomic_write_text(folder / f"{stem}.csv", buf.getvalue())
    return png
