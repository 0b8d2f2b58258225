"""What a tracking policy observes: only what a real robot measures, plus the reference it is asked to follow.

Measured (a robot's joint encoders and IMU; no base position and no base linear velocity: AKD does not estimate it):

| term | size | source |
|---|---|---|
| joint_pos, joint_vel | J, J | encoders (rad, rad/s) |
| last_target | J | the PD target the policy sent last |
| gravity_body | 3 | IMU orientation: unit gravity in the base frame (roll and pitch) |
| ang_vel_body | 3 | IMU gyro: base angular velocity in the base frame (rad/s) |
| heading_error | 2 | IMU orientation: sin, cos of (reference yaw - base yaw) |

Reference (from the clip being tracked, continued past its end by :mod:`akd_core.learn.reference`):

| term | size | meaning |
|---|---|---|
| ref_clock | 2 | sin, cos of the gait phase 2 pi f t - phi0 |
| ref_joint_pos_1, ref_joint_pos_4 | J, J | reference joint angles 1 and 4 control periods ahead |
| ref_lin_vel_heading | 3 | reference base velocity in its own heading (yaw-only) frame, m/s |
| ref_yaw_rate | 1 | reference yaw rate, rad/s |
| ref_gravity_body | 3 | gravity in the reference base frame one period ahead (the tilt asked for) |

Everything is in the base or heading frame, so the policy does not depend on where the robot is or which way it
faces, only on how far its heading is from the reference's. Observation noise (:func:`noise_scales`) is uniform with
legged_gym's per-term scales in physical units (joint_pos 0.01 rad, joint_vel 1.5 rad/s, gravity 0.05, gyro
0.2 rad/s; heading 0.02), times the evaluation's ``--obs-noise`` level.

A velocity-command policy (``task = "velocity"``, :func:`velocity_observation_layout`) sees the same measured terms
without the heading error, plus the command instead of a reference:

| term | size | meaning |
|---|---|---|
| joint_pos, joint_vel, last_target, gravity_body, ang_vel_body | J, J, J, 3, 3 | as above |
| command | 3 | vx, vy (m/s) and yaw rate (rad/s) in the heading frame (:mod:`akd_core.learn.command`) |
| clock | 2 | sin, cos of the gait clock's phase (:class:`akd_core.learn.command.GaitClock`) |
| history | H (3J + 6) | ``--history H``: those five terms of the H steps before, newest first |

The command and the clock are given, not measured: they get no noise. The history repeats what the policy saw, noise
included.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from akd_core.learn.reference import ReferenceClip, yaw_of
from akd_core.model.spatial import quat_to_matrix

TASKS = ("reference", "velocity")  # what a policy is conditioned on: a reference clip, or a velocity command
REFERENCE_OFFSETS = (1, 4)  # control periods ahead of the reference joint angles in the observation
NOISE_SCALES = {"joint_pos": 0.01, "joint_vel": 1.5, "gravity_body": 0.05, "ang_vel_body": 0.2,
                "heading_error": 0.02}


def observation_layout(num_joints: int) -> list[tuple[str, int]]:
    """Names and sizes of the observation terms, in order."""
    j = num_joints
    return [("joint_pos", j), ("joint_vel", j), ("last_target", j), ("gravity_body", 3), ("ang_vel_body", 3),
            ("heading_error", 2), ("ref_clock", 2), *[(f"ref_joint_pos_{k}", j) for k in REFERENCE_OFFSETS],
            ("ref_lin_vel_heading", 3), ("ref_yaw_rate", 1), ("ref_gravity_body", 3)]


HISTORY_TERMS = ("joint_pos", "joint_vel", "last_target", "gravity_body", "ang_vel_body")  # what a history repeats
MAX_HISTORY = 50  # control steps


def history_size(num_joints: int) -> int:
    """Columns of one step of history: the measured terms (:data:`HISTORY_TERMS`), 3J + 6."""
    return 3 * num_joints + 6


def velocity_observation_layout(num_joints: int, history: int = 0) -> list[tuple[str, int]]:
    """Names and sizes of a velocity-command policy's observation terms, in order (module docstring); ``history``
    control steps of the measured terms before this one at the end (:class:`ObservationHistory`)."""
    j = num_joints
    layout = [("joint_pos", j), ("joint_vel", j), ("last_target", j), ("gravity_body", 3), ("ang_vel_body", 3),
              ("command", 3), ("clock", 2)]
    return layout + ([("history", history * history_size(j))] if history > 0 else [])


def history_frames(layout: list[tuple[str, int]], num_joints: int) -> int:
    """Control steps of history in an observation layout (0: none; a size that is not whole steps: -1)."""
    size = dict(layout).get("history", 0)
    steps, rest = divmod(size, history_size(num_joints))
    return -1 if rest else steps


class ObservationHistory:
    """The measured terms (:data:`HISTORY_TERMS`, the first 3J + 6 columns of a velocity observation) of the last
    ``frames`` control steps of N robots, newest first, as a policy trained with ``--history`` sees them after its
    current observation. They are the observations the policy saw, noise included, as a robot's would be. A robot
    just (re)started has no past: its slots all hold its first observation's terms.

    Call :meth:`observe` once per control step."""

    def __init__(self, rows: int, frames: int, num_joints: int):
        self.frames, self.size = int(frames), history_size(num_joints)
        self.past = np.zeros((rows, self.frames, self.size), np.float32)
        self.fresh = np.ones(rows, bool)

    def reset(self, rows: Any = slice(None)) -> None:
        """Forget the past of ``rows`` (indices, a mask or a slice; default all)."""
        self.fresh[rows] = True

    def observe(self, obs: np.ndarray) -> np.ndarray:
        """This step's observations (N, D) without history -> with it (N, D + frames (3J + 6)) float32; then this
        step's terms become the newest of the past."""
        obs = np.asarray(obs, dtype=np.float32)
        terms = obs[:, :self.size]
        self.past[self.fresh] = terms[self.fresh][:, None, :]
        self.fresh[:] = False
        out = np.concatenate([obs, self.past.reshape(len(obs), -1)], axis=1)
        self.past[:, 1:] = self.past[:, :-1].copy()
        self.past[:, 0] = terms
        return out


def stack_history(obs: np.ndarray, frames: int, num_joints: int) -> np.ndarray:
    """One robot's observation sequence (T, D) -> with its history (T, D + frames (3J + 6)) float32, as
    :class:`ObservationHistory` builds it step by step from the first row."""
    obs = np.asarray(obs, dtype=np.float32)
    size, t = history_size(num_joints), np.arange(len(obs))
    return np.concatenate([obs] + [obs[np.maximum(t - h, 0), :size] for h in range(1, frames + 1)], axis=1)


def task_layout(task: str, num_joints: int, history: int = 0) -> list[tuple[str, int]]:
    """The observation layout of a policy of ``task`` ("reference" or "velocity", with ``history`` steps)."""
    if task == "velocity":
        return velocity_observation_layout(num_joints, history)
    if task == "reference":
        return observation_layout(num_joints)
    raise ValueError(f"unknown policy task {task!r}; one of {TASKS}")


def observation_slices(layout: list[tuple[str, int]]) -> dict[str, slice]:
    """Name -> slice of the observation vector."""
    out, start = {}, 0
    for name, size in layout:
        out[name] = slice(start, start + size)
        start += size
    return out


def noise_scales(num_joints: int, layout: list[tuple[str, int]] | None = None) -> np.ndarray:
    """(D,) half-width of the uniform observation noise per column at noise level 1 (of ``layout``, default the
    reference-conditioned one)."""
    layout = observation_layout(num_joints) if layout is None else layout
    return np.concatenate([np.full(size, NOISE_SCALES.get(name, 0.0)) for name, size in layout])


def reference_features(clip: ReferenceClip, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reference terms (N, 2J + 12) in layout order (ref_clock ... ref_gravity_body) at absolute control frames
    (N,), and the reference yaw (N,) at those frames (for heading_error)."""
    frames = np.asarray(frames, dtype=np.int64).reshape(-1)
    first, last = int(frames.min()), int(frames.max()) + max(REFERENCE_OFFSETS) + 1
    f = clip.frames(last - first + 1, first)
    at = frames - first
    quat = f["root_quat"]
    yaw = np.unwrap(yaw_of(quat))
    dt = clip.dt
    vel = np.gradient(f["root_pos"], dt, axis=0) if len(quat) > 1 else np.zeros_like(f["root_pos"])
    yaw_rate = np.gradient(yaw, dt) if len(quat) > 1 else np.zeros_like(yaw)
    c, s = np.cos(yaw[at]), np.sin(yaw[at])
    v = vel[at]
    lin_heading = np.stack([c * v[:, 0] + s * v[:, 1], -s * v[:, 0] + c * v[:, 1], v[:, 2]], -1)
    rot_next = quat_to_matrix(quat[at + 1])  # (N, 3, 3) body -> world
    gravity_next = -rot_next[..., 2, :]  # R^T (0, 0, -1)
    clock = f["clock"][at]
    parts = [np.sin(clock)[:, None], np.cos(clock)[:, None], *[f["joint_pos"][at + k] for k in REFERENCE_OFFSETS],
             lin_heading, yaw_rate[at][:, None], gravity_next]
    return np.concatenate(parts, axis=1), yaw[at]


def measured_terms(joint_pos: np.ndarray, joint_vel: np.ndarray, last_target: np.ndarray, root_quat: np.ndarray,
                   ang_vel_body: np.ndarray, ref_yaw: np.ndarray) -> np.ndarray:
    """Measured terms (N, 3J + 8) in layout order from encoders (N, J), the last targets (N, J), the IMU orientation
    (N, 4) xyzw, the gyro (N, 3) (base frame) and the reference yaw (N,)."""
    rot = quat_to_matrix(np.asarray(root_quat, dtype=np.float64))  # (N, 3, 3) body -> world
    gravity = -rot[..., 2, :]
    err = np.asarray(ref_yaw, dtype=np.float64) - yaw_of(root_quat)
    return np.concatenate([joint_pos, joint_vel, last_target, gravity, ang_vel_body, np.sin(err)[:, None],
                           np.cos(err)[:, None]], axis=1)


def build_observations(joint_pos: np.ndarray, joint_vel: np.ndarray, last_target: np.ndarray, root_quat: np.ndarray,
                       ang_vel_body: np.ndarray, clip: ReferenceClip, frames: np.ndarray,
                       noise: np.ndarray | None = None) -> np.ndarray:
    """Observations (N, 5J + 17) float32 in the order of :func:`observation_layout`; ``noise`` (N, D) is added when
    given (see :func:`sample_noise`)."""
    ref, ref_yaw = reference_features(clip, frames)
    obs = np.concatenate([measured_terms(joint_pos, joint_vel, last_target, root_quat, ang_vel_body, ref_yaw), ref],
                         axis=1)
    if noise is not None:
        obs = obs + noise
    return obs.astype(np.float32)


def sample_noise(rng: np.random.Generator, rows: int, num_joints: int, level: float,
                 layout: list[tuple[str, int]] | None = None) -> np.ndarray | None:
    """(rows, D) uniform noise at ``level`` times :func:`noise_scales`, or None at level 0."""
    if level <= 0:
        return None
    scales = noise_scales(num_joints, layout)
    return rng.uniform(-1.0, 1.0, size=(rows, scales.size)) * scales * level


def velocity_observations(joint_pos: np.ndarray, joint_vel: np.ndarray, last_target: np.ndarray,
                          root_quat: np.ndarray, ang_vel_body: np.ndarray, command: np.ndarray, phase: np.ndarray,
                          noise: np.ndarray | None = None) -> np.ndarray:
    """A velocity-command policy's observations (N, 3J + 11) float32 in the order of
    :func:`velocity_observation_layout`, from encoders (N, J), the last targets (N, J), the IMU orientation (N, 4)
    xyzw, the gyro (N, 3) (base frame), the commands (N, 3) and the gait clock's phases (N,) rad; ``noise`` (N, D)
    is added when given."""
    rot = quat_to_matrix(np.asarray(root_quat, dtype=np.float64))
    gravity = -rot[..., 2, :]
    phase = np.asarray(phase, dtype=np.float64).reshape(-1)
    obs = np.concatenate([joint_pos, joint_vel, last_target, gravity, ang_vel_body,
                          np.asarray(command, dtype=np.float64).reshape(-1, 3),
                          np.stack([np.sin(phase), np.cos(phase)], -1)], axis=1)
    if noise is not None:
        obs = obs + noise
    return obs.astype(np.float32)


def body_angular_velocity(root_quat: np.ndarray, root_ang_vel_world: np.ndarray) -> np.ndarray:
    """World-frame angular velocities (N, 3) -> the base frame (what a gyro reads)."""
    rot = quat_to_matrix(np.asarray(root_quat, dtype=np.float64))
    return np.einsum("nji,nj->ni", rot, np.asarray(root_ang_vel_world, dtype=np.float64))
