"""Ctrl-C held until the training loop asks (aimc.runs.interrupts): the first SIGINT waits for `check`, a second
one raises at once, the handler is put back afterwards, and errors raised from an interrupt are known."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from aimc.runs.interrupts import caused_by_interrupt, steps_interruptible


@pytest.fixture(autouse=True)
def _terminal_signal_handlers():
    """Python's own SIGINT handler and the default action of SIGTERM and SIGHUP for each test, as in a terminal;
    a process started with SIGINT ignored (a background job of a non-interactive shell) has no SIGINT handler,
    one started under nohup ignores SIGHUP, and steps_interruptible and stop_signals_interrupt leave those
    alone."""
    handlers = {
        signal.SIGINT: signal.default_int_handler,
        signal.SIGTERM: signal.SIG_DFL,
        signal.SIGHUP: signal.SIG_DFL,
    }
    previous = {s: signal.signal(s, h) for s, h in handlers.items()}
    yield
    for s, h in previous.items():
        signal.signal(s, h)


def _sigint() -> None:
    os.kill(os.getpid(), signal.SIGINT)  # delivered to the main thread before os.kill returns to Python code


def test_the_first_sigint_waits_for_check():
    done = []
    with pytest.raises(KeyboardInterrupt), steps_interruptible() as held:
        _sigint()
        done.append("after the signal")  # still runs: the interrupt is held
        held.check()
        done.append("after check")  # does not run
    assert done == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_sigint_raises_at_once():
    done = []
    with pytest.raises(KeyboardInterrupt), steps_interruptible():
        _sigint()
        _sigint()
        done.append("after the second signal")
    assert not done


def test_a_held_sigint_is_raised_when_the_body_ends():
    with pytest.raises(KeyboardInterrupt), steps_interruptible() as held:
        _sigint()
    assert not held.pending
    with steps_interruptible() as held:  # nothing held: nothing raised
        held.check()


def test_another_handler_or_thread_is_left_alone():
    def own(signum, frame):
        calls.append(signum)

    calls: list[int] = []
    previous = signal.signal(signal.SIGINT, own)
    try:
        with steps_interruptible() as held:
            assert signal.getsignal(signal.SIGINT) is own
            _sigint()
            held.check()
        assert calls == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)
    seen = []
    worker = threading.Thread(target=lambda: seen.append(_in_thread()))
    worker.start()
    worker.join()
    assert seen == [signal.default_int_handler]


def _in_thread():
    with steps_interruptible() as held:
        held.check()
        return signal.getsignal(signal.SIGINT)


def test_errors_caused_by_an_interrupt():
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as err:
            raise SystemError("a kernel returned a result with an exception set") from err
    except SystemError as err:
        assert caused_by_interrupt(err)
    assert not caused_by_interrupt(ValueError("bad"))
    assert caused_by_interrupt(KeyboardInterrupt())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_are_taken_as_ctrl_c(sig):
    from aimc.runs.interrupts import stop_signals_interrupt

    with stop_signals_interrupt():
        with pytest.raises(KeyboardInterrupt, match=signal.Signals(sig).name), steps_interruptible() as held:
            os.kill(os.getpid(), sig)
            assert held.pending == signal.Signals(sig).name  # held, not raised, until the check
            held.check()
        with pytest.raises(KeyboardInterrupt, match=signal.Signals(sig).name):
            os.kill(os.getpid(), sig)  # outside the steps: raised at once
            time.sleep(1)
    assert signal.getsignal(sig) is signal.SIG_DFL


def test_a_sighup_ignored_from_the_start_stays_ignored():
    """Under nohup SIGHUP comes ignored: a run keeps it ignored and goes on when it arrives."""
    from aimc.runs.interrupts import stop_signals_interrupt

    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with stop_signals_interrupt(), steps_interruptible() as held:
        os.kill(os.getpid(), signal.SIGHUP)
        assert held.pending is None
        held.check()
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
