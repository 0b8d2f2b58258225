"""The rules every PD-target sequence obeys, shared by the sampling tracker, the gradient method and the engines.

- :func:`control_rate`: the control period and the simulation substeps inside it;
- :func:`start_pose`: the first reference frame set down on the ground (or the terrain);
- :func:`max_target_step` / :func:`rate_limited`: targets never ask for more than ``VELOCITY_LIMIT_FRACTION`` of a
  joint's URDF velocity limit (the ROS nodes refuse commands beyond the limits);
- :func:`substep_targets`: targets interpolated linearly between control frames, as every engine applies them.

numpy arrays and torch tensors alike (the gradient method differentiates through :func:`rate_limited` and
:func:`substep_targets`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from akd_core.io.errors import ConfigError, MotionError
from akd_core.model.kinematics import ForwardKinematics, mesh_hull_points
from akd_core.model.robot import Robot
from akd_core.model.terrain import Terrain
from akd_core.motion.clip import Motion

VELOCITY_LIMIT_FRACTION = 0.98  # PD targets never ask for more than this fraction of the URDF velocity limit


# ----------------------------------------------------------------------------- building


def reference_control_hz(fps: float) -> float:
    """The control rate of a clip at ``fps`` frames per second when none is asked for: its fps within [25, 100]."""
    return min(max(float(fps), 25.0), 100.0)


def control_rate(motion: Motion, control_hz: float | None, sim_dt: float) -> tuple[float, int, float]:
    """(control_hz, substeps per control period, sim_dt) with sim_dt <= the bound."""
    hz = control_hz if control_hz is not None else reference_control_hz(motion.fps)
    if hz <= 0 or sim_dt <= 0:
        raise ConfigError(f"control_hz and sim_dt must be positive (got {hz}, {sim_dt})")
    steps = max(1, int(math.ceil(1.0 / (hz * sim_dt) - 1e-9)))
    return hz, steps, 1.0 / (hz * steps)


def start_pose(robot: Robot, motion: Motion, terrain: Terrain | None = None) -> tuple[np.ndarray, float]:
    """First reference frame lowered (or raised) until its collision geometry rests on z = 0, or, on ``terrain`` (an
    :class:`akd_core.model.terrain.Terrain`), on the surface under it: the shift is the largest vertical lift any
    point of the geometry needs (:func:`resting_lift`). Returns root_pos (3,) and the applied vertical shift (m).

    Spheres and capsules are placed exactly (a sphere's six poles, the first version, left a1's 2 cm feet, turned
    42 degrees with the shin, 4.3 mm in the ground); on a terrain the foot's whole footprint is sampled, stair
    nosings under it are met exactly, and a slope holds a sphere up by r / cos(slope), not r."""
    on_terrain = terrain is not None and not terrain.is_flat
    link_idx, points, radius = support_geometry(robot, dense=on_terrain)
    if len(points) == 0:
        raise MotionError(f"robot '{robot.name}' has no collision or visual geometry to stand on")
    fk = ForwardKinematics(robot)
    world = fk.link_points(torch.as_tensor(motion.root_pos[:1], dtype=torch.float64),
                           torch.as_tensor(motion.root_quat[:1], dtype=torch.float64),
                           torch.as_tensor(motion.joint_pos[:1], dtype=torch.float64),
                           torch.as_tensor(link_idx), torch.as_tensor(points))
    lift = resting_lift(world[0].detach().numpy(), radius, terrain if on_terrain else None)
    shift = float(np.max(lift))
    return motion.root_pos[0].astype(np.float64) + np.array([0.0, 0.0, shift]), shift


SUPPORT_SPACING_M = 0.01  # on a terrain: points this far apart on box faces, balls this far apart along capsules
SUPPORT_MAX_PER_SIDE = 12  # at most this many points along one side of a box face (or one capsule)
RIM_POINTS = 32  # points on each rim of a cylinder (a tilted rim's lowest point to 0.5 % of its radius)
FOOTPRINT_RINGS = (0.35, 0.7, 0.9, 1.0)  # on a terrain: rings (fractions of the radius) a ball's footprint is sampled
FOOTPRINT_ANGLES = 16  # points on each of those rings
EDGE_SIDE_M = 1e-5  # the height of an edge: the higher of the surfaces this far to either side of it


def support_geometry(robot: Robot, dense: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Balls bounding every link's collision geometry (its visuals where it has none): (link_idx (P,), centres (P,3)
    in the link frames, radius (P,)). The geometry's lowest point over flat ground is exactly the lowest ball's:
    spheres (centre, radius), capsules (the two end centres, radius), boxes (8 corners), cylinders (two rims of
    RIM_POINTS), meshes (every vertex of the convex hull, the shape the engines collide, and its face centres),
    the last three with radius 0. ``dense`` (for a terrain, where a stair nosing can meet a face between corners):
    balls every SUPPORT_SPACING_M along a capsule, points on every box face and cylinder cap, as many rims along a
    cylinder."""
    idx, pts, rad = [], [], []

    def add(li: int, geom, local: np.ndarray, radius: float) -> None:
        idx.append(np.full(len(local), li))
        pts.append(local @ geom.origin[:3, :3].T + geom.origin[:3, 3])
        rad.append(np.full(len(local), float(radius)))

    def count(length: float) -> int:
        return int(min(SUPPORT_MAX_PER_SIDE, max(2, np.ceil(length / SUPPORT_SPACING_M) + 1))) if dense else 2

    for li, link in enumerate(robot.links):
        geoms = link.collisions or link.visuals
        for geom in geoms:
            size = np.asarray(geom.size, dtype=np.float64).ravel()
            if geom.kind == "sphere":
                add(li, geom, np.zeros((1, 3)), size[0])
            elif geom.kind == "capsule":
                z = np.linspace(-size[1] / 2, size[1] / 2, count(size[1]))
                add(li, geom, np.c_[np.zeros((len(z), 2)), z], size[0])
            elif geom.kind == "box":
                add(li, geom, _box_points(size / 2, count), 0.0)
            elif geom.kind == "cylinder":
                add(li, geom, _cylinder_points(size[0], size[1], count, dense), 0.0)
            elif geom.kind == "mesh" and geom.mesh_path is not None:
                local = mesh_hull_points(str(geom.mesh_path), tuple(float(v) for v in size))
                if local is not None:
                    add(li, geom, local, 0.0)
    if not pts:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 3)), np.zeros(0)
    return np.concatenate(idx).astype(np.int64), np.concatenate(pts), np.concatenate(rad)


def _box_points(half: np.ndarray, count) -> np.ndarray:
    """Points on the six faces of a box of half extents ``half``: a grid of count(side) per side (8 corners at 2)."""
    axes = [np.linspace(-h, h, count(2 * h)) for h in half]
    faces = []
    for a in range(3):
        b, c = [k for k in range(3) if k != a]
        u, v = np.meshgrid(axes[b], axes[c], indexing="ij")
        for sign in (-1.0, 1.0):
            face = np.zeros((u.size, 3))
            face[:, a], face[:, b], face[:, c] = sign * half[a], u.ravel(), v.ravel()
            faces.append(face)
    return np.unique(np.concatenate(faces), axis=0)


def _cylinder_points(radius: float, length: float, count, dense: bool) -> np.ndarray:
    """Rims of a cylinder along z: two (dense: count(length) along it, and the caps' inner rings and centres)."""
    ang = np.linspace(0.0, 2 * np.pi, RIM_POINTS, endpoint=False)
    ring = np.stack([np.cos(ang), np.sin(ang)], -1)
    rings = [(radius * ring, z) for z in np.linspace(-length / 2, length / 2, count(length))]
    if dense:
        rings += [(f * radius * ring, z) for f in (0.0, 0.5) for z in (-length / 2, length / 2)]
    return np.concatenate([np.c_[xy, np.full(len(xy), z)] for xy, z in rings])


def resting_lift(points: np.ndarray, radius: np.ndarray, terrain: Terrain | None = None) -> np.ndarray:
    """(P,) how far each ball (centres ``points`` (P,3) in the world, ``radius`` (P,)) must rise straight up to rest
    on the ground (negative: how far it may sink): ``radius - z`` on flat ground (None). On ``terrain`` the largest of

    - the face under the centre: ``height + radius / normal_z - z`` (exact on a plane: a slope's tread of 15 degrees
      holds a 2 cm ball 0.7 mm higher than flat ground would);
    - its footprint: the surface at FOOTPRINT_RINGS x FOOTPRINT_ANGLES points within the radius, each holding the
      ball up by ``sqrt(r^2 - d^2)`` (a bump or a crease under the foot, away from its centre);
    - every edge within the radius (``terrain.edges``: stair nosings, step borders) met exactly, at the edge point
      nearest the centre and the edge's height (the higher side).
    """
    points = np.asarray(points, dtype=np.float64)
    radius = np.asarray(radius, dtype=np.float64)
    if terrain is None or terrain.is_flat:
        return radius - points[:, 2]
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    height, normal = terrain.surface(x, y)
    lift = height + radius / np.maximum(normal[:, 2], 1e-6) - z
    balls = np.flatnonzero(radius > 0)
    if len(balls):
        r = radius[balls, None]
        ang = np.linspace(0.0, 2 * np.pi, FOOTPRINT_ANGLES, endpoint=False)
        frac = np.repeat(np.asarray(FOOTPRINT_RINGS), FOOTPRINT_ANGLES)
        dx, dy = frac * np.tile(np.cos(ang), len(FOOTPRINT_RINGS)), frac * np.tile(np.sin(ang), len(FOOTPRINT_RINGS))
        ground = terrain.height(x[balls, None] + r * dx, y[balls, None] + r * dy)  # (B, S)
        ring = np.max(ground + r * np.sqrt(np.clip(1.0 - frac ** 2, 0.0, None)), axis=-1) - z[balls]
        lift[balls] = np.maximum(lift[balls], ring)
        lift[balls] = np.maximum(lift[balls], _edge_lift(terrain, points[balls], radius[balls]))
    return np.where(np.isfinite(lift), lift, -np.inf)


def _edge_lift(terrain: Terrain, centres: np.ndarray, radius: np.ndarray) -> np.ndarray:
    """(B,) lift each ball needs to clear the terrain's edges within its radius (-inf where none is that close)."""
    out = np.full(len(centres), -np.inf)
    edges = np.asarray(terrain.edges, dtype=np.float64)
    if not len(edges):
        return out
    near = np.flatnonzero(terrain.edge_distance(centres[:, 0], centres[:, 1]) < radius)
    if not len(near):
        return out
    a, d = edges[:, 0], edges[:, 1] - edges[:, 0]  # (E, 2)
    length2 = np.maximum((d ** 2).sum(-1), 1e-18)
    c = centres[near, None, :2]  # (N, 1, 2)
    t = np.clip(((c - a) * d).sum(-1) / length2, 0.0, 1.0)  # (N, E)
    q = a + t[..., None] * d  # (N, E, 2) the edge point nearest each centre
    rho2 = ((q - c) ** 2).sum(-1)
    side = np.stack([-d[:, 1], d[:, 0]], -1) / np.sqrt(length2)[:, None] * EDGE_SIDE_M  # (E, 2)
    top = np.maximum(terrain.height(*np.moveaxis(q + side, -1, 0)), terrain.height(*np.moveaxis(q - side, -1, 0)))
    r2 = radius[near, None] ** 2
    held = np.where(rho2 < r2, top + np.sqrt(np.clip(r2 - rho2, 0.0, None)), -np.inf)  # (N, E)
    out[near] = held.max(-1) - centres[near, 2]
    return out


def max_target_step(robot: Robot, hz: float) -> np.ndarray:
    """(J,) largest PD-target change per control period at ``hz``: VELOCITY_LIMIT_FRACTION of the URDF velocity
    limit times the period."""
    return VELOCITY_LIMIT_FRACTION * np.asarray(robot.velocity_limit, dtype=np.float64) / hz


def rate_limited(targets, max_step, previous=None):
    """targets (..., T, J) with every frame-to-frame change clamped to +-max_step (J,), starting from ``previous``
    (..., J) when given; the identity on sequences already within the limit.

    numpy in (float64 out) or torch in (same dtype out, differentiable almost everywhere)."""
    if isinstance(targets, torch.Tensor):
        max_step = torch.as_tensor(max_step, dtype=targets.dtype)
        clip = lambda d: torch.maximum(torch.minimum(d, max_step), -max_step)  # noqa: E731
        stack = torch.stack
    else:
        targets = np.asarray(targets, dtype=np.float64)
        previous = None if previous is None else np.asarray(previous, dtype=np.float64)
        clip = lambda d: np.clip(d, -max_step, max_step)  # noqa: E731
        stack = np.stack
    rows, prev = [], previous
    for t in range(targets.shape[-2]):
        row = targets[..., t, :]
        if prev is not None:
            row = prev + clip(row - prev)
        rows.append(row)
        prev = row
    return stack(rows, -2)


def substep_targets(pd_targets, steps: int):
    """Control-rate targets (..., H+1, J) -> per-substep targets (..., H*steps, J), linear between control frames
    (the substep at the start of period k uses exactly target k). numpy or torch."""
    if isinstance(pd_targets, torch.Tensor):
        frac = torch.arange(steps, dtype=pd_targets.dtype, device=pd_targets.device) / steps  # (S,)
    else:
        frac = np.arange(steps, dtype=np.float64) / steps
    start, end = pd_targets[..., :-1, None, :], pd_targets[..., 1:, None, :]  # (..., H, 1, J)
    sub = start + (end - start) * frac[:, None]  # (..., H, S, J)
    return sub.reshape(*pd_targets.shape[:-2], -1, pd_targets.shape[-1])
