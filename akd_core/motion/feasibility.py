"""Dynamic feasibility of a kinematic reference: centre of pressure vs support polygon, and residual wrench.

A reference clip (:class:`akd_core.motion.clip.Motion`) fixes every link's motion, so whole-body inverse dynamics fixes
the ground wrench it needs. ``feasibility(robot, motion, mu=1.0)`` measures per frame whether that wrench is one the
feet in intended stance (``Motion.foot_contacts``) can supply on flat ground (z = 0), before any physics tracking.

**Centroidal dynamics** (float64, world frame, gravity ``g = (0, 0, -9.81)``). Link ``i`` with an ``<inertial>``
(mass ``m_i``, COM frame ``origin_i``, inertia ``I_i`` about its COM in that frame) has its COM at
``p_i = x_link * origin_i`` and world rotation ``R_i = R_link R_origin`` (forward kinematics of the clip). With
``m = sum m_i`` and ``c = sum m_i p_i / m``:

- link COM velocities ``v_i`` and angular velocities ``w_i = vee(dR_i/dt R_i^T)`` (skew part) by **central
  differences** of the FK in time (``np.gradient``: ``(x[t+1] - x[t-1]) / 2 dt`` inside, second-order one-sided
  at the first and last frame);
- linear momentum ``P = sum m_i v_i`` and angular momentum about the CoM
  ``L = sum m_i (p_i - c) x v_i + R_i I_i R_i^T w_i``;
- their rates ``P'`` and ``L'`` by central differences again (the same operator for both, so force and moment are
  consistent; ``P' = m c''`` with the 5-frame stencil ``(c[t+2] - 2 c[t] + c[t-2]) / 4 dt^2`` inside).

**Required ground wrench.** Newton-Euler for the whole body: ``f = P' - m g = m (c'' - g)`` and, about the CoM,
``n = L'`` (gravity has no moment about the CoM). About the world origin the ground must supply ``n + c x f``.

**Centre of pressure** ``p = (p_x, p_y, 0)``: the point on the ground about which that wrench has no horizontal
moment, ``[n + c x f - p x f]_{x,y} = 0``, i.e. (for ``f_z > 0``)::

    p_x = c_x - (c_z f_x + n_y) / f_z
    p_y = c_y - (c_z f_y - n_x) / f_z

(standing still: ``p`` = CoM ground projection; constant horizontal acceleration ``a`` of a rigid pose:
``p = c_xy - c_z a / |g|``.)

**Support polygon** of a frame: the 2D convex hull (x, y) of the ground-contact points of the feet in intended
stance. A foot's contact points are the collision-geometry points (``akd_core.motion.metrics.geometry_points``;
spheres and capsules by their lowest point ``centre - radius z``) of its link (for a link without geometry: of the
links welded to it by fixed joints, e.g. talos' sole frame on its ankle link) that lie within ``SOLE_BAND_M`` (1 cm)
of that foot's lowest point at that frame, so a flat sole gives its sole outline (only its toe line once the heel has
lifted) and a sphere or point foot one point. A foot without collision geometry uses its contact parts
(``Motion.contact_points()``: the contact point ``foot_offsets``, or its heel and toe points). With one or two points
(or collinear ones) the polygon is a point or a segment.

**Margin** (m): signed distance from the CoP to the polygon's boundary, positive inside; for a point/segment
polygon it is minus the distance to it (0 on it). Frames without a stance foot, or whose required vertical force
is not positive (``f_z <= 0``: the ground would have to pull), have no CoP: ``cop`` and ``margin`` are NaN.

**Residual wrench** (fraction of ``m |g|``): the part of the required ground force that the stance feet cannot
supply, ``|f| / (m |g|)`` in flight (no stance foot: the body must be in free fall) and where ``f_z <= 0``;
otherwise the tangential force beyond friction, ``max(0, |f_xy| - mu f_z) / (m |g|)``. (A CoP outside the
polygon is a moment the feet cannot supply; it is reported by the margin, not by this residual.)

**Summary** (plain floats, SI names; ``None`` where undefined, e.g. no stance frame at all):
``cop_inside_frac``: fraction of stance frames (>= 1 foot in intended stance) whose margin is >= 0; stance frames
with ``f_z <= 0`` count as outside; flight frames are excluded. ``cop_margin_min_m`` / ``cop_margin_median_m``:
over stance frames with a CoP. ``residual_wrench_frac_mean`` / ``residual_wrench_frac_max``: over all frames.
``flight_frac``: fraction of frames with no stance foot.

The first and last one or two frames carry one-sided differences; a clip that starts or stops abruptly shows it
there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from akd_core.io.errors import MotionError
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.legs import welded_links
from akd_core.model.robot import Robot
from akd_core.motion.clip import Motion
from akd_core.motion.metrics import geometry_points

GRAVITY = 9.81  # m/s^2, along -z
SOLE_BAND_M = 0.01  # geometry points within this height of a foot's lowest point are its ground contacts


def feasibility(robot: Robot, motion: Motion, mu: float = 1.0) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Per-frame dynamic feasibility of ``motion`` on ``robot`` and its summary (module docstring for definitions).

    Returns (per_frame, summary). per_frame: ``com`` (F,3) m, ``force`` (F,3) N (required ground force
    ``m (c'' - g)``), ``moment`` (F,3) N m (``L'`` about the CoM), ``cop`` (F,2) m (NaN without one), ``margin_m``
    (F,) (NaN without a CoP), ``stance`` (F,) bool, ``residual_frac`` (F,). summary: ``cop_inside_frac``,
    ``cop_margin_min_m``, ``cop_margin_median_m``, ``residual_wrench_frac_mean``, ``residual_wrench_frac_max``,
    ``flight_frac`` (plain floats or None).
    """
    if not np.isfinite(mu) or mu < 0:
        raise MotionError(f"feasibility: friction coefficient mu must be >= 0, got {mu}")
    frames = motion.num_frames
    if motion.joint_pos.shape[1] != robot.num_dofs or frames < 1:
        raise MotionError(f"feasibility: the clip has {motion.joint_pos.shape[1]} joints and {frames} frames; robot "
                          f"'{robot.name}' has {robot.num_dofs} joints; regenerate the reference for this robot")
    link_pos, link_rot = clip_link_poses(robot, motion)
    com, force, moment, mass = centroidal_wrench(robot, link_pos, link_rot, motion.dt)
    stance = motion.foot_contacts.any(axis=1) if motion.foot_contacts.size else np.zeros(frames, dtype=bool)
    weight = mass * GRAVITY
    fz = force[:, 2]
    supported = stance & (fz > 0)
    cop = np.full((frames, 2), np.nan)
    safe_fz = np.where(supported, fz, 1.0)
    polygons, plane = support_polygons(robot, motion, link_pos, link_rot, heights=True)
    # the CoP on the plane the stance soles stand on (a terrain's treads); on the ground plane within SOLE_BAND_M of
    # z = 0 (flat ground: the plane z = 0 exactly)
    plane = np.where(np.abs(plane) > SOLE_BAND_M, plane, 0.0)
    above = com[:, 2] - plane
    cop[:, 0] = com[:, 0] - (above * force[:, 0] + moment[:, 1]) / safe_fz
    cop[:, 1] = com[:, 1] - (above * force[:, 1] - moment[:, 0]) / safe_fz
    cop[~supported] = np.nan
    margin = np.full(frames, np.nan)
    for t in np.flatnonzero(supported):
        margin[t] = signed_distance(cop[t], polygons[t])
    norm = np.linalg.norm(force, axis=1)
    beyond_friction = np.maximum(0.0, np.linalg.norm(force[:, :2], axis=1) - mu * fz)
    residual = np.where(supported, beyond_friction, norm) / weight
    per_frame = {"com": com, "force": force, "moment": moment, "cop": cop, "margin_m": margin, "stance": stance,
                 "residual_frac": residual}
    with_cop = margin[supported]
    summary: dict[str, Any] = {
        "cop_inside_frac": float((margin[stance] >= 0).mean()) if stance.any() else None,  # NaN >= 0 is False
        "cop_margin_min_m": float(with_cop.min()) if with_cop.size else None,
        "cop_margin_median_m": float(np.median(with_cop)) if with_cop.size else None,
        "residual_wrench_frac_mean": float(residual.mean()),
        "residual_wrench_frac_max": float(residual.max()),
        "flight_frac": float((~stance).mean()),
    }
    return per_frame, summary


def clip_link_poses(robot: Robot, motion: Motion) -> tuple[np.ndarray, np.ndarray]:
    """Every link's world position (F,L,3) and rotation (F,L,3,3) over a clip, by float64 FK."""
    fk = ForwardKinematics(robot).double()
    with torch.no_grad():
        pos, rot = fk(torch.as_tensor(motion.root_pos, dtype=torch.float64),
                      torch.as_tensor(motion.root_quat, dtype=torch.float64),
                      torch.as_tensor(motion.joint_pos, dtype=torch.float64))
    return pos.numpy(), rot.numpy()


def centroidal_wrench(robot: Robot, link_pos: np.ndarray, link_rot: np.ndarray,
                      dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """CoM (F,3), required ground force ``m (c'' - g)`` (F,3), moment ``L'`` about the CoM (F,3) and total mass.

    link_pos (F,L,3), link_rot (F,L,3,3): FK link poses (link order of ``robot.links``); dt s between frames.
    """
    massive = [(i, link.inertial) for i, link in enumerate(robot.links)
               if link.inertial is not None and link.inertial.mass > 0]
    if not massive:
        raise MotionError(f"robot '{robot.name}' has no link with an <inertial> mass; add inertials to its URDF")
    idx = np.array([i for i, _ in massive])
    m_i = np.array([inertial.mass for _, inertial in massive])  # (N,)
    origin = np.stack([inertial.origin for _, inertial in massive])  # (N, 4, 4)
    inertia = np.stack([inertial.inertia for _, inertial in massive])  # (N, 3, 3)
    rot_l = link_rot[:, idx]  # (F, N, 3, 3)
    p = link_pos[:, idx] + np.einsum("fnij,nj->fni", rot_l, origin[:, :3, 3])  # link COMs (F, N, 3)
    rot = rot_l @ origin[None, :, :3, :3]  # COM frames (F, N, 3, 3)
    mass = float(m_i.sum())
    com = np.einsum("n,fni->fi", m_i, p) / mass
    vel = _ddt(p, dt)
    drot = _ddt(rot, dt)
    omega_hat = drot @ np.swapaxes(rot, -1, -2)  # skew(w) in the world frame (up to differencing error)
    omega = 0.5 * np.stack([omega_hat[..., 2, 1] - omega_hat[..., 1, 2],
                            omega_hat[..., 0, 2] - omega_hat[..., 2, 0],
                            omega_hat[..., 1, 0] - omega_hat[..., 0, 1]], -1)  # (F, N, 3)
    inertia_world = rot @ inertia[None] @ np.swapaxes(rot, -1, -2)
    momentum = np.einsum("n,fni->fi", m_i, vel)
    angular = (np.einsum("n,fni->fi", m_i, np.cross(p - com[:, None], vel))
               + np.einsum("fnij,fnj->fi", inertia_world, omega))
    force = _ddt(momentum, dt) + mass * np.array([0.0, 0.0, GRAVITY])
    return com, force, _ddt(angular, dt), mass


def _ddt(x: np.ndarray, dt: float) -> np.ndarray:
    """Time derivative along axis 0 by central differences (second-order one-sided at the ends)."""
    if len(x) < 2:
        return np.zeros_like(x)
    return np.gradient(x, dt, axis=0, edge_order=2 if len(x) >= 3 else 1)


def motor_torques(robot: Robot, motion: Motion, speed: float = 1.0) -> np.ndarray:
    """(F,J) what each joint's own model asks of its motor beyond the body's dynamics along ``motion`` played
    ``speed`` times as fast: viscous damping ``b qd`` and rotor inertia ``armature qdd``, as the robot file gives them
    (MuJoCo Menagerie's robotis_op3: b 1.084 N m s/rad, armature 0.045 kg m^2 against 5 N m servos, so they cannot
    turn faster than about 4.6 rad/s; at the 8 rad/s of a 0.45 m/s walk's hips and knees they need 4-5 x the limit
    where the body's dynamics need 0.5 x). Coulomb friction is left out: a constant the PD law overcomes or not
    whatever the speed (talos's grippers have friction 1.0 N m against a 1.0 N m limit; the walk barely moves them).
    Zero for a robot file without them."""
    joints = robot.actuated_joints
    damping = np.array([j.damping for j in joints], dtype=np.float64)
    armature = np.array([j.armature for j in joints], dtype=np.float64)
    if not (damping.any() or armature.any()) or motion.num_frames < 2:
        return np.zeros((motion.num_frames, robot.num_dofs))
    qd = motion.joint_vel().astype(np.float64)
    if list(motion.joint_names) != list(robot.joint_names):
        qd = qd[:, [motion.joint_names.index(n) for n in robot.joint_names]]
    qdd = np.gradient(qd, motion.dt, axis=0)
    return speed * damping * qd + speed ** 2 * armature * qdd


def joint_torques(robot: Robot, motion: Motion, link_pos: np.ndarray | None = None,
                  link_rot: np.ndarray | None = None, motors: bool = True) -> np.ndarray:
    """Joint torques (F,J) N m (prismatic joints: N) a motor must give along ``motion``: inverse dynamics, the ground
    carrying the floating base through the feet in intended stance (module docstring of this file for the link
    dynamics), plus with ``motors`` each joint's own damping and rotor inertia (:func:`motor_torques`).

    Newton-Euler on the kinematic tree in its subtree form: the wrench a joint passes to its child's subtree is that
    subtree's rate of momentum change minus gravity minus the ground wrench on its feet, and the joint's torque is its
    moment about the joint axis (``tau_j = a_j . sum_{i in subtree} [(p_i - o_j) x m_i (a_i - g) + d/dt(I_i w_i)]`` less
    the feet's share). Link accelerations and angular-momentum rates by central differences of the FK, as
    :func:`centroidal_wrench`. The required ground wrench (``m (c'' - g)`` and ``L'``) is shared among the stance
    feet with weights ``w_k >= 0`` (sum 1) whose weighted contact point is nearest the centre of pressure (least
    squares, the most even split among equals: in double support the load moves from one foot to the other as the
    CoP does), each foot pushing at its contact point moved by the same offset so the feet's wrenches add up to the
    whole. Contact points: the middle of a foot's contact parts that are down (``Motion.contact_parts``). Flight, and
    frames where the ground would have to pull, have no ground wrench. No friction limit at the feet."""
    from scipy.optimize import nnls

    frames = motion.num_frames
    if link_pos is None or link_rot is None:
        link_pos, link_rot = clip_link_poses(robot, motion)
    dt = motion.dt
    num_links = len(robot.links)
    sum_f = np.zeros((frames, num_links, 3))  # per link: its own m (a - g), then (below) its subtree's
    sum_m = np.zeros((frames, num_links, 3))  # ... and the moment of that about the world origin, plus dh/dt
    for i, link in enumerate(robot.links):
        inertial = link.inertial
        if inertial is None or inertial.mass <= 0:
            continue
        rot = link_rot[:, i] @ inertial.origin[:3, :3]
        p = link_pos[:, i] + link_rot[:, i] @ inertial.origin[:3, 3]
        force = inertial.mass * (_ddt(_ddt(p, dt), dt) + np.array([0.0, 0.0, GRAVITY]))
        omega_hat = _ddt(rot, dt) @ np.swapaxes(rot, -1, -2)
        omega = 0.5 * np.stack([omega_hat[:, 2, 1] - omega_hat[:, 1, 2], omega_hat[:, 0, 2] - omega_hat[:, 2, 0],
                                omega_hat[:, 1, 0] - omega_hat[:, 0, 1]], -1)
        spin = np.einsum("fij,fj->fi", rot @ inertial.inertia @ np.swapaxes(rot, -1, -2), omega)
        sum_f[:, i] = force
        sum_m[:, i] = np.cross(p, force) + _ddt(spin, dt)
    total_f, total_m = sum_f.sum(1), sum_m.sum(1)  # the ground wrench the motion needs, about the origin
    # the ground's share per stance foot
    feet = [robot.link_index(name) for name in motion.foot_names]
    if feet and motion.foot_contacts.size:
        points, parts = motion.contact_points().astype(np.float64), motion.contact_parts()  # (K,P,3), (F,K,P)
        world = np.stack([link_pos[:, li, None] + np.einsum("fij,pj->fpi", link_rot[:, li], points[k])
                          for k, li in enumerate(feet)], 1)  # (F,K,P,3)
        down = parts & motion.foot_contacts[:, :, None]
        count = down.sum(-1)
        centre = np.where((count > 0)[..., None], (world * down[..., None]).sum(2) / np.maximum(count, 1)[..., None],
                          world.mean(2))  # (F,K,3)
        centre[..., 2] = 0.0
        fz = total_f[:, 2]
        for t in np.flatnonzero(motion.foot_contacts.any(1) & (fz > 1e-9)):
            stance = np.flatnonzero(motion.foot_contacts[t])
            cop = np.array([-total_m[t, 1] / fz[t], total_m[t, 0] / fz[t], 0.0])
            c = centre[t, stance]
            if len(stance) == 1:
                w = np.ones(1)
            else:
                scale = max(float(np.ptp(c[:, :2], axis=0).max()), 1e-3)
                a = np.vstack([c[:, :2].T / scale, 10.0 * np.ones(len(stance)), 1e-3 * np.eye(len(stance))])
                b = np.r_[cop[:2] / scale, 10.0, np.full(len(stance), 1e-3 / len(stance))]
                w = nnls(a, b)[0]
                w = w / w.sum() if w.sum() > 0 else np.full(len(stance), 1.0 / len(stance))
            shift = cop - w @ c
            free = total_m[t] - np.cross(cop, total_f[t])  # the vertical free moment
            for k, wk in zip(stance, w):
                sum_f[t, feet[k]] -= wk * total_f[t]
                sum_m[t, feet[k]] -= wk * (np.cross(c[np.flatnonzero(stance == k)[0]] + shift, total_f[t]) + free)
    parent = {robot.link_index(j.child): robot.link_index(j.parent) for j in robot.joints}
    for i in range(num_links - 1, 0, -1):  # children come after their parents in link order
        if i in parent:
            sum_f[:, parent[i]] += sum_f[:, i]
            sum_m[:, parent[i]] += sum_m[:, i]
    tau = np.zeros((frames, robot.num_dofs))
    for d, joint in enumerate(robot.actuated_joints):
        c = robot.link_index(joint.child)
        axis = link_rot[:, c] @ joint.axis
        if joint.type == "prismatic":
            tau[:, d] = np.einsum("fi,fi->f", axis, sum_f[:, c])
        else:
            moment = sum_m[:, c] - np.cross(link_pos[:, c], sum_f[:, c])
            tau[:, d] = np.einsum("fi,fi->f", axis, moment)
    return tau + motor_torques(robot, motion) if motors else tau


def effort_ratios(robot: Robot, torques: np.ndarray, skip: int = 2, percentile: float = 100.0) -> np.ndarray:
    """Per joint (J,), the largest ``|tau| / effort limit`` over the frames of ``torques`` (F,J) but the ``skip``
    first and last (one-sided differences there); 0 for a joint without a positive finite limit. ``percentile``
    below 100 takes that percentile over the frames instead of the largest value."""
    limit = np.asarray(robot.effort_limit, dtype=np.float64)
    finite = np.isfinite(limit) & (limit > 0)
    inner = torques[skip:len(torques) - skip] if len(torques) > 2 * skip else torques
    if not len(inner):
        return np.zeros(len(limit))
    peak = np.percentile(np.abs(inner), percentile, axis=0) if percentile < 100 else np.abs(inner).max(0)
    return np.where(finite, peak / np.where(finite, limit, 1.0), 0.0)


def support_polygons(robot: Robot, motion: Motion, link_pos: np.ndarray, link_rot: np.ndarray,
                     heights: bool = False) -> list[np.ndarray] | tuple[list[np.ndarray], np.ndarray]:
    """Per frame, the support polygon's vertices (V,2), counter-clockwise (V = 0 when no foot is in stance); with
    ``heights`` also the mean height (F,) of the stance soles' lowest points (0 without a foot in stance)."""

    frames = motion.num_frames
    geo_idx, geo_pts, geo_rad = geometry_points(robot)
    per_foot = []  # (F, P_k, 3) candidate ground-contact points of each foot
    contact_points = motion.contact_points()  # (K, P, 3)
    for k, name in enumerate(motion.foot_names):
        try:
            li = robot.link_index(name)
        except Exception as exc:
            raise MotionError(f"reference foot '{name}' is not a link of robot '{robot.name}' ({exc}); regenerate "
                              "the clip for this robot") from exc
        own = geo_idx == li
        if not own.any():  # a sole frame welded to the link that carries the foot's geometry (talos)
            own = np.isin(geo_idx, [robot.link_index(n) for n in welded_links(robot, name)])
        if own.any():
            links, local, radius = geo_idx[own], geo_pts[own], geo_rad[own]
        else:
            links, local, radius = np.full(contact_points.shape[1], li), contact_points[k].astype(np.float64), \
                np.zeros(contact_points.shape[1])
        world = link_pos[:, links] + np.einsum("fpij,pj->fpi", link_rot[:, links], local)
        world[..., 2] -= radius
        per_foot.append(world)
    polygons = []
    level = np.zeros(frames)
    for t in range(frames):
        pts, lows = [], []
        for k in np.flatnonzero(motion.foot_contacts[t]):
            world = per_foot[k][t]
            pts.append(world[world[:, 2] <= world[:, 2].min() + SOLE_BAND_M, :2])
            lows.append(world[:, 2].min())
        polygons.append(convex_hull_2d(np.concatenate(pts)) if pts else np.zeros((0, 2)))
        level[t] = float(np.mean(lows)) if lows else 0.0
    return (polygons, level) if heights else polygons


def convex_hull_2d(points: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """Vertices (V,2) of the convex hull of points (P,2), counter-clockwise, collinear points dropped (monotone
    chain). One distinct point gives V = 1, collinear points V = 2."""
    pts = np.unique(np.round(np.asarray(points, dtype=np.float64).reshape(-1, 2), 9), axis=0)  # sorted by x, y
    if len(pts) <= 2:
        return pts

    def chain(seq: np.ndarray) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for q in seq:
            while len(out) >= 2 and _cross(out[-2], out[-1], q) <= tol:
                out.pop()
            out.append(q)
        return out

    lower, upper = chain(pts), chain(pts[::-1])
    hull = np.array(lower[:-1] + upper[:-1])
    return hull if len(hull) >= 2 else pts[[0, -1]]


def _cross(o: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    return float((a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]))


def signed_distance(point: np.ndarray, polygon: np.ndarray) -> float:
    """Signed distance (m) from ``point`` (2,) to the boundary of a counter-clockwise convex ``polygon`` (V,2):
    positive inside, negative outside; a point (V = 1) or segment (V = 2) polygon gives minus the distance to it."""
    if len(polygon) == 0:
        return float("nan")
    if len(polygon) == 1:
        return -float(np.linalg.norm(point - polygon[0]))
    a = polygon
    b = np.roll(polygon, -1, axis=0)
    if len(polygon) == 2:
        a, b = polygon[:1], polygon[1:]
    ab = b - a
    s = np.clip(np.einsum("ij,ij->i", point - a, ab) / np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-18), 0.0, 1.0)
    dist = float(np.linalg.norm(a + s[:, None] * ab - point, axis=1).min())
    if len(polygon) == 2:
        return -dist
    inside = np.all(ab[:, 0] * (point[1] - a[:, 1]) - ab[:, 1] * (point[0] - a[:, 0]) >= 0)
    return dist if inside else -dist


def feasibility_summary(robot: Robot, motion: Motion, mu: float = 1.0) -> dict[str, Any]:
    """Only the summary of :func:`feasibility` (what the stages record in their manifest metrics)."""
    return feasibility(robot, motion, mu)[1]


def describe(summary: dict[str, Any]) -> str:
    """One line for the CLI, e.g. ``dynamic feasibility: CoP inside the support polygon on 97 % of stance frames
    (min margin -0.012 m), residual wrench 0.03 m g mean (max 0.40), flight 0 %``."""
    inside = summary.get("cop_inside_frac")
    margin = summary.get("cop_margin_min_m")
    cop = ("no stance frames" if inside is None else
           f"CoP inside the support polygon on {inside * 100:.0f} % of stance frames"
           + (f" (min margin {margin:.3f} m)" if margin is not None else ""))
    return (f"dynamic feasibility: {cop}, residual wrench {summary['residual_wrench_frac_mean']:.2f} m g mean "
            f"(max {summary['residual_wrench_frac_max']:.2f}), flight {summary['flight_frac'] * 100:.0f} %")


__all__ = ["GRAVITY", "SOLE_BAND_M", "feasibility", "feasibility_summary", "centroidal_wrench", "joint_torques",
           "effort_ratios", "support_polygons",
           "convex_hull_2d", "signed_distance", "describe"]
