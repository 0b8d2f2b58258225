"""Physics engines behind one interface (:class:`~akd_core.physics.engines.base.Engine`: batched rollouts of PD
targets from a state): MuJoCo C on CPU (:mod:`.mujoco`), Newton/Warp replicated worlds (:mod:`.newton`, loaded only
when asked for: it imports Warp and Newton). :func:`make_engine` builds one by name."""

from __future__ import annotations

from typing import Any

from akd_core.io.errors import ConfigError
from akd_core.model.robot import Robot
from akd_core.physics.engines.base import Engine, Feet
from akd_core.physics.engines.mujoco import MujocoEngine
from akd_core.physics.params import PhysicsParams

ENGINES = ("mujoco", "newton")


def make_engine(name: str, robot: Robot, physics: PhysicsParams, sim_dt: float, steps: int, feet: Feet,
                link_names: list[str] | None = None, device: str | None = None, worlds: int = 1,
                **options: Any) -> Engine:
    """``mujoco`` (MuJoCo C, CPU threads) or ``newton`` (Newton/Warp replicated worlds, CUDA or CPU). ``worlds``: the
    batch the engine is first sized for (Newton builds its model with that many worlds and rebuilds it for another
    batch size; MuJoCo needs no sizing)."""
    if name == "mujoco":
        return MujocoEngine(robot, physics, sim_dt, steps, feet, link_names, **options)
    if name == "newton":
        from akd_core.physics.engines.newton import NewtonEngine

        return NewtonEngine(robot, physics, sim_dt, steps, feet, link_names, device=device, worlds=worlds, **options)
    raise ConfigError(f"--engine must be one of {('auto',) + ENGINES}, got {name!r}")


def resolve_engine(name: str | None, device: str) -> str:
    """``auto`` -> Newton on CUDA (batched worlds pay off there), MuJoCo on CPU (~25-100x faster there:
    docs/architecture.md, "Backends")."""
    if name in (None, "auto"):
        return "newton" if device.startswith("cuda") else "mujoco"
    if name not in ENGINES:
        raise ConfigError(f"--engine must be one of {('auto',) + ENGINES}, got {name!r}")
    return name


def other_engine(name: str) -> str:
    return "newton" if name == "mujoco" else "mujoco"
