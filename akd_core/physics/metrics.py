"""Figures of a tracked motion against its reference, shared by every method and engine (the manifest's
``track`` metrics). Heights are measured from the terrain the clip was tracked on (flat ground: z = 0)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from akd_core.io.errors import AKDError, URDFError
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.legs import find_legs, rest_link_poses, welded_links
from akd_core.model.robot import Robot
from akd_core.model.spatial import quat_to_matrix
from akd_core.model.terrain import Terrain
from akd_core.motion.clip import Motion, TrackedMotion
from akd_core.motion.metrics import motion_metrics
from akd_core.physics.ground_contacts import non_foot_contacts, sole_on_one_tread

FALL_TILT_DEG = 60.0
FALL_HEIGHT_FRACTION = 0.5
SATURATION_FRACTION = 0.99
SHARED_METRICS = ("foot_skate_mps", "foot_skate_max_mps", "penetration_m", "speed_mps", "root_speed_mps",
                  "feet_on_edges_frac")


def heading_deg(root_quat: np.ndarray) -> np.ndarray:
    """Yaw of the body x axis projected on the ground (deg), (..., 4) xyzw -> (...)."""
    x_axis = quat_to_matrix(np.asarray(root_quat, dtype=np.float64))[..., :, 0]
    return np.degrees(np.arctan2(x_axis[..., 1], x_axis[..., 0]))


def wrap_deg(angle: np.ndarray | float) -> np.ndarray | float:
    return (np.asarray(angle) + 180.0) % 360.0 - 180.0


def stance_slip(foot_vel: np.ndarray, foot_force: np.ndarray, contact_force_n: float,
                foot_height: np.ndarray | None = None, foot_of: np.ndarray | None = None) -> float:
    """Mean horizontal speed (m/s) of feet while the engine reports them in contact: foot_vel (S, P, 3), foot_force
    (S, P) per simulation step and point. 0 when no foot ever touches.

    The speed paired with step i's contact is the one after that step (row i + 1; the last row keeps its own): the
    foot's motion under the ground's force. Both engines give row i the motion up to step i: MuJoCo computes its
    velocity sensors before the step's constraint forces act, Newton differences the positions the step ends at.
    So at the step a foot touches down, row i is the speed it arrives with, which the contact then stops; counted
    as slip, the landings of a robot whose feet stick were 47-80 % of its figure (docs/tracking.md, "Stance slip at
    touch-down").

    With several contact points per foot (a sole's heel and toe: ``foot_of`` (P,) the foot of each point,
    ``foot_height`` (S, P)) the slip of a foot in contact is measured at its lowest point, the one touching the
    ground: a foot rolling onto its toe rotates about the toe, which does not slip, while its heel moves."""
    after = np.concatenate([foot_vel[1:], foot_vel[-1:]]) if len(foot_vel) else foot_vel
    if foot_of is None or foot_height is None:
        stance = foot_force > contact_force_n
        if not stance.any():
            return 0.0
        return float(np.linalg.norm(after[..., :2], axis=-1)[stance].mean())
    speeds = []
    for foot in np.unique(foot_of):
        cols = np.flatnonzero(foot_of == foot)
        touching = (foot_force[:, cols] > contact_force_n).any(-1)  # (S,)
        lowest = cols[np.argmin(foot_height[:, cols], axis=-1)]  # (S,)
        speed = np.linalg.norm(after[np.arange(len(lowest)), lowest, :2], axis=-1)
        speeds.append(speed[touching])
    speeds_all = np.concatenate(speeds) if speeds else np.zeros(0)
    return float(speeds_all.mean()) if speeds_all.size else 0.0


def touchdown_speed(foot_vel: np.ndarray, foot_force: np.ndarray, contact_force_n: float,
                    foot_height: np.ndarray | None = None, foot_of: np.ndarray | None = None) -> float | None:
    """Mean horizontal speed (m/s) feet land with: at each contact onset (a step in contact after one not), the
    foot's row of that step, which the engines give before the contact acts (:func:`stance_slip`); at a foot's lowest
    point when it has several (``foot_of``, ``foot_height``). None when no foot touches down. What the reference
    plans is a landing at rest."""
    feet = np.unique(foot_of) if foot_of is not None and foot_height is not None else None
    speeds = []
    for cols in ([np.flatnonzero(foot_of == f) for f in feet] if feet is not None else
                 [np.array([p]) for p in range(foot_force.shape[1])]):
        touching = (foot_force[:, cols] > contact_force_n).any(-1)  # (S,)
        onset = np.flatnonzero(touching & ~np.r_[False, touching[:-1]])
        onset = onset[onset > 0]  # a foot already down at the first step did not land in the clip
        point = cols[np.argmin(foot_height[onset][:, cols], axis=-1)] if len(cols) > 1 else np.full(len(onset), cols[0])
        speeds.append(np.linalg.norm(foot_vel[onset, point, :2], axis=-1))
    speeds_all = np.concatenate(speeds) if speeds else np.zeros(0)
    return float(speeds_all.mean()) if speeds_all.size else None


def contact_match(foot_force: np.ndarray, intended: np.ndarray, steps: int, contact_force_n: float,
                  foot_of: np.ndarray | None = None) -> float | None:
    """Fraction of (control period, foot) pairs whose engine contact agrees with the intended stance.

    foot_force (P*steps, K) per simulation step, intended (P+1, K) stance at the control frames. A period counts
    when the intended stance is the same at both its frames (contact changes inside a period are ambiguous by a
    period either way); the foot is in contact in the period when it carries more than ``contact_force_n`` on
    most of its steps. None when no period counts. With several contact points per foot (``foot_of`` (K,) the
    foot of each column) a foot is in contact when any of its points is, and intended when any part is."""
    if foot_of is not None:
        feet = np.unique(foot_of)
        foot_force = np.stack([foot_force[:, foot_of == f].max(-1) for f in feet], -1)
        intended = np.stack([intended[:, foot_of == f].any(-1) for f in feet], -1)
    periods = len(foot_force) // steps
    if periods == 0 or len(intended) < periods + 1:
        return None
    touching = (foot_force[:periods * steps] > contact_force_n).reshape(periods, steps, -1).mean(axis=1) > 0.5
    steady = intended[:periods] == intended[1:periods + 1]
    if not steady.any():
        return None
    return float((touching == intended[:periods])[steady].mean())


def feet_of(robot: Robot, ref: Motion) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """Foot links (K,), contact offsets (K,3) and intended stance (T,K) of the reference; detected legs (no
    intended stance) when the reference names no feet."""
    if len(ref.foot_names):
        contacts = ref.foot_contacts if ref.foot_contacts is not None and ref.foot_contacts.any() else None
        return list(ref.foot_names), np.asarray(ref.foot_offsets, dtype=np.float64).reshape(-1, 3), contacts

    try:
        legs = find_legs(robot)
    except AKDError:  # no legs (e.g. an arm on a floating base): skating is not defined
        return [], np.zeros((0, 3)), None
    return [leg.foot_link for leg in legs], np.array([leg.foot_offset for leg in legs]), None


@dataclass(frozen=True)
class ContactSchedule:
    """The reference's contact parts as points the engines report on (every part of every foot, feet in order):
    what the tracker simulates, feeds its inverse dynamics with and measures slip at."""

    names: tuple[str, ...]  # (P,) foot link of each point
    points: np.ndarray  # (P, 3) in the foot links' frames (a sole's heel and toe lines, or one contact point)
    foot_of: np.ndarray  # (P,) index of each point's foot
    intended: np.ndarray | None  # (T, P) bool, which parts the reference puts down (None: no schedule)


def contact_schedule(robot: Robot, ref: Motion) -> ContactSchedule:
    """The :class:`ContactSchedule` of ``ref`` (``Motion.contact_points_flat``; one point per detected leg when the
    reference names no feet). A foot link without collision geometry (talos' ``left_sole_link``, a frame welded to
    the ankle link that carries the sole) is reported on the welded link that has it, its points moved into that
    link's frame: an engine's contact sensor on a body without geometry never feels the ground."""
    if len(ref.foot_names):
        names, points, parts, foot_of = ref.contact_points_flat()
        intended = parts if ref.foot_contacts is not None and ref.foot_contacts.any() else None
    else:
        names, points, _ = feet_of(robot, ref)
        points, parts, foot_of, intended = np.asarray(points, dtype=np.float64).reshape(-1, 3), None, \
            np.arange(len(names)), None
    names, points = list(names), np.array(points, dtype=np.float64)
    poses = None
    for i, name in enumerate(names):
        if robot.links[robot.link_index(name)].collisions:
            continue
        carrier = next((n for n in welded_links(robot, name)[1:] if robot.links[robot.link_index(n)].collisions), None)
        if carrier is None:
            continue
        if poses is None:
            poses = rest_link_poses(robot, np.zeros(robot.num_dofs))
        pos, rot = poses
        a, b = robot.link_index(name), robot.link_index(carrier)
        points[i] = rot[b].T @ (pos[a] + rot[a] @ points[i] - pos[b])
        names[i] = carrier
    return ContactSchedule(tuple(names), points, np.asarray(foot_of), intended)


def require_colliding_feet(robot: Robot, ref: Motion) -> None:
    """URDFError naming the feet of ``ref`` that no collision geometry carries (neither the foot link nor a link
    fixed to it): in an engine such a foot never touches the ground, so a clip would be tracked on whatever else
    collides (simple_humanoid's body cylinder) or fall through the floor (a URDF with visuals only)."""
    schedule = contact_schedule(robot, ref)
    bare = sorted({name for name in schedule.names if not robot.links[robot.link_index(name)].collisions})
    if not bare:
        return
    source = robot.mjcf_path or robot.urdf_path or f"robot '{robot.name}'"
    seen = [n for n in bare if any(robot.links[robot.link_index(w)].visuals for w in welded_links(robot, n))]
    what = (f"{seen} have only <visual> geometry" if seen == bare else
            "no geometry at all" if not seen else f"{seen} have only <visual> geometry, the others none")
    raise URDFError(f"{source}: the feet {bare} of robot '{robot.name}' have no collision geometry, nor has any link "
                    f"fixed to them ({what}), so in simulation they cannot touch the ground. Fix: give each of these "
                    f"links a <collision> element (a copy of its <visual> geometry, or a <box> sole) in the robot "
                    f"file, or make the gait again with --feet LINK,... naming foot links that have one")


def tracking_metrics(robot: Robot, ref: Motion, height_shift: float, tracked: TrackedMotion, torque_peak: np.ndarray,
                     effort: np.ndarray, link_names: list[str], diverged: bool = False,
                     slip_mps: float | None = None, ref_link_pos: np.ndarray | None = None,
                     schedule_match: float | None = None, terrain: Terrain | None = None) -> dict[str, Any]:
    """Errors of ``tracked`` against ``ref`` (same control rate; reference raised by ``height_shift`` m as the start
    state was), plus the quality metrics every stage shares.

    ``joint_rmse_rad``; ``link_pos_err_m`` (mean over frames and ``link_names``); ``root_pos_err_m``;
    ``final_root_err_m`` (horizontal root distance at the last frame);
    ``root_height_err_m`` / ``root_height_err_max_m`` (mean / max |z - z_ref| of the root);
    ``heading_err_deg`` (final frame, signed: tracked minus reference yaw) and ``max_heading_err_deg``;
    ``max_tilt_deg``; ``fell`` (tilt > 60 deg, root below half its start height above the ground under it, or a
    blown-up simulation: a robot that walked down stairs has not fallen);
    ``torque_saturation_frac`` / ``max_torque_ratio`` (torque_peak (T, J) vs ``effort``); ``stance_slip_mps`` (from
    the engine's contacts, when given); and from :func:`akd_core.motion.metrics.motion_metrics`: ``foot_skate_mps``,
    ``foot_skate_max_mps`` (stance = foot point below 1 cm), ``penetration_m``, ``speed_mps``, ``root_speed_mps``,
    ``contact_schedule_match``, ``feet_on_edges_frac`` (stance frames of feet within 2 cm of a terrain edge, a stance
    foot being one the reference's schedule puts down that is down; 0 on flat ground); from
    :mod:`akd_core.physics.ground_contacts`: ``non_foot_contact_frac`` (frames in which a link
    other than a foot is within 2 mm of the terrain, by MuJoCo's collision detection on the simulated states) and
    ``non_foot_contact_links``, and for bipeds ``sole_on_one_tread_frac`` (stance frames whose whole sole is on one
    tread: the surface under it within 5 mm of one plane, 2 cm or more from every edge; None without stance).
    ``terrain`` (None: flat ground): the surface heights, penetration and falls are measured from.
    ``ref_link_pos`` (T, L, 3): the raised reference's ``link_names`` positions when the caller has them already
    (FK of the reference otherwise). ``schedule_match``: the contact schedule match when
    the caller measured it from the engine's contacts (the height-based one otherwise).
    """

    fk = ForwardKinematics(robot)
    ref_root = ref.root_pos.astype(np.float64) + np.array([0.0, 0.0, height_shift])
    ids = [robot.link_names.index(n) for n in link_names]
    with torch.no_grad():
        link_pos, _ = fk(torch.as_tensor(tracked.root_pos, dtype=torch.float64),
                         torch.as_tensor(tracked.root_quat, dtype=torch.float64),
                         torch.as_tensor(tracked.joint_pos, dtype=torch.float64))
        if ref_link_pos is None:
            ref_link_pos = fk(torch.as_tensor(ref_root), torch.as_tensor(ref.root_quat, dtype=torch.float64),
                              torch.as_tensor(ref.joint_pos, dtype=torch.float64))[0].numpy()[:, ids]
    up_z = quat_to_matrix(tracked.root_quat.astype(np.float64))[:, 2, 2]
    tilt_deg = np.degrees(np.arccos(np.clip(up_z, -1.0, 1.0)))
    terrain = terrain if terrain is not None else Terrain.flat()
    root_height = tracked.root_pos[:, 2].astype(np.float64)  # above the ground under the root
    if not terrain.is_flat:
        root_height = root_height - terrain.height(tracked.root_pos[:, 0], tracked.root_pos[:, 1])
    height0 = float(root_height[0])
    collapsed = bool(np.any(root_height < FALL_HEIGHT_FRACTION * height0)) if height0 > 0 else False
    heading_err = wrap_deg(heading_deg(tracked.root_quat) - heading_deg(ref.root_quat))
    effort = np.asarray(effort, dtype=np.float64)
    out: dict[str, Any] = {
        "joint_rmse_rad": float(np.sqrt(np.mean((tracked.joint_pos - ref.joint_pos) ** 2))),
        "link_pos_err_m": float(np.linalg.norm(link_pos.numpy()[:, ids] - ref_link_pos, axis=-1).mean()),
        "root_pos_err_m": float(np.linalg.norm(tracked.root_pos - ref_root, axis=-1).mean()),
        # how far the root ends from where the reference ends, on the ground plane: a robot left behind by a clip
        # it could not keep up with can stay upright with a modest mean link error
        "final_root_err_m": float(np.linalg.norm(tracked.root_pos[-1, :2] - ref_root[-1, :2])),
        "root_height_err_m": float(np.abs(tracked.root_pos[:, 2] - ref_root[:, 2]).mean()),
        "root_height_err_max_m": float(np.abs(tracked.root_pos[:, 2] - ref_root[:, 2]).max()),
        "heading_err_deg": float(heading_err[-1]),
        "max_heading_err_deg": float(np.abs(heading_err).max()),
        "max_tilt_deg": float(tilt_deg.max()),
        "fell": bool(tilt_deg.max() > FALL_TILT_DEG or collapsed or diverged),
        "diverged": bool(diverged),
        "torque_saturation_frac": float(np.mean(torque_peak >= SATURATION_FRACTION * effort[None, :])),
        "max_torque_ratio": float(np.max(torque_peak / effort[None, :])),
    }
    if slip_mps is not None:
        out["stance_slip_mps"] = float(slip_mps)
    feet, offsets, intended = feet_of(robot, ref)
    args = (robot, tracked.root_pos, tracked.root_quat, tracked.joint_pos, 1.0 / tracked.dt, feet, offsets)
    parts = {"contact_points": ref.contact_points()} if len(ref.foot_names) else {}
    parts["terrain"] = terrain
    # stance from the simulated heights of the contact parts: a part on the ground that slides skates
    shared = motion_metrics(*args, **parts)
    for key in SHARED_METRICS:
        out[key] = shared[key]
    scheduled = None
    if intended is not None and (schedule_match is None or (terrain is not None and not terrain.is_flat)):
        scheduled = motion_metrics(*args, foot_contacts=intended, **parts)
    if schedule_match is not None:
        out["contact_schedule_match"] = float(schedule_match)
    elif scheduled is not None:
        out["contact_schedule_match"] = scheduled["contact_schedule_match"]
    if scheduled is not None and "feet_on_edges_frac" in scheduled:
        # a stance foot is one the schedule puts down and that is down: a swing passing low over a nose is not
        out["feet_on_edges_frac"] = scheduled["feet_on_edges_frac"]
    # what touches the ground besides the feet, and (bipeds) whether each sole rests on one tread: from the states
    carriers = list(dict.fromkeys(contact_schedule(robot, ref).names))  # the links carrying the feet's geometry
    states = (tracked.root_pos, tracked.root_quat, tracked.joint_pos)
    out.update(non_foot_contacts(robot, *states, carriers, terrain))
    if 0 < len(feet) <= 2:
        out["sole_on_one_tread_frac"] = sole_on_one_tread(robot, *states, carriers, terrain)
    return out


def tracks_better(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether rollout metrics ``a`` track strictly better than ``b``: upright first, then link position error."""
    return (bool(a["fell"]), float(a["link_pos_err_m"])) < (bool(b["fell"]), float(b["link_pos_err_m"]))


def fall_warning(metrics: dict[str, Any]) -> str:
    """The plain message `akd track` / `akd run` print when the tracked rollout fell."""
    how = "the simulation blew up" if metrics.get("diverged") else f"max root tilt {metrics['max_tilt_deg']:.0f} deg"
    return (f"WARNING: the tracked robot FELL ({how}); tracked.npz records "
            "the fall and manifest metrics say fell: true. These PD targets and torques are not a usable "
            "demonstration: try a slower gait, more --samples or a longer --horizon, or higher --kp.")
