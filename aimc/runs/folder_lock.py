"""One process at a time per output folder: a lock on `<folder>/.lock` (filelock), and beside it
`<folder>/.lock.holder` naming the holder.

filelock locks with the operating system's own file locks (flock on POSIX, LockFileEx on Windows), which are
dropped when their process ends however it ends (a kill included), so the lock of a killed process is taken
over by the next one without any clean-up. The holder file keeps the holder's pid, host and command for the
message a second process gets.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from aimc.common.errors import ConfigError
from aimc.common.files import atomic_write_text
from aimc.runs.timestamps import timestamp

LOCK_NAME = ".lock"
HOLDER_NAME = ".lock.holder"


def _holder(folder: Path) -> str:
    try:
        text = (folder / HOLDER_NAME).read_text().strip()
    except OSError:
        return ""
    return f" ({text})" if text else ""


@contextmanager
def folder_lock(folder: str | os.PathLike, what: str) -> Iterator[None]:
    """Hold `folder`'s lock for the body (creating the folder); raise ConfigError naming the other process at
    once when a live one holds it. `what` names this job in the holder file, for such a message to another
    process ("training run")."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"output folder {str(folder)!r} exists and is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(folder / LOCK_NAME)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ConfigError(
            f"{str(folder)!r} is in use by another process{_holder(folder)}; wait for it to "
            "finish or stop it, or choose another output folder"
        ) from None
    try:
        holder = f"{what}, pid {os.getpid()} on {socket.gethostname()}, since {timestamp()}\n"
        atomic_write_text(folder / HOLDER_NAME, holder)
        yield
    finally:
        lock.release()
