"""How many worker threads a CPU-parallel loop of this process may use (MuJoCo's batched rollouts of the tracker
and of the RL worlds).

``AKD_NUM_THREADS`` caps them for a process that shares its CPUs: two pytest-xdist workers on two cores each set it
to 1 (tests/conftest.py, with OMP_NUM_THREADS=1 for torch), and a user running two trackings side by side can do
the same. Without it a loop uses every CPU this process may run on. Threads beyond the free cores do not add speed,
they take it: two test workers each spinning two threads on two cores used 1213 s of CPU for the suite, one thread
each 660 s (docs/benchmarks.md). It is AKD's own variable, not OMP_NUM_THREADS, which torch reads: one torch thread
is often best beside MuJoCo's rollouts (akd_core.physics.tracker), while the rollouts themselves gain from every core.

:func:`flush_subnormals` is the other CPU setting of a learning loop: subnormal floats flushed to zero.
"""

from __future__ import annotations

import os

ENV = "AKD_NUM_THREADS"


def cpu_threads(asked: int | None = None) -> int:
    """``asked`` when it is a positive count, else $AKD_NUM_THREADS when set to one, else the CPUs this process may
    run on (its affinity mask, which a container or ``taskset`` narrows; ``os.cpu_count()`` where there is none)."""
    if asked is not None and asked > 0:
        return int(asked)
    value = os.environ.get(ENV, "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def flush_subnormals() -> None:
    """Flush subnormal floats to zero in this thread's torch CPU arithmetic (and numpy's, which shares the FPU flags).

    An x86 core takes ~100 cycles over each subnormal operand. A softmax over many candidates, most of whose weights
    underflow through the subnormal range, is all of them: a residual velocity policy's library feedforward (a
    softmax over every library frame, akd_core.learn.velocity_feedforward) took 9.4 ms of CPU per call at 64 x 20040
    frames, 3.6 ms with them flushed, and its BC targets (20040 x 20040) 6.0 s each, 2.8 s flushed. No learning
    figure needs numbers below 1e-38."""
    import torch

    torch.set_flush_denormal(True)


__all__ = ["ENV", "cpu_threads", "flush_subnormals"]
