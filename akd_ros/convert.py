"""Run directory -> ROS 2 messages.

:class:`ReplayData` is what a replay publishes, per sample at one fixed period: joint states,
PD targets (position commands) and torques, and the root pose. It is read from
``tracked.npz`` (tracked rate 1/dt) or, when a run has no tracking yet, from ``reference.npz``.
The ``*_msg`` builders turn one sample into the standard message each consumer expects
(docs/ros.md): ``sensor_msgs/JointState``, ``trajectory_msgs/JointTrajectory``
without effort (ros2_control rejects effort), ``std_msgs/Float64MultiArray`` (forward command
controllers), ``nav_msgs/Odometry`` and the ``robot_description`` string with ``file://`` URIs.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from builtin_interfaces.msg import Duration as DurationMsg
from builtin_interfaces.msg import Time as TimeMsg
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from akd_core.io.errors import ConfigError, MotionError, RunDirError
from akd_core.io.rundir import REFERENCE, ROBOT_URDF, TRACKED, RunDir
from akd_core.model.spatial import quat_to_matrix
from akd_core.motion.clip import Motion, TrackedMotion

NS_PER_S = 1_000_000_000


@dataclass
class ReplayData:
    """One clip at a fixed period, in the robot's actuated joint order (URDF names)."""

    source: str  # "tracked" | "reference"
    dt: float  # s between samples (tracked control period, or 1 / reference fps)
    joint_names: list[str]  # (J,)
    joint_pos: np.ndarray  # (T, J) JointState position
    joint_vel: np.ndarray  # (T, J) JointState velocity
    joint_effort: np.ndarray | None  # (T, J) JointState effort (tracked torques), None for a reference
    pd_targets: np.ndarray  # (T, J) position commands and JointTrajectory positions
    pd_target_vel: np.ndarray  # (T, J) JointTrajectory velocities (zero at the last point)
    joint_torques: np.ndarray | None  # (T, J) effort commands, None for a reference
    root_pos: np.ndarray  # (T, 3) world
    root_quat: np.ndarray  # (T, 4) xyzw, world
    root_lin_vel: np.ndarray  # (T, 3) world frame
    root_ang_vel: np.ndarray  # (T, 3) world frame

    @property
    def num_samples(self) -> int:
        return int(self.pd_targets.shape[0])


def trajectory_velocities(pd_targets: np.ndarray, dt: float) -> np.ndarray:
    """(T, J) central-difference velocities of ``pd_targets``, zero at the last point: ros2_control's
    joint_trajectory_controller (Jazzy and later) rejects a trajectory that ends moving."""
    pd = np.asarray(pd_targets, dtype=np.float64)
    vel = np.gradient(pd, dt, axis=0) if len(pd) > 1 else np.zeros_like(pd)
    vel[-1] = 0.0
    return vel


def replay_data_from_tracked(tracked: TrackedMotion) -> ReplayData:
    return ReplayData(
        source="tracked", dt=tracked.dt, joint_names=list(tracked.joint_names),
        joint_pos=tracked.joint_pos, joint_vel=tracked.joint_vel, joint_effort=tracked.joint_torques,
        pd_targets=tracked.pd_targets, pd_target_vel=trajectory_velocities(tracked.pd_targets, tracked.dt),
        joint_torques=tracked.joint_torques, root_pos=tracked.root_pos, root_quat=tracked.root_quat,
        root_lin_vel=tracked.root_lin_vel, root_ang_vel=tracked.root_ang_vel)


def replay_data_from_motion(motion: Motion) -> ReplayData:
    """A kinematic reference: joint angles are both the states and the position commands; no torques."""
    return ReplayData(
        source="reference", dt=motion.dt, joint_names=list(motion.joint_names),
        joint_pos=motion.joint_pos, joint_vel=motion.joint_vel(), joint_effort=None,
        pd_targets=motion.joint_pos, pd_target_vel=trajectory_velocities(motion.joint_pos, motion.dt),
        joint_torques=None, root_pos=motion.root_pos, root_quat=motion.root_quat,
        root_lin_vel=motion.root_lin_vel(), root_ang_vel=motion.root_ang_vel())


LOOP_RETURN_SPEED_RATIO = 0.5  # looping: the return to the first sample runs at <= this x the URDF velocity limits


def with_loop_return(data: ReplayData, velocity_limits: np.ndarray,
                     speed_ratio: float = LOOP_RETURN_SPEED_RATIO) -> tuple[ReplayData, int]:
    """``data`` extended by a return from its last sample towards its first, for looped replay.

    A clip is rarely a whole number of gait cycles, so jumping from the last sample back to the first would
    command joint speeds far beyond the limits. The return segment moves every joint linearly (PD targets,
    joint states and torques alike) at no more than ``speed_ratio`` x its velocity limit, ending one step
    short of the first sample so the wrap-around step is an ordinary one. The root holds its last pose
    (zero velocity) during the return. Returns (extended data, number of return samples; 0 when the clip
    already closes within one in-limit step).
    """
    if data.num_samples < 2:
        return data, 0
    first, last = data.pd_targets[0].astype(np.float64), data.pd_targets[-1].astype(np.float64)
    limit = np.where(np.isfinite(velocity_limits) & (velocity_limits > 0), velocity_limits, np.inf)
    seconds = float(np.max(np.abs(first - last) / (speed_ratio * limit)))
    steps = int(np.ceil(seconds / data.dt - 1e-9))  # samples from last to first, the last step being the wrap
    if steps <= 1:
        return data, 0
    frac = (np.arange(1, steps) / steps)[:, None]  # (steps - 1, 1): the inserted samples

    def ramp(values: np.ndarray | None) -> np.ndarray | None:
        if values is None:
            return None
        a, b = values[-1].astype(np.float64), values[0].astype(np.float64)
        return np.concatenate([values, (a + frac * (b - a)).astype(values.dtype)], axis=0)

    def hold(values: np.ndarray, zero: bool = False) -> np.ndarray:
        tail = np.zeros_like(values[-1:]) if zero else values[-1:]
        return np.concatenate([values, np.repeat(tail, steps - 1, axis=0)], axis=0)

    pd_targets = ramp(data.pd_targets)
    rate = np.repeat(((first - last) / (steps * data.dt))[None].astype(data.joint_vel.dtype), steps - 1, axis=0)
    extended = ReplayData(
        source=data.source, dt=data.dt, joint_names=list(data.joint_names),
        joint_pos=ramp(data.joint_pos), joint_vel=np.concatenate([data.joint_vel, rate], axis=0),
        joint_effort=ramp(data.joint_effort), pd_targets=pd_targets,
        pd_target_vel=trajectory_velocities(pd_targets, data.dt), joint_torques=ramp(data.joint_torques),
        root_pos=hold(data.root_pos), root_quat=hold(data.root_quat),
        root_lin_vel=hold(data.root_lin_vel, zero=True), root_ang_vel=hold(data.root_ang_vel, zero=True))
    return extended, steps - 1


def load_replay_data(run: RunDir, prefer: str = "tracked") -> ReplayData:
    """tracked.npz if present (and ``prefer`` is "tracked"), else reference.npz."""
    if prefer not in ("tracked", "reference"):
        raise ConfigError(f"replay source must be 'tracked' or 'reference', got {prefer!r}")
    tracked = run.file(TRACKED)
    if prefer == "tracked" and tracked.exists():
        return replay_data_from_tracked(TrackedMotion.load(tracked))
    reference = run.file(REFERENCE)
    if not reference.exists():
        raise RunDirError(f"{run.path} has neither {TRACKED} nor {REFERENCE}; run `akd gait --robot ROBOT "
                          f"--prompt TEXT --out {run.path}` (and `akd track {run.path}`) first")
    return replay_data_from_motion(Motion.load(reference))


def parse_remap(entries: list[str], joint_names: list[str], source: str = "joint_name_remap") -> dict[str, str]:
    """``["old:new", ...]`` -> {old: new}; every old name must be a joint, and the result must stay unique."""
    remap: dict[str, str] = {}
    for entry in entries:
        if not entry.strip():
            continue
        old, sep, new = entry.partition(":")
        old, new = old.strip(), new.strip()
        if not sep or not old or not new:
            raise ConfigError(f"{source}: entry {entry!r} must have the form 'old_name:new_name'")
        if old not in joint_names:
            raise ConfigError(f"{source}: entry {entry!r} renames '{old}', which is not a joint of this run "
                              f"(joints: {joint_names})")
        remap[old] = new
    renamed = [remap.get(n, n) for n in joint_names]
    if len(set(renamed)) != len(renamed):
        dup = sorted({n for n in renamed if renamed.count(n) > 1})
        raise ConfigError(f"{source}: after renaming, joint names {dup} appear more than once")
    return remap


def robot_description_xml(urdf_text: str, remap: dict[str, str] | None = None, source: str = ROBOT_URDF) -> str:
    """The URDF as RViz and robot_state_publisher want it: absolute mesh paths as ``file://`` URIs,
    joints renamed by ``remap`` (so /joint_states and /robot_description agree)."""
    try:
        root = ET.fromstring(urdf_text)
    except ET.ParseError as exc:
        raise RunDirError(f"{source} is not valid XML ({exc}); re-create the run's robot.urdf") from exc
    for mesh in root.iter("mesh"):
        filename = mesh.get("filename", "")
        if filename.startswith("/"):
            mesh.set("filename", Path(filename).as_uri())
    for joint in root.iter("joint"):
        if remap and joint.get("name") in remap:
            joint.set("name", remap[joint.get("name")])
    for mimic in root.iter("mimic"):
        if remap and mimic.get("joint") in remap:
            mimic.set("joint", remap[mimic.get("joint")])
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ----------------------------------------------------------------------------- messages
def time_msg(ns: int) -> TimeMsg:
    return TimeMsg(sec=int(ns // NS_PER_S), nanosec=int(ns % NS_PER_S))


def duration_msg(ns: int) -> DurationMsg:
    return DurationMsg(sec=int(ns // NS_PER_S), nanosec=int(ns % NS_PER_S))


def joint_state_msg(names: list[str], position: np.ndarray, velocity: np.ndarray, effort: np.ndarray | None,
                    stamp_ns: int, frame_id: str = "") -> JointState:
    """position, velocity, effort: (J,); effort None -> empty (allowed by sensor_msgs/JointState)."""
    msg = JointState()
    msg.header.stamp = time_msg(stamp_ns)
    msg.header.frame_id = frame_id
    msg.name = list(names)
    msg.position = np.asarray(position, dtype=np.float64).tolist()
    msg.velocity = np.asarray(velocity, dtype=np.float64).tolist()
    msg.effort = [] if effort is None else np.asarray(effort, dtype=np.float64).tolist()
    return msg


def joint_trajectory_msg(names: list[str], positions: np.ndarray, velocities: np.ndarray, period_ns: int,
                         stamp_ns: int = 0) -> JointTrajectory:
    """positions, velocities: (T, J). Point k has time_from_start = k * period (stamp = when point 0 is due;
    zero means "now" to ros2_control). No effort field: joint_trajectory_controller rejects it."""
    positions = np.asarray(positions, dtype=np.float64)
    velocities = np.asarray(velocities, dtype=np.float64)
    if positions.shape != velocities.shape or positions.ndim != 2 or positions.shape[1] != len(names):
        raise MotionError(f"trajectory positions {positions.shape} / velocities {velocities.shape} do not match "
                          f"{len(names)} joints")
    msg = JointTrajectory()
    msg.header.stamp = time_msg(stamp_ns)
    msg.joint_names = list(names)
    points = []
    for k in range(len(positions)):
        point = JointTrajectoryPoint()
        point.positions = positions[k].tolist()
        point.velocities = velocities[k].tolist()
        point.time_from_start = duration_msg(k * period_ns)
        points.append(point)
    msg.points = points
    return msg


def float64_array_msg(values: np.ndarray, label: str = "joints") -> Float64MultiArray:
    """values: (J,) one command per joint, in the controller's joint order."""
    data = np.asarray(values, dtype=np.float64).reshape(-1)
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=label, size=len(data), stride=len(data))]
    msg.data = data.tolist()
    return msg


def odometry_msg(root_pos: np.ndarray, root_quat: np.ndarray, lin_vel_world: np.ndarray,
                 ang_vel_world: np.ndarray, stamp_ns: int, frame_id: str, child_frame_id: str) -> Odometry:
    """Root pose in ``frame_id``; twist in ``child_frame_id`` (the body frame, as nav_msgs/Odometry defines it).

    root_pos (3,), root_quat (4,) xyzw, lin_vel_world / ang_vel_world (3,) world frame.
    """
    rot = quat_to_matrix(np.asarray(root_quat, dtype=np.float64))  # (3, 3) body -> world
    lin_body = rot.T @ np.asarray(lin_vel_world, dtype=np.float64)
    ang_body = rot.T @ np.asarray(ang_vel_world, dtype=np.float64)
    msg = Odometry()
    msg.header.stamp = time_msg(stamp_ns)
    msg.header.frame_id = frame_id
    msg.child_frame_id = child_frame_id
    pose = msg.pose.pose
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in root_pos)
    q = np.asarray(root_quat, dtype=np.float64)
    q = q / np.linalg.norm(q)
    pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = (float(v) for v in q)
    twist = msg.twist.twist
    twist.linear.x, twist.linear.y, twist.linear.z = (float(v) for v in lin_body)
    twist.angular.x, twist.angular.y, twist.angular.z = (float(v) for v in ang_body)
    return msg
