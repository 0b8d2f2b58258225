"""What touches the ground in a tracked clip, measured from its simulated states (the manifest's ``track`` metrics,
docs/terrain.md):

- :func:`non_foot_contacts`: the control frames in which a link other than a foot touches the terrain (a shin on a
  stair nosing, a knee or the trunk on the ground). Measured with MuJoCo's collision detection between the robot's
  collision geoms and the terrain's geoms (the ones the MuJoCo engine steps, equal to ``Terrain.height`` to 1e-9 m
  for boxes, 1e-4 m for height fields) at each tracked state: a link touches when one of its geoms comes within
  ``NON_FOOT_CONTACT_M`` of a terrain geom, or into it. The engines' own records give foot forces only, so the
  states are what is measured, whichever engine made them.
- :func:`sole_on_one_tread`: for bipeds, the stance frames whose whole sole rests on one tread (one face of the
  terrain, off its edges), from the feet's collision geometry and ``Terrain.height`` / ``normal`` /
  ``edge_distance``.

A foot is a link that carries a contact point of the reference (:func:`akd_core.physics.metrics.contact_schedule`:
for a foot frame without geometry, the link welded to it that has it). A robot whose shank link itself carries the
foot's contact point has that whole link counted as foot.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.robot import Robot
from akd_core.model.terrain import Terrain
from akd_core.motion.metrics import CONTACT_HEIGHT_M, EDGE_NEAR_M, above_ground
from akd_core.physics.engines.mujoco import build_mujoco, import_mujoco
from akd_core.physics.params import default_physics
from akd_core.physics.targets import support_geometry

NON_FOOT_CONTACT_M = 0.002  # a link's geom this close to the terrain's (or in it) touches it
TREAD_HEIGHT_M = 0.005  # a sole is on one tread when the surface under every point of it is within this of one plane
SOLE_THICKNESS_M = 0.02  # a foot's sole: its collision geometry's points this close above its lowest one
SOLE_DIRECTIONS = 16  # the sole's outline: its extreme points along this many horizontal directions

_models: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # robot -> {terrain spec: (MjModel, MjData)}


def _collision_model(robot: Robot, terrain: Terrain):
    """The MuJoCo model the MuJoCo engine builds for ``robot`` on ``terrain`` (its collision geoms and the terrain's),
    every geom's margin NON_FOOT_CONTACT_M so that near pairs are reported too; built once per robot and terrain."""
    per_robot = _models.setdefault(robot, {})
    if terrain.spec not in per_robot:
        model, data = build_mujoco(robot, default_physics(robot), 2e-3, terrain=terrain)
        model.geom_margin[:] = NON_FOOT_CONTACT_M
        model.geom_gap[:] = 0.0
        per_robot[terrain.spec] = (model, data)
    return per_robot[terrain.spec]


def non_foot_contacts(robot: Robot, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray,
                      feet: Sequence[str], terrain: Terrain | None = None) -> dict[str, Any]:
    """``non_foot_contact_frac``: the fraction of frames (F,) in which a link other than ``feet`` touches ``terrain``
    (None: flat ground), and ``non_foot_contact_links``: those links, most frames first (module docstring).

    root_pos (F,3), root_quat (F,4) xyzw, joint_pos (F,J) in ``robot.joint_names`` order: the simulated states."""
    mujoco, _ = import_mujoco()
    terrain = terrain if terrain is not None else Terrain.flat()
    model, data = _collision_model(robot, terrain)
    root = model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "root")]
    qpos_adr = np.array([model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)]
                         for n in robot.joint_names], dtype=int)
    foot_body = np.zeros(model.nbody, dtype=bool)
    foot_body[[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in feet]] = True
    names = [model.body(b).name for b in range(model.nbody)]
    robot_body = np.ones(model.nbody, dtype=bool)
    robot_body[0] = False  # the world body: the terrain (or the ground plane)
    frames = len(joint_pos)
    touched = np.zeros(frames, dtype=bool)
    counts: dict[str, int] = {}
    quat = np.asarray(root_quat, dtype=np.float64)
    quat = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
    for f in range(frames):
        data.qpos[root:root + 3] = root_pos[f]
        data.qpos[root + 3:root + 7] = np.roll(quat[f], 1)  # xyzw -> MuJoCo wxyz
        data.qpos[qpos_adr] = joint_pos[f]
        mujoco.mj_kinematics(model, data)
        mujoco.mj_collision(model, data)
        n = data.ncon
        if not n:
            continue
        bodies = model.geom_bodyid[data.contact.geom[:n]]  # (n, 2)
        mixed = (robot_body[bodies[:, 0]] != robot_body[bodies[:, 1]]) & (data.contact.dist[:n] < NON_FOOT_CONTACT_M)
        # robot-robot or world-world pairs, or pairs farther than the tolerance, do not count
        mine = np.where(robot_body[bodies[mixed, 0]], bodies[mixed, 0], bodies[mixed, 1])
        links = {names[b] for b in mine if not foot_body[b]}
        touched[f] = bool(links)
        for name in links:
            counts[name] = counts.get(name, 0) + 1
    return {"non_foot_contact_frac": float(touched.mean()) if frames else 0.0,
            "non_foot_contact_links": sorted(counts, key=lambda n: (-counts[n], n))}


def sole_on_one_tread(robot: Robot, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray,
                      feet: Sequence[str], terrain: Terrain | None = None) -> float | None:
    """``sole_on_one_tread_frac``: of the stance (frame, foot) pairs, the fraction whose whole sole lies on one tread
    of ``terrain`` (None: flat ground); None when no foot is ever in stance.

    A foot's sole: the points of its collision geometry (:func:`akd_core.physics.targets.support_geometry`: sphere
    centres, box corners, mesh hull vertices) within SOLE_THICKNESS_M of its lowest, outlined by their extreme
    points along SOLE_DIRECTIONS horizontal directions. In stance when a point of it (a sphere's bottom) is within
    CONTACT_HEIGHT_M of the surface under it. On one tread when the surface under every outline point is within
    TREAD_HEIGHT_M of the plane of the face under the sole's centre (a stair's tread, or a slope's face) and no
    outline point is within EDGE_NEAR_M of an edge (``Terrain.edge_distance``: nosings, step borders). A foot with
    many points (a mesh) is cut down to its extreme points along 128 directions first."""
    terrain = terrain if terrain is not None else Terrain.flat()
    link_idx, points, radius = support_geometry(robot)
    fk = ForwardKinematics(robot).double()
    with torch.no_grad():
        link_pos, link_rot = fk(torch.as_tensor(root_pos, dtype=torch.float64),
                                torch.as_tensor(root_quat, dtype=torch.float64),
                                torch.as_tensor(joint_pos, dtype=torch.float64))
    ang = np.linspace(0.0, 2 * np.pi, SOLE_DIRECTIONS, endpoint=False)
    directions = np.stack([np.cos(ang), np.sin(ang)], -1)  # (D, 2)
    outlines = []
    for name in dict.fromkeys(feet):
        mine = _extremes(np.flatnonzero(link_idx == robot.link_index(name)), points, radius)
        if not len(mine):
            continue
        world = ForwardKinematics.transform_points(link_pos, link_rot, torch.as_tensor(link_idx[mine]),
                                                   torch.as_tensor(points[mine])).numpy()  # (F, P, 3)
        bottom = world[..., 2] - radius[mine]  # (F, P)
        frames = np.arange(len(world))
        clearance = above_ground(np.concatenate([world[..., :2], bottom[..., None]], -1), terrain)  # (F, P)
        sole = bottom < bottom.min(-1, keepdims=True) + SOLE_THICKNESS_M  # (F, P)
        reach = np.where(sole[..., None], world[..., :2] @ directions.T, -np.inf)  # (F, P, D)
        extreme = reach.argmax(1)  # (F, D) the sole's outline
        stance = clearance.min(-1) < CONTACT_HEIGHT_M
        outlines.append(world[frames[:, None], extreme, :2][stance])  # (S, D, 2)
    outlines = np.concatenate(outlines) if outlines else np.zeros((0, SOLE_DIRECTIONS, 2))
    if not len(outlines):
        return None
    if terrain.is_flat:
        return 1.0
    return float(_on_one_tread(terrain, outlines).mean())


def _extremes(rows: np.ndarray, points: np.ndarray, radius: np.ndarray, directions: int = 128) -> np.ndarray:
    """``rows`` of ``points`` (a link's, in its frame) cut down to the extreme ones along ``directions`` directions
    (radius included) when there are more: a mesh foot's hull has hundreds of vertices, its outline a few."""
    if len(rows) <= directions:
        return rows
    k = np.arange(directions) + 0.5  # Fibonacci sphere directions
    z = 1 - 2 * k / directions
    r, phi = np.sqrt(1 - z * z), np.pi * (1 + 5 ** 0.5) * k
    d = np.stack([r * np.cos(phi), r * np.sin(phi), z], -1)
    reach = points[rows] @ d.T + radius[rows, None]
    return rows[np.unique(reach.argmax(0))]


def _on_one_tread(terrain: Terrain, outlines: np.ndarray) -> np.ndarray:
    """(S,) whether each outline (S, D, 2) lies on one face of ``terrain``, off its edges."""
    centre = outlines.mean(1)  # (S, 2)
    h0, n0 = terrain.surface(centre[:, 0], centre[:, 1])
    d = outlines - centre[:, None]
    plane = h0[:, None] - (n0[:, None, 0] * d[..., 0] + n0[:, None, 1] * d[..., 1]) / np.maximum(n0[:, None, 2], 1e-6)
    flat = (np.abs(terrain.height(outlines[..., 0], outlines[..., 1]) - plane) <= TREAD_HEIGHT_M).all(-1)
    clear = (terrain.edge_distance(outlines[..., 0], outlines[..., 1]) >= EDGE_NEAR_M).all(-1)
    return flat & clear


__all__ = ["NON_FOOT_CONTACT_M", "SOLE_THICKNESS_M", "TREAD_HEIGHT_M", "non_foot_contacts", "sole_on_one_tread"]
