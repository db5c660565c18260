"""A comparison: one training run per `compare` entry of a config, side by side in one folder.

Writes out_dir/<label>/ (one run folder each), comparison.json, comparison.csv, comparison.md (the
Markdown table of `comparison_table`) and curves.png / .csv (all runs' learning curves).
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

from aimc.common.files import atomic_write_text
from aimc.config import ExperimentConfig
from aimc.datasets import Dataset
from aimc.devices import check_kernel_threads
from aimc.runs.curves import describe, write_curves
from aimc.runs.folder_lock import folder_lock
from aimc.runs.memory import check_memory
from aimc.runs.metric_log import wanted
from aimc.runs.run_folder import RunFolder, write_json
from aimc.runs.training import TrainingDiverged, end_recorded, load_data, train_run

_LAST_GOOD = ("epoch", "train_loss", "test_loss", "test_accuracy", "saturated_fraction", "pulses_per_weight")
"""The metrics of a diverged run's last good epoch that its comparison row keeps."""


def run_comparison(cfg: ExperimentConfig, out_dir: str | Path, progress: bool = False) -> dict[str, dict]:
    """One run per `compare` entry in out_dir/<label>/, then comparison.{json,csv,md} and curves.{png,csv}.
    A diverged run is reported with its status and error; it does not stop the others."""
    check_kernel_threads(cfg.threads)  # before anything is written
    wanted(cfg)
    check_memory(cfg)
    run = RunFolder(out_dir)
    if (done := run.finished(cfg)) is not None:
        return done
    data = load_data(cfg)
    with folder_lock(run.root, "comparison run"):
        return _compare(cfg, run, data, progress)


def _compare(cfg: ExperimentConfig, run: RunFolder, data: Dataset, progress: bool) -> dict[str, dict]:
    run.start(cfg)
    results: dict[str, dict] = {}
    histories: dict[str, list[dict]] = {}
    label = ""
    with end_recorded(run, lambda: f"{label}: "):
        for label, sub in cfg.runs():
            try:
                results[label] = {"status": "finished", **train_run(sub, run.root / label, progress, data)}
            except TrainingDiverged as err:
                if progress:
                    print(f"{label}: {err}", file=sys.stderr)
                last = RunFolder(run.root / label).read_metrics()[-1]
                results[label] = {
                    "status": "diverged",
                    "error": str(err),
                    **{k: v for k, v in last.items() if k in _LAST_GOOD},
                }
            histories[label] = RunFolder(run.root / label).read_metrics()
    write_json(run.root / "comparison.json", results)
    atomic_write_text(run.root / "comparison.csv", _csv(results))
    atomic_write_text(run.root / "comparison.md", comparison_table(results) + "\n")
    write_curves(histories, run.root / "curves", f"{cfg.name}: {describe(cfg)}")
    run.finish("finished", final=results)
    return results


_COLUMNS = [
    ("algorithm", None),
    ("status", "status"),
    ("test acc %", "test_accuracy"),
    ("test loss", "test_loss"),
    ("train loss", "train_loss"),
    ("pulses/weight", "pulses_per_weight"),
    ("saturated", "saturated_fraction"),
    ("step ns", "step_ns"),
    ("train s", "train_s"),
]


def _cell(key: str, res: dict) -> str:
    v = res.get(key)
    if key == "test_accuracy" and v is not None:
        return f"{100 * v:.2f}"
    if isinstance(v, float):
        return f"{v:.4g}"
    return "-" if v is None else str(v)


def comparison_table(results: dict[str, dict]) -> str:
    """A Markdown table: one row per run with accuracy, losses, pulses per weight, saturation, latency.
    Plain text joined in code: Markdown needs no escaping, and a template would add a file for one table."""
    rows = [[h for h, _ in _COLUMNS]]
    for label, res in results.items():
        rows.append([label] + [_cell(k, res) for _, k in _COLUMNS[1:]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _csv(results: dict[str, dict]) -> str:
    keys = list(dict.fromkeys(k for res in results.values() for k in res))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["algorithm", *keys])
    for label, res in results.items():
        w.writerow([label, *[res.get(k, "") for k in keys]])
    return buf.getvalue()
