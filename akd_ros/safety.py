"""Command safety: nothing AKD publishes to a controller leaves the URDF's joint limits.

Every command stream of a replay (PD-target positions, their implied velocities, torques) is
checked against the robot's ``<limit lower upper velocity effort>`` before the first message
goes out. A violation refuses the whole replay with a :class:`JointLimitError` naming the
stream, joint, sample, value and limit, unless the user explicitly allows it (``allow_unsafe``).

Pure numpy: no rclpy here, so the checks are testable and reusable without ROS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from akd_core.io.errors import JointLimitError, MotionError
from akd_core.model.robot import Robot

POSITION_TOLERANCE = 1e-6  # rad or m, as akd_core.motion.clip.LIMIT_TOLERANCE
RELATIVE_TOLERANCE = 1e-6  # of the velocity / effort limit (float32 storage of a clamped value)
MAX_LISTED = 5


@dataclass(frozen=True)
class JointLimits:
    """URDF limits of the actuated joints, in a command stream's joint order."""

    joint_names: list[str]  # (J,)
    lower: np.ndarray  # (J,) rad or m; -inf for continuous joints
    upper: np.ndarray  # (J,)
    velocity: np.ndarray  # (J,) rad/s or m/s
    effort: np.ndarray  # (J,) N m or N
    prismatic: np.ndarray  # (J,) bool, for units in messages

    @classmethod
    def from_robot(cls, robot: Robot, joint_names: list[str] | None = None) -> JointLimits:
        """Limits of ``joint_names`` (default: the robot's actuated order), looked up by name."""
        names = list(robot.joint_names if joint_names is None else joint_names)
        index = {n: i for i, n in enumerate(robot.joint_names)}
        unknown = [n for n in names if n not in index]
        if unknown:
            raise MotionError(f"joints {unknown} are not actuated joints of robot '{robot.name}' "
                              f"(actuated: {robot.joint_names}); the run's files do not match its robot.urdf")
        order = np.array([index[n] for n in names], dtype=int)
        prismatic = np.array([robot.actuated_joints[i].type == "prismatic" for i in order], dtype=bool)
        return cls(names, robot.lower[order], robot.upper[order], robot.velocity_limit[order],
                   robot.effort_limit[order], prismatic)


@dataclass(frozen=True)
class LimitViolation:
    """One command value outside a limit (the worst sample of one joint in one stream)."""

    stream: str  # e.g. "PD target position"
    kind: str  # position | velocity | effort | non-finite
    joint: str
    sample: int
    value: float
    lower: float
    upper: float
    unit: str
    excess: float  # how far outside, in the limit's unit

    def describe(self, dt: float | None = None) -> str:
        when = f"sample {self.sample}" + (f" (t = {self.sample * dt:.3f} s)" if dt else "")
        if self.kind == "non-finite":
            return f"{self.stream} of joint '{self.joint}' is {self.value} at {when}"
        if self.kind == "position":
            bounds = f"the URDF position limits [{self.lower:.4f}, {self.upper:.4f}] {self.unit}"
        else:
            bounds = f"the URDF {self.kind} limit {self.upper:.4f} {self.unit}"
        return f"{self.stream} of joint '{self.joint}' is {self.value:.4f} {self.unit} at {when}, outside {bounds}"


def _unit(prismatic: bool, kind: str) -> str:
    return {"position": ("rad", "m"), "velocity": ("rad/s", "m/s"), "effort": ("N m", "N"),
            "non-finite": ("", "")}[kind][int(prismatic)]


def _check_stream(values: np.ndarray, lower: np.ndarray, upper: np.ndarray, tolerance: np.ndarray,
                  limits: JointLimits, stream: str, kind: str) -> list[LimitViolation]:
    """Worst violation per joint of ``values`` (T, J) against [lower, upper] (J,)."""
    values = np.asarray(values, dtype=np.float64)
    found: list[LimitViolation] = []
    for j, name in enumerate(limits.joint_names):
        column = values[:, j]
        bad = ~np.isfinite(column)
        if bad.any():
            k = int(np.argmax(bad))
            found.append(LimitViolation(stream, "non-finite", name, k, float(column[k]), -np.inf, np.inf, "", np.inf))
            continue
        excess = np.maximum(lower[j] - column, column - upper[j])
        if excess.size and excess.max() > tolerance[j]:
            k = int(np.argmax(excess))
            found.append(LimitViolation(stream, kind, name, k, float(column[k]), float(lower[j]), float(upper[j]),
                                        _unit(bool(limits.prismatic[j]), kind), float(excess[k])))
    return found


def position_violations(positions: np.ndarray, limits: JointLimits, stream: str) -> list[LimitViolation]:
    """positions: (T, J) against [lower, upper]."""
    tol = np.full(len(limits.joint_names), POSITION_TOLERANCE)
    return _check_stream(positions, limits.lower, limits.upper, tol, limits, stream, "position")


def velocity_violations(velocities: np.ndarray, limits: JointLimits, stream: str) -> list[LimitViolation]:
    """velocities: (T, J) against |v| <= velocity limit."""
    tol = np.abs(limits.velocity) * RELATIVE_TOLERANCE + 1e-9
    return _check_stream(velocities, -limits.velocity, limits.velocity, tol, limits, stream, "velocity")


def effort_violations(efforts: np.ndarray, limits: JointLimits, stream: str) -> list[LimitViolation]:
    """efforts: (T, J) against |tau| <= effort limit."""
    tol = np.abs(limits.effort) * RELATIVE_TOLERANCE + 1e-9
    return _check_stream(efforts, -limits.effort, limits.effort, tol, limits, stream, "effort")


def step_velocities(positions: np.ndarray, dt: float, loop: bool = False) -> np.ndarray:
    """Velocity implied by streaming ``positions`` (T, J) one sample per ``dt``: (T-1, J), or (T, J) with the
    wrap-around step from the last sample back to the first when the replay loops."""
    positions = np.asarray(positions, dtype=np.float64)
    if loop and len(positions) > 1:
        positions = np.concatenate([positions, positions[:1]], axis=0)
    return np.diff(positions, axis=0) / dt


def command_violations(limits: JointLimits, dt: float, pd_targets: np.ndarray, trajectory_velocities: np.ndarray,
                       joint_torques: np.ndarray | None, loop: bool = False) -> list[LimitViolation]:
    """Every limit the replay's commands would break.

    pd_targets: (T, J) position commands (streamed and in the JointTrajectory);
    trajectory_velocities: (T, J) the JointTrajectory's velocities; joint_torques: (T, J) or None.
    """
    found = position_violations(pd_targets, limits, "PD target position")
    found += velocity_violations(trajectory_velocities, limits, "PD target trajectory velocity")
    steps = step_velocities(pd_targets, dt, loop)
    step_found = velocity_violations(steps, limits, "PD target step rate")
    if loop:
        wrap = len(steps) - 1
        step_found = [v if v.sample != wrap else LimitViolation(
            "PD target step rate when looping (last sample -> first)", v.kind, v.joint, v.sample, v.value, v.lower,
            v.upper, v.unit, v.excess) for v in step_found]
    found += step_found
    if joint_torques is not None:
        found += effort_violations(joint_torques, limits, "joint torque command")
    return found


def refuse_unsafe(violations: list[LimitViolation], source: str, dt: float | None = None) -> None:
    """Raise JointLimitError describing ``violations`` (worst first); do nothing if there are none."""
    if not violations:
        return
    ranked = sorted(violations, key=lambda v: -v.excess)
    lines = [v.describe(dt) for v in ranked[:MAX_LISTED]]
    more = f" (and {len(ranked) - MAX_LISTED} more)" if len(ranked) > MAX_LISTED else ""
    raise JointLimitError(
        f"{source}: refusing to publish commands outside the URDF joint limits: " + "; ".join(lines) + more
        + ". Fix the motion (re-run `akd track`, or clip the reference and track again), or, only if you know "
          "the robot tolerates it, override with the parameter allow_unsafe:=true (CLI: --allow-unsafe)")
