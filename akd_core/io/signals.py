"""How `akd` processes take interruption signals, so that every long loop ends through its checkpoint path.

Long loops (distill, prior training, tracking, batch) catch ``KeyboardInterrupt``, write or keep their checkpoint
and re-raise; the CLI then prints how to resume. Two signals would otherwise bypass that path:

* **SIGINT ignored at start.** A process launched in the background of a non-interactive shell (``cmd &``,
  nohup, some CI runners and supervisors) inherits SIGINT as *ignored*; Python then installs no
  KeyboardInterrupt handler, and Ctrl-C, ``kill -INT`` or ``ros2 launch``'s shutdown signal do nothing.
  :func:`stop_on_sigint` restores Python's handler (a handler someone installed is left alone).
* **SIGTERM** (``kill``, a job scheduler's time limit, a container stop) kills Python outright, losing the work
  since the last periodic checkpoint. :func:`terminate_as_interrupt` raises KeyboardInterrupt instead.

Both only act in the main thread (signal handlers cannot be installed elsewhere).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


def stop_on_sigint() -> None:
    """Make SIGINT raise KeyboardInterrupt even when this process was started with SIGINT ignored."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt (the previous handler is restored after it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


__all__ = ["stop_on_sigint", "terminate_as_interrupt"]
