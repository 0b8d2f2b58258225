"""Motion quality metrics shared by every stage: skating, penetration, clearance, contacts, limits.

``motion_metrics(robot, root_pos, root_quat, joint_pos, fps, foot_names, foot_offsets, foot_contacts)``
runs forward kinematics once over the clip and returns plain floats (JSON-ready) whose names carry SI
units. It is used on kinematic references (``akd gait``, ``akd distill``) and on simulated states
(``akd track``, ``akd crosscheck``) alike, so the same numbers can be compared across stages.

Definitions (per clip of F frames, K feet):

- ``foot_skate_mps`` / ``foot_skate_max_mps``: mean / max horizontal speed of a foot's contact point
  between two consecutive frames in which that foot is in stance (intended contacts if given,
  else derived ones). With contact parts (``contact_points`` (K,P,3) and ``contact_parts`` (F,K,P), e.g. a
  sole's heel and toe lines, schema 2 of ``reference.npz``) the speed is measured at the parts that are down
  in both frames (derived: below ``contact_height_m``), so a foot rolling onto its toe does not count as skating
  where its toe stays put.
- ``penetration_m``: max depth below z = 0 of any geometry point of any link (box/mesh corners, cylinder
  rims; spheres and capsules exactly, by centre minus radius) and of every foot contact point; 0 if none.
- On a ``terrain`` (:class:`akd_core.model.terrain.Terrain`) every height above is measured from the surface
  straight under the point instead of z = 0, along the surface's normal there (``(z - height) * normal_z``: the
  depth below a slope, not the vertical distance): penetration, the contact height of stance, swing clearance.
  ``feet_on_edges_frac`` (only with a terrain; 0 on flat ground): the fraction of stance (frame, foot) pairs whose
  contact point (with parts: a part) is down (below the contact height: a foot the schedule puts down while it is
  still in the air, landing late, stands on no edge) within ``EDGE_NEAR_M`` of a terrain edge
  (``Terrain.edge_distance``: stair nosings, step borders).
- ``swing_clearance_m``: mean over swing phases (runs of non-stance frames) of the foot's highest point (of its
  lowest contact part, with parts).
- ``contact_schedule_match``: fraction of (frame, foot) pairs where the derived contact (contact point,
  or the lowest of its contact parts, below ``contact_height_m``) equals the intended one (only when
  ``foot_contacts`` is given).
- ``joint_limit_violation_rad``: max excess over the URDF limits (0 when inside).
- ``joint_velocity_ratio``: max |finite-difference joint velocity| / URDF velocity limit.
- ``duty_factor``: mean stance fraction over feet; ``duty_factor_per_foot``: {foot: fraction}.
- ``speed_mps``: mean root velocity along the body's heading (the way it faces, projected on the ground: its x axis,
  or +-y for a robot facing its base's y, :func:`akd_core.model.legs.forward_axis`);
  ``root_speed_mps``: net horizontal root displacement / duration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from akd_core.io.errors import MotionError
from akd_core.model.kinematics import ForwardKinematics, geometry_corners
from akd_core.model.legs import forward_axis
from akd_core.model.robot import Robot
from akd_core.model.spatial import quat_to_matrix

CONTACT_HEIGHT_M = 0.01  # a foot's contact point below this height counts as touching the ground
EDGE_NEAR_M = 0.02  # a stance foot's contact point this close to a terrain edge counts as standing on the edge


def geometry_points(robot: Robot, use: str = "collision") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points bounding every link's geometry, with a radius each.

    Returns (link_idx (P,), points (P,3) in link frames, radius (P,)): spheres give their centre with their
    radius, capsules their two end centres with their radius (exact lowest points under any rotation), every
    other shape the corner/rim points of :func:`akd_core.model.kinematics.geometry_corners` with radius 0.
    """
    idx, pts, rad = [], [], []
    for li, link in enumerate(robot.links):
        geoms = link.collisions if use == "collision" else link.visuals
        if not geoms:
            geoms = link.visuals or link.collisions
        for geom in geoms:
            centre = geom.origin[:3, 3]
            if geom.kind == "sphere":
                idx.append(li)
                pts.append(centre)
                rad.append(float(geom.size[0]))
            elif geom.kind == "capsule":
                half = geom.origin[:3, :3] @ np.array([0.0, 0.0, geom.size[1] / 2])
                idx += [li, li]
                pts += [centre - half, centre + half]
                rad += [float(geom.size[0])] * 2
    other_idx, other_pts = _non_round_corners(robot, use)
    link_idx = np.concatenate([np.asarray(idx, dtype=np.int64), other_idx])
    points = np.concatenate([np.asarray(pts, dtype=np.float64).reshape(-1, 3), other_pts])
    radius = np.concatenate([np.asarray(rad, dtype=np.float64), np.zeros(len(other_idx))])
    return link_idx, points, radius


def _non_round_corners(robot: Robot, use: str) -> tuple[np.ndarray, np.ndarray]:
    """geometry_corners of every shape except spheres and capsules (handled exactly)."""
    stripped = []
    for link in robot.links:
        geoms = link.collisions if use == "collision" else link.visuals
        if not geoms:
            geoms = link.visuals or link.collisions
        stripped.append([g for g in geoms if g.kind not in ("sphere", "capsule")])
    shadow = _GeometryView(robot, stripped)
    return geometry_corners(shadow, use="collision")  # type: ignore[arg-type]


class _GeometryView:
    """Duck-typed stand-in exposing only ``links`` (with chosen geometries) to geometry_corners."""

    class _LinkView:
        def __init__(self, geoms: list) -> None:
            self.collisions = geoms
            self.visuals = geoms

    def __init__(self, robot: Robot, geoms_per_link: list[list]) -> None:
        self.links = [self._LinkView(g) for g in geoms_per_link]


def motion_metrics(robot: Robot, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray, fps: float,
                   foot_names: Sequence[str], foot_offsets: np.ndarray, foot_contacts: np.ndarray | None = None,
                   contact_height_m: float = CONTACT_HEIGHT_M, contact_points: np.ndarray | None = None,
                   contact_parts: np.ndarray | None = None, terrain: Any = None) -> dict[str, Any]:
    """Quality metrics of a clip (see the module docstring for each definition).

    root_pos (F,3) m, root_quat (F,4) xyzw, joint_pos (F,J) in ``robot.joint_names`` order, fps frames/s,
    foot_names (K,) link names, foot_offsets (K,3) contact points in the foot links' frames,
    foot_contacts (F,K) bool intended stance or None (then derived from the contact-point height);
    contact_points (K,P,3) the parts of each foot that touch the ground (heel, toe; ``Motion.contact_points()``)
    and contact_parts (F,K,P) which are intended down, or None (derived from their heights).
    terrain: the ground heights are measured from (an :class:`akd_core.model.terrain.Terrain`; None: z = 0, and no
    ``feet_on_edges_frac``).
    Returns a dict of plain floats (and ``duty_factor_per_foot``: {foot: float}).
    """
    root_pos = np.asarray(root_pos, dtype=np.float64)
    root_quat = np.asarray(root_quat, dtype=np.float64)
    joint_pos = np.asarray(joint_pos, dtype=np.float64)
    frames = joint_pos.shape[0]
    if joint_pos.shape != (frames, robot.num_dofs) or root_pos.shape != (frames, 3) or root_quat.shape != (frames, 4):
        raise MotionError(f"motion_metrics: shapes root_pos {root_pos.shape}, root_quat {root_quat.shape}, "
                          f"joint_pos {joint_pos.shape} do not describe {frames} frames of robot '{robot.name}' "
                          f"({robot.num_dofs} joints)")
    if fps <= 0:
        raise MotionError(f"motion_metrics: fps must be positive, got {fps}")
    fk = ForwardKinematics(robot).double()
    with torch.no_grad():
        link_pos, link_rot = fk(torch.as_tensor(root_pos), torch.as_tensor(root_quat), torch.as_tensor(joint_pos))
        idx, pts, radius = geometry_points(robot)
        lowest = np.inf
        if len(idx):
            world = ForwardKinematics.transform_points(link_pos, link_rot, torch.as_tensor(idx), torch.as_tensor(pts))
            lowest = float((above_ground(world.numpy(), terrain) - radius).min())
        feet = foot_positions(robot, link_pos, link_rot, foot_names, foot_offsets)  # (F, K, 3)
        parts = None
        if contact_points is not None:
            cp = np.asarray(contact_points, dtype=np.float64)
            if cp.ndim != 3 or cp.shape[0] != len(foot_names):
                raise MotionError(f"motion_metrics: contact_points has shape {cp.shape}, expected "
                                  f"({len(foot_names)}, P, 3)")
            names = [n for n in foot_names for _ in range(cp.shape[1])]
            parts = foot_positions(robot, link_pos, link_rot, names, cp.reshape(-1, 3)).reshape(
                frames, cp.shape[0], cp.shape[1], 3)  # (F, K, P, 3)
    if terrain is not None and not terrain.is_flat:  # heights above the surface under each point (x, y kept)
        feet, parts = (None if a is None else np.concatenate([a[..., :2], above_ground(a, terrain)[..., None]], -1)
                       for a in (feet, parts))
    if feet.shape[1]:
        lowest = min(lowest, float(feet[..., 2].min()))
    out: dict[str, Any] = {"penetration_m": float(max(0.0, -lowest)) if np.isfinite(lowest) else 0.0}
    out.update(_joint_metrics(robot, joint_pos, fps))
    out.update(_foot_metrics(feet, foot_names, foot_contacts, fps, contact_height_m, parts, contact_parts, terrain))
    out.update(_root_metrics(root_pos, root_quat, fps, forward_axis(robot, foot_names)))
    return out


def above_ground(points: np.ndarray, terrain: Any = None) -> np.ndarray:
    """Height (...) of ``points`` (..., 3) above ``terrain`` (None or flat: z itself), along the surface's normal
    under each point: ``(z - height) * normal_z`` (negative: below it)."""
    if terrain is None or terrain.is_flat:
        return points[..., 2]
    height, normal = terrain.surface(points[..., 0], points[..., 1])
    return (points[..., 2] - height) * normal[..., 2]


def foot_positions(robot: Robot, link_pos: torch.Tensor, link_rot: torch.Tensor, foot_names: Sequence[str],
                   foot_offsets: np.ndarray) -> np.ndarray:
    """World contact points (F,K,3) of feet ``foot_names`` (K,) with offsets (K,3) in their link frames."""
    if len(foot_names) == 0:
        return np.zeros((link_pos.shape[0], 0, 3))
    try:
        idx = torch.as_tensor([robot.link_index(n) for n in foot_names])
    except Exception as exc:
        raise MotionError(f"foot names {list(foot_names)} are not all links of robot '{robot.name}' ({exc}); "
                          "regenerate the clip for this robot") from exc
    offsets = torch.as_tensor(np.asarray(foot_offsets, dtype=np.float64).reshape(-1, 3))
    return ForwardKinematics.transform_points(link_pos, link_rot, idx, offsets).numpy()


def _joint_metrics(robot: Robot, joint_pos: np.ndarray, fps: float) -> dict[str, float]:
    excess = np.maximum(robot.lower - joint_pos, joint_pos - robot.upper)
    violation = float(max(0.0, excess.max())) if excess.size else 0.0
    ratio = 0.0
    if joint_pos.shape[0] > 1 and joint_pos.shape[1]:
        vel = np.abs(np.gradient(joint_pos, 1.0 / fps, axis=0))
        limit = np.asarray(robot.velocity_limit, dtype=np.float64)
        finite = np.isfinite(limit) & (limit > 0)
        if finite.any():
            ratio = float((vel[:, finite] / limit[finite]).max())
    return {"joint_limit_violation_rad": violation, "joint_velocity_ratio": ratio}


def _foot_metrics(feet: np.ndarray, foot_names: Sequence[str], foot_contacts: np.ndarray | None, fps: float,
                  contact_height_m: float, parts: np.ndarray | None = None,
                  part_contacts: np.ndarray | None = None, terrain: Any = None) -> dict[str, Any]:
    """feet (F,K,3) contact points; parts (F,K,P,3) contact parts or None, part_contacts (F,K,P) or None; their
    z are heights above the ground. terrain: report ``feet_on_edges_frac`` against its edges (None: not at all)."""
    frames, num_feet = feet.shape[:2]
    height = feet[..., 2] if parts is None else parts[..., 2].min(-1)  # (F, K) the foot's lowest contact
    derived = height < contact_height_m  # (F, K)
    out: dict[str, Any] = {}
    if foot_contacts is not None:
        foot_contacts = np.asarray(foot_contacts, dtype=bool)
        if foot_contacts.shape != (frames, num_feet):
            raise MotionError(f"motion_metrics: foot_contacts has shape {foot_contacts.shape}, "
                              f"expected {(frames, num_feet)}")
        out["contact_schedule_match"] = float((derived == foot_contacts).mean()) if derived.size else 1.0
        stance = foot_contacts
    else:
        stance = derived
    if num_feet == 0 or frames < 2:
        out.update(foot_skate_mps=0.0, foot_skate_max_mps=0.0, swing_clearance_m=0.0, duty_factor=0.0,
                   duty_factor_per_foot={})
        return out
    if parts is None:
        speed = np.linalg.norm(np.diff(feet[..., :2], axis=0), axis=-1) * fps  # (F-1, K)
        both = stance[1:] & stance[:-1]
    else:  # at the parts that are down in both frames
        if part_contacts is None:
            down = (parts[..., 2] < contact_height_m) & stance[..., None]
        else:
            down = np.asarray(part_contacts, dtype=bool).reshape(parts.shape[:3])
        speed = np.linalg.norm(np.diff(parts[..., :2], axis=0), axis=-1) * fps  # (F-1, K, P)
        both = down[1:] & down[:-1]
    if terrain is not None:
        out["feet_on_edges_frac"] = _on_edges(terrain, stance, feet, parts, contact_height_m)
    out["foot_skate_mps"] = float(speed[both].mean()) if both.any() else 0.0
    out["foot_skate_max_mps"] = float(speed[both].max()) if both.any() else 0.0
    out["swing_clearance_m"] = _swing_clearance(height, stance)
    duty = stance.mean(axis=0)
    out["duty_factor"] = float(duty.mean())
    out["duty_factor_per_foot"] = {str(n): float(d) for n, d in zip(foot_names, duty)}
    return out


def _on_edges(terrain: Any, stance: np.ndarray, feet: np.ndarray, parts: np.ndarray | None,
              contact_height_m: float) -> float:
    """Fraction of stance (frame, foot) pairs (F,K) whose contact point (feet (F,K,3); with parts (F,K,P,3): a part),
    below the contact height, lies within EDGE_NEAR_M of an edge of ``terrain``; 0 without edges or stance."""
    if terrain.is_flat or not len(terrain.edges) or not stance.any():
        return 0.0
    if parts is None:  # a foot the schedule puts down but still in the air (landing late) stands on no edge
        xy = feet[stance][..., :2]  # (S, 2)
        down = feet[stance][..., 2] < contact_height_m
        return float(((terrain.edge_distance(xy[:, 0], xy[:, 1]) < EDGE_NEAR_M) & down).mean())
    points = parts[stance]  # (S, P, 3)
    near = terrain.edge_distance(points[..., 0], points[..., 1]) < EDGE_NEAR_M
    return float((near & (points[..., 2] < contact_height_m)).any(-1).mean())


def _swing_clearance(height: np.ndarray, stance: np.ndarray) -> float:
    """Mean over swing runs (contiguous non-stance frames of one foot) of the foot's max height. height (F,K)."""
    peaks = []
    for k in range(height.shape[1]):
        swing = ~stance[:, k]
        edges = np.flatnonzero(np.diff(np.r_[0, swing.astype(np.int8), 0]))
        for start, stop in zip(edges[::2], edges[1::2]):
            peaks.append(height[start:stop, k].max())
    return float(np.mean(peaks)) if peaks else 0.0


def _root_metrics(root_pos: np.ndarray, root_quat: np.ndarray, fps: float,
                  forward: np.ndarray | None = None) -> dict[str, float]:
    frames = root_pos.shape[0]
    if frames < 2:
        return {"speed_mps": 0.0, "root_speed_mps": 0.0}

    vel = np.gradient(root_pos, 1.0 / fps, axis=0)
    forward = np.array([1.0, 0.0, 0.0]) if forward is None else forward
    heading = quat_to_matrix(root_quat) @ forward  # the way the body faces, in world (F, 3): its x axis (REP 103)
    heading[:, 2] = 0.0
    heading /= np.maximum(np.linalg.norm(heading, axis=-1, keepdims=True), 1e-9)
    forward = float(np.mean(np.sum(vel * heading, axis=-1)))
    duration = (frames - 1) / fps
    net = float(np.linalg.norm(root_pos[-1, :2] - root_pos[0, :2]) / duration)
    return {"speed_mps": forward, "root_speed_mps": net}


__all__ = ["CONTACT_HEIGHT_M", "EDGE_NEAR_M", "above_ground", "motion_metrics", "geometry_points", "foot_positions"]
