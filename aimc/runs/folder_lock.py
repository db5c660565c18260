"""One process at a time per output folder: an advisory lock on `<folder>/.lock` that names its holder.

The lock is `flock` on an open file, which the operating system drops when its process ends however it ends
(a kill included), so the lock of a killed process is taken over by the next one without any clean-up. The
file keeps the holder's pid, host and command for the message a second process gets.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aimc.common.errors import ConfigError
from aimc.runs.timestamps import timestamp

LOCK_NAME = ".lock"


def _holder(fh) -> str:
    fh.seek(0)
    text = fh.read().strip()
    return f" ({text})" if text else ""


@contextmanager
def folder_lock(folder: str | os.PathLike, what: str) -> Iterator[None]:
    """Hold `folder`'s lock for the body (creating the folder); raise ConfigError naming the other process at
    once when a live one holds it. `what` names this job in the lock file, for such a message to another
    process ("training run")."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"output folder {str(folder)!r} exists and is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_NAME, "a+") as fh:  # "a+": a waiting process must not erase the holder's line
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"{str(folder)!r} is in use by another process{_holder(fh)}; wait for it to "
                "finish or stop it, or choose another output folder"
            ) from None
        fh.truncate(0)
        fh.write(f"{what}, pid {os.getpid()} on {socket.gethostname()}, since {timestamp()}\n")
        fh.flush()
        yield
