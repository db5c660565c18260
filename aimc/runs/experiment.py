"""The entry point of a run: `run_experiment(cfg, out_dir)` trains a config (one run, or one per `compare`
entry) and then measures its retention if the config asks for it. `aimc train` and the sweep workers call it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from aimc.config import ExperimentConfig
from aimc.runs.comparison import run_comparison
from aimc.runs.retention import retention
from aimc.runs.training import train_run


def run_experiment(cfg: ExperimentConfig, out_dir: str | Path, progress: bool = False) -> dict[str, Any]:
    """Run `cfg` into `out_dir` (resuming an unfinished run there) and return its final metrics: those of
    the single run, or for a `compare` config `{"<label>.<metric>": value}` over all its runs. Raises
    TrainingDiverged for a diverged single run (the folder keeps the last good checkpoint)."""
    if not cfg.compare:
        final = train_run(cfg, out_dir, progress)
    else:
        results = run_comparison(cfg, out_dir, progress)
        final = {f"{label}.{k}": v for label, res in results.items() for k, v in res.items()}
    run_retention(cfg, out_dir, progress)
    return final


def run_retention(cfg: ExperimentConfig, out_dir: str | Path, progress: bool = False) -> None:
    """Retention of the finished run in `out_dir` with the config's `retention` table (nothing without one):
    retention.csv and its figure (`aimc.runs.retention`)."""
    if cfg.retention is None:
        return
    r = cfg.retention
    say = (lambda line: print(line, file=sys.stderr)) if progress else None
    retention(out_dir, r.times, seed=r.seed, drift=r.drift, step_s=r.step_time_s, progress=say)
