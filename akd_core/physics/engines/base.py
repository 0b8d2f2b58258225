"""The engine interface: batched rollouts of N worlds of one robot from given states under given PD-target
sequences. Planners and costs see only these types; MuJoCo and Newton implement them.

Conventions (every engine): states are engine-neutral :class:`BodyState` (root origin pose and velocity in world,
quaternions xyzw, angular velocity in world); PD targets are given at the control rate and linearly interpolated
over the substeps of each control period (:func:`substep_targets`); the PD law and contact material come from one
:class:`~akd_core.physics.params.PhysicsParams`. Outputs are sampled at the control frames except the contact
channels, which are per substep (slip is a per-step quantity). Every engine simulates one
:class:`~akd_core.model.terrain.Terrain` (flat ground, the plane z = 0, unless told otherwise) and reports its
foot contacts against all of it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Protocol

import numpy as np

from akd_core.model.robot import Robot
from akd_core.model.terrain import Terrain
from akd_core.physics.params import PhysicsParams


@dataclass
class BodyState:
    """Generalized state of N worlds (leading dims ``...``)."""

    root_pos: np.ndarray  # (..., 3) m, root link origin, world
    root_quat: np.ndarray  # (..., 4) xyzw
    joint_pos: np.ndarray  # (..., J)
    root_lin_vel: np.ndarray  # (..., 3) m/s, root origin velocity, world
    root_ang_vel: np.ndarray  # (..., 3) rad/s, world
    joint_vel: np.ndarray  # (..., J)

    def __getitem__(self, index) -> BodyState:
        return BodyState(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def astype(self, dtype) -> BodyState:
        return BodyState(**{f.name: np.asarray(getattr(self, f.name), dtype=dtype) for f in fields(self)})

    @staticmethod
    def stack(states: list[BodyState], axis: int = 0) -> BodyState:
        return BodyState(**{f.name: np.stack([getattr(s, f.name) for s in states], axis=axis)
                            for f in fields(BodyState)})

    @staticmethod
    def concat(states: list[BodyState], axis: int = 0) -> BodyState:
        return BodyState(**{f.name: np.concatenate([getattr(s, f.name) for s in states], axis=axis)
                            for f in fields(BodyState)})


@dataclass
class RolloutBatch:
    """What N rollouts of H control periods produced."""

    states: BodyState  # (N, H+1, ...) at the control frames, frame 0 = the start
    link_pos: np.ndarray  # (N, H, L, 3) world positions of the engine's ``link_names`` at frames 0..H-1
    foot_vel: np.ndarray  # (N, H*S, K, 3) world velocity of each foot's contact point, per substep
    foot_force: np.ndarray  # (N, H*S, K) normal contact force on each foot (N), per substep
    # (N, H*S, K) height of each foot's contact point (m), per substep: world z; above the terrain under it for the
    # points of feet with several (heel and toe: what it is read for is which part is down), on a terrain
    foot_height: np.ndarray
    torques: np.ndarray  # (N, H, J) mean applied (clamped) joint torque over each control period
    torque_peak: np.ndarray  # (N, H, J) max |torque| over each control period
    diverged: np.ndarray  # (N,) bool: the simulation went non-finite (states held from there on)
    end: Any = None  # the engine's own state after the last step (continue from it with ``Engine.advance``)


@dataclass(frozen=True)
class Feet:
    """Contact points the engines report on: foot link names (K,) and points in those links' frames (K, 3)."""

    names: tuple[str, ...]
    points: np.ndarray  # (K, 3)


class Engine(Protocol):
    """Batched rollouts of one robot. ``sim_dt`` is the physics step, ``steps`` the substeps per control period."""

    name: str
    device: str  # "cpu" or a CUDA device
    robot: Robot
    physics: PhysicsParams
    sim_dt: float
    steps: int
    link_names: list[str]
    feet: Feet
    terrain: Terrain  # what the robot stands on (Terrain.flat(): the plane z = 0)

    def start(self, state: BodyState) -> Any:
        """The engine's own state for one world at ``state`` (fresh solver caches)."""

    def body_state(self, start: Any) -> BodyState:
        """The generalized state of an engine state (inverse of :meth:`start`)."""

    def rollout(self, start: Any, pd_targets: np.ndarray) -> RolloutBatch:
        """N rollouts from ``start`` (one engine state, or a list of N) under control-rate targets (N, H+1, J);
        target row 0 is the target at the start frame."""

    def advance(self, start: Any, pd_targets: np.ndarray) -> RolloutBatch:
        """One world, continuing exactly (solver warm starts included) from ``start`` under targets (H+1, J): what
        the tracker executes. Replaying the stored targets through ``advance`` reproduces its states."""


def mass_links(robot: Robot) -> list[str]:
    """Links that carry mass: the bodies whose positions the tracking cost and error metrics compare (not the
    placeholder links an MJCF reader inserts between joints of one body: ``Robot.inserted_links``)."""
    names = [link.name for link in robot.links if link.inertial is not None and link.inertial.mass > 0
             and link.name not in robot.inserted_links]
    return names or [robot.root_link]
