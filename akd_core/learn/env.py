"""The simulated world a policy (or the MPC expert) is evaluated and trained in: the tracking's own MuJoCo model with
the episode's randomisation.

One :class:`SimWorld` is the robot on a plane in MuJoCo, built by the tracking engine
(:class:`~akd_core.physics.engines.mujoco.MujocoEngine`: the same MJCF, PD actuators clamped to the URDF effort
limits, armature, elliptic friction cones, contact time constant, timestep), with per episode:

- friction: the ground/foot Coulomb coefficient (``mu``);
- base mass: the root link's mass and inertia scaled;
- action latency: a command issued at control frame k starts to act ``latency_s`` later (the whole PD-target signal,
  linear between control frames as in tracking, is delayed), 0-20 ms;
- pushes: a velocity kick added to the base's horizontal velocity (:meth:`SimWorld.push`).

One :meth:`SimWorld.step` is one control period. States are engine-neutral :class:`BodyState` rows (xyzw, world
velocities); :meth:`SimWorld.engine_state` hands the exact MuJoCo state (with the solver warm start) to a planner.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from akd_core.io.errors import ConfigError
from akd_core.model.robot import Robot
from akd_core.model.spatial import quat_to_matrix
from akd_core.physics.engines.base import BodyState, Feet
from akd_core.physics.engines.mujoco import MujocoEngine, MujocoState
from akd_core.physics.metrics import FALL_HEIGHT_FRACTION, FALL_TILT_DEG
from akd_core.physics.params import ContactParams, PhysicsParams, default_physics


@dataclass
class Randomisation:
    """What an evaluation (or a DAgger rollout) randomises. Ranges are (low, high), drawn uniformly per episode."""

    push_mps: float = 0.4  # horizontal velocity kick, random direction
    push_every_s: float = 2.0  # first push at push_every_s, then every push_every_s (0: no pushes)
    friction: tuple[float, float] = (0.6, 1.2)
    mass_scale: tuple[float, float] = (0.9, 1.1)  # base (root link) mass and inertia
    obs_noise: float = 1.0  # level of the observation noise (akd_core.learn.observation.noise_scales)
    latency_s: tuple[float, float] = (0.0, 0.02)

    def check(self) -> None:
        for name in ("friction", "mass_scale", "latency_s"):
            lo, hi = getattr(self, name)
            if not (np.isfinite(lo) and np.isfinite(hi) and 0 <= lo <= hi):
                raise ConfigError(f"--{name.replace('_', '-')} must be LO,HI with 0 <= LO <= HI, got {lo},{hi}")
        if self.friction[0] <= 0 or self.mass_scale[0] <= 0:
            raise ConfigError("friction and mass scale must be positive")
        if self.push_mps < 0 or self.push_every_s < 0 or self.obs_noise < 0:
            raise ConfigError("--push-mps, --push-every and --obs-noise must be non-negative")

    def to_dict(self) -> dict[str, Any]:
        return {"push_mps": self.push_mps, "push_every_s": self.push_every_s, "friction": list(self.friction),
                "mass_scale": list(self.mass_scale), "obs_noise": self.obs_noise, "latency_s": list(self.latency_s)}


@dataclass
class EpisodeDraw:
    """The random draws of one episode (reproducible from ``seed`` and ``index``)."""

    index: int
    clip: int  # which reference clip
    friction: float
    mass_scale: float
    latency_s: float
    push_frames: list[int]  # control frames at which a push is applied
    push_dirs: list[float]  # rad, world frame
    start_frame: int = 0  # frame of the clip (and of the reference) the episode starts at
    noise_seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "clip": self.clip, "friction": self.friction, "mass_scale": self.mass_scale,
                "latency_s": self.latency_s, "push_frames": list(self.push_frames), "start_frame": self.start_frame}


def draw_episode(rand: Randomisation, seed: int, index: int, num_clips: int, frames: int, dt: float,
                 start_frames: int = 1) -> EpisodeDraw:
    """Episode ``index``'s draws from ``numpy.random.default_rng([seed, index])``: the same seed and index give the
    same clip, friction, mass, latency and pushes whatever is evaluated (BC, DAgger, the MPC expert)."""
    rng = np.random.default_rng([int(seed), int(index)])
    clip = int(rng.integers(num_clips))
    friction = float(rng.uniform(*rand.friction))
    mass = float(rng.uniform(*rand.mass_scale))
    latency = float(rng.uniform(*rand.latency_s))
    every = int(round(rand.push_every_s / dt)) if rand.push_every_s > 0 and rand.push_mps > 0 else 0
    push_frames = list(range(every, frames, every)) if every else []
    dirs = [float(d) for d in rng.uniform(-math.pi, math.pi, size=len(push_frames))]
    start = int(rng.integers(start_frames)) if start_frames > 1 else 0
    return EpisodeDraw(index=index, clip=clip, friction=friction, mass_scale=mass, latency_s=latency,
                       push_frames=push_frames, push_dirs=dirs, start_frame=start,
                       noise_seed=int(rng.integers(1 << 31)))


def scaled_base_mass(robot: Robot, scale: float) -> Robot:
    """A copy of ``robot`` whose root link mass and inertia are multiplied by ``scale``."""
    if abs(scale - 1.0) < 1e-12:
        return robot
    out = copy.deepcopy(robot)
    inertial = out.link(out.root_link).inertial
    if inertial is not None:
        inertial.mass *= scale
        inertial.inertia = np.asarray(inertial.inertia, dtype=np.float64) * scale
    return out


@dataclass
class WorldPhysics:
    """The physics of the data: PD gains, armature, contact material (its ``mu`` is the nominal friction), control
    period, simulation step and MuJoCo integrator (the tracking's: euler for robots with three or more feet; data
    written before the track metrics recorded it was tracked with implicitfast)."""

    kp: np.ndarray  # (J,)
    kd: np.ndarray  # (J,)
    armature: np.ndarray  # (J,)
    contact: dict[str, float]  # ContactParams fields
    dt: float  # control period, s
    sim_dt: float  # MuJoCo step, s (dt is a whole number of steps)
    integrator: str = "implicitfast"  # MUJOCO_INTEGRATORS

    def params(self, robot: Robot, friction: float | None = None) -> PhysicsParams:
        contact = ContactParams(**{k: float(v) for k, v in self.contact.items()
                                   if k in ContactParams.__dataclass_fields__})
        return default_physics(robot, kp=self.kp, kd=self.kd, armature=self.armature, contact=contact,
                               contact_mu=friction)

    @property
    def substeps(self) -> int:
        return max(1, int(round(self.dt / self.sim_dt)))

    def to_dict(self) -> dict[str, Any]:
        return {"kp": np.asarray(self.kp, np.float64), "kd": np.asarray(self.kd, np.float64),
                "armature": np.asarray(self.armature, np.float64), "contact": dict(self.contact), "dt": self.dt,
                "sim_dt": self.sim_dt, "integrator": self.integrator}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorldPhysics:
        return cls(kp=np.asarray(d["kp"], np.float64), kd=np.asarray(d["kd"], np.float64),
                   armature=np.asarray(d["armature"], np.float64), contact=dict(d["contact"]), dt=float(d["dt"]),
                   sim_dt=float(d["sim_dt"]), integrator=str(d.get("integrator") or "implicitfast"))


def delayed_ramp(before: np.ndarray, current: np.ndarray, target: np.ndarray, steps: int, dt: float,
                 latency_s: float | np.ndarray) -> np.ndarray:
    """Per-substep PD targets (steps, J) of one control period when the target signal (linear from ``before`` to
    ``current`` over the previous period, then to ``target`` over this one) is delayed by ``latency_s`` <= dt.
    With no latency this is :func:`akd_core.physics.targets.substep_targets` of (current, target). Many worlds at
    once: targets (N, J) and latencies (N,) give (N, steps, J)."""
    lat = np.asarray(latency_s, dtype=np.float64)[..., None]  # (..., 1)
    u = (np.arange(steps) * (dt / steps) - lat) / dt  # (..., S) position on this period's ramp, negative: the last
    this = current[..., None, :] + (target - current)[..., None, :] * np.maximum(u, 0.0)[..., None]
    last = before[..., None, :] + (current - before)[..., None, :] * (1.0 + np.minimum(u, 0.0))[..., None]
    return np.where((u >= 0)[..., None], this, last)


def tilt_deg(root_quat: np.ndarray) -> float:
    """Angle between the base's up axis and the world's (deg), from its orientation (xyzw)."""
    up_z = quat_to_matrix(np.asarray(root_quat, dtype=np.float64))[2, 2]
    return math.degrees(math.acos(float(np.clip(up_z, -1.0, 1.0))))


def fallen(root_pos: np.ndarray, root_quat: np.ndarray, start_height: float) -> bool:
    """Tracking's fall rule: tilt over FALL_TILT_DEG or the root below FALL_HEIGHT_FRACTION of its start height."""
    return tilt_deg(root_quat) > FALL_TILT_DEG or float(root_pos[2]) < FALL_HEIGHT_FRACTION * start_height


class SimWorld:
    """One randomised MuJoCo world (see the module docstring)."""

    def __init__(self, robot: Robot, physics: WorldPhysics, friction: float | None = None, mass_scale: float = 1.0,
                 latency_s: float = 0.0):
        self.robot = scaled_base_mass(robot, mass_scale)
        self.physics = physics
        self.params = physics.params(self.robot, friction)
        self.engine = MujocoEngine(self.robot, self.params, physics.sim_dt, physics.substeps,
                                   Feet((), np.zeros((0, 3))), link_names=[], threads=1, integrator=physics.integrator)
        self.model, self.data, self.mujoco = self.engine.model, self.engine.data, self.engine.mujoco
        self.dt = physics.dt
        self.latency_s = float(np.clip(latency_s, 0.0, self.dt))
        self.frame = 0
        self.targets = np.zeros((2, robot.num_dofs))  # the PD targets of the last two control frames
        self.start_height = 1.0

    def reset(self, state: BodyState, target: np.ndarray, frame: int = 0) -> BodyState:
        """Set the state and the current PD target (held as if it had been sent at the previous frames too)."""
        mj_state = self.engine.start(state)
        self.mujoco.mj_setState(self.model, self.data, mj_state.physics, self.engine.spec)
        self.data.qacc_warmstart[:] = 0.0
        self.targets = np.stack([target, target]).astype(np.float64)
        self.data.ctrl[self.engine.act] = target
        self.mujoco.mj_forward(self.model, self.data)
        self.frame = frame
        self.start_height = float(state.root_pos[2])
        return self.state()

    @property
    def last_target(self) -> np.ndarray:
        return self.targets[1].copy()

    def state(self) -> BodyState:
        physics = np.empty(self.engine.nstate)
        self.mujoco.mj_getState(self.model, self.data, physics, self.engine.spec)
        return self.engine.body_state(MujocoState(physics, self.data.qacc_warmstart.copy()))

    def engine_state(self) -> MujocoState:
        """The exact engine state (for :meth:`MujocoEngine.rollout` of a planner with the same model layout)."""
        physics = np.empty(self.engine.nstate)
        self.mujoco.mj_getState(self.model, self.data, physics, self.engine.spec)
        return MujocoState(physics, self.data.qacc_warmstart.copy())

    def push(self, velocity_xy: np.ndarray) -> None:
        """Add a horizontal velocity (2,) m/s to the base (a kick)."""
        v = self.engine.root_v
        self.data.qvel[v:v + 2] += np.asarray(velocity_xy, dtype=np.float64)
        self.mujoco.mj_forward(self.model, self.data)

    def step(self, target: np.ndarray) -> BodyState:
        """Advance one control period under the new PD target (J,) (latency and interpolation as documented)."""
        target = np.asarray(target, dtype=np.float64)
        if not np.all(np.isfinite(target)):
            raise ConfigError("a controller produced a non-finite PD target; this is a bug (please report it)")
        before, current = self.targets
        for ctrl in delayed_ramp(before, current, target, self.physics.substeps, self.dt, self.latency_s):
            self.data.ctrl[self.engine.act] = ctrl
            self.mujoco.mj_step(self.model, self.data)
        self.targets = np.stack([current, target])
        self.frame += 1
        return self.state()

    def fallen(self, state: BodyState) -> bool:
        return fallen(state.root_pos, state.root_quat, self.start_height)
