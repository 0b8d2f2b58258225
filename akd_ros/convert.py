"""Run directory -> ROS 2 messages.

:class:`ReplayData` is what a replay publishes, per sample at one fixed period: joint states,
PD targets (position commands) and torques, and the root pose. It is read from
``tracked.npz`` (tracked rate 1/dt) or, when a run has no tracking yet, from ``reference.npz``.
The ``*_msg`` builders turn one sample into the standard message each consumer expects
(docs/ros.md): ``sensor_msgs/JointState``, ``trajectory_msgs/JointTrajectory``
without effort (ros2_control rejects effort), ``std_msgs/Float64MultiArray`` (forward command
controllers), ``nav_msgs/Odometry`` and the ``robot_description`` string with ``file://`` URIs.
:func:`terrain_mesh_around` and :func:`terrain_marker_msg` turn the run's terrain into a
``visualization_msgs/Marker`` triangle list.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from builtin_interfaces.msg import Duration as DurationMsg
from builtin_interfaces.msg import Time as TimeMsg
from geometry_msgs.msg import Point
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker

from akd_core.io.errors import ConfigError, MotionError, RunDirError
from akd_core.io.rundir import REFERENCE, ROBOT_URDF, TRACKED, RunDir
from akd_core.model.spatial import quat_to_matrix
from akd_core.model.terrain import Terrain
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


# ----------------------------------------------------------------------------- terrain
TERRAIN_MARGIN_M = 1.0  # the terrain mesh covers the clip's root path grown by this much
TERRAIN_MAX_TRIANGLES = 200_000  # above this the mesh is resampled as a coarser height grid (~14 MB at the limit)
TERRAIN_MARKER_NS = "akd_terrain"
TERRAIN_COLOR = (0.62, 0.60, 0.56, 1.0)  # RGBA


@dataclass
class TerrainMesh:
    """A terrain mesh for one clip: ``vertices`` (V, 3) float32 m, ``faces`` (M, 3) int32 (counter-clockwise seen
    from outside), over ``x_range`` x ``y_range`` m; ``resampled_cell`` (m) when it is a decimated height grid of
    the top surface (the whole mesh had ``full_triangles`` > the budget), else None."""

    vertices: np.ndarray
    faces: np.ndarray
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    full_triangles: int
    resampled_cell: float | None = None

    @property
    def num_triangles(self) -> int:
        return int(len(self.faces))


def _compact(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop the vertices no face uses; faces renumbered."""
    used, inverse = np.unique(faces.reshape(-1), return_inverse=True)
    return vertices[used].astype(np.float32), inverse.reshape(faces.shape).astype(np.int32)


def _height_grid_mesh(terrain: Terrain, x_range: tuple[float, float], y_range: tuple[float, float],
                      max_triangles: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The top surface sampled with :meth:`Terrain.height` on the coarsest square grid whose 2 triangles per cell
    fit ``max_triangles``; cells with a corner over no surface (height -inf) are left out. Returns (vertices,
    faces, cell)."""
    (x0, x1), (y0, y1) = x_range, y_range
    cell = max(np.sqrt(2.0 * (x1 - x0) * (y1 - y0) / max(max_triangles, 2)), 1e-3)
    while True:
        cx, cy = max(1, int(np.ceil((x1 - x0) / cell - 1e-9))), max(1, int(np.ceil((y1 - y0) / cell - 1e-9)))
        if 2 * cx * cy <= max_triangles or cx == cy == 1:
            break
        cell *= 1.02
    xs, ys = np.linspace(x0, x1, cx + 1), np.linspace(y0, y1, cy + 1)
    z = terrain.height(xs[:, None], ys[None, :])  # (cx + 1, cy + 1)
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    vertices = np.column_stack([gx.ravel(), gy.ravel(), np.where(np.isfinite(z), z, 0.0).ravel()])
    idx = np.arange(z.size).reshape(z.shape)
    v00, v10, v01, v11 = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel()
    finite = np.isfinite(z).ravel()
    keep = finite[v00] & finite[v10] & finite[v01] & finite[v11]
    faces = np.concatenate([np.stack([v00, v10, v11], 1)[keep], np.stack([v00, v11, v01], 1)[keep]])
    if not len(faces):
        return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int32), float(cell)
    vertices, faces = _compact(vertices, faces)
    return vertices, faces, float(cell)


def terrain_mesh_around(terrain: Terrain, root_pos: np.ndarray, margin: float = TERRAIN_MARGIN_M,
                        max_triangles: int = TERRAIN_MAX_TRIANGLES) -> TerrainMesh:
    """``terrain``'s triangle mesh over the clip's root path (``root_pos`` (T, 3) world) grown by ``margin`` m.

    :meth:`Terrain.render_mesh` over that range (planes as a quad over it; boxes and height grids whole), less every
    triangle whose footprint lies outside the range. When more than ``max_triangles`` remain (a fine height map or
    rough ground over a long path), the top surface is resampled on a coarser grid with :meth:`Terrain.height`
    instead (:attr:`TerrainMesh.resampled_cell`): its vertices still lie on the surface.
    """
    xy = np.asarray(root_pos, dtype=np.float64).reshape(-1, 3)[:, :2]
    if not len(xy) or not np.all(np.isfinite(xy)):
        raise MotionError("the clip's root path is empty or not finite; cannot place the terrain mesh")
    lo, hi = xy.min(axis=0) - margin, xy.max(axis=0) + margin
    x_range, y_range = (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1]))
    vertices, faces = terrain.render_mesh(x_range, y_range)
    if len(faces):
        tri = vertices[faces][..., :2]  # (M, 3, 2)
        tmin, tmax = tri.min(axis=1), tri.max(axis=1)
        inside = np.all((tmax >= lo - 1e-6) & (tmin <= hi + 1e-6), axis=1)
        vertices, faces = _compact(vertices, faces[inside]) if inside.any() else (vertices[:0], faces[:0])
    full = int(len(faces))
    if full <= max_triangles:
        return TerrainMesh(vertices.astype(np.float32), faces.astype(np.int32), x_range, y_range, full)
    vertices, faces, cell = _height_grid_mesh(terrain, x_range, y_range, max_triangles)
    return TerrainMesh(vertices, faces, x_range, y_range, full, resampled_cell=cell)


def terrain_marker_msg(mesh: TerrainMesh, frame_id: str, stamp_ns: int = 0, ns: str = TERRAIN_MARKER_NS,
                       marker_id: int = 0, color: tuple[float, float, float, float] = TERRAIN_COLOR) -> Marker:
    """A ``visualization_msgs/Marker`` TRIANGLE_LIST (ADD): three points per triangle in ``frame_id``, identity
    pose, scale 1, one colour, no lifetime (stays until replaced or deleted). Stamp 0: RViz uses the latest
    transform, right for a static mesh."""
    msg = Marker()
    msg.header.stamp = time_msg(stamp_ns)
    msg.header.frame_id = frame_id
    msg.ns, msg.id = ns, int(marker_id)
    msg.type, msg.action = Marker.TRIANGLE_LIST, Marker.ADD
    msg.pose.orientation.w = 1.0
    msg.scale.x = msg.scale.y = msg.scale.z = 1.0
    msg.color.r, msg.color.g, msg.color.b, msg.color.a = (float(c) for c in color)
    corners = np.asarray(mesh.vertices, dtype=np.float64)[np.asarray(mesh.faces).reshape(-1)]  # (3M, 3)
    msg.points = [Point(x=x, y=y, z=z) for x, y, z in corners.tolist()]
    return msg


def terrain_delete_msg(frame_id: str, stamp_ns: int = 0, ns: str = TERRAIN_MARKER_NS, marker_id: int = 0) -> Marker:
    """A DELETE of the terrain marker (flat ground: clears a mesh an earlier replay left in RViz)."""
    msg = Marker()
    msg.header.stamp = time_msg(stamp_ns)
    msg.header.frame_id = frame_id
    msg.ns, msg.id = ns, int(marker_id)
    msg.type, msg.action = Marker.TRIANGLE_LIST, Marker.DELETE
    msg.pose.orientation.w = 1.0
    return msg
