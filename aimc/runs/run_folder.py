"""The run folder (resolved config, manifest, metrics, checkpoints) and the writers of result files (JSON,
JSON lines); every write atomic (temp file, fsync, rename). Figures are saved by
`aimc.common.figures.save_figure` (PNG and PDF).

Layout of one run (docs/usage.md):

    config.toml, config.json   the resolved config (every field, defaults filled in)
    manifest.json              name, config hash, versions, seed, status, error, timestamps, timings, final metrics
    metrics.jsonl              one JSON record per epoch (epoch 0: before training)
    checkpoints/epoch-NNNN.pt  model, optimizer, RNG states and metrics history at the end of an epoch
"""

from __future__ import annotations

import io
import json
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import aimc
from aimc.common.errors import ConfigError
from aimc.common.files import atomic_write_bytes, atomic_write_text, json_safe
from aimc.config import ExperimentConfig
from aimc.runs.timestamps import timestamp
from aimc.toml_writer import to_toml

STATUSES = ("running", "finished", "failed", "diverged", "interrupted")


def write_json(path: str | Path, data: Any) -> None:
    """Write JSON (indented, non-finite floats as null) atomically."""
    atomic_write_text(path, json.dumps(json_safe(data), indent=2) + "\n")


def write_jsonl(path: str | Path, records: list[dict]) -> None:
    """Write JSON lines, one record per line, atomically."""
    atomic_write_text(path, "".join(json.dumps(json_safe(r)) + "\n" for r in records))


def read_json(path: str | Path) -> Any:
    """The JSON in `path`; ConfigError naming the file and the place where it is not JSON (a corrupt file)."""
    try:
        return json.loads(Path(path).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        json_error = isinstance(err, json.JSONDecodeError)
        where = f" at line {err.lineno}, column {err.colno} ({err.msg})" if json_error else f" ({err.reason})"
        raise ConfigError(
            f"{path}: not valid JSON{where}: the file is corrupt; restore it or train the run again into another folder"
        ) from None


def read_jsonl(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def write_config(folder: str | Path, data: dict[str, Any]) -> None:
    """Write a resolved config (`model_dump(mode="json")`) as folder/config.json and folder/config.toml."""
    write_json(Path(folder) / "config.json", data)
    atomic_write_text(Path(folder) / "config.toml", to_toml(data))


# -- the run folder --------------------------------------------------------------------------------------


class RunFolder:
    """One run's folder. `start(cfg)` creates or reopens it; the manifest tracks status and timings."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.manifest: dict[str, Any] = {}

    # paths
    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    @property
    def metrics_path(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def checkpoint_dir(self) -> Path:
        return self.root / "checkpoints"

    def read_manifest(self) -> dict[str, Any] | None:
        """The manifest on disk, or None for a folder without one."""
        if not self.manifest_path.is_file():
            return None
        return read_json(self.manifest_path)

    def finished(self, cfg: ExperimentConfig) -> dict[str, Any] | None:
        """The final metrics of a finished run of `cfg` in this folder, or None."""
        old = self.read_manifest()
        if old is not None and old["status"] == "finished" and old.get("config_hash") == cfg.hash():
            return old["final"]
        return None

    def start(self, cfg: ExperimentConfig) -> str:
        """Create the folder for `cfg` or reopen one holding the same config (same hash), and mark it
        running. Returns the previous status ('new' for a fresh folder). Raises ConfigError where the folder
        holds another config. Temp files of writes cut by a kill are removed."""
        old = self.read_manifest()
        digest = cfg.hash()
        if old is not None and old.get("config_hash") != digest:
            raise ConfigError(
                f"run folder {str(self.root)!r} holds a run of another config (hash "
                f"{old.get('config_hash')}, this one {digest}); choose another output folder"
            )
        if old is None:
            self.root.mkdir(parents=True, exist_ok=True)
            write_config(self.root, cfg.model_dump(mode="json"))
            self.manifest = {
                "name": cfg.name,
                "config_hash": digest,
                "seed": cfg.seed,
                "aimc_version": aimc.__version__,
                "torch_version": torch.__version__,
                "numpy_version": np.__version__,
                "python_version": platform.python_version(),
                "status": "running",
                "error": None,
                "created": timestamp(),
                "attempts": 0,
                "timings": {},
                "final": None,
            }
        else:
            self.manifest = old
            for tmp in [*self.root.glob(".*.tmp"), *self.checkpoint_dir.glob(".*.tmp")]:
                tmp.unlink()  # a write cut by a kill (the caller holds the folder's lock)
        previous = "new" if old is None else old["status"]
        self.manifest.update(
            status="running", error=None, started=timestamp(), attempts=self.manifest.get("attempts", 0) + 1
        )
        self.save_manifest()
        return previous

    def save_manifest(self) -> None:
        write_json(self.manifest_path, self.manifest)

    def finish(self, status: str, error: str | None = None, **fields: Any) -> None:
        """Record the outcome (one of STATUSES) with an optional error message and more manifest fields."""
        if status not in STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        self.manifest.update(status=status, error=error, ended=timestamp(), **fields)
        self.save_manifest()

    def write_metrics(self, records: list[dict]) -> None:
        write_jsonl(self.metrics_path, records)

    def read_metrics(self) -> list[dict]:
        return read_jsonl(self.metrics_path) if self.metrics_path.is_file() else []

    # checkpoints
    def checkpoints(self) -> list[Path]:
        """Checkpoint files, oldest first."""
        return sorted(self.checkpoint_dir.glob("epoch-*.pt"))

    def save_checkpoint(self, epoch: int, state: dict, keep: int) -> Path:
        """Write `state` as checkpoints/epoch-NNNN.pt atomically; delete all but the newest `keep`."""
        path = self.checkpoint_dir / f"epoch-{epoch:04d}.pt"
        buf = io.BytesIO()
        torch.save(state, buf)  # in memory first: torch's own writer reports a full disk as "unexpected pos"
        atomic_write_bytes(path, buf.getvalue())
        for old in self.checkpoints()[:-keep]:
            old.unlink()
        return path

    def load_checkpoint(self, path: Path | None = None, say: Callable[[str], None] | None = None) -> dict | None:
        """The newest checkpoint (or `path`), or None where there is none. A checkpoint that cannot be read
        (truncated or emptied by a copy or a failing disk; the writes here are atomic) is a ConfigError naming
        it, unless `say` is given: then the newest intact one before it is taken and `say` told which (a run
        resumes from there)."""
        if path is not None:
            return read_checkpoint(path)
        found = self.checkpoints()
        again = "train the run again into another folder"
        unreadable: list[str] = []
        for path in reversed(found):
            try:
                state = read_checkpoint(path)
            except ConfigError as err:
                if say is None:
                    raise ConfigError(f"{err}: the model it holds is lost; {again}") from None
                unreadable.append(str(err))
                continue
            for line in unreadable:
                say(f"{line}; resuming from {path}")
            return state
        if unreadable:
            raise ConfigError(f"{unreadable[0]}, and no earlier checkpoint is intact: {again}")
        return None


def read_checkpoint(path: Path) -> dict:
    """The state in the checkpoint file `path`; ConfigError naming it where it cannot be read."""
    if not path.is_file():
        raise ConfigError(f"checkpoint {path}: no such file")
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # torch reports a cut or empty file as EOFError, RuntimeError or OSError
        what = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(
            f"checkpoint {path} cannot be read ({what}; {path.stat().st_size} bytes): it is truncated or corrupt"
        ) from None
