"""Batched, differentiable forward kinematics in torch.

``ForwardKinematics(robot)(root_pos, root_quat, joint_pos)`` maps a floating-base
configuration per frame to every link's world pose. Links are processed level by level
(all links at the same depth in one batched step), so the cost grows with the tree's
depth, not its number of links. Gradients flow to the root pose and the joint angles.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from akd_core.model.robot import Robot
from akd_core.model.spatial.tensor import axis_angle_to_matrix, quat_to_matrix


class ForwardKinematics(torch.nn.Module):
    """World poses of every link of ``robot`` (link order = ``robot.link_names``)."""

    def __init__(self, robot: Robot):
        super().__init__()
        self.robot = robot
        names = robot.link_names
        index = {n: i for i, n in enumerate(names)}
        dof = {n: i for i, n in enumerate(robot.joint_names)}
        num_links = len(names)
        parent = np.full(num_links, -1)
        origin = np.tile(np.eye(4), (num_links, 1, 1))
        axis = np.zeros((num_links, 3))
        axis[:, 0] = 1.0
        kind = np.zeros(num_links, dtype=np.int64)  # 0 fixed/root, 1 revolute, 2 prismatic
        dof_of_link = np.zeros(num_links, dtype=np.int64)
        depth = np.zeros(num_links, dtype=np.int64)
        for joint in robot.joints:
            c = index[joint.child]
            parent[c] = index[joint.parent]
            depth[c] = depth[parent[c]] + 1  # parents come first in link order
            origin[c] = joint.origin
            axis[c] = joint.axis
            if joint.type in ("revolute", "continuous"):
                kind[c] = 1
            elif joint.type == "prismatic":
                kind[c] = 2
            if joint.actuated:
                dof_of_link[c] = dof[joint.name]
        self.num_links = num_links
        self.register_buffer("parent", torch.as_tensor(parent), persistent=False)
        self.register_buffer("origin_rot", torch.as_tensor(origin[:, :3, :3]), persistent=False)
        self.register_buffer("origin_pos", torch.as_tensor(origin[:, :3, 3]), persistent=False)
        self.register_buffer("axis", torch.as_tensor(axis), persistent=False)
        self.register_buffer("kind", torch.as_tensor(kind), persistent=False)
        self.register_buffer("dof_of_link", torch.as_tensor(dof_of_link), persistent=False)
        # links grouped by depth (level 0 is the root)
        self.levels = [torch.as_tensor(np.nonzero(depth == d)[0]) for d in range(1, int(depth.max(initial=0)) + 1)]

    def forward(self, root_pos: torch.Tensor, root_quat: torch.Tensor,
                joint_pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """root_pos (F,3), root_quat (F,4) xyzw, joint_pos (F,J) -> link_pos (F,L,3), link_rot (F,L,3,3)."""
        dtype = joint_pos.dtype if joint_pos.is_floating_point() else torch.get_default_dtype()
        frames = root_pos.shape[0]
        root_rot = quat_to_matrix(root_quat.to(dtype))
        rots: list[torch.Tensor | None] = [None] * self.num_links
        poss: list[torch.Tensor | None] = [None] * self.num_links
        rots[0], poss[0] = root_rot, root_pos.to(dtype)
        origin_rot = self.origin_rot.to(dtype)
        origin_pos = self.origin_pos.to(dtype)
        axis = self.axis.to(dtype)
        for level in self.levels:
            idx = level.tolist()
            parents = self.parent[level].tolist()
            parent_rot = torch.stack([rots[p] for p in parents], 1)  # (F, n, 3, 3)
            parent_pos = torch.stack([poss[p] for p in parents], 1)  # (F, n, 3)
            q = joint_pos[:, self.dof_of_link[level]].to(dtype)  # (F, n); ignored for fixed joints
            kind = self.kind[level]
            revolute = (kind == 1).to(dtype)
            prismatic = (kind == 2).to(dtype)
            joint_rot = axis_angle_to_matrix(axis[level].expand(frames, -1, -1), q * revolute)
            joint_shift = axis[level] * (q * prismatic)[..., None]  # (F, n, 3)
            local_rot = origin_rot[level] @ joint_rot  # (F, n, 3, 3)
            local_pos = origin_pos[level] + (origin_rot[level] @ joint_shift[..., None]).squeeze(-1)
            world_rot = parent_rot @ local_rot
            world_pos = parent_pos + (parent_rot @ local_pos[..., None]).squeeze(-1)
            for k, link in enumerate(idx):
                rots[link] = world_rot[:, k]
                poss[link] = world_pos[:, k]
        return torch.stack(poss, 1), torch.stack(rots, 1)

    @staticmethod
    def transform_points(link_pos: torch.Tensor, link_rot: torch.Tensor, link_idx: torch.Tensor,
                         points_local: torch.Tensor) -> torch.Tensor:
        """Points fixed in links -> world.

        link_pos (F,L,3), link_rot (F,L,3,3), link_idx (P,), points_local (P,3) -> (F,P,3).
        """
        rot = link_rot[:, link_idx]  # (F, P, 3, 3)
        return link_pos[:, link_idx] + (rot @ points_local.to(rot.dtype)[None, :, :, None]).squeeze(-1)

    def link_points(self, root_pos: torch.Tensor, root_quat: torch.Tensor, joint_pos: torch.Tensor,
                    link_idx: torch.Tensor, points_local: torch.Tensor) -> torch.Tensor:
        """World positions (F,P,3) of points (P,3) fixed in links ``link_idx`` (P,)."""
        link_pos, link_rot = self(root_pos, root_quat, joint_pos)
        return self.transform_points(link_pos, link_rot, link_idx, points_local)


def geometry_corners(robot: Robot, use: str = "collision") -> tuple[np.ndarray, np.ndarray]:
    """Representative points of every link's geometry in its link frame: (link_idx (P,), points (P,3)).

    Boxes give their 8 corners; cylinders/capsules 16 rim points (+ hemispheres' poles); spheres 6 poles;
    meshes their convex hull's extreme vertices along 128 directions. Used for ground losses, lowest-point
    queries and camera framing.
    """
    idx, pts = [], []
    for li, link in enumerate(robot.links):
        geoms = link.collisions if use == "collision" else link.visuals
        if not geoms:
            geoms = link.visuals or link.collisions
        for geom in geoms:
            local = _shape_points(geom)
            if local is None:
                continue
            world = local @ geom.origin[:3, :3].T + geom.origin[:3, 3]
            idx.append(np.full(len(world), li))
            pts.append(world)
    if not pts:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 3))
    return np.concatenate(idx).astype(np.int64), np.concatenate(pts)


def _shape_points(geom) -> np.ndarray | None:
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float64)
    if geom.kind == "box":
        return signs * (np.asarray(geom.size) / 2)
    if geom.kind in ("cylinder", "capsule"):
        radius, length = geom.size[0], geom.size[1]
        ang = np.linspace(0, 2 * np.pi, 8, endpoint=False)
        ring = np.stack([radius * np.cos(ang), radius * np.sin(ang)], -1)
        pts = np.concatenate([np.c_[ring, np.full(8, -length / 2)], np.c_[ring, np.full(8, length / 2)]])
        if geom.kind == "capsule":
            pts = np.concatenate([pts, [[0, 0, -length / 2 - radius], [0, 0, length / 2 + radius]]])
        return pts
    if geom.kind == "sphere":
        r = geom.size[0]
        return np.array([[r, 0, 0], [-r, 0, 0], [0, r, 0], [0, -r, 0], [0, 0, r], [0, 0, -r]], dtype=np.float64)
    if geom.kind == "mesh" and geom.mesh_path is not None:
        points = _mesh_points(str(geom.mesh_path), tuple(float(v) for v in np.asarray(geom.size).ravel()))
        return None if points is None else points.copy()
    return None


@functools.lru_cache(maxsize=256)
def mesh_hull_points(path: str, scale: tuple[float, ...]) -> np.ndarray | None:
    """Every vertex of the (scaled) mesh's convex hull and the centroid of every hull face (the shape MuJoCo and
    Newton collide), in the mesh frame; None for an unreadable or degenerate mesh. Denser than
    :func:`geometry_corners`' extreme vertices: what a lowest-point query that must be exact to a millimetre uses."""
    import trimesh

    try:
        mesh = trimesh.load(path, force="mesh")
        vertices = np.asarray(mesh.vertices, dtype=np.float64) * np.asarray(scale)
        if len(vertices) <= 4:
            return vertices.copy() if len(vertices) else None
        hull = trimesh.Trimesh(vertices=vertices).convex_hull
        return np.concatenate([np.asarray(hull.vertices, dtype=np.float64), np.asarray(hull.triangles_center)])
    except Exception:  # unreadable or degenerate mesh: skip, as geometry_corners does
        return None


MESH_POINT_DIRECTIONS = 128  # a mesh is represented by its extreme vertices along this many directions


@functools.lru_cache(maxsize=256)
def _mesh_points(path: str, scale: tuple[float, ...]) -> np.ndarray | None:
    """Vertices of the (scaled) mesh's convex hull that are extreme along MESH_POINT_DIRECTIONS directions.

    Bounding-box corners (the first version) lie outside a slanted or tapered mesh: g1's inclined shin put a box
    corner 9 mm below the ground while the shin itself was above it. Extreme hull vertices are real surface
    points; the lowest one in any orientation is within ~1 % of the mesh radius of the true lowest point.
    """
    import trimesh

    try:
        mesh = trimesh.load(path, force="mesh")
        vertices = np.asarray(mesh.vertices, dtype=np.float64) * np.asarray(scale)
        hull = trimesh.Trimesh(vertices=vertices).convex_hull.vertices if len(vertices) > 4 else vertices
    except Exception:  # unreadable or degenerate mesh: skip, geometry points are best-effort
        return None
    hull = np.asarray(hull, dtype=np.float64)
    if len(hull) <= MESH_POINT_DIRECTIONS:
        return hull
    k = np.arange(MESH_POINT_DIRECTIONS) + 0.5  # Fibonacci sphere directions
    z = 1 - 2 * k / MESH_POINT_DIRECTIONS
    phi = np.pi * (1 + 5 ** 0.5) * k
    r = np.sqrt(1 - z * z)
    directions = np.stack([r * np.cos(phi), r * np.sin(phi), z], -1)
    return hull[np.unique(np.argmax(hull @ directions.T, axis=0))]
