"""How many worker threads a CPU-parallel loop of this process may use (MuJoCo's batched rollouts, the RL worlds).

A process that shares its CPUs says so the standard way, with ``OMP_NUM_THREADS`` (torch and the BLAS libraries
read it too): two pytest-xdist workers on two cores each set it to 1 (tests/conftest.py), and a user running two
trainings side by side can do the same. Without it a loop uses every CPU this process may run on. Threads beyond
the free cores do not add speed, they take it: MuJoCo's rollout threads and torch's pool spinning on the same two
busy cores made the tracker's metrics 5-10x slower (akd_core.physics.tracker).
"""

from __future__ import annotations

import os


def cpu_threads(asked: int | None = None) -> int:
    """``asked`` when it is a positive count, else $OMP_NUM_THREADS when set to one, else the CPUs this process may
    run on (its affinity mask, which a container or ``taskset`` narrows; ``os.cpu_count()`` where there is none)."""
    if asked is not None and asked > 0:
        return int(asked)
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


__all__ = ["cpu_threads"]
