"""Ctrl-C during training, taken between two steps.

Python raises KeyboardInterrupt at whatever bytecode runs when SIGINT arrives. Inside a training step that is
often Python code that a compiled kernel or a C extension calls back (Numba rebuilding a constant or an
exception, torch's autograd), which does not expect it: the interrupt then surfaces as a SystemError, the run
is recorded as failed, or a library's state is left half-updated. `steps_interruptible` holds the first
SIGINT until the loop asks (`check`, between two steps) and raises KeyboardInterrupt there; a second signal
raises at once, for a process that must stop now.

SIGTERM (a job scheduler's or `kill`'s stop) and SIGHUP (the terminal closed) are taken as Ctrl-C is: inside
`stop_signals_interrupt` they raise KeyboardInterrupt (named by the signal) instead of ending the process
unrecorded, and `steps_interruptible` holds them as it holds SIGINT.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that stop a run as Ctrl-C does."""


def raise_interrupt(signum: int, frame) -> None:
    """A signal handler that raises KeyboardInterrupt(the signal's name), as Python's own does for SIGINT."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt in the body (`raise_interrupt`) where the process keeps
    their default action (ending it); the handlers are put back afterwards. Main thread only."""
    taken = [s for s in STOP_SIGNALS[1:] if _on_main_thread() and signal.getsignal(s) is signal.SIG_DFL]
    for s in taken:
        signal.signal(s, raise_interrupt)
    try:
        yield
    finally:
        for s in taken:
            signal.signal(s, signal.SIG_DFL)


class HeldInterrupt:
    """The handler of `steps_interruptible`: the first stop signal is held, a second one raises."""

    def __init__(self) -> None:
        self.pending: str | None = None  # the name of the held signal

    def __call__(self, signum: int, frame) -> None:
        if self.pending:
            raise KeyboardInterrupt(signal.Signals(signum).name)
        self.pending = signal.Signals(signum).name

    def check(self) -> None:
        """Raise KeyboardInterrupt(the signal's name) if a signal is held."""
        if self.pending:
            name, self.pending = self.pending, None
            raise KeyboardInterrupt(name)


_INTERRUPTING = (signal.default_int_handler, raise_interrupt)
"""The handlers that make a signal a KeyboardInterrupt: Python's own for SIGINT, and `raise_interrupt`."""


@contextmanager
def steps_interruptible() -> Iterator[HeldInterrupt]:
    """Hold SIGINT (and SIGTERM, SIGHUP where `stop_signals_interrupt` made them interrupt) in the body until its
    `check()`; a signal still held when the body ends is raised then. Only where Python's own handler is in
    place and on the main thread (signal handlers can be set nowhere else): elsewhere (a Dask worker thread, a
    host with its own handler) the body runs unchanged and `check()` never raises."""
    held = HeldInterrupt()
    taken = [s for s in STOP_SIGNALS if _on_main_thread() and signal.getsignal(s) in _INTERRUPTING]
    if signal.SIGINT not in taken:
        yield held
        return
    previous = {s: signal.signal(s, held) for s in taken}
    try:
        yield held
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
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
