"""Where each pixel's ray meets a :class:`~akd_core.model.terrain.Terrain`: camera depth, world point and normal.

Both renderers draw a run's ground from this: the preview (one ray per pixel) and the Gaussian render's background
(supersampled, by casting at a multiple of its resolution). The terrain's planes are intersected analytically (they
are infinite, so the ground reaches the horizon as the flat checkerboard always did); its boxes and height grids
are triangulated once (:meth:`Terrain.render_mesh`, the same triangles its MuJoCo geoms and ``height`` use) and
drawn with the z-buffer rasterizer of :mod:`akd_core.render.zbuffer`, cut at the near plane so treads that reach
behind the camera still cover the pixels in front of it. The nearest of the two wins per pixel.

Flat ground is not cast here: the renderers keep their exact z = 0 code for it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from akd_core.model.spatial import quat_to_matrix
from akd_core.model.terrain import Terrain
from akd_core.render.zbuffer import NEAR_PLANE, clip_near, rasterize


@dataclass
class SurfaceHits:
    """Rays of one camera image, H x W pixels, and where they meet the terrain."""

    rays: np.ndarray  # (H, W, 3) world direction of each pixel's ray, scaled so the camera depth grows 1 per unit
    depth: np.ndarray  # (H, W) camera depth of the hit (inf: the ray meets no surface)
    points: np.ndarray  # (H, W, 3) world hit points (eye where there is no hit)
    normals: np.ndarray  # (H, W, 3) unit normal of the face hit, pointing out of the ground ((0, 0, 1) without hit)

    @property
    def hit(self) -> np.ndarray:
        """(H, W) bool: the ray meets the terrain."""
        return np.isfinite(self.depth)


class TerrainCaster:
    """Casts camera rays at one terrain; the terrain's mesh is built once, per image only the posing changes.

    ``max_distance``: hits farther than this from the camera (m) are dropped (the sky shows there).
    """

    def __init__(self, terrain: Terrain, max_distance: float = np.inf):
        self.terrain = terrain
        self.max_distance = float(max_distance)
        self.plane_points = np.array([p.point for p in terrain.planes], dtype=np.float64).reshape(-1, 3)
        self.plane_normals = np.array([p.normal for p in terrain.planes], dtype=np.float64).reshape(-1, 3)
        vertices, faces = _box_pieces(terrain)
        if terrain.grids:  # the planes are cast exactly, the boxes are in pieces: the grids' own mesh
            grid_vertices, grid_faces = dataclasses.replace(terrain, planes=(), boxes=()).render_mesh()
            faces = np.concatenate([faces, np.asarray(grid_faces, dtype=np.int64) + len(vertices)])
            vertices = np.concatenate([vertices, np.asarray(grid_vertices, dtype=np.float64)])
        self.vertices = np.asarray(vertices, dtype=np.float64)  # (V, 3) world
        self.faces = np.asarray(faces, dtype=np.int64)  # (M, 3), outward (counter-clockwise seen from outside)
        tri = self.vertices[self.faces]
        normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-300)
        up = normal[:, 2] > -0.5  # the undersides of boxes and grids face the ground below them: never seen
        self.faces, self.face_normals = self.faces[up], normal[up]  # (M, 3), (M, 3)

    def cast(self, viewmat: np.ndarray, K: np.ndarray, width: int, height: int) -> SurfaceHits:
        """Hits of the rays through the pixel centres of a ``width`` x ``height`` image seen by ``viewmat`` (4, 4)
        world -> camera (OpenCV axes) with intrinsics ``K`` (3, 3)."""
        viewmat, K = np.asarray(viewmat, dtype=np.float64), np.asarray(K, dtype=np.float64)
        rot, trans = viewmat[:3, :3], viewmat[:3, 3]
        eye = -rot.T @ trans
        u = (np.arange(width) + 0.5 - K[0, 2]) / K[0, 0]
        v = (np.arange(height) + 0.5 - K[1, 2]) / K[1, 1]
        cam_rays = np.stack(np.broadcast_arrays(u[None, :], v[:, None], np.ones((1, 1))), axis=-1)  # (H, W, 3)
        rays = (cam_rays @ rot).reshape(-1, 3)  # camera -> world; z_cam of eye + s * ray is s
        depth = np.full(len(rays), np.inf)
        normals = np.zeros((len(rays), 3))
        normals[:, 2] = 1.0
        for point, normal in zip(self.plane_points, self.plane_normals):
            above = float(np.dot(eye - point, normal))
            if above <= 0.0:  # the camera is under this plane: it cannot be seen from here
                continue
            facing = rays @ normal  # < 0: the ray goes down through the plane
            s = np.where(facing < -1e-12, above / np.maximum(-facing, 1e-300), np.inf)
            nearer = s < depth
            depth[nearer] = s[nearer]
            normals[nearer] = normal
        if len(self.faces):
            mesh_depth, face = self._rasterize(rot, trans, eye, K, width, height)
            nearer = mesh_depth < depth
            depth[nearer] = mesh_depth[nearer]
            normals[nearer] = self.face_normals[face[nearer]]
        if np.isfinite(self.max_distance):
            depth[depth * np.linalg.norm(rays, axis=1) > self.max_distance] = np.inf
        points = eye + np.where(np.isfinite(depth), depth, 0.0)[:, None] * rays
        shape = (height, width)
        return SurfaceHits(rays=rays.reshape(*shape, 3), depth=depth.reshape(shape), points=points.reshape(*shape, 3),
                           normals=normals.reshape(*shape, 3))

    def _rasterize(self, rot: np.ndarray, trans: np.ndarray, eye: np.ndarray, K: np.ndarray, width: int,
                   height: int) -> tuple[np.ndarray, np.ndarray]:
        """Camera depth (H*W,) of the nearest mesh face per pixel (inf: none) and that face's index (H*W,)."""
        faces = self.faces
        cam = self.vertices @ rot.T + trans
        # frustum culling by outcodes: a face all of whose vertices lie beyond one side of the view is dropped
        x, y, z = cam[:, 0], cam[:, 1], cam[:, 2]
        ahead = z > NEAR_PLANE
        code = (~ahead).astype(np.int64) << 4
        for bit, outside in enumerate((x < -K[0, 2] / K[0, 0] * z, x > (width - K[0, 2]) / K[0, 0] * z,
                                       y < -K[1, 2] / K[1, 1] * z, y > (height - K[1, 2]) / K[1, 1] * z)):
            code |= (outside & ahead).astype(np.int64) << bit  # vertices behind the camera bound no side
        seen = (code[faces[:, 0]] & code[faces[:, 1]] & code[faces[:, 2]]) == 0
        seen[seen] = np.einsum("ij,ij->i", self.face_normals[seen], eye - self.vertices[faces[seen, 0]]) > 0
        verts, tris, source = clip_near(cam, faces[seen])
        source = np.nonzero(seen)[0][source]
        safe = np.where(verts[:, 2] > NEAR_PLANE, verts[:, 2], 1.0)
        screen = np.stack([K[0, 0] * verts[:, 0] / safe + K[0, 2], K[1, 1] * verts[:, 1] / safe + K[1, 2]], axis=1)
        face_id, depth = rasterize(screen, verts[:, 2], tris, width, height, spans=True)
        face_id = face_id.reshape(-1)
        face = np.where(face_id >= 0, source[np.maximum(face_id, 0)], 0)
        return depth.reshape(-1), face


BOX_PIECE = 0.25  # m: box faces are cut into pieces at most this big, so the hidden ones can be left out


def _box_pieces(terrain: Terrain, piece: float = BOX_PIECE) -> tuple[np.ndarray, np.ndarray]:
    """The terrain's boxes as triangles (V, 3), (M, 3) outward, without the parts no camera above the ground sees.

    Each face is cut into pieces of at most ``piece`` m; a piece whose four corners all lie in or on one other box
    (a stair's riser below the tread in front of it, the sides where boxes abut) or all below a plane of the terrain
    (the feet the boxes have under the floor) is left out; a piece only partly hidden is kept whole. Stairs are
    tall boxes standing on the floor, so this removes most of what the rasterizer would otherwise draw and then hide.
    """
    if not terrain.boxes:
        return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)

    centers = np.array([b.center for b in terrain.boxes], dtype=np.float64)
    rots = quat_to_matrix(np.array([b.quat_xyzw for b in terrain.boxes], dtype=np.float64))  # (B, 3, 3) local->world
    halves = np.array([b.half_size for b in terrain.boxes], dtype=np.float64)
    vertices, faces, owner, corners = [], [], [], []
    count = 0
    for k in range(len(terrain.boxes)):
        for axis in range(3):
            u_axis, v_axis = (axis + 1) % 3, (axis + 2) % 3  # (u, v, axis) is right-handed
            nu = max(1, int(np.ceil(2 * halves[k, u_axis] / piece - 1e-9)))
            nv = max(1, int(np.ceil(2 * halves[k, v_axis] / piece - 1e-9)))
            u = np.linspace(-halves[k, u_axis], halves[k, u_axis], nu + 1)
            v = np.linspace(-halves[k, v_axis], halves[k, v_axis], nv + 1)
            gu, gv = np.meshgrid(u, v, indexing="ij")
            for sign in (1.0, -1.0):
                local = np.zeros((nu + 1, nv + 1, 3))
                local[..., u_axis], local[..., v_axis], local[..., axis] = gu, gv, sign * halves[k, axis]
                world = local.reshape(-1, 3) @ rots[k].T + centers[k]
                idx = np.arange((nu + 1) * (nv + 1)).reshape(nu + 1, nv + 1) + count
                a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
                quads = np.stack([a, b, c, d], axis=1) if sign > 0 else np.stack([a, d, c, b], axis=1)
                faces.append(np.concatenate([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]]))
                corner = world[quads - count]  # (Q, 4, 3)
                corners.append(np.concatenate([corner, corner]))
                owner.append(np.full(2 * len(quads), k))
                vertices.append(world)
                count += len(world)
    vertices, faces = np.concatenate(vertices), np.concatenate(faces)
    owner, corners = np.concatenate(owner), np.concatenate(corners)  # (M,), (M, 4, 3)
    eps = 1e-6
    hidden = np.zeros(len(faces), dtype=bool)
    lo, hi = corners.min(axis=1), corners.max(axis=1)  # (M, 3) each piece's bounding box
    for k in range(len(terrain.boxes)):  # in or on another box (tested where the bounding boxes meet)
        reach = np.abs(rots[k]) @ halves[k] + eps
        near = np.nonzero((owner != k) & ~hidden & np.all(lo >= centers[k] - reach, axis=1)
                          & np.all(hi <= centers[k] + reach, axis=1))[0]
        local = np.abs((corners[near] - centers[k]) @ rots[k])
        hidden[near] = np.all(local <= halves[k] + eps, axis=(1, 2))
    for plane in terrain.planes:  # under a ground plane
        hidden |= np.all((corners - plane.point) @ plane.normal < eps, axis=1)
    return vertices, faces[~hidden]


def checker_parity(points: np.ndarray, normals: np.ndarray, tile: float) -> np.ndarray:
    """0/1 checker square (...) of surface points (..., 3) with unit normals (..., 3), squares ``tile`` m wide.

    Faces that look mostly up take the square of their (x, y), as flat ground does; steep faces (risers, walls)
    the square of the two axes across them ((y, z) facing x, (x, z) facing y), so a stair's riser is chequered too.
    """
    cells = np.floor(points / tile)
    axis = np.argmax(np.abs(normals), axis=-1)  # 2: mostly up
    pair = np.where((axis == 2)[..., None], cells[..., [0, 1]],
                    np.where((axis == 0)[..., None], cells[..., [1, 2]], cells[..., [0, 2]]))
    return (pair.sum(axis=-1) % 2).astype(np.float64)


def sun_shade(normals: np.ndarray, ambient: float, sun: np.ndarray) -> np.ndarray:
    """Lambert light of faces with unit ``normals`` (..., 3) under a unit ``sun`` direction, relative to a level
    face's: 1 on flat ground, so level treads and level ground look exactly alike and slopes, risers and walls
    show by their tilt."""
    level = ambient + (1.0 - ambient) * max(float(sun[2]), 0.0)
    light = ambient + (1.0 - ambient) * np.clip(normals @ sun, 0.0, None)
    return light / level


SUN = np.array([-0.45, -0.30, 1.0]) / np.linalg.norm([-0.45, -0.30, 1.0])  # from above, behind-right of a +x walker


def depth_edges(depth: np.ndarray, threshold: float = 0.01, thick: bool = True) -> np.ndarray:
    """(H, W) bool: pixels where the surface depth (H, W) jumps or creases: where 1/depth (which is affine in the
    image over any plane) is not the mean of its four neighbours to within ``threshold`` of its value, and with
    ``thick`` their four neighbours too (lines two pixels wide). Nosings and step edges show as lines; pixels next to
    the sky are left alone."""
    inv = np.where(np.isfinite(depth), 1.0 / np.maximum(depth, 1e-12), 0.0)
    near = _neighbours(inv)
    ground = np.isfinite(depth)
    for n in near:
        ground &= n > 0
    edges = ground & (np.abs(sum(near) - 4.0 * inv) > threshold * 4.0 * inv)
    if thick:
        edges = np.logical_or.reduce((edges, *_neighbours(edges))) & np.isfinite(depth)
    return edges


def _neighbours(image: np.ndarray) -> tuple[np.ndarray, ...]:
    """The four neighbours (up, down, left, right) of every pixel of ``image`` (H, W), edges replicated."""
    padded = np.pad(image, 1, mode="edge")
    return padded[:-2, 1:-1], padded[2:, 1:-1], padded[1:-1, :-2], padded[1:-1, 2:]


__all__ = ["SUN", "SurfaceHits", "TerrainCaster", "checker_parity", "depth_edges", "sun_shade"]
