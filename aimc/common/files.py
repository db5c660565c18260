"""Atomic file writes: a temp file in the target's folder, renamed over the target, so a reader sees the
old file or the new one, never a part. In the neutral base so that every layer can use it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write bytes to path via a temp file in the same folder and os.replace (the temp file is removed on
    failure)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write text (UTF-8) to path atomically, as atomic_write_bytes."""
    return atomic_write_bytes(path, text.encode())
