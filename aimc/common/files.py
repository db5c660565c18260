"""Atomic file writes (a temp file in the target's folder, fsynced and renamed over the target, so a reader
sees the old file or the new one, never a part) and JSON-safe copies of results (JSON has no NaN or
infinity). In the neutral base so that every layer writes the same way."""

from __future__ import annotations

import csv
import io
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

_UMASK = os.umask(0o022)  # read once, at import (os.umask can only be read by setting it)
os.umask(_UMASK)


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """Open a temp file in `path`'s folder for writing; on success flush, fsync and rename it over `path`
    (a reader sees the old file or the new one, even after a power loss), on failure remove it."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise _naming(err, path) from err
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # the mode open() gives a new file (mkstemp's is 0600)
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise _naming(err, path) from err
        raise


def _naming(err: OSError, path: Path) -> OSError:
    """The same error (class and errno) naming the file being written, not a temp file or nothing (a full
    disk reports ENOSPC on a write, with no file name)."""
    if err.errno is None:
        return err
    return type(err)(err.errno, err.strerror, str(path))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write bytes to `path` atomically (`atomic_open`)."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write text (UTF-8) to `path` atomically (`atomic_open`)."""
    return atomic_write_bytes(path, text.encode())


def atomic_write_csv(path: str | os.PathLike, rows: list[dict], columns: tuple[str, ...]) -> Path:
    """rows (dicts holding every column) as CSV with a header of `columns`, written atomically."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(columns)
    for r in rows:
        w.writerow([r[c] for c in columns])
    return atomic_write_text(path, buf.getvalue())


def json_safe(value: Any) -> Any:
    """A copy of nested dicts, lists and tuples in which NaN and infinities (not JSON) become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
