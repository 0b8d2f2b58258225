"""Preview videos: a fast CPU mesh renderer for watching a robot's motion (``RUN/preview.mp4``).

This room owns the person-facing preview, not the differentiable Gaussian renderer
(:mod:`akd_core.render`). Every link's visual geometry is triangulated once (primitives
through ``trimesh.creation``, meshes through ``trimesh.load``, decimated by vertex
clustering when a geometry has more than ``max_faces`` triangles). Per frame the
vertices are posed with :class:`~akd_core.model.kinematics.ForwardKinematics`, projected by a
pinhole camera that follows the robot (smoothed root, 3/4 front view), and rasterized
with a numpy z-buffer and flat Lambert shading over a ray-cast checkerboard ground
(z = 0, tiles scaled to the robot) with soft blob shadows and a sky. A run made on a terrain
(stairs, a slope, rough ground) is drawn on it: the checker on the surface the rays meet
(:mod:`akd_core.render.terrain_cast`), faces shaded by their tilt, lines on nosings, shadows
measured from the surface, and a camera that keeps above the ground and watches a climb from
behind. Flat ground keeps its exact z = 0 code.

:func:`render_preview` puts several clips (reference | tracked) side by side, each panel
with its own camera and label, and writes an H.264 / yuv420p MP4 atomically;
:func:`render_frame` renders one pose; :func:`stage_preview` is the ``akd preview`` stage.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from akd_core.io.errors import ConfigError, MeshNotFoundError, MotionError
from akd_core.io.rundir import PREVIEW, REFERENCE, ROBOT_URDF, TRACKED, RunDir
from akd_core.model.kinematics import ForwardKinematics
from akd_core.model.robot import Geometry, Robot, load_urdf
from akd_core.model.spatial import quat_slerp
from akd_core.model.terrain import Terrain, run_terrain
from akd_core.motion.clip import Motion, TrackedMotion
from akd_core.render.camera import intrinsics_from_fov, look_at, smooth_over_time
from akd_core.render.terrain_cast import SUN, TerrainCaster, checker_parity, depth_edges, sun_shade
from akd_core.render.video import write_mp4_frames
from akd_core.render.zbuffer import NEAR_PLANE, rasterize

log = logging.getLogger(__name__)

DEFAULT_RGB = (0.56, 0.66, 0.80)  # pleasant grey-blue for geometry without a colour
DEFAULT_FPS = 30.0
MIN_FACES = 64  # smallest per-geometry face budget
UPHILL_RISE = 0.02  # m: a clip whose ground ends this much higher than it starts is watched from behind


# ----------------------------------------------------------------------------- style
@dataclass(frozen=True)
class PreviewStyle:
    """Look and camera of a preview (angles in degrees, colours RGB in [0, 1])."""

    fov_y_deg: float = 40.0
    elevation_deg: float = 20.0
    azimuth_deg: float = -55.0  # camera direction from the robot, relative to its initial heading (-90 = right side)
    margin: float = 1.1  # distance = margin * rest-pose radius / sin(half fov)
    follow_sigma_s: float = 0.25  # Gaussian smoothing of the followed root position
    max_faces: int = 2000  # per geometry; larger meshes are decimated
    side_tint: float = 0.25  # warm left (+y) links, cool right ones, so legs are told apart; 0 = exact URDF colours
    ambient: float = 0.38
    sky_horizon: tuple[float, float, float] = (0.86, 0.90, 0.95)
    sky_zenith: tuple[float, float, float] = (0.52, 0.68, 0.88)
    ground_a: tuple[float, float, float] = (0.80, 0.80, 0.78)
    ground_b: tuple[float, float, float] = (0.56, 0.58, 0.60)
    shadow: float = 0.45  # darkening right under a link touching the ground; 0 = no shadow
    terrain_ambient: float = 0.38  # light of a terrain face turned away from the sun (level faces: 1)
    terrain_edge: float = 0.55  # brightness of the lines drawn on a terrain's nosings and creases; 1 = none
    camera_clearance: float = 0.25  # a terrain's surface stays this far (x rest-pose size) below the camera

    def __post_init__(self) -> None:
        if not 0.0 < self.fov_y_deg < 170.0:
            raise ConfigError(f"preview: fov_y_deg must be in (0, 170), got {self.fov_y_deg}")
        if not -80.0 <= self.elevation_deg <= 80.0:
            raise ConfigError(f"preview: elevation_deg must be in [-80, 80], got {self.elevation_deg}")
        if self.max_faces < MIN_FACES:
            raise ConfigError(f"preview: max_faces must be >= {MIN_FACES}, got {self.max_faces}")


# ----------------------------------------------------------------------------- triangulation
@dataclass
class RobotMesh:
    """The robot's visual geometry as one triangle soup in link frames."""

    vertex_link: np.ndarray  # (V,) int64 link index (robot.link_names order), non-decreasing: stored link by link
    vertices: np.ndarray  # (V, 3) float64, link frame
    faces: np.ndarray  # (T, 3) int64
    face_colors: np.ndarray  # (T, 3) float64 RGB in [0, 1]
    two_sided: np.ndarray  # (T,) bool: drawn from both sides (winding unknown); other faces are culled from behind

    @property
    def num_faces(self) -> int:
        return len(self.faces)


def decimate_mesh(vertices: np.ndarray, faces: np.ndarray, max_faces: int) -> tuple[np.ndarray, np.ndarray]:
    """Vertex-clustering decimation: vertices (V, 3), faces (T, 3) -> at most ``max_faces`` faces.

    Vertices are merged on a regular grid (cluster = mean of its vertices); collapsed and
    duplicate faces are dropped. The grid is refined by bisection to keep as many faces as
    allowed, so the silhouette is kept to about one grid cell.
    """
    if len(faces) <= max_faces:
        return vertices, faces
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    extent = max(float((hi - lo).max()), 1e-9)
    best = _cluster(vertices, faces, lo, extent / 2)  # 8 clusters: at most 56 distinct faces <= MIN_FACES
    cells_lo, cells_hi = 3, 512
    while cells_lo <= cells_hi:
        cells = (cells_lo + cells_hi) // 2
        verts, tris = _cluster(vertices, faces, lo, extent / cells)
        if len(tris) <= max_faces:
            best = (verts, tris)
            cells_lo = cells + 1
        else:
            cells_hi = cells - 1
    return best


def _cluster(vertices: np.ndarray, faces: np.ndarray, origin: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray]:
    grid = np.floor((vertices - origin) / cell).astype(np.int64)
    side = int(grid.max()) + 1
    keys = (grid[:, 0] * side + grid[:, 1]) * side + grid[:, 2]
    _, cluster, counts = np.unique(keys, return_inverse=True, return_counts=True)
    cluster = cluster.reshape(-1)
    verts = np.stack([np.bincount(cluster, vertices[:, k], len(counts)) for k in range(3)], axis=1) / counts[:, None]
    tris = cluster[faces]
    keep = (tris[:, 0] != tris[:, 1]) & (tris[:, 1] != tris[:, 2]) & (tris[:, 0] != tris[:, 2])
    tris = tris[keep]
    ordered = np.sort(tris, axis=1)
    n = len(counts)
    if n < 2**21:  # one int64 key per face (n^3 < 2^63) is much faster than unique rows
        _, first = np.unique((ordered[:, 0] * n + ordered[:, 1]) * n + ordered[:, 2], return_index=True)
    else:
        _, first = np.unique(ordered, axis=0, return_index=True)
    tris = tris[np.sort(first)]
    used, tris = np.unique(tris, return_inverse=True)  # drop clusters no face uses
    return verts[used], tris.reshape(-1, 3)


def _geometry_triangles(geom: Geometry, cache: dict[Path, _Triangles], max_faces: int) -> _Triangles | None:
    """One visual as triangles in its link frame, or None for a shape that cannot be drawn."""
    import trimesh.creation

    size = np.asarray(geom.size, dtype=np.float64)
    if geom.kind == "mesh":
        if geom.mesh_path is None:
            raise MeshNotFoundError(f"preview: mesh '{geom.mesh_uri}' was not resolved to a file; pass "
                                    "--package-path DIR so package:// URIs resolve")
        if geom.mesh_path not in cache:
            cache[geom.mesh_path] = _load_mesh(Path(geom.mesh_path), max_faces)
        tri = cache[geom.mesh_path]
        if len(tri.faces) == 0:
            return None
        faces = tri.faces[:, ::-1] if np.prod(size) < 0 else tri.faces  # a mirroring scale flips the winding
        return _Triangles(_transform(tri.vertices * size, geom.origin), faces, tri.outward)
    if geom.kind == "box":
        mesh = trimesh.creation.box(extents=size)
    elif geom.kind == "cylinder":
        mesh = trimesh.creation.cylinder(radius=size[0], height=size[1], sections=16)
    elif geom.kind == "capsule":
        mesh = trimesh.creation.capsule(height=size[1], radius=size[0], count=[12, 12])
    elif geom.kind == "sphere":
        mesh = trimesh.creation.icosphere(subdivisions=2, radius=size[0])
    else:
        return None
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    return _Triangles(_transform(vertices, geom.origin), np.asarray(mesh.faces, dtype=np.int64), outward=True)


@dataclass
class _Triangles:
    vertices: np.ndarray  # (V, 3)
    faces: np.ndarray  # (T, 3)
    outward: bool  # consistent, outward winding: faces seen from behind may be culled


def _transform(points: np.ndarray, tf: np.ndarray) -> np.ndarray:
    """Points (N, 3) through a (4, 4) transform."""
    return points @ tf[:3, :3].T + tf[:3, 3]


def _load_mesh(path: Path, max_faces: int) -> _Triangles:
    import trimesh

    if not path.is_file():
        raise MeshNotFoundError(f"preview: mesh file {path} does not exist; fix the URDF's <mesh filename> "
                                "or pass --package-path DIR")
    try:
        mesh = trimesh.load(path, force="mesh")
    except Exception as exc:  # trimesh raises many types for unreadable files
        log.warning("preview: cannot read mesh %s (%s); the link is drawn without it", path, exc)
        return _Triangles(np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64), outward=False)
    verts, faces = np.asarray(mesh.vertices, dtype=np.float64), np.asarray(mesh.faces, dtype=np.int64)
    # a signed volume tells the winding's orientation when the winding is consistent; otherwise draw both sides
    volume = float(mesh.volume) if mesh.is_winding_consistent else 0.0
    if volume < 0:
        faces = faces[:, ::-1]
    verts, faces = decimate_mesh(verts, faces, max_faces)
    return _Triangles(verts, faces, outward=abs(volume) > 0)


def build_robot_mesh(robot: Robot, style: PreviewStyle = PreviewStyle()) -> RobotMesh:
    """Triangulate every link's visual geometry (collision geometry for links without visuals)."""
    cache: dict[Path, _Triangles] = {}
    side = _link_sides(robot)
    links, verts, faces, colors, two_sided = [], [], [], [], []
    offset = 0
    for index, link in enumerate(robot.links):
        for geom in link.visuals or link.collisions:
            tri = _geometry_triangles(geom, cache, style.max_faces)
            if tri is None:
                continue
            v, f = tri.vertices, tri.faces
            rgb = np.asarray(geom.rgba[:3] if geom.rgba is not None else DEFAULT_RGB, dtype=np.float64)
            rgb = _tint(rgb, side[index] * style.side_tint)
            links.append(np.full(len(v), index, dtype=np.int64))
            verts.append(v)
            faces.append(f + offset)
            colors.append(np.broadcast_to(rgb, (len(f), 3)))
            two_sided.append(np.full(len(f), not tri.outward))
            offset += len(v)
    if not faces:
        raise ConfigError(f"preview: robot '{robot.name}' has no visual or collision geometry to draw")
    return RobotMesh(np.concatenate(links), np.concatenate(verts), np.concatenate(faces), np.concatenate(colors),
                     np.concatenate(two_sided))


def _link_sides(robot: Robot) -> np.ndarray:
    """(L,) +1 for links left of the root (y > 0 in the zero pose), -1 right, 0 on the mid-plane."""
    fk = ForwardKinematics(robot).double()
    with torch.no_grad():
        pos, _ = fk(torch.zeros(1, 3, dtype=torch.float64), torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=torch.float64),
                    torch.zeros(1, robot.num_dofs, dtype=torch.float64))
    y = pos[0, :, 1].numpy()
    scale = max(float(np.abs(y).max()), 1e-9)
    return np.where(np.abs(y) > 0.05 * scale, np.sign(y), 0.0)


def _tint(rgb: np.ndarray, amount: float) -> np.ndarray:
    """Shift a colour towards warm (amount > 0) or cool (< 0), keeping it in [0, 1]."""
    if amount == 0.0:
        return rgb
    target = np.array([0.95, 0.55, 0.30]) if amount > 0 else np.array([0.30, 0.55, 0.95])
    return np.clip(rgb + abs(amount) * (target - rgb), 0.0, 1.0)


# ----------------------------------------------------------------------------- renderer
@dataclass
class PanelCamera:
    """Cameras of one panel: world -> camera (OpenCV axes) per frame and the intrinsics."""

    viewmats: np.ndarray  # (F, 4, 4)
    K: np.ndarray  # (3, 3)


class PreviewRenderer:
    """Renders poses of one robot: triangulated once, posed with FK, rasterized per frame."""

    def __init__(self, robot: Robot, width: int = 320, height: int = 240, style: PreviewStyle = PreviewStyle(),
                 terrain: Terrain | None = None):
        if width < 16 or height < 16:
            raise ConfigError(f"preview: width and height must be >= 16 pixels, got {width}x{height}")
        self.robot, self.width, self.height, self.style = robot, int(width), int(height), style
        # flat ground keeps the exact z = 0 checkerboard; any other terrain is ray-cast (terrain_cast)
        self.terrain = terrain if terrain is not None and not terrain.is_flat else None
        self._caster = TerrainCaster(self.terrain) if self.terrain is not None else None
        self.mesh = build_robot_mesh(robot, style)
        self.fk = ForwardKinematics(robot).double()
        self.K = intrinsics_from_fov(style.fov_y_deg, self.width, self.height, dtype=torch.float64).numpy()
        # vertices and faces are stored link by link: pose each link's block with one small matmul
        self._vertex_blocks = _blocks(self.mesh.vertex_link)
        self._face_blocks = _blocks(self.mesh.vertex_link[self.mesh.faces[:, 0]])
        tri = self.mesh.vertices[self.mesh.faces]
        normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        self._normals_local = normal / np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-12)  # (T, 3)
        rest = self.pose_vertices(*_rest_pose(robot))[0]  # (V, 3), root at the origin
        lo, hi = rest.min(axis=0), rest.max(axis=0)
        self.rest_centre = 0.5 * (lo + hi)  # relative to the root
        self.size = float(np.linalg.norm(hi - lo))  # m, rest-pose bounding-box diagonal
        self.tile_size = max(0.05, round(0.5 * float((hi - lo).max()) / 0.05) * 0.05)
        self.blobs = shadow_blobs(self.mesh, len(robot.links))
        self._view_cache: dict[tuple[bytes, bytes], _ViewRays] = {}

    # -- posing -------------------------------------------------------------
    def link_poses(self, root_pos: np.ndarray, root_quat: np.ndarray,
                   joint_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """root_pos (F, 3), root_quat (F, 4) xyzw, joint_pos (F, J) -> link_pos (F, L, 3), link_rot (F, L, 3, 3)."""
        with torch.no_grad():
            pos, rot = self.fk(torch.as_tensor(np.asarray(root_pos, dtype=np.float64)),
                               torch.as_tensor(np.asarray(root_quat, dtype=np.float64)),
                               torch.as_tensor(np.asarray(joint_pos, dtype=np.float64)))
        return pos.numpy(), rot.numpy()

    def pose_vertices(self, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray) -> np.ndarray:
        """World vertices (F, V, 3) of the poses (root_pos (F, 3), root_quat (F, 4) xyzw, joint_pos (F, J))."""
        link_pos, link_rot = self.link_poses(root_pos, root_quat, joint_pos)
        return np.stack([self._posed(p, r) for p, r in zip(link_pos, link_rot)])

    def _posed(self, link_pos: np.ndarray, link_rot: np.ndarray) -> np.ndarray:
        """(V, 3) world vertices of one frame from link_pos (L, 3), link_rot (L, 3, 3)."""
        return _per_block(self.mesh.vertices, self._vertex_blocks, link_pos, link_rot)

    # -- cameras ------------------------------------------------------------
    def follow_camera(self, root_pos: np.ndarray, root_quat: np.ndarray, fps: float) -> PanelCamera:
        """A camera per frame following the smoothed root (F, 3) at a fixed 3/4 front offset.

        The azimuth is taken relative to the clip's initial heading (yaw of root_quat[0]), and the
        distance from the rest-pose size, so every panel of a preview frames the robot alike. On a terrain the
        camera follows the root's height too (it always does) and keeps above the ground under it; when the ground
        under the clip's last frame is higher than under its first (stairs or a slope up) the view is mirrored to
        the rear (azimuth -180 - azimuth_deg), so the risers and the rising ground face the camera.
        """
        style = self.style
        yaw = _yaw(np.asarray(root_quat[0], dtype=np.float64))
        centre = np.asarray(root_pos, dtype=np.float64) + _rotz(yaw) @ self.rest_centre
        sigma = style.follow_sigma_s * fps
        targets = smooth_over_time(torch.as_tensor(centre), sigma).numpy()
        half_fov = min(math.atan(0.5 * self.width / self.K[0, 0]), math.atan(0.5 * self.height / self.K[1, 1]))
        distance = style.margin * 0.5 * self.size / math.sin(half_fov)
        azimuth = style.azimuth_deg
        if self.terrain is not None and len(root_pos) > 1:
            start, end = self.terrain.height(np.asarray(root_pos)[[0, -1], 0], np.asarray(root_pos)[[0, -1], 1])
            if np.isfinite(start) and np.isfinite(end) and end - start > UPHILL_RISE:
                azimuth = -180.0 - azimuth  # climbing: watch from behind, where the risers and the slope face us
        el, az = math.radians(style.elevation_deg), yaw + math.radians(azimuth)
        offset = distance * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
        eyes = targets + offset
        if self.terrain is not None:  # never inside a step or a hill: rise above the ground under the camera
            ground = self.terrain.height(eyes[:, 0], eyes[:, 1])
            need = np.where(np.isfinite(ground), ground + style.camera_clearance * self.size - eyes[:, 2], 0.0)
            lift = smooth_over_time(torch.as_tensor(np.maximum(need, 0.0)[:, None]), sigma).numpy()[:, 0]
            eyes = eyes + np.maximum(lift, need)[:, None] * np.array([0.0, 0.0, 1.0])
        viewmats = look_at(torch.as_tensor(eyes), torch.as_tensor(targets)).numpy()
        return PanelCamera(viewmats=viewmats, K=self.K)

    # -- one frame ----------------------------------------------------------
    def render(self, link_pos: np.ndarray, link_rot: np.ndarray, viewmat: np.ndarray,
               K: np.ndarray | None = None) -> np.ndarray:
        """Image (H, W, 3) uint8 of one pose (link_pos (L, 3), link_rot (L, 3, 3)) seen by viewmat (4, 4)."""
        K = self.K if K is None else K
        rot, trans = viewmat[:3, :3], viewmat[:3, 3]
        eye = -rot.T @ trans
        verts = self._posed(link_pos, link_rot)  # (V, 3) world
        cam = verts @ rot.T + trans
        depth = cam[:, 2]
        safe = np.where(depth > NEAR_PLANE, depth, 1.0)
        screen = np.stack([K[0, 0] * cam[:, 0] / safe + K[0, 2], K[1, 1] * cam[:, 1] / safe + K[1, 2]], axis=1)
        normal, facing = self._face_normals(verts, link_rot, eye)
        drawn = np.nonzero(facing | self.mesh.two_sided)[0]
        face_id, robot_depth = rasterize(screen, depth, self.mesh.faces[drawn], self.width, self.height)
        if self._caster is None:
            image, ground_depth = self._background(rot, eye, K, link_pos, link_rot)
        else:
            image, ground_depth = self._terrain_background(viewmat, K, link_pos, link_rot)
        visible = (face_id >= 0) & (robot_depth < ground_depth)
        shade = self._shade(normal[drawn], self.mesh.face_colors[drawn], rot)
        image[visible] = shade[face_id[visible]]
        return np.round(np.clip(image, 0.0, 1.0) * 255.0).astype(np.uint8)

    def render_pose(self, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray,
                    viewmat: np.ndarray | None = None) -> np.ndarray:
        """Image (H, W, 3) uint8 of one pose: root_pos (3,), root_quat (4,) xyzw, joint_pos (J,).

        ``viewmat`` (4, 4) world -> camera; default: :meth:`follow_camera` for this single frame.
        """
        root_pos, root_quat = np.asarray(root_pos)[None], np.asarray(root_quat)[None]
        link_pos, link_rot = self.link_poses(root_pos, root_quat, np.asarray(joint_pos)[None])
        if viewmat is None:
            viewmat = self.follow_camera(root_pos, root_quat, fps=DEFAULT_FPS).viewmats[0]
        return self.render(link_pos[0], link_rot[0], viewmat)

    def _face_normals(self, verts: np.ndarray, link_rot: np.ndarray,
                      eye: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Unit face normals (T, 3) turned towards the camera, and whether each face's own front faces it (T,)."""
        normal = _per_block(self._normals_local, self._face_blocks, None, link_rot)
        facing = np.einsum("ij,ij->i", normal, eye - verts[self.mesh.faces[:, 0]]) >= 0
        normal[~facing] *= -1.0
        return normal, facing

    def _shade(self, normal: np.ndarray, color: np.ndarray, cam_rot: np.ndarray) -> np.ndarray:
        """Flat Lambert colour (T, 3) of faces with camera-facing unit normals (T, 3) and base colours (T, 3)."""
        # key light from above, over the camera's left shoulder; a weak fill from the camera itself
        key = -cam_rot[1] * 1.0 - cam_rot[0] * 0.35 - cam_rot[2] * 0.45
        key /= np.linalg.norm(key)
        fill = -cam_rot[2]
        diffuse = 0.75 * np.clip(normal @ key, 0.0, None) + 0.25 * np.clip(normal @ fill, 0.0, None)
        light = self.style.ambient + (1.0 - self.style.ambient) * diffuse
        return color * light[:, None]

    def _background(self, cam_rot: np.ndarray, eye: np.ndarray, K: np.ndarray, link_pos: np.ndarray,
                    link_rot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sky and checkerboard ground (H, W, 3) float, and the ground's camera depth (H, W) (inf: sky)."""
        style = self.style
        view = self._view_rays(cam_rot, K)
        image = view.sky.copy()
        depth = np.full(image.shape[:2], np.inf)
        if eye[2] <= 0:  # camera under the ground: sky only
            return image, depth
        t = eye[2] * view.inv_drop  # (N,) camera depth of each ground hit
        points = eye[:2] + t[:, None] * view.dirs_xy  # (N, 2) on z = 0
        tile = self.tile_size
        parity = (np.floor(points[:, 0] / tile) + np.floor(points[:, 1] / tile)) % 2  # 0: colour a, 1: colour b
        a, b = np.asarray(style.ground_a), np.asarray(style.ground_b)
        # fade the checker to its mean where a pixel's footprint nears a tile (no moire at the horizon)
        contrast = np.clip(1.6 - 3.0 * (t * view.footprint) / tile, 0.0, 1.0)
        haze = np.clip((t * view.length - 6.0 * self.size) / (30.0 * self.size), 0.0, 1.0)
        light = 1.0 - haze
        if style.shadow > 0:
            light *= self._shadow(points, link_pos, link_rot)
        # colour = light * (mean +- contrast * (a - b) / 2) + haze * horizon, with scalars per pixel
        signed = contrast * (1.0 - 2.0 * parity)
        flat = image.reshape(-1, 3)
        flat[view.hit] = (light[:, None] * (0.5 * (a + b)) + (light * signed)[:, None] * (0.5 * (a - b))
                          + haze[:, None] * np.asarray(style.sky_horizon))
        depth.reshape(-1)[view.hit] = t
        return image, depth

    def _terrain_background(self, viewmat: np.ndarray, K: np.ndarray, link_pos: np.ndarray,
                            link_rot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sky and the chequered terrain (H, W, 3) float, and the terrain's camera depth (H, W) (inf: sky).

        As :meth:`_background` on z = 0, with the surface the ray meets first: squares on treads and slopes by their
        (x, y), on risers and walls across them; each face lit by its tilt to a fixed sun (level faces exactly as
        flat ground); shadows measured from the surface under each link; lines where the depth jumps or creases.
        """
        style = self.style
        view = self._view_rays(viewmat[:3, :3], K)
        image = view.sky.copy()
        hits = self._caster.cast(viewmat, K, self.width, self.height)
        depth = hits.depth.copy()
        hit = np.nonzero(np.isfinite(depth.reshape(-1)))[0]
        t = depth.reshape(-1)[hit]
        rays = hits.rays.reshape(-1, 3)[hit]
        points = hits.points.reshape(-1, 3)[hit]
        normals = hits.normals.reshape(-1, 3)[hit]
        length = np.linalg.norm(rays, axis=1)
        footprint = length**2 / (K[1, 1] * np.maximum(np.abs(np.einsum("ij,ij->i", rays, normals)), 1e-9))
        tile = self.tile_size
        parity = checker_parity(points, normals, tile)
        a, b = np.asarray(style.ground_a), np.asarray(style.ground_b)
        contrast = np.clip(1.6 - 3.0 * (t * footprint) / tile, 0.0, 1.0)
        haze = np.clip((t * length - 6.0 * self.size) / (30.0 * self.size), 0.0, 1.0)
        light = (1.0 - haze) * sun_shade(normals, style.terrain_ambient, SUN)
        if style.shadow > 0:
            light *= self._shadow(points, link_pos, link_rot)
        # lines on nosings and creases, fading with the checker where a pixel covers a tile
        light *= 1.0 - (1.0 - style.terrain_edge) * contrast * depth_edges(depth).reshape(-1)[hit]
        signed = contrast * (1.0 - 2.0 * parity)
        flat = image.reshape(-1, 3)
        flat[hit] = (light[:, None] * (0.5 * (a + b)) + (light * signed)[:, None] * (0.5 * (a - b))
                     + haze[:, None] * np.asarray(style.sky_horizon))
        return image, depth

    def _view_rays(self, cam_rot: np.ndarray, K: np.ndarray) -> _ViewRays:
        """What the background needs of a camera orientation; cached, as a following camera keeps its orientation."""
        key = (cam_rot.tobytes(), K.tobytes())
        if key not in self._view_cache:
            if len(self._view_cache) >= 8:
                self._view_cache.pop(next(iter(self._view_cache)))
            self._view_cache[key] = _ViewRays.build(cam_rot, K, self.width, self.height, self.style)
        return self._view_cache[key]

    def _shadow(self, points: np.ndarray, link_pos: np.ndarray, link_rot: np.ndarray,
                cells: int = 48) -> np.ndarray:
        """Blob-shadow factor (N,) in (0, 1] at ground points (N, 3): soft discs under the links, fading with height.

        The blob field is evaluated on a ``cells``-wide grid over the robot's footprint and looked up per pixel.
        """
        blobs = self.blobs
        centres = link_pos[blobs.link] + np.einsum("kij,kj->ki", link_rot[blobs.link], blobs.centre)  # (K, 3)
        if self.terrain is None:
            heights = np.clip(centres[:, 2] - blobs.radius, 0.0, None)
        else:  # measured from the surface under each blob
            ground = self.terrain.height(centres[:, 0], centres[:, 1])  # -inf off a scene's geoms: no shadow
            heights = np.clip(centres[:, 2] - blobs.radius - ground, 0.0, None)
        strength = self.style.shadow * np.exp(-heights / (0.15 * self.size))  # (K,)
        reach = 3.0 * blobs.radius.max()
        lo, hi = centres[:, :2].min(axis=0) - reach, centres[:, :2].max(axis=0) + reach
        cell = float((hi - lo).max()) / cells
        nx, ny = (np.ceil((hi - lo) / cell).astype(np.int64) + 1).tolist()
        gx, gy = lo[0] + (np.arange(nx) + 0.5) * cell, lo[1] + (np.arange(ny) + 0.5) * cell
        d2 = (gx[None, :, None] - centres[:, 0]) ** 2 + (gy[:, None, None] - centres[:, 1]) ** 2  # (ny, nx, K)
        field = np.clip((strength * np.exp(-0.5 * d2 / blobs.radius**2)).max(axis=-1), 0.0, 1.0)
        ix = np.floor((points[:, 0] - lo[0]) / cell).astype(np.int64)
        iy = np.floor((points[:, 1] - lo[1]) / cell).astype(np.int64)
        inside = (ix >= 0) & (ix < nx) & (iy >= 0) & (iy < ny)
        factor = np.ones(len(points))
        factor[inside] = 1.0 - field[iy[inside], ix[inside]]
        return factor


@dataclass
class ShadowBlobs:
    """Soft shadow casters fixed in links: one disc per short link, three along a long one."""

    link: np.ndarray  # (K,) int64 link index
    centre: np.ndarray  # (K, 3) in the link frame
    radius: np.ndarray  # (K,) m


def shadow_blobs(mesh: RobotMesh, num_links: int) -> ShadowBlobs:
    """Blobs from each link's vertex box: radius = half its middle extent, spread along its longest axis."""
    links, centres, radii = [], [], []
    for index in range(num_links):
        verts = mesh.vertices[mesh.vertex_link == index]
        if len(verts) == 0:
            continue
        lo, hi = verts.min(axis=0), verts.max(axis=0)
        extent = hi - lo
        order = np.argsort(extent)
        radius = max(0.5 * float(extent[order[1]]), 1e-3)
        centre = 0.5 * (lo + hi)
        along = np.zeros(3)
        along[order[2]] = extent[order[2]]
        spread = (-0.33, 0.0, 0.33) if extent[order[2]] > 3.0 * radius else (0.0,)
        for s in spread:
            links.append(index)
            centres.append(centre + s * along)
            radii.append(radius)
    return ShadowBlobs(np.asarray(links, dtype=np.int64), np.asarray(centres), np.asarray(radii))


@dataclass
class _ViewRays:
    """Per-pixel rays of one camera orientation: the sky image and, for rays that reach z = 0, their geometry."""

    sky: np.ndarray  # (H, W, 3) sky colour of every pixel
    hit: np.ndarray  # (N,) flat indices of pixels whose ray goes down
    dirs_xy: np.ndarray  # (N, 2) world xy of those rays, scaled so their camera depth grows by 1 per unit
    inv_drop: np.ndarray  # (N,) 1 / -dz: ground hit depth = camera height * inv_drop
    length: np.ndarray  # (N,) world length of a ray per unit depth (distance = depth * length)
    footprint: np.ndarray  # (N,) ground footprint of a pixel per unit depth, m

    @classmethod
    def build(cls, cam_rot: np.ndarray, K: np.ndarray, width: int, height: int, style: PreviewStyle) -> _ViewRays:
        u = (np.arange(width) + 0.5 - K[0, 2]) / K[0, 0]
        v = (np.arange(height) + 0.5 - K[1, 2]) / K[1, 1]
        rays = np.stack(np.broadcast_arrays(u[None, :], v[:, None], np.ones((1, 1))), axis=-1)  # (H, W, 3), z = 1
        dirs = (rays @ cam_rot).reshape(-1, 3)  # camera -> world; the ray parameter is the camera depth
        length = np.linalg.norm(dirs, axis=1)
        sky_mix = np.sqrt(np.clip(dirs[:, 2] / length, 0.0, 1.0))[:, None]
        sky = (1 - sky_mix) * np.asarray(style.sky_horizon) + sky_mix * np.asarray(style.sky_zenith)
        hit = np.nonzero(dirs[:, 2] < -1e-9)[0]
        drop = -dirs[hit, 2]
        return cls(sky=sky.reshape(height, width, 3), hit=hit, dirs_xy=dirs[hit, :2], inv_drop=1.0 / drop,
                   length=length[hit], footprint=length[hit] ** 2 / (K[1, 1] * drop))


def _blocks(owner: np.ndarray) -> list[tuple[int, int, int]]:
    """(link, start, stop) of each run of equal values in a sorted (N,) link index."""
    links, starts = np.unique(owner, return_index=True)
    stops = np.append(starts[1:], len(owner))
    return [(int(k), int(a), int(b)) for k, a, b in zip(links, starts, stops)]


def _per_block(local: np.ndarray, blocks: list[tuple[int, int, int]], link_pos: np.ndarray | None,
               link_rot: np.ndarray) -> np.ndarray:
    """Rows of ``local`` (N, 3) rotated (and moved, if ``link_pos`` is given) by their link's pose."""
    out = np.empty_like(local)
    for link, start, stop in blocks:
        out[start:stop] = local[start:stop] @ link_rot[link].T
        if link_pos is not None:
            out[start:stop] += link_pos[link]
    return out


def _rest_pose(robot: Robot) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One frame at the origin, identity orientation, joints at the zero pose clipped into limits."""
    return np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0, 1.0]]), robot.default_joint_pos()[None]


def _yaw(quat: np.ndarray) -> float:
    """Heading (rad) of an xyzw quaternion: the angle of its x axis projected on the ground."""
    x, y, z, w = quat / np.linalg.norm(quat)
    return math.atan2(2 * (x * y + z * w), 1 - 2 * (y * y + z * z))


def _rotz(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


# ----------------------------------------------------------------------------- clips
@dataclass
class _Clip:
    """A clip in the robot's joint order; ``rate`` None means 'one frame per video frame'."""

    root_pos: np.ndarray  # (F, 3)
    root_quat: np.ndarray  # (F, 4) xyzw
    joint_pos: np.ndarray  # (F, J)
    rate: float | None

    @property
    def duration(self) -> float:
        return (len(self.joint_pos) - 1) / self.rate if self.rate else 0.0

    def frames_at(self, fps: float) -> int:
        """Number of video frames this clip lasts at ``fps``."""
        if self.rate is None:
            return len(self.joint_pos)
        return int(math.floor(self.duration * fps + 1e-9)) + 1

    def sample(self, times: np.ndarray, fps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Poses at video times (N,) s: linear joints and positions, slerp rotations; last pose held after the end."""
        n = len(self.joint_pos)
        src = times * (self.rate if self.rate else fps)
        src = np.clip(src, 0.0, n - 1)
        i0 = np.minimum(np.floor(src + 1e-9).astype(np.int64), n - 1)
        i1 = np.minimum(i0 + 1, n - 1)
        frac = (src - i0).clip(0.0, 1.0)
        if self.rate is None:
            frac = np.zeros_like(frac)
        lerp = lambda a: a[i0] * (1 - frac)[:, None] + a[i1] * frac[:, None]  # noqa: E731
        return lerp(self.root_pos), quat_slerp(self.root_quat[i0], self.root_quat[i1], frac), lerp(self.joint_pos)


def _as_clip(robot: Robot, clip: Any, index: int) -> _Clip:
    """A Motion, TrackedMotion, any object with root_pos/root_quat/joint_pos (and fps or dt), or a tuple."""
    names = None
    if isinstance(clip, tuple):
        if len(clip) != 3:
            raise MotionError(f"preview: clip {index} is a tuple of {len(clip)} items; give "
                              "(root_pos (F,3), root_quat (F,4) xyzw, joint_pos (F,J))")
        root_pos, root_quat, joint_pos = clip
        rate = None
    elif all(hasattr(clip, a) for a in ("root_pos", "root_quat", "joint_pos")):
        root_pos, root_quat, joint_pos = clip.root_pos, clip.root_quat, clip.joint_pos
        rate = float(clip.fps) if hasattr(clip, "fps") else (1.0 / float(clip.dt) if hasattr(clip, "dt") else None)
        names = list(getattr(clip, "joint_names", []) or []) or None
    else:
        raise MotionError(f"preview: clip {index} is a {type(clip).__name__}; give a Motion, a TrackedMotion or "
                          "a tuple (root_pos, root_quat, joint_pos)")
    root_pos = np.asarray(root_pos, dtype=np.float64)
    root_quat = np.asarray(root_quat, dtype=np.float64)
    joint_pos = np.asarray(joint_pos, dtype=np.float64).reshape(len(root_pos), -1) if len(root_pos) else joint_pos
    frames = len(root_pos)
    if frames == 0 or root_pos.shape != (frames, 3) or root_quat.shape != (frames, 4):
        raise MotionError(f"preview: clip {index} needs root_pos (F,3) and root_quat (F,4) with F >= 1, got "
                          f"{root_pos.shape} and {root_quat.shape}")
    if names is not None and names != robot.joint_names:
        missing = sorted(set(robot.joint_names) - set(names))
        if missing:
            raise MotionError(f"preview: clip {index} has no joints {missing} of robot '{robot.name}'; "
                              "it was made for another robot")
        joint_pos = joint_pos[:, [names.index(n) for n in robot.joint_names]]
    if joint_pos.shape != (frames, robot.num_dofs):
        raise MotionError(f"preview: clip {index} joint_pos has shape {joint_pos.shape}, expected "
                          f"({frames}, {robot.num_dofs}) for robot '{robot.name}'")
    for name, arr in (("root_pos", root_pos), ("root_quat", root_quat), ("joint_pos", joint_pos)):
        if not np.all(np.isfinite(arr)):
            raise MotionError(f"preview: clip {index} field '{name}' contains NaN or inf values")
    if rate is not None and rate <= 0:
        raise MotionError(f"preview: clip {index} has a non-positive frame rate {rate}")
    return _Clip(root_pos, root_quat, joint_pos, rate)


# ----------------------------------------------------------------------------- labels
def draw_label(image: np.ndarray, text: str, x: int, y: int, size: int = 12) -> np.ndarray:
    """Image (H, W, 3) uint8 with ``text`` drawn at (x, y) in white on a darkened box (PIL's default font)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size)
    canvas = Image.fromarray(image)
    draw = ImageDraw.Draw(canvas)
    left, top, right, bottom = draw.textbbox((x, y), text, font=font)
    box = np.asarray(canvas).copy()
    y0, y1 = max(top - 2, 0), min(bottom + 3, image.shape[0])
    x0, x1 = max(left - 3, 0), min(right + 3, image.shape[1])
    box[y0:y1, x0:x1] = (box[y0:y1, x0:x1] * 0.4).astype(np.uint8)
    canvas = Image.fromarray(box)
    ImageDraw.Draw(canvas).text((x, y), text, fill=(255, 255, 255), font=font)
    return np.asarray(canvas)


# ----------------------------------------------------------------------------- public entry points
def render_frame(robot: Robot, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray,
                 width: int = 320, height: int = 240, style: PreviewStyle = PreviewStyle(),
                 viewmat: np.ndarray | None = None, terrain: Terrain | None = None) -> np.ndarray:
    """One pose as an image (H, W, 3) uint8: root_pos (3,), root_quat (4,) xyzw, joint_pos (J,) robot order.

    The default camera is the preview's following camera for this pose (see :meth:`PreviewRenderer.follow_camera`).
    ``terrain``: the ground to draw (default: flat z = 0).
    """
    return PreviewRenderer(robot, width, height, style, terrain).render_pose(root_pos, root_quat, joint_pos, viewmat)


def clip_frames(robot: Robot, clips: Sequence[Any], labels: Sequence[str] | None = None, fps: float | None = None,
                width: int = 320, height: int = 240, style: PreviewStyle = PreviewStyle(),
                progress: bool = True, terrain: Terrain | None = None) -> tuple[Iterator[np.ndarray], int, float]:
    """(frames, count, video fps) of clips side by side: ``frames`` yields each (H, C * W, 3) uint8 frame as it is
    drawn, so a long clip is encoded as it renders (:func:`~akd_core.render.video.write_mp4_frames`) instead of
    held whole; see :func:`render_preview`. The input is checked before this returns."""
    from tqdm import tqdm

    if not clips:
        raise ConfigError("preview: no clips to render; give at least one motion")
    labels = list(labels) if labels is not None else [f"clip {i + 1}" for i in range(len(clips))]
    if len(labels) != len(clips):
        raise ConfigError(f"preview: {len(labels)} labels for {len(clips)} clips; give one label per clip")
    parsed = [_as_clip(robot, clip, i) for i, clip in enumerate(clips)]
    if fps is None:
        rates = [c.rate for c in parsed if c.rate]
        fps = min(DEFAULT_FPS, max(rates)) if rates else DEFAULT_FPS
    if fps <= 0:
        raise ConfigError(f"preview: fps must be positive, got {fps}")
    renderer = PreviewRenderer(robot, width, height, style, terrain)
    num_frames = max(c.frames_at(fps) for c in parsed)
    times = np.arange(num_frames) / fps
    panels = []
    for clip in parsed:
        root_pos, root_quat, joint_pos = clip.sample(times, fps)
        link_pos, link_rot = renderer.link_poses(root_pos, root_quat, joint_pos)
        camera = renderer.follow_camera(root_pos, root_quat, fps)
        panels.append((link_pos, link_rot, camera, clip.frames_at(fps)))
    font_size = max(10, height // 20)

    def frames() -> Iterator[np.ndarray]:
        for f in tqdm(range(num_frames), desc="preview", unit="frame", disable=not progress, leave=False):
            frame = np.empty((height, width * len(parsed), 3), dtype=np.uint8)
            for c, (link_pos, link_rot, camera, length) in enumerate(panels):
                image = renderer.render(link_pos[f], link_rot[f], camera.viewmats[f], camera.K)
                clock = f"{times[f]:.2f} s" if f < length else f"{times[length - 1]:.2f} s (end)"
                frame[:, c * width:(c + 1) * width] = draw_label(image, f"{labels[c]}  {clock}", 4, 3, font_size)
            yield frame

    return frames(), num_frames, float(fps)


def render_clips(robot: Robot, clips: Sequence[Any], labels: Sequence[str] | None = None, fps: float | None = None,
                 width: int = 320, height: int = 240, style: PreviewStyle = PreviewStyle(),
                 progress: bool = True, terrain: Terrain | None = None) -> tuple[np.ndarray, float]:
    """Frames (N, H, C * W, 3) uint8 of clips side by side, and the video fps (:func:`clip_frames`, held)."""
    frames, count, video_fps = clip_frames(robot, clips, labels, fps, width, height, style, progress, terrain)
    out = np.empty((count, height, width * len(clips), 3), dtype=np.uint8)
    for f, frame in enumerate(frames):
        out[f] = frame
    return out, video_fps


def render_preview(robot: Robot, clips: Sequence[Any], labels: Sequence[str] | str | os.PathLike | None = None,
                   path: str | os.PathLike | None = None, fps: float | None = None, width: int = 320,
                   height: int = 240, style: PreviewStyle = PreviewStyle(), progress: bool = True,
                   terrain: Terrain | None = None) -> Path:
    """Render clips side by side (each panel W x H with its own following camera and label) to an MP4.

    Args:
        clips: Motion / TrackedMotion objects (resampled by time, joints matched by name) or tuples
            (root_pos (F, 3), root_quat (F, 4) xyzw, joint_pos (F, J) in robot order) taken as one
            frame per video frame. Shorter clips hold their last pose until the longest ends.
        labels: one text per clip (default "clip 1", ...). ``render_preview(robot, clips, path)``
            is accepted too: a path in this position is the output path.
        path: the .mp4 to write (H.264, yuv420p), atomically.
        fps: video frame rate; default min(30, highest clip rate).
        terrain: the ground the clips stand on (:func:`~akd_core.model.terrain.run_terrain` of a run); default
            flat z = 0.

    Returns the path written.
    """
    if isinstance(labels, (str, os.PathLike)) and path is None:
        labels, path = None, labels
    if path is None:
        raise ConfigError("preview: no output path; give path='preview.mp4'")

    frames, _, video_fps = clip_frames(robot, clips, labels, fps, width, height, style, progress, terrain)
    return write_mp4_frames(frames, path, fps=video_fps)


# ----------------------------------------------------------------------------- stage + CLI
def stage_preview(run: RunDir, width: int = 320, height: int = 240, fps: float | None = None,
                  naive: bool = False, output: str | os.PathLike | None = None,
                  style: PreviewStyle = PreviewStyle()) -> dict[str, Any]:
    """`akd preview`: RUN/reference.npz | RUN/tracked.npz (| naive PD replay) side by side -> RUN/preview.mp4.

    Without tracked.npz (only `akd gait` has run) the reference is rendered alone. The ground is the run's terrain
    (:func:`~akd_core.model.terrain.run_terrain`: flat z = 0 unless the gait stage recorded one). Returns the
    recorded metrics.
    """

    robot = load_urdf(run.require(ROBOT_URDF, "akd gait --robot ROBOT --prompt TEXT --out RUN"))
    clips: list[Any] = [Motion.load(run.require(REFERENCE, "akd gait --robot ROBOT --prompt TEXT --out RUN"))]
    labels = ["reference"]
    if run.file(TRACKED).exists():
        tracked = TrackedMotion.load(run.file(TRACKED))
        clips.append(tracked)
        labels.append("tracked")
        if naive and tracked.naive is not None:
            clips.append(tracked.naive)
            labels.append("naive PD")
    path = Path(output) if output is not None else run.file(PREVIEW)
    terrain = run_terrain(run)
    config = {"width": width, "height": height, "fps": fps, "naive": naive, "panels": labels, "path": str(path),
              "terrain": terrain.spec}
    with run.running_stage("preview", config) as metrics:
        start = time.perf_counter()
        frames, count, video_fps = clip_frames(robot, clips, labels, fps, width, height, style, progress=True,
                                               terrain=terrain)
        write_mp4_frames(frames, path, fps=video_fps)  # drawn and encoded frame by frame
        seconds = time.perf_counter() - start
        metrics.update(frames=count, fps=video_fps, duration_s=count / video_fps, panels=len(clips),
                       render_s_per_frame=seconds / count)
    return metrics
