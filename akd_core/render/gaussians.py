"""Gaussian assets: 3D Gaussians on a robot's visual surface (or a creature's skin), bound to its links; PLY I/O.

Usage::

    asset = GaussianAsset.from_robot(robot, n_gaussians=6000, seed=0)
    link_pos, link_rot = ForwardKinematics(robot)(root_pos, root_quat, joint_pos)   # (F,L,3), (F,L,3,3)
    means, covars = asset.pose(link_pos, link_rot)          # (F,N,3), (F,N,3,3), differentiable
    frames = render_video(means, covars, asset.colors_tensor(), asset.opacities_tensor(), viewmats, K, W, H)

Frames and conventions:

- ``means``, ``quats``, ``covars`` are in the **rest-pose world frame**: root at the origin with identity
  orientation, every joint at ``rest_joint_pos`` (the robot's zero pose clipped into its limits). The rest link
  poses (``rest_link_pos`` (L,3), ``rest_link_rot`` (L,3,3)) are stored with the asset; posing applies
  ``T_link(pose) T_link(rest)^-1`` blended by the skin weights (:func:`akd_core.render.skinning.linear_blend`).
- Robot assets (real URDFs): area-weighted samples of every link's visual geometry (primitives and meshes via
  trimesh; collision geometry when a link has no visual), each bound one-hot to its link, so a posed mean equals
  the FK transform of its point in the link frame exactly. Colours: the URDF material rgba, else the mesh's own
  colours, else grey.
- Creature assets (built-in skeletons of :mod:`akd_core.model.skeletons`, or ``skin=True``): a closed, smooth skin mesh
  is built around the bones (the level set of a smooth union of the bones' boxes, offset outwards), Pinocchio
  bone-heat weights are computed on it, and Gaussians sampled on the skin take the weights of their surface point
  (top ``k`` links each). Colours: the material of the nearest bone box.
- Every Gaussian is flat: two axes in the surface tangent plane with std ``tangent_scale * spacing`` (spacing =
  sqrt(area / N)), and a thin one along the surface normal (``normal_ratio`` of that). Quaternions are (x, y, z, w)
  in the API; the PLY file stores (w, x, y, z) as 3DGS does.

PLY (:func:`save_ply` / :func:`load_ply`): the standard 3DGS vertex layout ``x y z nx ny nz f_dc_0..2 opacity
scale_0..2 rot_0..3`` (colour as degree-0 SH coefficient, opacity as logit, scales as log, rot wxyz), binary
little-endian float32, so splat viewers open it; the skin binding follows as extra properties
``bind_link_0..K-1`` / ``bind_weight_0..K-1`` (viewers ignore them) and the rest link poses and names as header
comments, so :func:`load_ply` restores a complete, poseable asset.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from scipy.spatial.transform import Rotation
from torch import Tensor

from akd_core.io.errors import ConfigError, MeshNotFoundError
from akd_core.io.fileio import atomic_path
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.robot import Geometry, Robot
from akd_core.model.skeletons import SKELETONS
from akd_core.render.skinning import (
    bone_heat_weights,
    linear_blend,
    rigid_weights,
    robot_bones,
    top_k_weights,
    transfer_weights,
)

SH_C0 = 0.28209479177387814  # degree-0 spherical harmonic: colour = 0.5 + SH_C0 * f_dc
DEFAULT_COLOR = (0.7, 0.7, 0.7)
PLY_FIELDS = ("x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2", "opacity",
              "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3")


@dataclass
class GaussianAsset:
    """Gaussians of one articulated body in its rest pose, with their binding to the body's links.

    All arrays are numpy float64 (indices int64); ``pose`` converts to torch in the dtype of its inputs.
    """

    means: np.ndarray  # (N, 3) rest-pose world
    scales: np.ndarray  # (N, 3) std along the Gaussian's own axes, m
    quats: np.ndarray  # (N, 4) xyzw, Gaussian axes -> rest-pose world
    colors: np.ndarray  # (N, 3) RGB in [0, 1]
    opacities: np.ndarray  # (N,) in [0, 1]
    normals: np.ndarray  # (N, 3) surface normals, rest-pose world
    weight_index: np.ndarray  # (N, K) link indices (robot.link_names order)
    weight_value: np.ndarray  # (N, K) skin weights, rows sum to 1 (K = 1: rigid one-hot binding)
    rest_link_pos: np.ndarray  # (L, 3) link origins in the rest pose, world
    rest_link_rot: np.ndarray  # (L, 3, 3) link orientations in the rest pose, world
    link_names: list[str]
    rest_joint_pos: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (J,)
    skin: object | None = None  # trimesh.Trimesh skin (creature assets), rest-pose world

    # -- construction -------------------------------------------------------
    @classmethod
    def from_robot(cls, robot: Robot, n_gaussians: int = 6000, seed: int = 0, skin: bool | None = None,
                   tangent_scale: float = 0.7, normal_ratio: float = 0.1, opacity: float = 0.95,
                   skin_offset: float = 0.01, skin_blend: float = 0.012, max_influences: int = 4) -> GaussianAsset:
        """Gaussians on ``robot``'s surface in its rest pose (see the module docstring).

        Args:
            n_gaussians: number of Gaussians N (spread over the surface by area).
            seed: seed of the surface sampling (the asset is a pure function of its arguments).
            skin: True builds a creature skin with bone-heat weights; False samples link geometry rigidly;
                None picks skin for the built-in skeletons (robot.name in akd_core.model.skeletons.SKELETONS).
            tangent_scale: tangent std as a fraction of the mean sample spacing sqrt(area / N).
            normal_ratio: normal std as a fraction of the tangent std (flat Gaussians).
            skin_offset, skin_blend: creature skin: outward offset from the bones and smooth-union radius, m.
            max_influences: creature skin: links kept per Gaussian (top-k weights).
        """

        if n_gaussians < 1:
            raise ConfigError(f"gaussians: n_gaussians must be >= 1, got {n_gaussians}")
        rest_q = robot.default_joint_pos()
        fk = ForwardKinematics(robot)
        with torch.no_grad():
            link_pos, link_rot = fk(torch.zeros(1, 3, dtype=torch.float64),
                                    torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=torch.float64),
                                    torch.as_tensor(rest_q[None], dtype=torch.float64))
        rest_pos, rest_rot = link_pos[0].numpy(), link_rot[0].numpy()
        if skin is None:
            skin = _is_builtin_skeleton(robot)
        rng = np.random.default_rng(seed)
        if skin:
            sample = creature_skin_samples(robot, rest_pos, rest_rot, n_gaussians, rng, offset=skin_offset,
                                           blend=skin_blend, max_influences=max_influences)
        else:
            sample = _rigid_surface_samples(robot, rest_pos, rest_rot, n_gaussians, rng)
        spacing = np.sqrt(sample.total_area / n_gaussians)
        tangent = tangent_scale * spacing
        scales = np.tile([tangent, tangent, tangent * normal_ratio], (n_gaussians, 1))
        return cls(means=sample.points, scales=scales, quats=_frame_quats(sample.normals), colors=sample.colors,
                   opacities=np.full(n_gaussians, float(opacity)), normals=sample.normals,
                   weight_index=sample.weight_index, weight_value=sample.weight_value, rest_link_pos=rest_pos,
                   rest_link_rot=rest_rot, link_names=list(robot.link_names), rest_joint_pos=rest_q,
                   skin=sample.mesh)

    # -- derived quantities ---------------------------------------------------
    @property
    def num_gaussians(self) -> int:
        return len(self.means)

    @property
    def link_index(self) -> np.ndarray:
        """(N,) the link with the largest weight per Gaussian (the bound link of a rigid asset)."""
        best = np.argmax(self.weight_value, axis=1)
        return self.weight_index[np.arange(len(best)), best]

    @property
    def covars(self) -> np.ndarray:
        """(N, 3, 3) rest-pose covariances R diag(scales^2) R^T."""
        rot = Rotation.from_quat(self.quats).as_matrix()
        return rot @ (self.scales[:, :, None] ** 2 * np.eye(3)) @ rot.transpose(0, 2, 1)

    def colors_tensor(self, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> Tensor:
        return torch.as_tensor(self.colors, dtype=dtype, device=device)  # (N, 3)

    def opacities_tensor(self, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> Tensor:
        return torch.as_tensor(self.opacities, dtype=dtype, device=device)  # (N,)

    # -- posing ---------------------------------------------------------------
    def pose(self, link_pos: Tensor, link_rot: Tensor) -> tuple[Tensor, Tensor]:
        """Posed Gaussians by linear blend skinning; differentiable w.r.t. the link poses.

        link_pos (F, L, 3), link_rot (F, L, 3, 3): world link poses in ``link_names`` order, e.g.
        ``ForwardKinematics(robot)(root_pos, root_quat, joint_pos)``. Returns means (F, N, 3) and
        covariances (F, N, 3, 3) in link_pos's dtype and device.
        """
        dtype, device = link_pos.dtype, link_pos.device

        def t(x: np.ndarray, dt: torch.dtype = dtype) -> Tensor:
            return torch.as_tensor(x, dtype=dt, device=device)

        return linear_blend(t(self.means), t(self.covars), t(self.weight_index, torch.long), t(self.weight_value),
                            t(self.rest_link_pos), t(self.rest_link_rot), link_pos, link_rot)

    def subset(self, indices: np.ndarray) -> GaussianAsset:
        """The asset restricted to the Gaussians ``indices`` (same links, rest pose and skin)."""
        per_gaussian = ("means", "scales", "quats", "colors", "opacities", "normals", "weight_index", "weight_value")
        return dataclasses.replace(self, **{name: getattr(self, name)[indices] for name in per_gaussian})

    def local_means(self) -> np.ndarray:
        """(N, 3) each mean in the frame of its :attr:`link_index` link (exact for rigid assets)."""
        idx = self.link_index
        return np.einsum("nji,nj->ni", self.rest_link_rot[idx], self.means - self.rest_link_pos[idx])

    # -- files ----------------------------------------------------------------
    def save_ply(self, path: str | os.PathLike) -> Path:
        return save_ply(self, path)

    @classmethod
    def load_ply(cls, path: str | os.PathLike) -> GaussianAsset:
        return load_ply(path)


# ----------------------------------------------------------------------------- surface samples
@dataclass
class SurfaceSamples:
    """Points sampled on a surface, with what each Gaussian needs (all rest-pose world)."""

    points: np.ndarray  # (N, 3)
    normals: np.ndarray  # (N, 3)
    colors: np.ndarray  # (N, 3)
    weight_index: np.ndarray  # (N, K)
    weight_value: np.ndarray  # (N, K)
    total_area: float
    mesh: object | None = None


def sample_triangles(triangles: np.ndarray, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray,
                                                                                             np.ndarray]:
    """Area-weighted uniform samples on triangles (T, 3, 3): face index (count,), barycentric (count, 3), points."""
    cross = np.cross(triangles[:, 1] - triangles[:, 0], triangles[:, 2] - triangles[:, 0])
    area = 0.5 * np.linalg.norm(cross, axis=-1)
    if area.sum() <= 0:
        raise ConfigError("gaussians: the surface to sample has zero area")
    face = rng.choice(len(triangles), size=count, p=area / area.sum())
    u, v = rng.random(count), rng.random(count)
    flip = u + v > 1
    u, v = np.where(flip, 1 - u, u), np.where(flip, 1 - v, v)
    bary = np.stack([1 - u - v, u, v], axis=1)
    points = np.einsum("nc,ncd->nd", bary, triangles[face])
    return face, bary, points


def geometry_mesh(geom: Geometry):
    """A trimesh.Trimesh of one URDF geometry in its link frame, and its per-face colours (T, 3)."""
    import trimesh

    if geom.kind == "box":
        mesh = trimesh.creation.box(extents=np.asarray(geom.size, dtype=np.float64))
    elif geom.kind == "cylinder":
        mesh = trimesh.creation.cylinder(radius=float(geom.size[0]), height=float(geom.size[1]), sections=32)
    elif geom.kind == "capsule":
        mesh = trimesh.creation.capsule(height=float(geom.size[1]), radius=float(geom.size[0]), count=[16, 16])
    elif geom.kind == "sphere":
        mesh = trimesh.creation.icosphere(subdivisions=3, radius=float(geom.size[0]))
    elif geom.kind == "mesh":
        if geom.mesh_path is None or not Path(geom.mesh_path).exists():
            raise MeshNotFoundError(f"gaussians: mesh '{geom.mesh_uri}' of a visual was not found at "
                                    f"{geom.mesh_path}; pass --package-path so package:// URIs resolve")
        mesh = trimesh.load(geom.mesh_path, force="mesh")
        mesh.apply_scale(np.asarray(geom.size, dtype=np.float64))
    else:
        raise ConfigError(f"gaussians: unknown geometry kind {geom.kind!r}")
    colors = _face_colors(mesh, geom)
    mesh.apply_transform(geom.origin)
    return mesh, colors


def _face_colors(mesh, geom: Geometry) -> np.ndarray:
    """(T, 3) colours: the URDF material, else the mesh's own visual colours, else grey."""
    if geom.rgba is not None:
        return np.tile(np.asarray(geom.rgba, dtype=np.float64)[:3], (len(mesh.faces), 1))
    try:
        visual = mesh.visual
        if visual.kind == "texture":
            visual = visual.to_color()
        if visual.kind in ("face", "vertex"):
            return np.asarray(visual.face_colors, dtype=np.float64)[:, :3] / 255.0
    except Exception:  # a visual trimesh cannot convert: the colour is cosmetic, fall back to grey
        pass
    return np.tile(DEFAULT_COLOR, (len(mesh.faces), 1))


def _rigid_surface_samples(robot: Robot, rest_pos: np.ndarray, rest_rot: np.ndarray, count: int,
                           rng: np.random.Generator) -> SurfaceSamples:
    """Samples on every link's visual (else collision) geometry, bound one-hot to the link."""
    triangles, face_link, face_color = [], [], []
    for link in robot.links:
        li = robot.link_index(link.name)
        for geom in link.visuals or link.collisions:
            mesh, colors = geometry_mesh(geom)
            tri = np.asarray(mesh.triangles) @ rest_rot[li].T + rest_pos[li]
            triangles.append(tri)
            face_link.append(np.full(len(tri), li))
            face_color.append(colors)
    if not triangles:
        raise ConfigError(f"gaussians: robot '{robot.name}' has no visual or collision geometry to put Gaussians "
                          "on; add <visual> geometry to its URDF links")
    tris = np.concatenate(triangles)
    face, _, points = sample_triangles(tris, count, rng)
    normals = np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
    areas = 0.5 * np.linalg.norm(normals, axis=-1)
    normals = normals / np.maximum(2 * areas, 1e-18)[:, None]
    weight_index, weight_value = rigid_weights(np.concatenate(face_link)[face])
    return SurfaceSamples(points=points, normals=normals[face], colors=np.concatenate(face_color)[face],
                          weight_index=weight_index, weight_value=weight_value, total_area=float(areas.sum()))


@dataclass
class BoneBoxes:
    """The boxes of a skeleton's bones in the rest pose: centres (B, 3), rotations (B, 3, 3), half extents (B, 3),
    colours (B, 3) and owning link (B,)."""

    centres: np.ndarray
    rotations: np.ndarray
    half_extents: np.ndarray
    colors: np.ndarray
    link: np.ndarray


def bone_boxes(robot: Robot, rest_pos: np.ndarray, rest_rot: np.ndarray) -> BoneBoxes:
    """Every visual box of ``robot`` in the rest-pose world frame (other shapes use their bounding box)."""
    centres, rotations, halves, colors, links = [], [], [], [], []
    for link in robot.links:
        li = robot.link_index(link.name)
        for geom in link.visuals or link.collisions:
            if geom.kind == "box":
                half, local = np.asarray(geom.size, dtype=np.float64) / 2, geom.origin
            else:
                mesh, _ = geometry_mesh(geom)  # already in the link frame: its axis-aligned box there
                lo, hi = mesh.bounds
                half, local = (hi - lo) / 2, np.eye(4)
                local[:3, 3] = (hi + lo) / 2
            centres.append(rest_rot[li] @ local[:3, 3] + rest_pos[li])
            rotations.append(rest_rot[li] @ local[:3, :3])
            halves.append(half)
            colors.append(np.asarray(geom.rgba, dtype=np.float64)[:3] if geom.rgba is not None else DEFAULT_COLOR)
            links.append(li)
    if not centres:
        raise ConfigError(f"gaussians: robot '{robot.name}' has no bone geometry to build a skin around")
    return BoneBoxes(np.array(centres), np.array(rotations), np.array(halves), np.array(colors), np.array(links))


def box_distances(points: np.ndarray, boxes: BoneBoxes) -> np.ndarray:
    """Signed distances (P, B) from points (P, 3) to each box (negative inside)."""
    return _box_distances_torch(torch.as_tensor(points), boxes).numpy()


def _box_distances_torch(points: Tensor, boxes: BoneBoxes) -> Tensor:
    centres, rotations = torch.as_tensor(boxes.centres), torch.as_tensor(boxes.rotations)
    local = torch.einsum("pbi,bij->pbj", points[:, None] - centres[None], rotations)  # world -> box frame
    q = local.abs() - torch.as_tensor(boxes.half_extents)[None]
    return q.clamp_min(0.0).norm(dim=-1) + q.max(-1).values.clamp_max(0.0)


def skin_sdf(points: np.ndarray, boxes: BoneBoxes, offset: float, blend: float, chunk: int = 65536) -> np.ndarray:
    """Signed distance (P,) to the skin: smooth union (exponential smooth-min, radius ``blend``) of the boxes,
    offset outwards by ``offset`` m (negative inside)."""
    pts = torch.as_tensor(points, dtype=torch.float64)
    out = torch.empty(len(points), dtype=torch.float64)
    for start in range(0, len(points), chunk):
        d = _box_distances_torch(pts[start:start + chunk], boxes)
        out[start:start + chunk] = -blend * torch.logsumexp(-d / blend, dim=1) - offset
    return out.numpy()


def creature_skin_mesh(boxes: BoneBoxes, offset: float = 0.01, blend: float = 0.012,
                       edge_length: float | None = None):
    """A closed, smooth skin (trimesh.Trimesh) around bone boxes: the zero level set of :func:`skin_sdf`.

    The SDF is sampled on a grid of spacing ``edge_length`` and interpolated trilinearly for manifold3d's marching
    tetrahedra (``Manifold.level_set``), which returns a watertight mesh. ``edge_length`` defaults to 1/80 of the
    skeleton's largest extent.
    """
    import manifold3d
    import trimesh

    corners = boxes.centres[:, None] + np.einsum("bij,bcj->bci", boxes.rotations,
                                                 boxes.half_extents[:, None] * _BOX_SIGNS[None])
    pad = offset + 3 * blend
    lo, hi = corners.reshape(-1, 3).min(0) - pad, corners.reshape(-1, 3).max(0) + pad
    if edge_length is None:
        edge_length = float((hi - lo).max()) / 80.0
    h = edge_length
    dims = np.ceil((hi - lo) / h).astype(int) + 1
    axes = [lo[i] + h * np.arange(dims[i]) for i in range(3)]
    grid_points = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    values = (-skin_sdf(grid_points, boxes, offset, blend)).reshape(*dims).tolist()  # manifold: positive inside
    nx, ny, nz = (int(v) - 2 for v in dims)
    x0, y0, z0 = (float(v) for v in lo)

    def field_at(x: float, y: float, z: float) -> float:  # trilinear interpolation in plain Python (fast per call)
        fx, fy, fz = (x - x0) / h, (y - y0) / h, (z - z0) / h
        i, j, k = min(max(int(fx), 0), nx), min(max(int(fy), 0), ny), min(max(int(fz), 0), nz)
        tx, ty, tz = fx - i, fy - j, fz - k
        a, b = values[i], values[i + 1]
        c00 = a[j][k] * (1 - tz) + a[j][k + 1] * tz
        c01 = a[j + 1][k] * (1 - tz) + a[j + 1][k + 1] * tz
        c10 = b[j][k] * (1 - tz) + b[j][k + 1] * tz
        c11 = b[j + 1][k] * (1 - tz) + b[j + 1][k + 1] * tz
        return (c00 * (1 - ty) + c01 * ty) * (1 - tx) + (c10 * (1 - ty) + c11 * ty) * tx

    bounds = [*(lo + h / 2), *(hi - h / 2)]
    solid = manifold3d.Manifold.level_set(field_at, bounds, edge_length)
    out = solid.to_mesh()
    vertices = project_to_skin(np.asarray(out.vert_properties, dtype=np.float64)[:, :3], boxes, offset, blend)
    mesh = trimesh.Trimesh(vertices, np.asarray(out.tri_verts), process=False)
    if not mesh.is_watertight:
        raise ConfigError("gaussians: the creature skin is not watertight; try a smaller edge_length")
    return mesh


def project_to_skin(points: np.ndarray, boxes: BoneBoxes, offset: float, blend: float, steps: int = 3) -> np.ndarray:
    """Points (P, 3) moved onto the exact zero level set of :func:`skin_sdf` by Newton steps along its gradient.

    The level-set mesher sees a trilinearly interpolated grid, whose vertices can sit up to half a grid cell off
    the true surface near tight curves; this removes that error (the mesh's topology is unchanged).
    """
    eps = 1e-5
    shifts = np.concatenate([np.eye(3), -np.eye(3)]) * eps
    for _ in range(steps):
        values = skin_sdf(np.concatenate([points, *(points + s for s in shifts)]), boxes, offset, blend)
        values = values.reshape(7, len(points))
        grad = (values[1:4] - values[4:7]).T / (2 * eps)  # (P, 3)
        grad /= np.maximum(np.linalg.norm(grad, axis=1, keepdims=True), 1e-12)
        points = points - values[0][:, None] * grad
    return points


_BOX_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float64)


def creature_skin_samples(robot: Robot, rest_pos: np.ndarray, rest_rot: np.ndarray, count: int,
                          rng: np.random.Generator, offset: float = 0.01, blend: float = 0.012,
                          max_influences: int = 4, edge_length: float | None = None) -> SurfaceSamples:
    """Samples on a creature skin with bone-heat weights (top ``max_influences`` links) and bone colours."""

    boxes = bone_boxes(robot, rest_pos, rest_rot)
    mesh = creature_skin_mesh(boxes, offset, blend, edge_length)
    segments, segment_link = robot_bones(robot, rest_pos, rest_rot)
    vertex_weights = bone_heat_weights(mesh, segments, segment_link, len(robot.link_names))
    face, _, points = sample_triangles(np.asarray(mesh.triangles), count, rng)
    weights = transfer_weights(mesh, vertex_weights, points, face_index=face)
    weight_index, weight_value = top_k_weights(weights, max_influences)
    colors = boxes.colors[np.argmin(box_distances(points, boxes), axis=1)]
    return SurfaceSamples(points=points, normals=np.asarray(mesh.face_normals)[face], colors=colors,
                          weight_index=weight_index, weight_value=weight_value, total_area=float(mesh.area),
                          mesh=mesh)


def _frame_quats(normals: np.ndarray) -> np.ndarray:
    """(N, 4) xyzw of frames whose third axis is the normal (N, 3) (the first two span the tangent plane)."""
    n = normals / np.maximum(np.linalg.norm(normals, axis=-1, keepdims=True), 1e-12)
    helper = np.where(np.abs(n[:, :1]) < 0.9, np.array([[1.0, 0.0, 0.0]]), np.array([[0.0, 1.0, 0.0]]))
    t1 = np.cross(helper, n)
    t1 /= np.linalg.norm(t1, axis=-1, keepdims=True)
    t2 = np.cross(n, t1)
    return Rotation.from_matrix(np.stack([t1, t2, n], axis=-1)).as_quat()


def _is_builtin_skeleton(robot: Robot) -> bool:

    return robot.name in SKELETONS and all(g.kind == "box" for link in robot.links for g in link.visuals)


# ----------------------------------------------------------------------------- PLY
def save_ply(asset: GaussianAsset, path: str | os.PathLike) -> Path:
    """Write ``asset`` as a 3DGS PLY (binary little-endian float32) atomically; see the module docstring."""
    n, k = asset.num_gaussians, asset.weight_index.shape[1]
    colors = np.clip(asset.colors, 0.0, 1.0)
    opac = np.clip(asset.opacities, 1e-6, 1 - 1e-6)
    quat_wxyz = np.roll(asset.quats, 1, axis=1)  # xyzw -> wxyz (3DGS convention)
    columns = [asset.means, asset.normals, (colors - 0.5) / SH_C0, np.log(opac / (1 - opac))[:, None],
               np.log(np.maximum(asset.scales, 1e-12)), quat_wxyz, asset.weight_index.astype(np.float64),
               asset.weight_value]
    data = np.concatenate(columns, axis=1).astype("<f4")
    names = [*PLY_FIELDS, *(f"bind_link_{i}" for i in range(k)), *(f"bind_weight_{i}" for i in range(k))]
    header = ["ply", "format binary_little_endian 1.0", "comment akd gaussian asset (rest-pose world frame, z up)"]
    header.append("comment akd_rest_joint_pos " + " ".join(repr(float(q)) for q in asset.rest_joint_pos))
    for name, pos, rot in zip(asset.link_names, asset.rest_link_pos, asset.rest_link_rot):
        values = " ".join(repr(float(v)) for v in (*pos, *Rotation.from_matrix(rot).as_quat()))
        header.append(f"comment akd_link {name} {values}")
    header.append(f"element vertex {n}")
    header += [f"property float {name}" for name in names]
    header.append("end_header")
    with atomic_path(path, suffix=".ply") as tmp:
        with open(tmp, "wb") as f:
            f.write(("\n".join(header) + "\n").encode("ascii"))
            f.write(data.tobytes())
    return Path(path)


def load_ply(path: str | os.PathLike) -> GaussianAsset:
    """Read a PLY written by :func:`save_ply` (or any 3DGS PLY: then every Gaussian is bound to one root link)."""
    path = Path(path)
    raw = path.read_bytes()
    end = raw.find(b"end_header\n")
    if not raw.startswith(b"ply") or end < 0:
        raise ConfigError(f"gaussians: {path} is not a PLY file (no 'ply' magic or 'end_header'); write it with "
                          "GaussianAsset.save_ply")
    lines = raw[:end].decode("ascii").splitlines()
    names, count, links, rest_q = [], 0, [], np.zeros(0)
    for line in lines:
        parts = line.split()
        if parts[:2] == ["format", "ascii"] or parts[:2] == ["format", "binary_big_endian"]:
            raise ConfigError(f"gaussians: {path}: only binary_little_endian PLY is supported")
        if parts[:2] == ["element", "vertex"]:
            count = int(parts[2])
        elif parts[:1] == ["property"]:
            if parts[1] != "float":
                raise ConfigError(f"gaussians: {path}: property {parts[-1]} is {parts[1]}, expected float")
            names.append(parts[2])
        elif parts[:2] == ["comment", "akd_link"]:
            links.append((parts[2], np.array([float(v) for v in parts[3:10]])))
        elif parts[:2] == ["comment", "akd_rest_joint_pos"]:
            rest_q = np.array([float(v) for v in parts[2:]])
    missing = [f for f in PLY_FIELDS if f not in names and f not in ("nx", "ny", "nz")]
    if missing:
        raise ConfigError(f"gaussians: {path} lacks the 3DGS properties {missing}")
    data = np.frombuffer(raw[end + len(b"end_header\n"):], dtype="<f4", count=count * len(names))
    data = data.reshape(count, len(names)).astype(np.float64)
    col = {name: data[:, i] for i, name in enumerate(names)}

    def cols(*keys: str) -> np.ndarray:
        return np.stack([col[k] for k in keys], axis=1)

    k = sum(1 for name in names if name.startswith("bind_link_"))
    if k:
        weight_index = cols(*(f"bind_link_{i}" for i in range(k))).round().astype(np.int64)
        weight_value = cols(*(f"bind_weight_{i}" for i in range(k)))
    else:
        weight_index, weight_value = rigid_weights(np.zeros(count, dtype=np.int64))
    if not links:
        links = [("root", np.array([0.0, 0, 0, 0, 0, 0, 1]))]
    quat_wxyz = cols("rot_0", "rot_1", "rot_2", "rot_3")
    quats = np.roll(quat_wxyz / np.maximum(np.linalg.norm(quat_wxyz, axis=1, keepdims=True), 1e-12), -1, axis=1)
    normals = cols("nx", "ny", "nz") if "nx" in col else Rotation.from_quat(quats).as_matrix()[:, :, 2]
    return GaussianAsset(
        means=cols("x", "y", "z"), scales=np.exp(cols("scale_0", "scale_1", "scale_2")), quats=quats,
        colors=np.clip(0.5 + SH_C0 * cols("f_dc_0", "f_dc_1", "f_dc_2"), 0.0, 1.0),
        opacities=1.0 / (1.0 + np.exp(-col["opacity"])), normals=normals, weight_index=weight_index,
        weight_value=weight_value, rest_link_pos=np.array([v[:3] for _, v in links]),
        rest_link_rot=Rotation.from_quat(np.array([v[3:] for _, v in links])).as_matrix().reshape(-1, 3, 3),
        link_names=[name for name, _ in links], rest_joint_pos=rest_q)


__all__ = ["BoneBoxes", "GaussianAsset", "SurfaceSamples", "bone_boxes", "creature_skin_mesh", "creature_skin_samples",
           "project_to_skin", "skin_sdf", "geometry_mesh", "load_ply", "sample_triangles", "save_ply",
           "PLY_FIELDS", "SH_C0"]
