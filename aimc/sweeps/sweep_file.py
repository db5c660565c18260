"""The sweep file and its expansion into validated runs.

A sweep file (TOML) holds `name`, `base` (an inline table or the path of an experiment TOML, relative to
the sweep file), `seeds` (a list, or a count n meaning 0..n-1), `metrics` (those of the Markdown summary
and the figures) and `[[axes]]`. An axis sets one field by dotted path to each value of its grid
(`values`, `linspace` or `logspace`); a zipped axis (`zip = [...]` of such axes) advances several fields
together. The axes are crossed, and every point runs once per seed. docs/sweeps.md has the details.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union

import numpy as np
from pydantic import BaseModel, Discriminator, Field, Tag, ValidationError, field_validator, model_validator

from aimc.common.errors import ConfigError
from aimc.common.validation import STRICT, format_validation_error
from aimc.config import UNION_TAGS, ExperimentConfig, apply_overrides, read_toml

_FIELD = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_-]+)*$"


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
    logspace: Span | None = Field(
        None, description="log-spaced values from start to stop (the values themselves, not exponents: numpy.geomspace)"
    )
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
    name: str | None = Field(None, min_length=1, description="name in the summary (default: the fields, joined by +)")
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


AxisSpec = Annotated[Union[Annotated[Axis, Tag("single")], Annotated[Zip, Tag("zipped")]], Discriminator(_axis_tag)]


class SweepConfig(BaseModel):
    """A sweep: the base experiment, the axes crossed with each other, and the seeds of every point."""

    model_config = STRICT
    name: str = Field("sweep", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="sweep name (folder-safe)")
    base: str | dict[str, Any] = Field(
        default_factory=dict,
        description="the base experiment config: an "
        "inline table, or the path of a TOML file relative to the sweep file",
    )
    seeds: list[int] | int = Field([0], description="seeds of every point: a list, or a count n for 0..n-1")
    axes: list[AxisSpec] = Field(default_factory=list, description="the axes, crossed in this order")
    metrics: list[str] = Field(
        ["test_accuracy"], min_length=1, description="final metrics of summary.md and the figures (summary.csv has all)"
    )

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
        return {
            f: lab
            for dim, pos in zip(self.dims, self.points[point])
            for f, lab in zip(dim.fields, dim.field_labels[pos])
        }


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
    labels = (
        tuple(spec.labels) if isinstance(spec, Zip) and spec.labels else tuple(", ".join(fl) for fl in field_labels)
    )
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
            raise ConfigError(
                f"two axes set the config field {a}"
                if a == b
                else f"axes {a} and {b} overlap (one is inside the other)"
            )


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
                return (
                    f"{where}: {line} (the base config has no table `{parent}` for the axis to set a "
                    f"field in; give it there)"
                )
    return f"base config: {line}"


def expand(cfg: SweepConfig, base: dict[str, Any]) -> Sweep:
    """Every run of the sweep, each with a validated config. Every point is validated before any work;
    a ConfigError lists each distinct problem, naming the axis (and value) and the field."""
    if "compare" in base:
        raise ConfigError(
            "base config: `compare` runs several trainers; in a sweep put the trainers on an "
            "axis over `trainer` instead"
        )
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
                problems.setdefault(
                    f"points {seen[digest]} and {labels} give the same config; make the axis values distinct", None
                )
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
