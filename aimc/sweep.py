"""Parameter sweeps: a base experiment config, axes over any config field, seeds; expansion into validated
runs, the resumable run loop, the sweep manifest, the summary over seeds and the figures.

A sweep file (TOML) holds `name`, `base` (an inline table or the path of an experiment TOML, relative to
the sweep file), `seeds` (a list, or a count n meaning 0..n-1), `metrics` (those of the Markdown summary
and the figures) and `[[axes]]`. An axis sets one field by dotted path to each value of its grid
(`values`, `linspace` or `logspace`); a zipped axis (`zip = [...]` of such axes) advances several fields
together. The axes are crossed, and every point runs once per seed. docs/sweeps.md has the details.

Folder layout: `manifest.json`, `sweep.json` (the sweep as resolved), `summary.csv`, `summary.md`,
`figures/`, and `runs/<config hash>/`: the run folder of `aimc.train.run_experiment`, plus `result.json`
(written by the sweep when the run finished) or `error.txt` (when it failed).
"""

from __future__ import annotations

import csv
import fcntl
import io
import itertools
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union

import numpy as np
from pydantic import BaseModel, Discriminator, Field, Tag, ValidationError, field_validator, model_validator

import aimc
from aimc.common.errors import ConfigError
from aimc.common.files import atomic_write_bytes
from aimc.common.validation import STRICT, format_validation_error
from aimc.config import UNION_TAGS, ExperimentConfig, apply_overrides, read_toml
from aimc.executors import DEFAULT_RUNNER, Executor, LocalExecutor, make_task
from aimc.results import to_toml, write_json, write_text

_FIELD = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_-]+)*$"
STATUSES = ("pending", "running", "done", "failed")
RESULT_FILE = "result.json"


# -- the sweep file --------------------------------------------------------------------------------------
class Span(BaseModel):
    """`num` values from `start` to `stop`, both included."""

    model_config = STRICT
    start: int | float
    stop: int | float
    num: int = Field(ge=1, le=10_000, description="number of values")


class Axis(BaseModel):
    """One config field by dotted path and its grid: exactly one of `values`, `linspace`, `logspace`."""

    model_config = STRICT
    field: str = Field(pattern=_FIELD, description="dotted path of the config field, e.g. tile.device.gamma")
    values: list[Any] | None = Field(None, min_length=1, description="the values, any TOML value or table")
    linspace: Span | None = Field(None, description="evenly spaced values (numpy.linspace)")
    logspace: Span | None = Field(None, description="log-spaced values from start to stop (the values "
                                                    "themselves, not exponents: numpy.geomspace)")
    labels: list[str] | None = Field(None, description="display label of each value (default: derived)")

    @model_validator(mode="after")
    def _check(self) -> Axis:
        given = [k for k in ("values", "linspace", "logspace") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of values, linspace, logspace (got {given or 'none'})")
        span = self.logspace
        if span is not None and (span.start == 0 or span.stop == 0 or (span.start > 0) != (span.stop > 0)):
            raise ValueError("logspace: start and stop must be non-zero and of the same sign")
        if self.labels is not None and len(self.labels) != len(self.grid()):
            raise ValueError(f"labels: {len(self.labels)} labels for {len(self.grid())} values")
        return self

    def grid(self) -> list[Any]:
        """The values of the axis; spans rounded to 12 significant digits, integers where start and stop
        are integers and every value is whole."""
        if self.values is not None:
            return list(self.values)
        span = self.linspace or self.logspace
        raw = (np.linspace if self.linspace else np.geomspace)(span.start, span.stop, span.num)
        out = [float(f"{x:.12g}") for x in raw]
        if isinstance(span.start, int) and isinstance(span.stop, int) and all(x.is_integer() for x in out):
            return [int(x) for x in out]
        return out


class Zip(BaseModel):
    """Axes that advance together: point i takes the i-th value of each."""

    model_config = STRICT
    zip: list[Axis] = Field(min_length=2, description="the zipped axes, all with the same number of values")
    name: str | None = Field(None, min_length=1, description="name in the summary (default: the fields, "
                                                              "joined by +)")
    labels: list[str] | None = Field(None, description="display label of each position (default: derived)")

    @model_validator(mode="after")
    def _check(self) -> Zip:
        sizes = {a.field: len(a.grid()) for a in self.zip}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"zipped axes need the same number of values (got {sizes})")
        n = next(iter(sizes.values()))
        if self.labels is not None and len(self.labels) != n:
            raise ValueError(f"labels: {len(self.labels)} labels for {n} positions")
        return self


def _axis_tag(v: Any) -> str:
    return "zipped" if (isinstance(v, dict) and "zip" in v) or isinstance(v, Zip) else "single"


AxisSpec = Annotated[Union[Annotated[Axis, Tag("single")], Annotated[Zip, Tag("zipped")]],
                     Discriminator(_axis_tag)]


class SweepConfig(BaseModel):
    """A sweep: the base experiment, the axes crossed with each other, and the seeds of every point."""

    model_config = STRICT
    name: str = Field("sweep", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="sweep name (folder-safe)")
    base: str | dict[str, Any] = Field(default_factory=dict, description="the base experiment config: an "
                                       "inline table, or the path of a TOML file relative to the sweep file")
    seeds: list[int] | int = Field([0], description="seeds of every point: a list, or a count n for 0..n-1")
    axes: list[AxisSpec] = Field(default_factory=list, description="the axes, crossed in this order")
    metrics: list[str] = Field(["test_accuracy"], min_length=1,
                               description="final metrics of summary.md and the figures (summary.csv has all)")

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int] | int) -> list[int]:
        if isinstance(v, int):
            if v < 1:
                raise ValueError(f"a count of seeds must be at least 1 (got {v})")
            return list(range(v))
        if not v or len(set(v)) != len(v) or min(v) < 0:
            raise ValueError(f"give at least one seed, each once, none negative (got {v})")
        return v


# -- expansion -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Dim:
    """A resolved axis: its fields, the values of each position (one per field) and their labels."""

    name: str
    fields: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]
    field_labels: tuple[tuple[str, ...], ...]
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Run:
    """One run of the sweep: a grid point, a seed and the validated config."""

    point: int
    seed: int
    config: ExperimentConfig
    config_hash: str
    labels: dict[str, str]

    @property
    def folder(self) -> str:
        return f"runs/{self.config_hash}"


@dataclass(frozen=True)
class Sweep:
    """An expanded sweep: every point (one position per dim) and every run, in point-then-seed order."""

    config: SweepConfig
    base: dict[str, Any]
    dims: tuple[Dim, ...]
    points: tuple[tuple[int, ...], ...]
    runs: tuple[Run, ...]

    def point_labels(self, point: int) -> dict[str, str]:
        """field -> value label of a grid point."""
        return {f: lab for dim, pos in zip(self.dims, self.points[point])
                for f, lab in zip(dim.fields, dim.field_labels[pos])}


def _label(v: Any) -> str:
    """A short display label of an axis value."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (int, str)):
        return str(v)
    if isinstance(v, dict):
        tag = next((str(v[k]) for k in ("algorithm", "kind", "name") if k in v), None)
        rest = ", ".join(f"{k}={_label(x)}" for k, x in v.items() if k not in ("algorithm", "kind", "name"))
        return rest if tag is None else f"{tag}({rest})" if rest else tag
    return json.dumps(v, separators=(",", ":"))


def _dim(spec: Axis | Zip) -> Dim:
    axes = spec.zip if isinstance(spec, Zip) else [spec]
    grids = [a.grid() for a in axes]
    per_field = [a.labels or [_label(v) for v in g] for a, g in zip(axes, grids)]
    field_labels = tuple(zip(*per_field))
    name = (spec.name or "+".join(a.field for a in axes)) if isinstance(spec, Zip) else spec.field
    labels = tuple(spec.labels) if isinstance(spec, Zip) and spec.labels else tuple(
        ", ".join(fl) for fl in field_labels)
    if len(set(labels)) != len(labels):
        dup = next(lab for lab in labels if labels.count(lab) > 1)
        raise ConfigError(f"axis {name}: several values have the label {dup!r}; give `labels`")
    return Dim(name, tuple(a.field for a in axes), tuple(zip(*grids)), field_labels, labels)


def _check_fields(dims: list[Dim]) -> None:
    fields = [f for d in dims for f in d.fields]
    for f in fields:
        if f == "seed":
            raise ConfigError("axis seed: give the seeds with `seeds`, not as an axis")
    for a, b in itertools.combinations(fields, 2):
        if a == b or a.startswith(b + ".") or b.startswith(a + "."):
            raise ConfigError(f"two axes set the config field {a}" if a == b else
                              f"axes {a} and {b} overlap (one is inside the other)")


def _has(data: dict[str, Any], path: str) -> bool:
    for key in path.split("."):
        if not isinstance(data, dict) or key not in data:
            return False
        data = data[key]
    return True


def _blame(line: str, dims: list[Dim], pos: tuple[int, ...], base: dict[str, Any]) -> str:
    """Prefix an error line of a point with the axis (and value) whose field it names, else 'base config'.
    An axis that sets a field in a table the base lacks is blamed for that table's missing fields."""
    path = line.split(":", 1)[0].strip().strip("'")
    parent = path.rpartition(".")[0]
    for dim, p in zip(dims, pos):
        for f, lab in zip(dim.fields, dim.field_labels[p]):
            where = f"axis {dim.name} = {dim.labels[p]!r}" if len(dim.fields) > 1 else f"axis {f} = {lab!r}"
            if path == f or path.startswith(f + ".") or f.startswith(path + "."):
                return f"{where}: {line}"
            if parent and f.startswith(parent + ".") and not _has(base, parent):
                return f"{where}: {line} (the base config has no table `{parent}` for the axis to set a " \
                       f"field in; give it there)"
    return f"base config: {line}"


def expand(cfg: SweepConfig, base: dict[str, Any]) -> Sweep:
    """Every run of the sweep, each with a validated config. Every point is validated before any work;
    a ConfigError lists each distinct problem, naming the axis (and value) and the field."""
    if "compare" in base:
        raise ConfigError("base config: `compare` runs several trainers; in a sweep put the trainers on an "
                          "axis over `trainer` instead")
    if "seed" in base:
        raise ConfigError("base config: seed is set by the sweep's `seeds`; remove it from the base")
    dims = [_dim(spec) for spec in cfg.axes]
    _check_fields(dims)
    points = list(itertools.product(*(range(len(d.values)) for d in dims)))
    runs, problems, seen = [], {}, {}
    for i, pos in enumerate(points):
        overrides = {f: v for d, p in zip(dims, pos) for f, v in zip(d.fields, d.values[p])}
        labels = {f: lab for d, p in zip(dims, pos) for f, lab in zip(d.fields, d.field_labels[p])}
        for seed in cfg.seeds:
            try:
                data = apply_overrides(base, {**overrides, "seed": seed})
                run_cfg = ExperimentConfig.model_validate(data)
            except ConfigError as err:
                problems.setdefault(_blame(str(err).removeprefix("override "), dims, pos, base), None)
                break
            except ValidationError as err:
                for line in format_validation_error(err, hidden=UNION_TAGS).splitlines():
                    problems.setdefault(_blame(line, dims, pos, base), None)
                break
            digest = run_cfg.hash()
            if digest in seen:
                problems.setdefault(f"points {seen[digest]} and {labels} give the same config; make the "
                                    f"axis values distinct", None)
            seen[digest] = labels
            runs.append(Run(i, seed, run_cfg, digest, labels))
    if problems:
        raise ConfigError("\n".join(problems))
    return Sweep(cfg, base, tuple(dims), tuple(points), tuple(runs))


def parse_sweep(data: dict[str, Any], where: str = "sweep", root: str | Path = ".") -> Sweep:
    """A validated, expanded sweep from the table of a sweep file; `root` resolves a `base` path."""
    try:
        cfg = SweepConfig.model_validate(data)
    except ValidationError as err:
        lines = re.sub(r"\.(single|zipped)(?=[.:])", "", format_validation_error(err, hidden=UNION_TAGS))
        raise ConfigError(f"invalid {where}:\n{lines}") from None
    try:
        base = read_toml(Path(root) / cfg.base) if isinstance(cfg.base, str) else cfg.base
        return expand(cfg, base)
    except ConfigError as err:
        raise ConfigError(f"invalid {where}:\n{err}") from None


def load_sweep(path: str | Path) -> Sweep:
    """Read, validate and expand a sweep TOML file."""
    path = Path(path)
    return parse_sweep(read_toml(path), where=str(path), root=path.parent)


# -- the sweep folder ------------------------------------------------------------------------------------
def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def read_result(folder: Path, config_hash: str) -> dict[str, Any] | None:
    """The result file of a finished run in `folder`, or None where there is none for this config hash."""
    path = folder / RESULT_FILE
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return result if result.get("config_hash") == config_hash else None


class SweepRunner:
    """Runs a sweep into its folder: skips finished runs, records every outcome, writes the summary."""

    def __init__(self, sweep: Sweep, out_dir: str | Path, runner: str = DEFAULT_RUNNER,
                 log: Callable[[str], None] | None = print):
        self.sweep, self.out, self.runner = sweep, Path(out_dir).resolve(), runner
        self.log = log or (lambda _msg: None)
        self.entries: dict[str, dict[str, Any]] = {}
        self.created = _now()

    def _entry(self, run: Run, old: dict[str, Any] | None) -> dict[str, Any]:
        entry = {"config_hash": run.config_hash, "folder": run.folder, "point": run.point, "seed": run.seed,
                 "labels": run.labels, "status": "pending", "error": None, "attempts": 0,
                 "package_version": None, "submitted": None, "started": None, "finished": None,
                 "duration_s": None, "host": None, "pid": None}
        if old:
            entry.update({k: old[k] for k in ("attempts", "package_version", "submitted", "started",
                                                "finished", "duration_s", "host", "pid", "error") if k in old})
        result = read_result(self.out / run.folder, run.config_hash)
        entry["status"] = "done" if result else "pending"
        if result:
            entry["error"] = None
        return entry

    def save_manifest(self, executor: str) -> None:
        counts = {s: sum(e["status"] == s for e in self.entries.values()) for s in STATUSES}
        write_json(self.out / "manifest.json", {
            "name": self.sweep.config.name, "aimc_version": aimc.__version__, "created": self.created,
            "updated": _now(), "executor": executor, "counts": counts, "seeds": self.sweep.config.seeds,
            "axes": [{"name": d.name, "fields": list(d.fields), "labels": list(d.labels)} for d in self.sweep.dims],
            "runs": list(self.entries.values())})

    def run(self, executor: Executor) -> dict[str, int]:
        """Run every unfinished run on `executor`; returns the counts per status. One driver at a time per
        sweep folder (a lock file); a second one fails at once."""
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.out / ".lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ValueError(f"another aimc sweep is running into {self.out}; wait for it to finish or "
                                 f"choose another output folder") from None
            return self._run(executor)

    def _run(self, executor: Executor) -> dict[str, int]:
        where = executor.describe()
        old_path = self.out / "manifest.json"
        old = json.loads(old_path.read_text()) if old_path.is_file() else {}
        self.created = old.get("created", self.created)
        previous = {e["config_hash"]: e for e in old.get("runs", [])}
        self.entries = {r.config_hash: self._entry(r, previous.get(r.config_hash)) for r in self.sweep.runs}
        write_json(self.out / "sweep.json", {**self.sweep.config.model_dump(mode="json"), "base": self.sweep.base})
        todo = [r for r in self.sweep.runs if self.entries[r.config_hash]["status"] != "done"]
        by_hash = {r.config_hash: r for r in self.sweep.runs}
        self.log(f"sweep {self.sweep.config.name}: {len(self.sweep.runs)} runs, "
                 f"{len(self.sweep.runs) - len(todo)} finished before, {len(todo)} to run; executor: {where}")
        tasks = []
        for r in todo:
            data = r.config.model_dump(mode="json")
            write_json(self.out / r.folder / "config.json", data)
            write_text(self.out / r.folder / "config.toml", to_toml(data))
            tasks.append(make_task(data, r.config_hash, str(self.out / r.folder), self.runner))
        self.save_manifest(where)

        def submitted(task: dict) -> None:
            self.entries[task["config_hash"]].update(status="running", submitted=_now())
            self.save_manifest(where)

        finished = 0
        try:
            for task, outcome in executor.run(tasks, submitted):
                finished += 1
                self._record(by_hash[task["config_hash"]], outcome)
                self.save_manifest(where)
                e = self.entries[task["config_hash"]]
                what = "done" if e["status"] == "done" else f"FAILED: {e['error'].splitlines()[0]}"
                self.log(f"[{finished}/{len(tasks)}] {task['config_hash']} "
                         f"{_describe(by_hash[task['config_hash']])}: {what} ({e['duration_s']:.1f} s)")
        finally:
            self.save_manifest(where)
            write_summary(self.sweep, self.out)
        counts = {s: sum(e["status"] == s for e in self.entries.values()) for s in STATUSES}
        self.log(f"sweep {self.sweep.config.name}: {counts['done']} done, {counts['failed']} failed; "
                 f"summary in {self.out / 'summary.md'}")
        return counts

    def _record(self, run: Run, outcome: dict[str, Any]) -> None:
        folder = self.out / run.folder
        entry = self.entries[run.config_hash]
        entry.update(status=outcome["status"], error=outcome["error"], attempts=entry["attempts"] + 1,
                     **{k: outcome[k] for k in ("started", "finished", "duration_s", "host", "pid")},
                     package_version=outcome["aimc_version"] or entry["package_version"])
        if outcome["status"] == "done":
            (folder / "error.txt").unlink(missing_ok=True)
            write_json(folder / RESULT_FILE, {"config_hash": run.config_hash, "point": run.point,
                                              "seed": run.seed, "labels": run.labels,
                                              "metrics": outcome["metrics"],
                                              **{k: outcome[k] for k in ("started", "finished", "duration_s",
                                                                         "aimc_version")}})
        else:
            write_text(folder / "error.txt", outcome["traceback"] or outcome["error"])


def _describe(run: Run) -> str:
    return "(" + ", ".join([*(f"{f}={lab}" for f, lab in run.labels.items()), f"seed={run.seed}"]) + ")"


def run_sweep(sweep: Sweep, out_dir: str | Path, executor: Executor | None = None,
              runner: str = DEFAULT_RUNNER, log: Callable[[str], None] | None = print) -> dict[str, int]:
    """Run a sweep into `out_dir` (default executor: a local process pool on every core) and write its
    manifest, summary and figures; rerunning skips the finished runs. Returns the counts per status."""
    with executor or LocalExecutor() as ex:
        return SweepRunner(sweep, out_dir, runner, log).run(ex)


# -- summary ---------------------------------------------------------------------------------------------
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
    """summary.csv (every numeric metric), summary.md (the sweep's `metrics`) and the figures."""
    out = Path(out)
    metrics, rows = summarize(sweep, collect_results(sweep, out))
    fields = [f for d in sweep.dims for f in d.fields]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    columns = [*fields, "runs", "done", *(f"{m}_{s}" for m in metrics for s in ("mean", "std"))]
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if isinstance(row[c], float) and math.isnan(row[c]) else row[c] for c in columns])
    write_text(out / "summary.csv", buf.getvalue())

    shown = sweep.config.metrics
    head = [*fields, "runs done", *(f"{m} (mean ± std)" for m in shown)]
    lines = [f"# Sweep {sweep.config.name}", "",
             f"Mean ± sample standard deviation over the seeds {sweep.config.seeds} of each point "
             f"(finished runs only).", "",
             "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for row in rows:
        cells = [row[f] for f in fields] + [f"{row['done']}/{row['runs']}"]
        for m in shown:
            mean, std = row.get(f"{m}_mean", math.nan), row.get(f"{m}_std", math.nan)
            cells.append("-" if math.isnan(mean) else _fmt(mean) + ("" if math.isnan(std) else f" ± {_fmt(std)}"))
        lines.append("| " + " | ".join(cells) + " |")
    missing = [m for m in shown if m not in metrics]
    if missing and any(row["done"] for row in rows):
        lines += ["", f"No finished run reports {', '.join(missing)}; metrics found: {', '.join(metrics)}."]
    write_text(out / "summary.md", "\n".join(lines) + "\n")
    write_figures(sweep, rows, [m for m in shown if m in metrics], out / "figures")


# -- figures ---------------------------------------------------------------------------------------------
def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _save_png(fig: Any, path: Path) -> None:
    """Save a figure atomically (atomic_write_bytes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    atomic_write_bytes(path, buf.getvalue())


def _numeric_axis(dim: Dim) -> list[float] | None:
    """The values of a single-field numeric dim (for a numeric x axis), else None."""
    if len(dim.fields) != 1 or not all(_number(v[0]) is not None for v in dim.values):
        return None
    return [float(v[0]) for v in dim.values]


def write_figures(sweep: Sweep, rows: list[dict[str, Any]], metrics: list[str], folder: Path) -> None:
    """Per metric: `<metric>_vs_<axis>.png` for each axis (one line per combination of the other axes,
    error bars: std over seeds) and, for a sweep of exactly two axes, `<metric>_heatmap.png`; a CSV with
    the plotted numbers beside each."""
    if not sweep.dims or not metrics:
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for m in metrics:
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
                name = ", ".join(f"{sweep.dims[j].name}={sweep.dims[j].labels[p]}" for j, p in zip(others, key))
                pos_k = [sweep.points[i][k] for i in idx]
                x = [xs[p] for p in pos_k] if xs else pos_k
                mean = [rows[i][f"{m}_mean"] for i in idx]
                std = [0.0 if math.isnan(rows[i][f"{m}_std"]) else rows[i][f"{m}_std"] for i in idx]
                ax.errorbar(x, mean, yerr=std, marker="o", capsize=3, label=name or None)
                for i, p in zip(idx, pos_k):
                    writer.writerow([name, dim.labels[p], rows[i][f"{m}_mean"], rows[i][f"{m}_std"],
                                     rows[i]["done"]])
            if xs is None:
                ax.set_xticks(range(len(dim.labels)), dim.labels, rotation=20, ha="right")
            elif min(xs) > 0 and max(xs) / min(xs) >= 100:
                ax.set_xscale("log")
            ax.set(xlabel=dim.name, ylabel=m, title=f"{sweep.config.name}: {m} against {dim.name}")
            ax.grid(alpha=0.3)
            if others and len(groups) <= 10:
                ax.legend(fontsize=7)
            fig.tight_layout()
            stem = _safe(f"{m}_vs_{dim.name}")
            _save_png(fig, folder / f"{stem}.png")
            plt.close(fig)
            write_text(folder / f"{stem}.csv", buf.getvalue())
        if len(sweep.dims) == 2:
            _heatmap(sweep, rows, m, folder, plt)


def _heatmap(sweep: Sweep, rows: list[dict[str, Any]], m: str, folder: Path, plt: Any) -> None:
    a, b = sweep.dims
    grid = np.full((len(a.labels), len(b.labels)), np.nan)
    for i, (p, q) in enumerate(sweep.points):
        grid[p, q] = rows[i][f"{m}_mean"]
    fig, ax = plt.subplots(figsize=(1.2 * len(b.labels) + 3, 0.8 * len(a.labels) + 2))
    im = ax.imshow(grid, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(b.labels)), b.labels, rotation=20, ha="right")
    ax.set_yticks(range(len(a.labels)), a.labels)
    ax.set(xlabel=b.name, ylabel=a.name, title=f"{sweep.config.name}: {m} (mean over seeds)")
    finite = grid[np.isfinite(grid)]
    middle = float(finite.mean()) if finite.size else 0.0
    for (p, q), v in np.ndenumerate(grid):
        ax.text(q, p, _fmt(v), ha="center", va="center", fontsize=8, color="white" if v < middle else "black")
    fig.colorbar(im, ax=ax, label=m)
    fig.tight_layout()
    stem = _safe(f"{m}_heatmap")
    _save_png(fig, folder / f"{stem}.png")
    plt.close(fig)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([f"{a.name} \\ {b.name}", *b.labels])
    for p, lab in enumerate(a.labels):
        writer.writerow([lab, *("" if math.isnan(v) else v for v in grid[p])])
    write_text(folder / f"{stem}.csv", buf.getvalue())
