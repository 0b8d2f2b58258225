"""Episode assembly shared by every exporter: one run directory -> one :class:`Episode`.

An episode is the clip a dataset stores: the tracked (simulated) states, PD targets and torques at the control
rate when ``tracked.npz`` exists, else the kinematic reference (allowed for the motion-file formats only). Derived
here, once, for every format: foot contact points in the world (FK of the exported states), foot contacts from
their height above the ground under them (the run's terrain, :func:`~akd_core.model.terrain.run_terrain`: the plane
z = 0 unless the run was made on stairs, a slope, ...), every link's world pose (AMP body poses) and velocities, and
the velocity command the clip was made to follow (:func:`commanded_velocity`).

Quaternions are xyzw; joint order is the robot's actuated-joint order (recorded by name).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from akd_core.io.errors import JointLimitError, MotionError, RunDirError
from akd_core.io.rundir import REFERENCE, ROBOT_URDF, TRACKED, RunDir
from akd_core.model.kinematics import ForwardKinematics, geometry_corners
from akd_core.model.robot import Robot, load_urdf
from akd_core.model.spatial import angular_velocity, quat_to_matrix
from akd_core.model.spatial.tensor import matrix_to_quat
from akd_core.model.terrain import Terrain, run_terrain
from akd_core.motion.clip import LIMIT_TOLERANCE, STATE_LIMIT_TOLERANCE, Motion, TrackedMotion, check_joint_limits

CONTACT_HEIGHT_M = 0.015  # a foot whose lowest point is this close (m) to the ground under it is in contact
SOURCES = ("auto", "tracked", "reference")
DATASET_FORMATS = ("hdf5", "lerobot")  # many runs -> one dataset
# motion files for RL-tracking trainers (akd_core.export.motion_files)
MOTION_FORMATS = ("mjlab", "beyondmimic", "gmr", "mimickit", "protomotions", "locomujoco", "amp-rsl-rl")
PER_RUN_FORMATS = ("amp", "isaaclab-amp", "rosbag2") + MOTION_FORMATS  # one file (or bag) per run
FORMATS = DATASET_FORMATS + PER_RUN_FORMATS



@dataclass
class Episode:
    """One run's clip at a fixed period, with everything the exporters derive from it.

    T samples, J actuated joints, K feet, B = every link of the robot (``body_names`` = ``robot.link_names``).
    """

    run_dir: Path
    robot: Robot
    source: str  # "tracked" | "reference"
    prompt: str
    seed: int
    success: bool  # the tracked clip passed its verdict and did not fall (True for a reference clip)
    dt: float  # s between samples (control period)
    joint_names: list[str]  # (J,)
    joint_pos: np.ndarray  # (T, J) rad
    joint_vel: np.ndarray  # (T, J) rad/s
    root_pos: np.ndarray  # (T, 3) m, world
    root_quat: np.ndarray  # (T, 4) xyzw, world
    root_lin_vel: np.ndarray  # (T, 3) m/s, world frame
    root_ang_vel: np.ndarray  # (T, 3) rad/s, world frame
    pd_targets: np.ndarray  # (T, J) rad: tracked PD targets, or the reference angles for a reference clip
    joint_torques: np.ndarray | None  # (T, J) N m after effort clamping; None for a reference clip
    kp: np.ndarray | None  # (J,) PD gains; None for a reference clip
    kd: np.ndarray | None  # (J,)
    foot_names: list[str]  # (K,) URDF link names
    foot_pos: np.ndarray  # (T, K, 3) world positions of the foot contact points
    foot_contacts: np.ndarray  # (T, K) bool, foot's lowest point within CONTACT_HEIGHT_M of the ground under it
    contact_labels: list[str]  # (P,) the parts of a foot that touch the ground (["heel", "toe"]; ["sole"])
    foot_part_contacts: np.ndarray  # (T, K, P) bool, each part within CONTACT_HEIGHT_M of the ground
    body_names: list[str]  # (B,)
    body_pos: np.ndarray  # (T, B, 3) world
    body_quat: np.ndarray  # (T, B, 4) xyzw, world
    body_lin_vel: np.ndarray  # (T, B, 3) world frame
    body_ang_vel: np.ndarray  # (T, B, 3) world frame
    manifest: dict[str, Any]
    reference: Motion | None = None  # the kinematic reference the clip tracks (reference.npz, its own fps)
    # (T, 3) the commanded (vx, vy, yaw rate) per sample, m/s, m/s, rad/s in the heading frame (commanded_velocity);
    # None for a clip that followed no velocity command (distilled by SDS)
    command: np.ndarray | None = None
    terrain: Terrain = field(default_factory=Terrain.flat)  # the ground the run was made on (RUN/terrain.npz)

    @property
    def num_samples(self) -> int:
        return int(self.joint_pos.shape[0])

    @property
    def fps(self) -> float:
        return 1.0 / self.dt

    @property
    def name(self) -> str:
        return self.run_dir.name

    def root_frame(self, vectors: np.ndarray) -> np.ndarray:
        """World vectors (T, ..., 3) -> the root's body frame (per sample)."""

        rot = quat_to_matrix(self.root_quat.astype(np.float64))  # (T, 3, 3) body -> world
        v = np.asarray(vectors, dtype=np.float64)
        extra = v.ndim - 2
        rot_t = np.swapaxes(rot, -1, -2).reshape(rot.shape[0], *([1] * extra), 3, 3)
        return (rot_t @ v[..., None])[..., 0]


def load_episode(run_dir: str | Path, source: str = "auto", check_limits: bool = True) -> Episode:
    """Read RUN/{robot.urdf, reference.npz, tracked.npz, manifest.json} into an :class:`Episode`.

    ``source``: "tracked" (needs tracked.npz), "reference" (the kinematic clip) or "auto" (tracked when present).
    With ``check_limits`` the exported joint positions and PD targets must lie within the URDF limits
    (JointLimitError otherwise)."""
    if source not in SOURCES:
        raise MotionError(f"episode source must be one of {SOURCES}, got {source!r}")
    run = RunDir(run_dir)
    robot = load_urdf(run.require(ROBOT_URDF, f"akd gait --robot ROBOT --prompt TEXT --out {run.path}"))
    motion = Motion.load(run.require(REFERENCE, f"akd gait --robot ROBOT --prompt TEXT --out {run.path}"), robot)
    manifest = run.manifest()
    tracked_path = run.file(TRACKED)
    if source == "tracked" and not tracked_path.exists():
        raise RunDirError(f"{tracked_path} is missing: this format stores tracked PD targets, torques and simulated "
                          f"states; run `akd track {run.path}` first")
    if source != "reference" and tracked_path.exists():
        tracked = TrackedMotion.load(tracked_path)
        if list(tracked.joint_names) != list(robot.joint_names):
            raise MotionError(f"{tracked_path}: joint names {tracked.joint_names} differ from {run.file(ROBOT_URDF)}'s "
                              f"{robot.joint_names}; re-run `akd track {run.path}`")
        episode = _from_tracked(run, robot, motion, tracked, manifest)
    else:
        episode = _from_reference(run, robot, motion, manifest)
    if check_limits:
        check_episode_limits(episode)
    return episode


def limit_violation(episode: Episode) -> str | None:
    """The first joint position or PD target outside the URDF limits (or not finite), as a message naming run, field,
    joint and frame; None when the clip is within the limits. The one limit check of every export and quality gate."""
    for field_name in ("joint_pos", "pd_targets"):
        values = np.asarray(getattr(episode, field_name))
        bad = ~np.isfinite(values)
        if bad.any():
            frame, joint = np.argwhere(bad)[0]
            return (f"{episode.run_dir}: '{field_name}' of joint '{episode.robot.joint_names[joint]}' is "
                    f"{values[frame, joint]} at frame {frame}; the simulation blew up, re-run `akd track`")
        simulated = field_name == "joint_pos" and episode.source == "tracked"  # a measured state, not a command
        tolerance = STATE_LIMIT_TOLERANCE if simulated else LIMIT_TOLERANCE
        try:
            check_joint_limits(values, episode.robot, str(episode.run_dir), field_name, tolerance=tolerance)
        except JointLimitError as exc:
            return str(exc)
    return None


def check_episode_limits(episode: Episode) -> None:
    """JointLimitError (naming run, field, joint, frame) if joint positions or PD targets leave the URDF limits."""
    violation = limit_violation(episode)
    if violation:
        raise JointLimitError(f"{violation}. Refusing to export commands outside the robot's limits "
                              "(override with --allow-limit-violations)")


def require_tracked(episode: Episode, fmt: str) -> None:
    if episode.source != "tracked":
        raise RunDirError(f"{episode.run_dir / TRACKED} is missing: the {fmt} format stores tracked PD targets, "
                          f"torques and simulated states; run `akd track {episode.run_dir}` first")


def _seed(manifest: dict[str, Any]) -> int:
    seeds = manifest.get("seeds") or {}
    if isinstance(seeds, dict):
        for key in ("gait", "distill", "track", *seeds.keys()):
            if isinstance(seeds.get(key), (int, float)):
                return int(seeds[key])
    return 0


def _tracked_well(manifest: dict[str, Any]) -> bool:
    """The tracked robot did not fall and the clip passed its verdict (runs tracked before verdicts existed: did
    not fall)."""
    metrics = ((manifest.get("stages") or {}).get("track") or {}).get("metrics", {})
    return not metrics.get("fell", False) and metrics.get("tracking_passed", True) is not False


def _from_tracked(run: RunDir, robot: Robot, motion: Motion, tracked: TrackedMotion,
                  manifest: dict[str, Any]) -> Episode:
    arrays = {name: np.asarray(getattr(tracked, name), dtype=np.float32)
              for name in ("joint_pos", "joint_vel", "root_pos", "root_quat", "root_lin_vel", "root_ang_vel",
                           "pd_targets", "joint_torques")}
    return _assemble(run, robot, motion, manifest, "tracked", tracked.dt, arrays, tracked.kp, tracked.kd,
                     success=_tracked_well(manifest))


def _from_reference(run: RunDir, robot: Robot, motion: Motion, manifest: dict[str, Any]) -> Episode:
    arrays = {"joint_pos": motion.joint_pos, "joint_vel": motion.joint_vel(), "root_pos": motion.root_pos,
              "root_quat": motion.root_quat, "root_lin_vel": motion.root_lin_vel(),
              "root_ang_vel": motion.root_ang_vel(), "pd_targets": motion.joint_pos, "joint_torques": None}
    return _assemble(run, robot, motion, manifest, "reference", motion.dt, arrays, None, None, success=True)


def _assemble(run: RunDir, robot: Robot, motion: Motion, manifest: dict[str, Any], source: str, dt: float,
              arrays: dict[str, np.ndarray | None], kp, kd, success: bool) -> Episode:
    if arrays["joint_pos"].shape[0] < 2:
        raise MotionError(f"{run.path}: the {source} clip has {arrays['joint_pos'].shape[0]} sample(s); "
                          "an episode needs at least 2")
    foot_names, foot_offsets = _feet(robot, motion)
    terrain = run_terrain(run)
    body = body_poses(robot, arrays["root_pos"], arrays["root_quat"], arrays["joint_pos"], dt)
    foot_pos, foot_low = _foot_points(robot, foot_names, foot_offsets, body["pos"], body["rot"], terrain)
    parts = _part_heights(robot, foot_names, motion.contact_points() if motion.foot_names else
                          foot_offsets[:, None], body["pos"], body["rot"], terrain)
    prompt = str(manifest.get("prompt") or motion.prompt or "")
    command = commanded_velocity(manifest, np.arange(arrays["joint_pos"].shape[0]) * float(dt))
    return Episode(
        run_dir=run.path, robot=robot, source=source, prompt=prompt, seed=_seed(manifest), success=bool(success),
        dt=float(dt), joint_names=list(robot.joint_names), joint_torques=arrays.pop("joint_torques"),
        **{k: np.asarray(v, dtype=np.float32) for k, v in arrays.items()},
        kp=None if kp is None else np.asarray(kp, dtype=np.float32),
        kd=None if kd is None else np.asarray(kd, dtype=np.float32),
        foot_names=foot_names, foot_pos=foot_pos.astype(np.float32), foot_contacts=foot_low < CONTACT_HEIGHT_M,
        contact_labels=motion.contact_labels() if motion.foot_names else ["sole"],
        foot_part_contacts=parts < CONTACT_HEIGHT_M,
        body_names=list(robot.link_names), body_pos=body["pos"].astype(np.float32),
        body_quat=body["quat"].astype(np.float32), body_lin_vel=body["lin_vel"].astype(np.float32),
        body_ang_vel=body["ang_vel"].astype(np.float32), manifest=manifest, reference=motion,
        command=None if command is None else command.astype(np.float32), terrain=terrain)


COMMAND_NAMES = ("vx", "vy", "yaw_rate")  # the columns of an episode's command


def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3 - 2 * x)


def commanded_velocity(manifest: dict[str, Any], times: np.ndarray) -> np.ndarray | None:
    """The velocity command (vx, vy, yaw rate) a gait-library clip follows, at ``times`` (T,) s -> (T, 3) float64:
    m/s, m/s, rad/s in the heading frame (x along the body's heading, z up). None when the run's gait stage records
    none (a clip distilled by SDS).

    A motion program (``stages.gait.config.segments``, :mod:`akd_core.motion.program`) holds each segment's played
    command (after any lowering by the gait library: what the reference does, not what was asked) and ramps into it
    from the value reached by a smoothstep over the segment's ``ramp_s``, as the program's body path does; the body
    rests before t = 0. A single gait (``config.spec``) ramps from rest to its speed along its direction and its turn
    rate by a smoothstep over ``ramp_time``, as :func:`akd_core.motion.gait.body_path` does. The reference's root
    velocity is not used: a balanced biped's body sways about the commanded path, and a bounding gait's pitches."""
    config = (((manifest.get("stages") or {}).get("gait") or {}).get("config")) or {}
    times = np.asarray(times, dtype=np.float64)
    segments = config.get("segments")
    if segments:
        out = np.zeros((len(times), 3))
        value = np.zeros(3)
        for n, seg in enumerate(segments):
            played = seg.get("command") or {}
            target = np.array([played.get("vx_mps", 0.0), played.get("vy_mps", 0.0),
                               played.get("yaw_rate_radps", 0.0)], dtype=np.float64)
            start, ramp = float(seg["start_s"]), max(float(seg.get("ramp_s") or 0.0), 1e-9)
            lo = start if n else -np.inf
            hi = float(segments[n + 1]["start_s"]) if n + 1 < len(segments) else np.inf
            span = (times >= lo) & (times < hi)
            out[span] = value + (target - value) * _smoothstep((times[span] - start) / ramp)[:, None]
            if n + 1 < len(segments):
                value = value + (target - value) * float(_smoothstep(np.array((hi - start) / ramp)))
        return out
    spec = config.get("spec")
    if not isinstance(spec, dict) or "speed" not in spec:
        return None
    speed, direction = float(spec.get("speed") or 0.0), float(spec.get("direction") or 0.0)
    ramp_time = float(spec.get("ramp_time") or 0.0)
    ramp = _smoothstep(times / ramp_time) if ramp_time > 0 else (times >= 0).astype(np.float64)
    steady = np.array([speed * np.cos(direction), speed * np.sin(direction), float(spec.get("turn_rate") or 0.0)])
    return ramp[:, None] * steady[None, :]


def _feet(robot: Robot, motion: Motion) -> tuple[list[str], np.ndarray]:
    """The reference's feet (K,) and contact offsets (K, 3); without them, the leaf links at the end of the longest
    actuated chains (a leg's tip, not an IMU or a welded cover), offset zero."""
    if motion.foot_names:
        return list(motion.foot_names), np.asarray(motion.foot_offsets, dtype=np.float64).reshape(-1, 3)
    parents = {j.parent for j in robot.joints}
    by_child = {j.child: j for j in robot.joints}

    def actuated_depth(link: str) -> int:
        depth = 0
        while link in by_child:
            depth += int(by_child[link].actuated)
            link = by_child[link].parent
        return depth

    leaves = [link.name for link in robot.links
              if link.name not in parents and link.name != robot.root_link and (link.collisions or link.visuals)]
    deepest = max((actuated_depth(n) for n in leaves), default=0)
    feet = [n for n in leaves if actuated_depth(n) == deepest and deepest > 0]
    return feet, np.zeros((len(feet), 3))


def body_poses(robot: Robot, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray,
               dt: float) -> dict[str, np.ndarray]:
    """World pose and velocity of every link by FK (float64).

    root_pos (T,3), root_quat (T,4) xyzw, joint_pos (T,J) -> pos (T,L,3), rot (T,L,3,3), quat (T,L,4) xyzw,
    lin_vel (T,L,3), ang_vel (T,L,3) (world frame, central differences)."""
    fk = ForwardKinematics(robot)
    with torch.no_grad():
        pos, rot = fk(torch.as_tensor(np.asarray(root_pos), dtype=torch.float64),
                      torch.as_tensor(np.asarray(root_quat), dtype=torch.float64),
                      torch.as_tensor(np.asarray(joint_pos), dtype=torch.float64))
        quat = matrix_to_quat(rot)
    pos_np, rot_np, quat_np = pos.numpy(), rot.numpy(), quat.numpy()
    quat_np = continuous_quats(quat_np)
    lin_vel = np.gradient(pos_np, dt, axis=0)
    ang_vel = np.stack([angular_velocity(quat_np[:, b], dt) for b in range(quat_np.shape[1])], 1)
    return {"pos": pos_np, "rot": rot_np, "quat": quat_np, "lin_vel": lin_vel, "ang_vel": ang_vel}


def continuous_quats(quat: np.ndarray) -> np.ndarray:
    """Flip signs so consecutive quaternions (T, ..., 4) lie in the same hemisphere (no jumps for consumers
    that interpolate or difference them)."""
    quat = quat.copy()
    for t in range(1, quat.shape[0]):
        flip = np.sum(quat[t] * quat[t - 1], axis=-1) < 0.0
        quat[t][flip] *= -1.0
    return quat


def _above(terrain: Terrain, points: np.ndarray) -> np.ndarray:
    """Heights (...) of world points (..., 3) above the terrain's surface under them (z itself on flat ground)."""
    if terrain.is_flat:
        return points[..., 2]
    return points[..., 2] - terrain.height(points[..., 0], points[..., 1])


def _foot_points(robot: Robot, foot_names: list[str], foot_offsets: np.ndarray, link_pos: np.ndarray,
                 link_rot: np.ndarray, terrain: Terrain) -> tuple[np.ndarray, np.ndarray]:
    """Foot contact points (T, K, 3) and each foot's lowest height above the terrain (T, K): min of the contact
    point's and the foot link's geometry corners' heights (a sphere-tipped foot with its origin at the sphere centre
    still touches), each measured from the surface under it."""
    corner_idx, corners = geometry_corners(robot)
    num = link_pos.shape[0]
    points = np.zeros((num, len(foot_names), 3))
    low = np.zeros((num, len(foot_names)))
    for k, (name, offset) in enumerate(zip(foot_names, foot_offsets)):
        if name not in robot.link_names:
            raise MotionError(f"foot '{name}' of reference.npz is not a link of robot '{robot.name}'; "
                              "re-create the reference for this robot")
        li = robot.link_index(name)
        points[:, k] = link_pos[:, li] + link_rot[:, li] @ offset
        height = _above(terrain, points[:, k])
        mask = corner_idx == li
        if mask.any():
            world = link_pos[:, li, None] + np.einsum("tij,pj->tpi", link_rot[:, li], corners[mask])
            height = np.minimum(height, _above(terrain, world).min(1))
        low[:, k] = height
    return points, low


def has_parts(episode: Episode) -> bool:
    """Whether the episode's feet have contact parts of their own (heel and toe), not one point each."""
    return bool(episode.foot_names) and episode.contact_labels != ["sole"]


def part_names(episode: Episode) -> list[str]:
    """Names (K*P,) of the contact-part columns, foot-major: ``"<foot link>/<part>"``."""
    return [f"{foot}/{part}" for foot in episode.foot_names for part in episode.contact_labels]


def _part_heights(robot: Robot, foot_names: list[str], points: np.ndarray, link_pos: np.ndarray,
                  link_rot: np.ndarray, terrain: Terrain) -> np.ndarray:
    """Heights (T, K, P) above the terrain of each foot's contact parts ``points`` (K, P, 3) in its link frame (heel
    and toe lines)."""
    out = np.zeros((link_pos.shape[0], len(foot_names), points.shape[1]))
    for k, name in enumerate(foot_names):
        li = robot.link_index(name)
        out[:, k] = _above(terrain, link_pos[:, li, None] + np.einsum("tij,pj->tpi", link_rot[:, li], points[k]))
    return out


def stack_checked(episodes: list[Episode], fmt: str) -> None:
    """Episodes stored in one dataset must be readable together: same dt (one fps per dataset)."""
    rates = {round(e.dt, 9) for e in episodes}
    if len(rates) > 1:
        raise MotionError(f"{fmt}: the runs have different control periods {sorted(rates)} s; a {fmt} dataset has "
                          "one fps. Export them to separate datasets (-o) or re-track them at one rate (`akd track RUN "
                          "--control-hz HZ`; a clip with flight phases is controlled at 100 Hz by default)")
