"""A numpy z-buffer triangle rasterizer (the preview's and the terrain caster's), with near-plane clipping.

:func:`rasterize` gives, per pixel centre, the nearest covering triangle and its perspective-correct camera depth
(1/z interpolated); :func:`clip_near` cuts triangles that cross the camera's near plane, so large faces that reach
behind the camera (a terrain's treads, a ground quad) are drawn instead of dropped.
"""

from __future__ import annotations

import numpy as np

NEAR_PLANE = 1e-2  # m; triangles with a vertex closer than this to the camera are dropped by rasterize


def rasterize(screen: np.ndarray, depth: np.ndarray, faces: np.ndarray, width: int,
              height: int, spans: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Z-buffer rasterization of triangles.

    Args:
        screen: (V, 2) pixel coordinates (x right, y down; pixel (i, j) covers [i, i+1) x [j, j+1)).
        depth: (V,) camera-space depth (> 0 in front of the camera).
        faces: (T, 3) vertex indices.
        spans: test only each pixel row's span of a triangle instead of its whole bounding box (same pixels, same
            result; much less work for long thin triangles, such as a terrain's treads seen at an angle).

    Returns:
        face_id (H, W) int64, the nearest face covering each pixel centre (-1: none), and
        pixel depth (H, W) float64 (inf: none), perspective-correct (1/z interpolated).
    """
    face_id = np.full(height * width, -1, dtype=np.int64)
    inv_depth = np.zeros(height * width)
    tri = faces if depth.min(initial=np.inf) > NEAR_PLANE else faces[np.all(depth[faces] > NEAR_PLANE, axis=1)]
    if len(tri):
        a, b, c = screen[tri[:, 0]], screen[tri[:, 1]], screen[tri[:, 2]]
        area2 = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
        x0 = np.maximum(np.ceil(np.minimum(np.minimum(a[:, 0], b[:, 0]), c[:, 0]) - 0.5), 0).astype(np.int64)
        x1 = np.minimum(np.floor(np.maximum(np.maximum(a[:, 0], b[:, 0]), c[:, 0]) - 0.5), width - 1).astype(np.int64)
        y0 = np.maximum(np.ceil(np.minimum(np.minimum(a[:, 1], b[:, 1]), c[:, 1]) - 0.5), 0).astype(np.int64)
        y1 = np.minimum(np.floor(np.maximum(np.maximum(a[:, 1], b[:, 1]), c[:, 1]) - 0.5), height - 1).astype(np.int64)
        keep = (np.abs(area2) > 1e-12) & (x1 >= x0) & (y1 >= y0)
        ids = np.nonzero(keep)[0]
        _rasterize_kept(tri[ids], ids, a[ids], b[ids], c[ids], area2[ids], x0[ids], x1[ids], y0[ids], y1[ids],
                        depth, width, face_id, inv_depth, spans=spans)
    covered = face_id >= 0
    pixel_depth = np.full(height * width, np.inf)
    pixel_depth[covered] = 1.0 / inv_depth[covered]
    return face_id.reshape(height, width), pixel_depth.reshape(height, width)


def _rasterize_kept(tri: np.ndarray, ids: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, area2: np.ndarray,
                    x0: np.ndarray, x1: np.ndarray, y0: np.ndarray, y1: np.ndarray, depth: np.ndarray, width: int,
                    face_id: np.ndarray, inv_depth: np.ndarray, max_candidates: int = 2_000_000,
                    spans: bool = False) -> None:
    """Fill ``face_id`` / ``inv_depth`` (H*W,) from triangles with non-empty pixel boxes, in bounded chunks."""
    box_w = x1 - x0 + 1
    counts = box_w * (y1 - y0 + 1)
    # edge functions as planes over the image: w_a(P) = A_a x + B_a y + C_a (barycentric of vertex a), same for b
    wa = _edge_plane(b, c, area2)  # (T, 3)
    wb = _edge_plane(c, a, area2)
    za, zb, zc = (1.0 / depth[tri[:, k]] for k in range(3))
    inv_z = wa * (za - zc)[:, None] + wb * (zb - zc)[:, None]
    inv_z[:, 2] += zc  # 1/z = w_a/z_a + w_b/z_b + (1 - w_a - w_b)/z_c is a plane too
    coeffs = np.concatenate([wa, wb, inv_z], axis=1)  # (T, 9)
    # move each plane's origin to its box corner, so float32 candidates keep sub-pixel precision
    for col in (0, 3, 6):
        coeffs[:, col + 2] += coeffs[:, col] * x0 + coeffs[:, col + 1] * y0
    if spans:
        _fill_spans(ids, box_w, y1 - y0 + 1, x0, y0, coeffs, width, face_id, inv_depth, max_candidates)
        return
    start = 0
    cumulative = np.cumsum(counts)
    while start < len(counts):
        budget = (cumulative[start - 1] if start else 0) + max_candidates
        stop = max(int(np.searchsorted(cumulative, budget, side="right")), start + 1)
        _fill(slice(start, stop), ids, counts, box_w, x0, y0, coeffs, width, face_id, inv_depth)
        start = stop


def _edge_plane(p: np.ndarray, q: np.ndarray, area2: np.ndarray) -> np.ndarray:
    """(A, B, C) (T, 3) with cross(p - P, q - P) / area2 = A x + B y + C."""
    plane = np.stack([p[:, 1] - q[:, 1], q[:, 0] - p[:, 0], p[:, 0] * q[:, 1] - p[:, 1] * q[:, 0]], axis=1)
    return plane / area2[:, None]


def _fill(part: slice, ids: np.ndarray, counts: np.ndarray, box_w: np.ndarray, x0: np.ndarray, y0: np.ndarray,
          coeffs: np.ndarray, width: int, face_id: np.ndarray, inv_depth: np.ndarray) -> None:
    n = counts[part]
    owner = np.repeat(np.arange(len(n), dtype=np.int32), n)  # candidate -> triangle (within the part)
    local = np.arange(int(n.sum()), dtype=np.int32) - np.repeat((np.cumsum(n) - n).astype(np.int32), n)
    row, col = np.divmod(local, box_w[part].astype(np.int32)[owner])
    px = x0[part].astype(np.int32)[owner] + col
    py = y0[part].astype(np.int32)[owner] + row
    _test_and_write(coeffs[part].astype(np.float32)[owner], col, row, px, py, ids[part][owner], width, face_id,
                    inv_depth)


def _test_and_write(k: np.ndarray, col: np.ndarray, row: np.ndarray, px: np.ndarray, py: np.ndarray,
                    faces: np.ndarray, width: int, face_id: np.ndarray, inv_depth: np.ndarray) -> None:
    """Keep the candidates (N,) whose pixel centre lies in their triangle (coefficients ``k`` (N, 9) float32 about
    the box corner; ``col``, ``row`` int32 in the box) and write the nearest into the buffers."""
    cx, cy = col + np.float32(0.5), row + np.float32(0.5)  # pixel centre relative to the box corner
    w_a = k[:, 0] * cx + k[:, 1] * cy + k[:, 2]
    w_b = k[:, 3] * cx + k[:, 4] * cy + k[:, 5]
    inside = np.nonzero((w_a >= 0) & (w_b >= 0) & (w_a + w_b <= 1))[0]
    pix = py[inside] * width + px[inside]
    k = k[inside]
    inv_z = (k[:, 6] * cx[inside] + k[:, 7] * cy[inside] + k[:, 8]).astype(np.float64)
    faces = faces[inside]
    np.maximum.at(inv_depth, pix, inv_z)
    nearest = inv_z >= inv_depth[pix]
    face_id[pix[nearest]] = faces[nearest]


def _fill_spans(ids: np.ndarray, box_w: np.ndarray, box_h: np.ndarray, x0: np.ndarray, y0: np.ndarray,
                coeffs: np.ndarray, width: int, face_id: np.ndarray, inv_depth: np.ndarray,
                max_candidates: int) -> None:
    """The candidates of each triangle row by row, only between its edges (widened by a pixel each side, so the
    exact float32 test of :func:`_test_and_write` decides as it does over the whole box)."""
    tri = np.repeat(np.arange(len(ids)), box_h)  # one record per (triangle, row of its box)
    row = np.arange(len(tri)) - np.repeat(np.cumsum(box_h) - box_h, box_h)
    k = coeffs[tri]
    y = row + 0.5
    lo = np.zeros(len(tri))
    hi = (box_w[tri] - 1).astype(np.float64)
    # w(x, y) = A x + B y + C >= 0 for the three barycentrics w_a, w_b, 1 - w_a - w_b, at x = col + 0.5
    for a, b, c in ((k[:, 0], k[:, 1], k[:, 2]), (k[:, 3], k[:, 4], k[:, 5]),
                    (-(k[:, 0] + k[:, 3]), -(k[:, 1] + k[:, 4]), 1.0 - (k[:, 2] + k[:, 5]))):
        rest = b * y + c
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.clip(-rest / a - 0.5, -2.0, hi + 2.0)
        lo = np.where(a > 0, np.maximum(lo, np.ceil(bound) - 1.0), lo)
        hi = np.where(a < 0, np.minimum(hi, np.floor(bound) + 1.0), hi)
        hi = np.where((a == 0) & (rest < -1e-6), -1.0, hi)
    lo = np.maximum(lo, 0.0).astype(np.int64)
    counts = np.maximum(hi.astype(np.int64) - lo + 1, 0)
    cumulative = np.cumsum(counts)
    start = 0
    while start < len(counts):
        budget = (cumulative[start - 1] if start else 0) + max_candidates
        stop = max(int(np.searchsorted(cumulative, budget, side="right")), start + 1)
        n = counts[start:stop]
        owner = np.repeat(np.arange(start, stop), n)  # candidate -> record
        col = (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + lo[owner]).astype(np.int32)
        t = tri[owner]
        r = row[owner].astype(np.int32)
        _test_and_write(coeffs[t].astype(np.float32), col, r, x0[t].astype(np.int32) + col,
                        y0[t].astype(np.int32) + r, ids[t], width, face_id, inv_depth)
        start = stop


def clip_near(cam: np.ndarray, faces: np.ndarray, near: float = 1.5 * NEAR_PLANE) -> tuple[np.ndarray, np.ndarray,
                                                                                            np.ndarray]:
    """Triangles cut at the camera plane z = ``near``, keeping the part in front and the winding.

    Args:
        cam: (V, 3) camera-space vertices (z = depth).
        faces: (T, 3) vertex indices.

    Returns:
        vertices (V', 3) (the input ones, then the cut points), faces (T', 3), and the input face each output face
        comes from (T',). A triangle with one vertex in front becomes one triangle, with two a quad (two triangles).
    """
    z = cam[:, 2]
    front = z[faces] > near  # (T, 3)
    count = front.sum(axis=1)
    keep = np.nonzero(count == 3)[0]
    out_v, out_f, out_src = [cam], [faces[keep]], [keep]
    offset = len(cam)

    def cut(p: np.ndarray, q: np.ndarray) -> np.ndarray:  # points (N, 3) on segments p-q at z = near
        s = (near - p[:, 2]) / (q[:, 2] - p[:, 2])
        return p + s[:, None] * (q - p)

    for inside in (1, 2):
        ids = np.nonzero(count == inside)[0]
        if len(ids) == 0:
            continue
        # rotate each triangle (keeping its cyclic order) so the odd vertex comes first: the one vertex in front
        # (inside == 1) or the one behind (inside == 2)
        odd = np.argmax(front[ids] if inside == 1 else ~front[ids], axis=1)
        tri = faces[ids[:, None], (odd[:, None] + np.arange(3)) % 3]
        a, b, c = cam[tri[:, 0]], cam[tri[:, 1]], cam[tri[:, 2]]
        n = len(ids)
        base = offset + np.arange(n)
        if inside == 1:  # a in front: (a, ab, ac)
            out_v += [cut(a, b), cut(a, c)]
            out_f.append(np.stack([tri[:, 0], base, base + n], axis=1))
            out_src.append(ids)
            offset += 2 * n
        else:  # a behind, b and c in front: polygon b, c, ca, ab
            out_v += [cut(c, a), cut(a, b)]
            ca, ab = base, base + n
            out_f += [np.stack([tri[:, 1], tri[:, 2], ca], axis=1), np.stack([tri[:, 1], ca, ab], axis=1)]
            out_src += [ids, ids]
            offset += 2 * n
    return np.concatenate(out_v), np.concatenate(out_f).astype(np.int64), np.concatenate(out_src)


__all__ = ["NEAR_PLANE", "clip_near", "rasterize"]
