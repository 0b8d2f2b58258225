"""Skinning: which links move each point of an asset, and how (linear blend skinning, LBS).

Weights live on link indices (``robot.link_names`` order), stored sparsely as the ``k`` largest per point:
``weight_index (P, K)`` long and ``weight_value (P, K)`` float, rows summing to 1.

- Robot links (rigid assets): one-hot weights, :func:`rigid_weights`.
- Creature skins: Pinocchio bone-heat weights (Baran & Popovic 2007), :func:`bone_heat_weights`, on a closed
  mesh, then :func:`transfer_weights` to any points by barycentric interpolation at their nearest surface point.

Bones (:func:`robot_bones`): a link's bone is the union of the segments from its origin to the origins of its
child links (a child reached through a 3-DoF compound joint's intermediate links ``<name>_link_x`` /
``<name>_link_y`` counts as a direct child; the intermediate links carry no bone and get no weight). A leaf link's
bone runs from its origin to the centre of its visual geometry. Segments are taken in the rest pose.

Bone heat, per bone b: ``(-L + M H) w_b = M H p_b`` with L the cotangent Laplacian (stiffness form), M the lumped
vertex areas (so ``M^-1 L`` is the surface Laplacian of the paper), ``p_b[j] = 1`` iff b is the nearest bone
visible from vertex j, ``H[j, j] = c / d_j^2`` (d_j the distance to that bone) and ``H[j, j] = 0`` where no bone is
visible. A bone is visible from a vertex when the segment from the vertex to the closest point on the bone stays
inside the mesh (one ray cast). A connected component from which no bone is visible gets, per vertex, its nearest
bone marked visible (keeps the system non-singular on noisy meshes). The matrix is the same for every bone, so it
is factorised once; weights are clamped to >= 0 and renormalised to sum to 1.

LBS (:func:`linear_blend`): with the relative transforms ``T_i = T_i(pose) T_i(rest)^-1 = (R_i, t_i)`` of the links,
``x' = A x + t``, ``A = sum_i w_i R_i``, ``t = sum_i w_i t_i`` and ``Sigma' = A Sigma A^T`` (A is the Jacobian
of the blended map), differentiable w.r.t. the link poses and hence, through
:class:`~akd_core.model.kinematics.ForwardKinematics`, the joint angles and the root pose.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph
import scipy.sparse.linalg
from torch import Tensor

from akd_core.io.errors import ConfigError
from akd_core.model.robot import Robot

COMPOUND_SUFFIXES = ("_link_x", "_link_y")


# ----------------------------------------------------------------------------- sparse weights
def rigid_weights(link_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One-hot binding of each point to one link: link_index (P,) -> weight_index (P, 1), weight_value (P, 1)."""
    link_index = np.asarray(link_index, dtype=np.int64)
    return link_index[:, None].copy(), np.ones((len(link_index), 1))


def top_k_weights(weights: np.ndarray, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Dense weights (P, L) -> the k largest per row: weight_index (P, k) long, weight_value (P, k) summing to 1."""
    if weights.ndim != 2 or weights.shape[1] == 0:
        raise ConfigError(f"skinning: weights must be (P, L) with L >= 1, got {weights.shape}")
    k = min(k, weights.shape[1])
    index = np.argsort(-weights, axis=1)[:, :k]
    value = np.clip(np.take_along_axis(weights, index, axis=1), 0.0, None)
    total = value.sum(1, keepdims=True)
    value = np.where(total > 0, value / np.where(total > 0, total, 1.0), np.eye(k)[0])
    return index.astype(np.int64), value


def dense_weights(weight_index: np.ndarray, weight_value: np.ndarray, num_links: int) -> np.ndarray:
    """Sparse (P, K) index/value -> dense (P, L)."""
    dense = np.zeros((len(weight_index), num_links))
    np.add.at(dense, (np.arange(len(weight_index))[:, None], weight_index), weight_value)
    return dense


# ----------------------------------------------------------------------------- LBS
def relative_transforms(link_pos: Tensor, link_rot: Tensor, rest_link_pos: Tensor,
                        rest_link_rot: Tensor) -> tuple[Tensor, Tensor]:
    """T_i(pose) T_i(rest)^-1 per link.

    link_pos (F, L, 3), link_rot (F, L, 3, 3) posed; rest_link_pos (L, 3), rest_link_rot (L, 3, 3).
    Returns rel_rot (F, L, 3, 3) and rel_pos (F, L, 3) with ``x_posed = rel_rot x_rest + rel_pos`` for rigid points.
    """
    rel_rot = link_rot @ rest_link_rot.transpose(-1, -2)
    rel_pos = link_pos - (rel_rot @ rest_link_pos[..., None]).squeeze(-1)
    return rel_rot, rel_pos


def linear_blend(means: Tensor, covars: Tensor, weight_index: Tensor, weight_value: Tensor, rest_link_pos: Tensor,
                 rest_link_rot: Tensor, link_pos: Tensor, link_rot: Tensor) -> tuple[Tensor, Tensor]:
    """Linear blend skinning of Gaussians.

    Args:
        means: (N, 3) rest-pose means (world). covars: (N, 3, 3) rest-pose covariances.
        weight_index: (N, K) long link indices; weight_value: (N, K) weights, rows sum to 1.
        rest_link_pos: (L, 3), rest_link_rot: (L, 3, 3) link poses in the rest pose (world).
        link_pos: (F, L, 3), link_rot: (F, L, 3, 3) posed link poses (e.g. from ForwardKinematics).

    Returns:
        posed means (F, N, 3) and covariances (F, N, 3, 3) (``A Sigma A^T``, A = sum_k w_k R_k).
    """
    if link_pos.ndim != 3 or link_rot.ndim != 4 or link_pos.shape[1] != rest_link_pos.shape[0]:
        raise ConfigError(
            f"skinning: link poses must be (F, L, 3) and (F, L, 3, 3) with L = {rest_link_pos.shape[0]} links, "
            f"got {tuple(link_pos.shape)} and {tuple(link_rot.shape)}; pass ForwardKinematics(robot) output "
            "for the robot this asset was built from")
    rel_rot, rel_pos = relative_transforms(link_pos, link_rot, rest_link_pos, rest_link_rot)
    blend_rot, blend_pos = None, None
    for k in range(weight_index.shape[1]):  # a loop over K keeps the peak at (F, N, 3, 3), not (F, N, K, 3, 3)
        w = weight_value[:, k]
        term_rot = w[:, None, None] * rel_rot[:, weight_index[:, k]]  # (F, N, 3, 3)
        term_pos = w[:, None] * rel_pos[:, weight_index[:, k]]  # (F, N, 3)
        blend_rot = term_rot if blend_rot is None else blend_rot + term_rot
        blend_pos = term_pos if blend_pos is None else blend_pos + term_pos
    posed_means = (blend_rot @ means[None, :, :, None]).squeeze(-1) + blend_pos
    posed_covars = blend_rot @ covars[None] @ blend_rot.transpose(-1, -2)
    return posed_means, posed_covars


# ----------------------------------------------------------------------------- bones
def is_compound_intermediate(link_name: str) -> bool:
    """True for the intermediate links of a 3-DoF compound joint (``<name>_link_x`` / ``<name>_link_y``)."""
    return link_name.endswith(COMPOUND_SUFFIXES)


def robot_bones(robot: Robot, rest_link_pos: np.ndarray, rest_link_rot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bone segments of every link in the rest pose (see the module docstring).

    rest_link_pos (L, 3), rest_link_rot (L, 3, 3) world. Returns segments (B, 2, 3) world and segment_link (B,)
    (the link index each segment belongs to; a link may own several segments).
    """
    index = {name: i for i, name in enumerate(robot.link_names)}
    segments, owners = [], []
    for name in robot.link_names:
        if is_compound_intermediate(name):
            continue
        i = index[name]
        ends = [rest_link_pos[index[c]] for c in _bone_children(robot, name)]
        if not ends:
            centre = _geometry_centre(robot.link(name))
            ends = [rest_link_pos[i] + rest_link_rot[i] @ centre]
        for end in ends:
            segments.append(np.stack([rest_link_pos[i], end]))
            owners.append(i)
    return np.asarray(segments, dtype=np.float64).reshape(-1, 2, 3), np.asarray(owners, dtype=np.int64)


def _bone_children(robot: Robot, link_name: str) -> list[str]:
    """Child links of ``link_name``, looking through compound-joint intermediate links."""
    out = []
    for joint in robot.children(link_name):
        if is_compound_intermediate(joint.child):
            out.extend(_bone_children(robot, joint.child))
        else:
            out.append(joint.child)
    return out


def _geometry_centre(link) -> np.ndarray:
    """Centre (3,) of a link's visual (else collision) geometry origins in its frame; zero if it has none."""
    geoms = link.visuals or link.collisions
    if not geoms:
        return np.zeros(3)
    return np.mean([g.origin[:3, 3] for g in geoms], axis=0)


def point_segment_distance(points: np.ndarray, segments: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distances (P, B) from points (P, 3) to segments (B, 2, 3), and the closest points (P, B, 3)."""
    a, b = segments[:, 0], segments[:, 1]  # (B, 3)
    ab = b - a
    denom = np.maximum((ab * ab).sum(-1), 1e-18)
    t = np.clip(((points[:, None] - a[None]) * ab[None]).sum(-1) / denom, 0.0, 1.0)  # (P, B)
    closest = a[None] + t[..., None] * ab[None]
    return np.linalg.norm(points[:, None] - closest, axis=-1), closest


# ----------------------------------------------------------------------------- bone heat
def cotangent_laplacian(vertices: np.ndarray, faces: np.ndarray) -> tuple[scipy.sparse.csr_matrix, np.ndarray]:
    """Cotangent Laplacian (stiffness form, negative semi-definite) and lumped vertex areas.

    vertices (V, 3), faces (T, 3). Returns L (V, V) with ``L_ij = (cot a_ij + cot b_ij) / 2``, ``L_ii = -sum_j L_ij``
    (so L 1 = 0) and areas (V,) = a third of the adjacent triangle areas. Zero-area (degenerate) triangles are
    left out of L.
    """
    v = vertices[faces]  # (T, 3 corners, 3)
    double_area = np.linalg.norm(np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0]), axis=-1)
    proper = double_area > 1e-10 * max(double_area.mean(), 1e-300)  # zero-area slivers carry no Dirichlet energy
    rows, cols, vals = [], [], []
    for corner in range(3):
        i, j, k = corner, (corner + 1) % 3, (corner + 2) % 3  # cotangent at corner i weights edge (j, k)
        e1, e2 = v[:, j] - v[:, i], v[:, k] - v[:, i]
        cot = np.where(proper, (e1 * e2).sum(-1) / np.where(proper, double_area, 1.0), 0.0)
        rows += [faces[:, j], faces[:, k]]
        cols += [faces[:, k], faces[:, j]]
        vals += [0.5 * cot, 0.5 * cot]
    n = len(vertices)
    off = scipy.sparse.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                  shape=(n, n)).tocsr()
    lap = off - scipy.sparse.diags(np.asarray(off.sum(axis=1)).ravel())
    tri_area = 0.5 * double_area
    areas = np.zeros(n)
    np.add.at(areas, faces.ravel(), np.repeat(tri_area / 3.0, 3))
    return lap.tocsr(), areas


def bone_heat_weights(mesh, segments: np.ndarray, segment_link: np.ndarray, num_links: int, c: float = 1.0,
                      max_candidates: int = 4) -> np.ndarray:
    """Pinocchio bone-heat weights (V, num_links) of the vertices of a closed ``mesh`` (trimesh.Trimesh).

    segments (B, 2, 3) world, segment_link (B,) link of each segment. Links without segments get weight 0.
    For each vertex the ``max_candidates`` nearest bones are tried in order of distance for visibility.
    """
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    faces = np.asarray(mesh.faces, dtype=np.int64)
    if len(segments) == 0:
        raise ConfigError("skinning: bone_heat_weights needs at least one bone segment")
    seg_dist, seg_closest = point_segment_distance(vertices, segments)  # (V, B), (V, B, 3)
    links = np.unique(segment_link)
    bone_dist = np.full((len(vertices), len(links)), np.inf)
    bone_closest = np.zeros((len(vertices), len(links), 3))
    for b, link in enumerate(links):  # distance to a bone = to the nearest of its segments
        cols = np.nonzero(segment_link == link)[0]
        best = cols[np.argmin(seg_dist[:, cols], axis=1)]
        bone_dist[:, b] = seg_dist[np.arange(len(vertices)), best]
        bone_closest[:, b] = seg_closest[np.arange(len(vertices)), best]
    order = np.argsort(bone_dist, axis=1)
    rows = np.arange(len(vertices))
    nearest_visible = np.zeros((len(vertices), len(links)))  # p: 1 for the nearest visible bone (ties split)
    chosen_dist = np.full(len(vertices), np.inf)
    inset = 1e-4 * float(np.linalg.norm(mesh.extents))
    for rank in range(min(max_candidates, len(links))):
        cand = order[:, rank]
        dist = bone_dist[rows, cand]
        todo = np.nonzero(np.isinf(chosen_dist) | (dist <= chosen_dist * (1 + 1e-9) + 1e-12))[0]
        if len(todo) == 0:
            break
        visible = todo[visible_from_vertices(mesh, todo, bone_closest[todo, cand[todo]], inset)]
        nearest_visible[visible, cand[visible]] = 1.0
        chosen_dist[visible] = np.minimum(chosen_dist[visible], dist[visible])
    _fix_invisible_components(faces, nearest_visible, chosen_dist, order[:, 0], bone_dist[rows, order[:, 0]])
    has_bone = np.isfinite(chosen_dist)
    nearest_visible /= np.maximum(nearest_visible.sum(1, keepdims=True), 1.0)
    heat = np.where(has_bone, c / np.maximum(np.where(has_bone, chosen_dist, 1.0), 1e-6) ** 2, 0.0)
    lap, areas = cotangent_laplacian(vertices, faces)
    system = (-lap + scipy.sparse.diags(areas * heat)).tocsc()
    solve = scipy.sparse.linalg.factorized(system)
    rhs = (areas * heat)[:, None] * nearest_visible
    solved = np.stack([solve(rhs[:, b]) for b in range(len(links))], axis=1)
    solved = np.clip(solved, 0.0, None)
    total = solved.sum(1, keepdims=True)
    fallback = np.eye(len(links))[order[:, 0]]
    solved = np.where(total > 1e-12, solved / np.maximum(total, 1e-12), fallback)
    weights = np.zeros((len(vertices), num_links))
    weights[:, links] = solved
    return weights


def visible_from_vertices(mesh, vertex_ids: np.ndarray, targets: np.ndarray, inset: float) -> np.ndarray:
    """Whether the segment from each vertex ``vertex_ids`` (P,) of a closed ``mesh`` to its target (P, 3) stays inside.

    One ray per vertex, starting ``inset`` m inside the surface (along the inward vertex normal, so it does not hit
    its own face): the segment is inside iff the ray's first surface hit lies beyond the target. A target outside
    the mesh is therefore never visible. Returns (P,) bool.
    """
    todo = np.asarray(vertex_ids, dtype=np.int64)
    normals = np.asarray(mesh.vertex_normals)[todo]
    origins = np.asarray(mesh.vertices)[todo] - inset * normals
    direction = targets - origins
    length = np.linalg.norm(direction, axis=-1)
    direction = direction / np.maximum(length, 1e-12)[:, None]
    visible = np.ones(len(todo), dtype=bool)
    locations, ray_index, _ = mesh.ray.intersects_location(origins, direction, multiple_hits=False)
    if len(ray_index):
        hit_distance = np.linalg.norm(locations - origins[ray_index], axis=-1)
        visible[ray_index[hit_distance < length[ray_index] - 1e-9]] = False
    return visible


def _fix_invisible_components(faces: np.ndarray, nearest_visible: np.ndarray, chosen_dist: np.ndarray,
                              nearest: np.ndarray, nearest_dist: np.ndarray) -> None:
    """Multi-component fix, in place: a connected component with no visible bone takes each vertex's nearest bone."""
    num_vertices = len(chosen_dist)
    edges = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    adjacency = scipy.sparse.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])),
                                        shape=(num_vertices, num_vertices))
    _, labels = scipy.sparse.csgraph.connected_components(adjacency, directed=False)
    for comp in np.unique(labels):
        members = np.nonzero(labels == comp)[0]
        if not np.isfinite(chosen_dist[members]).any():
            nearest_visible[members, nearest[members]] = 1.0
            chosen_dist[members] = nearest_dist[members]


def transfer_weights(mesh, vertex_weights: np.ndarray, points: np.ndarray | None = None,
                     face_index: np.ndarray | None = None) -> np.ndarray:
    """Weights (P, L) at points by barycentric interpolation of vertex_weights (V, L) at their nearest surface point.

    Give ``points`` (P, 3) (nearest point found with trimesh.proximity.closest_point) and optionally ``face_index``
    (P,) when the points are already on known faces (e.g. surface samples), which skips the nearest-point search.
    """
    import trimesh

    if points is None:
        raise ConfigError("skinning: transfer_weights needs points (P, 3)")
    if face_index is None:
        points, _, face_index = trimesh.proximity.closest_point(mesh, points)
    triangles = np.asarray(mesh.vertices)[np.asarray(mesh.faces)[face_index]]  # (P, 3, 3)
    bary = trimesh.triangles.points_to_barycentric(triangles, points)
    bary = np.clip(bary, 0.0, None)
    bary /= np.maximum(bary.sum(1, keepdims=True), 1e-12)
    corner_weights = vertex_weights[np.asarray(mesh.faces)[face_index]]  # (P, 3, L)
    return (bary[:, :, None] * corner_weights).sum(1)


__all__ = [
    "bone_heat_weights", "cotangent_laplacian", "dense_weights", "is_compound_intermediate",
    "linear_blend", "point_segment_distance", "relative_transforms", "rigid_weights", "robot_bones", "top_k_weights",
    "transfer_weights", "visible_from_vertices",
]
