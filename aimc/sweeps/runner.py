"""Parameter sweeps: the resumable run loop over a sweep's runs and the sweep folder.

Folder layout: `manifest.json`, `sweep.json` (the sweep as resolved), `summary.csv`, `summary.md`,
`summary.html`, `figures/`, and `runs/<config hash>/`: the run folder of `aimc.runs.experiment.run_experiment`,
plus `result.json` (written by the sweep when the run finished) or `error.txt` (when it failed). The sweep file and its
expansion are in `aimc.sweeps.sweep_file`, the summary and figures in `aimc.sweeps.summary`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

import aimc
from aimc.common.files import atomic_write_text
from aimc.runs.folder_lock import folder_lock
from aimc.runs.run_folder import RunFolder, read_json, write_config, write_json
from aimc.runs.timestamps import timestamp
from aimc.sweeps.executors import DEFAULT_RUNNER, Executor, LocalExecutor, make_task
from aimc.sweeps.summary import RESULT_FILE, read_result, write_summary
from aimc.sweeps.sweep_file import Run, Sweep

STATUSES = ("pending", "running", "done", "failed")


class SweepRunner:
    """Runs a sweep into its folder: skips finished runs, records every outcome, writes the summary."""

    def __init__(
        self, sweep: Sweep, out_dir: str | Path, runner: str = DEFAULT_RUNNER, log: Callable[[str], None] | None = print
    ):
        self.sweep, self.out, self.runner = sweep, Path(out_dir).resolve(), runner
        self.log = log or (lambda _msg: None)
        self.entries: dict[str, dict[str, Any]] = {}
        self.created = timestamp()

    def _entry(self, run: Run, old: dict[str, Any] | None) -> dict[str, Any]:
        entry = {
            "config_hash": run.config_hash,
            "folder": run.folder,
            "point": run.point,
            "seed": run.seed,
            "labels": run.labels,
            "status": "pending",
            "error": None,
            "attempts": 0,
            "package_version": None,
            "submitted": None,
            "started": None,
            "finished": None,
            "duration_s": None,
            "host": None,
            "pid": None,
        }
        if old:
            entry.update(
                {
                    k: old[k]
                    for k in (
                        "attempts",
                        "package_version",
                        "submitted",
                        "started",
                        "finished",
                        "duration_s",
                        "host",
                        "pid",
                        "error",
                    )
                    if k in old
                }
            )
        result = read_result(self.out / run.folder, run.config_hash)
        entry["status"] = "done" if result else "pending"
        if result:
            entry["error"] = None
        return entry

    def counts(self) -> dict[str, int]:
        """The number of runs per status."""
        return {s: sum(e["status"] == s for e in self.entries.values()) for s in STATUSES}

    def save_manifest(self, executor: str) -> None:
        write_json(
            self.out / "manifest.json",
            {
                "name": self.sweep.config.name,
                "aimc_version": aimc.__version__,
                "created": self.created,
                "updated": timestamp(),
                "executor": executor,
                "counts": self.counts(),
                "seeds": self.sweep.config.seeds,
                "axes": [{"name": d.name, "fields": list(d.fields), "labels": list(d.labels)} for d in self.sweep.dims],
                "runs": list(self.entries.values()),
            },
        )

    def run(self, executor: Executor) -> dict[str, int]:
        """Run every unfinished run on `executor`; returns the counts per status. One driver at a time per
        sweep folder (a lock file); a second one fails at once."""
        with folder_lock(self.out, "sweep driver"):
            return self._run(executor)

    def _run(self, executor: Executor) -> dict[str, int]:
        where = executor.describe()
        old_path = self.out / "manifest.json"
        old = read_json(old_path) if old_path.is_file() else {}
        self.created = old.get("created", self.created)
        previous = {e["config_hash"]: e for e in old.get("runs", [])}
        self.entries = {r.config_hash: self._entry(r, previous.get(r.config_hash)) for r in self.sweep.runs}
        write_json(self.out / "sweep.json", {**self.sweep.config.model_dump(mode="json"), "base": self.sweep.base})
        todo = [r for r in self.sweep.runs if self.entries[r.config_hash]["status"] != "done"]
        by_hash = {r.config_hash: r for r in self.sweep.runs}
        self.log(
            f"sweep {self.sweep.config.name}: {len(self.sweep.runs)} runs, "
            f"{len(self.sweep.runs) - len(todo)} finished before, {len(todo)} to run; executor: {where}"
        )
        tasks = []
        for r in todo:
            data = r.config.model_dump(mode="json")
            write_config(self.out / r.folder, data)
            tasks.append(make_task(data, r.config_hash, str(self.out / r.folder), self.runner))
        self.save_manifest(where)

        def submitted(task: dict) -> None:
            self.entries[task["config_hash"]].update(status="running", submitted=timestamp())
            self.save_manifest(where)

        finished = 0
        bar = tqdm(
            total=len(tasks),
            desc=f"sweep {self.sweep.config.name}",
            unit="run",
            file=sys.stderr,
            disable=not sys.stderr.isatty(),
            dynamic_ncols=True,
        )  # a bar on a terminal only
        try:
            for task, outcome in executor.run(tasks, submitted):
                finished += 1
                self._record(by_hash[task["config_hash"]], outcome)
                self.save_manifest(where)
                e = self.entries[task["config_hash"]]
                what = "done" if e["status"] == "done" else f"FAILED: {e['error'].splitlines()[0]}"
                bar.update(1)
                with tqdm.external_write_mode(file=sys.stderr):
                    self.log(
                        f"[{finished}/{len(tasks)}] {task['config_hash']} "
                        f"{_describe(by_hash[task['config_hash']])}: {what} ({e['duration_s']:.1f} s)"
                    )
        finally:
            bar.close()
            self.save_manifest(where)
            write_summary(self.sweep, self.out)
        counts = self.counts()
        self.log(
            f"sweep {self.sweep.config.name}: {counts['done']} done, {counts['failed']} failed; "
            f"summary in {self.out / 'summary.md'}"
        )
        return counts

    def _record(self, run: Run, outcome: dict[str, Any]) -> None:
        folder = self.out / run.folder
        entry = self.entries[run.config_hash]
        # every start of the run counts, also a task that Dask retried on another worker after its first
        # worker died: the run folder's manifest counts them where the driver sees one outcome
        started = (RunFolder(folder).read_manifest() or {}).get("attempts", 0)
        entry.update(
            status=outcome["status"],
            error=outcome["error"],
            attempts=max(entry["attempts"] + 1, started),
            **{k: outcome[k] for k in ("started", "finished", "duration_s", "host", "pid")},
            package_version=outcome["aimc_version"] or entry["package_version"],
        )
        if outcome["status"] == "done":
            (folder / "error.txt").unlink(missing_ok=True)
            write_json(
                folder / RESULT_FILE,
                {
                    "config_hash": run.config_hash,
                    "point": run.point,
                    "seed": run.seed,
                    "labels": run.labels,
                    "metrics": outcome["metrics"],
                    **{k: outcome[k] for k in ("started", "finished", "duration_s", "aimc_version")},
                },
            )
        else:
            atomic_write_text(folder / "error.txt", outcome["traceback"] or outcome["error"])


def _describe(run: Run) -> str:
    return "(" + ", ".join([*(f"{f}={lab}" for f, lab in run.labels.items()), f"seed={run.seed}"]) + ")"


def run_sweep(
    sweep: Sweep,
    out_dir: str | Path,
    executor: Executor | None = None,
    runner: str = DEFAULT_RUNNER,
    log: Callable[[str], None] | None = print,
) -> dict[str, int]:
    """Run a sweep into `out_dir` (default executor: a local process pool on every core) and write its
    manifest, summary and figures; rerunning skips the finished runs. Returns the counts per status."""
    with executor or LocalExecutor() as ex:
        return SweepRunner(sweep, out_dir, runner, log).run(ex)
