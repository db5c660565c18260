"""Ctrl-C during training, taken between two steps.

Python raises KeyboardInterrupt at whatever bytecode runs when SIGINT arrives. Inside a training step that is
often Python code that a compiled kernel or a C extension calls back (Numba rebuilding a constant or an
exception, torch's autograd), which does not expect it: the interrupt then surfaces as a SystemError, the run
is recorded as failed, or a library's state is left half-updated. `steps_interruptible` holds the first
SIGINT until the loop asks (`check`, between two steps) and raises KeyboardInterrupt there; a second SIGINT
raises at once, for a process that must stop now.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class HeldInterrupt:
    """The SIGINT handler of `steps_interruptible`: the first signal is held, a second one raises."""

    def __init__(self) -> None:
        self.pending = False

    def __call__(self, signum: int, frame) -> None:
        if self.pending:
            raise KeyboardInterrupt
        self.pending = True

    def check(self) -> None:
        """Raise KeyboardInterrupt if a SIGINT is held."""
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


@contextmanager
def steps_interruptible() -> Iterator[HeldInterrupt]:
    """Hold SIGINT in the body until its `check()`; a signal still held when the body ends is raised then.
    Only where Python's own handler is in place and on the main thread (signal handlers can be set nowhere
    else): elsewhere (a Dask worker thread, a host with its own handler) the body runs unchanged and
    `check()` never raises."""
    held = HeldInterrupt()
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield held
        return
    signal.signal(signal.SIGINT, held)
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    held.check()


def caused_by_interrupt(err: BaseException) -> bool:
    """Whether `err` or an exception in its chain of causes is a KeyboardInterrupt (a compiled kernel that
    met one in a call back into Python raises SystemError from it)."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False
