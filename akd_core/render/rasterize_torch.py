"""Pure-PyTorch Gaussian rasterizer (CPU or any torch device), gsplat "classic" math.

This is the reference/CPU backend. It reproduces gsplat 1.5.3's fused EWA projection
(``ProjectionEWA3DGSFused.cu``) and its tile rasterizer (``RasterizeToPixels3DGSFwd.cu``):

- world -> camera with an OpenCV viewmat (x right, y down, z forward), pinhole ``K``;
- EWA: ``cov2d = J W Sigma W^T J^T`` with the Jacobian evaluated at the camera-space mean
  whose x/y are clamped to 1.3x the field of view (as gsplat), plus ``eps2d`` (0.3 px^2)
  on the diagonal; conic = inverse of the blurred 2D covariance;
- culling: depth outside ``(near_plane, far_plane)``, ``det <= 0``, opacity < 1/255,
  or a bounding box (opacity-aware extent ``min(3.33, sqrt(2 ln(255 opacity)))`` sigma)
  entirely outside the image;
- per pixel (centre ``(j + 0.5, i + 0.5)``), Gaussians front to back by camera depth:
  ``alpha = min(0.999, opacity * exp(-sigma))``, ``sigma = 0.5 d^T conic d``; skipped
  when ``alpha < 1/255``; a pixel stops *before* the Gaussian that would bring its
  transmittance to ``<= 1e-4`` (exclusive, as gsplat).

Gradients come from autograd. Memory stays bounded because Gaussians are binned into
pixel tiles by their bounding boxes (lossless: a pixel outside a Gaussian's box has
alpha < 1/255 there) and each tile is wrapped in activation checkpointing, so only one
tile's intermediates live at a time during backward. Tiles are processed in
depth-sorted chunks of Gaussians, carrying transmittance between chunks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from akd_core.io.errors import ConfigError

ALPHA_THRESHOLD = 1.0 / 255.0
TRANSMITTANCE_MIN = 1e-4
ALPHA_MAX = 0.999
BOX_EXTENT_SIGMA = 3.33


@dataclass
class ProjectedGaussians:
    """Screen-space Gaussians for C cameras; entries with ``radii == 0`` are culled."""

    means2d: Tensor  # (C, N, 2) pixel coordinates
    conics: Tensor  # (C, N, 3) upper triangle (a, b, c) of the inverse 2D covariance [[a, b], [b, c]]
    depths: Tensor  # (C, N) camera-space z
    radii: Tensor  # (C, N, 2) int32 bounding-box half extents in pixels; 0 = culled


def broadcast_inputs(
    means: Tensor,
    covars: Tensor,
    colors: Tensor,
    opacities: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Check shapes and broadcast every input to a per-camera batch.

    Accepts means (N,3)|(C,N,3), covars (N,3,3)|(C,N,3,3), colors (N,D)|(C,N,D),
    opacities (N,)|(C,N), viewmats (C,4,4), Ks (3,3)|(C,3,3); returns them as
    (C,N,3), (C,N,3,3), (C,N,D), (C,N), (C,4,4), (C,3,3).
    """
    if viewmats.ndim != 3 or viewmats.shape[-2:] != (4, 4):
        raise ConfigError(f"render: viewmats must be (C,4,4) world->camera matrices, got {tuple(viewmats.shape)}")
    C = viewmats.shape[0]
    if means.ndim not in (2, 3) or means.shape[-1] != 3:
        raise ConfigError(f"render: means must be (N,3) or (C,N,3), got {tuple(means.shape)}")
    N = means.shape[-2]

    def per_camera(x: Tensor, name: str, tail: tuple[int, ...], what: str) -> Tensor:
        if x.ndim == len(tail) + 1 and x.shape[0] == N and x.shape[1:] == tail:
            return x.unsqueeze(0).expand(C, *x.shape)
        if x.ndim == len(tail) + 2 and x.shape[:2] == (C, N) and x.shape[2:] == tail:
            return x
        raise ConfigError(
            f"render: {name} must be {what} with C={C} cameras and N={N} Gaussians, got {tuple(x.shape)}"
        )

    means = per_camera(means, "means", (3,), "(N,3) or (C,N,3)")
    covars = per_camera(covars, "covars", (3, 3), "(N,3,3) or (C,N,3,3)")
    if colors.ndim not in (2, 3):
        raise ConfigError(f"render: colors must be (N,D) or (C,N,D), got {tuple(colors.shape)}")
    colors = per_camera(colors, "colors", (colors.shape[-1],), "(N,D) or (C,N,D)")
    opacities = per_camera(opacities, "opacities", (), "(N,) or (C,N)")
    if Ks.shape == (3, 3):
        Ks = Ks.unsqueeze(0).expand(C, 3, 3)
    elif Ks.shape != (C, 3, 3):
        raise ConfigError(f"render: Ks must be (3,3) or (C,3,3) with C={C}, got {tuple(Ks.shape)}")
    return means, covars, colors, opacities, viewmats, Ks


def project_gaussians(
    means: Tensor,  # (C, N, 3) world
    covars: Tensor,  # (C, N, 3, 3) world
    opacities: Tensor,  # (C, N) in [0, 1]
    viewmats: Tensor,  # (C, 4, 4) world -> camera, OpenCV axes
    Ks: Tensor,  # (C, 3, 3)
    width: int,
    height: int,
    eps2d: float = 0.3,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
) -> ProjectedGaussians:
    """EWA-project 3D Gaussians to the image plane, exactly as gsplat's fused projection."""
    R = viewmats[:, None, :3, :3]  # (C, 1, 3, 3)
    t = viewmats[:, None, :3, 3]  # (C, 1, 3)
    means_c = (R @ means.unsqueeze(-1)).squeeze(-1) + t  # (C, N, 3)
    covars_c = R @ covars @ R.transpose(-1, -2)  # (C, N, 3, 3)
    x, y, z = means_c.unbind(-1)  # (C, N)
    depth_ok = (z > near_plane) & (z < far_plane)
    # culled Gaussians still flow through the arithmetic: keep them finite so that
    # their (masked) gradients are 0, not NaN
    z = torch.where(depth_ok, z, torch.ones_like(z))

    fx, fy = Ks[:, 0, 0, None], Ks[:, 1, 1, None]  # (C, 1)
    cx, cy = Ks[:, 0, 2, None], Ks[:, 1, 2, None]
    tan_fovx, tan_fovy = 0.5 * width / fx, 0.5 * height / fy
    lim_x_pos = (width - cx) / fx + 0.3 * tan_fovx
    lim_x_neg = cx / fx + 0.3 * tan_fovx
    lim_y_pos = (height - cy) / fy + 0.3 * tan_fovy
    lim_y_neg = cy / fy + 0.3 * tan_fovy
    tx = z * torch.minimum(torch.maximum(x / z, -lim_x_neg), lim_x_pos)
    ty = z * torch.minimum(torch.maximum(y / z, -lim_y_neg), lim_y_pos)

    zeros = torch.zeros_like(z)
    J = torch.stack([fx / z, zeros, -fx * tx / z**2, zeros, fy / z, -fy * ty / z**2], dim=-1)
    J = J.reshape(*z.shape, 2, 3)  # (C, N, 2, 3)
    cov2d = J @ covars_c @ J.transpose(-1, -2)  # (C, N, 2, 2)
    a = cov2d[..., 0, 0] + eps2d
    b = 0.5 * (cov2d[..., 0, 1] + cov2d[..., 1, 0])
    c = cov2d[..., 1, 1] + eps2d
    det = a * c - b * b
    det_ok = det > 0
    det = torch.where(det_ok, det, torch.ones_like(det))
    conics = torch.stack([c / det, -b / det, a / det], dim=-1)  # (C, N, 3)
    means2d = torch.stack([fx * x / z + cx, fy * y / z + cy], dim=-1)  # (C, N, 2)

    with torch.no_grad():
        opac = opacities.detach()
        visible_enough = opac >= ALPHA_THRESHOLD
        extend = torch.sqrt(2.0 * torch.log(opac.clamp_min(ALPHA_THRESHOLD) / ALPHA_THRESHOLD))
        extend = extend.clamp(max=BOX_EXTENT_SIGMA)
        radius_x = torch.ceil(extend * torch.sqrt(a.detach().clamp_min(0)))
        radius_y = torch.ceil(extend * torch.sqrt(c.detach().clamp_min(0)))
        mx, my = means2d.detach().unbind(-1)
        inside = (mx + radius_x > 0) & (mx - radius_x < width) & (my + radius_y > 0) & (my - radius_y < height)
        keep = depth_ok & det_ok & visible_enough & inside & ((radius_x > 0) | (radius_y > 0))
        radii = torch.stack([radius_x, radius_y], dim=-1) * keep.unsqueeze(-1)
    return ProjectedGaussians(means2d=means2d, conics=conics, depths=means_c[..., 2], radii=radii.to(torch.int32))


def _tile_intersections(
    means2d: Tensor,  # (N, 2) one camera, detached
    radii: Tensor,  # (N, 2) int
    depths: Tensor,  # (N,)
    tile_size: int,
    tiles_x: int,
    tiles_y: int,
) -> tuple[Tensor, Tensor]:
    """Bin visible Gaussians into tiles (gsplat's rule), depth-sorted within each tile.

    Returns (gaussian_ids (M,) long grouped by tile and front to back inside a tile,
    tile_offsets (tiles_y * tiles_x + 1,) long: tile k owns ids[offsets[k]:offsets[k+1]]).
    """
    visible = (radii > 0).all(dim=-1)
    ids = torch.nonzero(visible).squeeze(-1)
    ids = ids[torch.argsort(depths[ids], stable=True)]  # front to back
    r = radii[ids].to(means2d.dtype)
    centre = means2d[ids]
    tmin = torch.floor((centre - r) / tile_size).long()
    tmax = torch.ceil((centre + r) / tile_size).long()
    limit = torch.tensor([tiles_x, tiles_y], device=means2d.device)
    tmin = torch.minimum(tmin.clamp_min(0), limit)
    tmax = torch.minimum(tmax.clamp_min(0), limit)
    span = (tmax - tmin).clamp_min(0)  # (V, 2)
    counts = span[:, 0] * span[:, 1]
    owner = torch.repeat_interleave(torch.arange(len(ids), device=ids.device), counts)
    first = torch.cumsum(counts, 0) - counts
    k = torch.arange(len(owner), device=ids.device) - first[owner]
    tile_x = tmin[owner, 0] + k % span[owner, 0]
    tile_y = tmin[owner, 1] + torch.div(k, span[owner, 0], rounding_mode="floor")
    tile_id = tile_y * tiles_x + tile_x
    order = torch.argsort(tile_id, stable=True)  # stable: keeps depth order inside a tile
    per_tile = torch.bincount(tile_id, minlength=tiles_x * tiles_y)
    offsets = torch.cat([per_tile.new_zeros(1), torch.cumsum(per_tile, 0)])
    return ids[owner[order]], offsets


def _composite_tile(
    pixels: Tensor,  # (P, 2) pixel centres
    means2d: Tensor,  # (N, 2)
    conics: Tensor,  # (N, 3)
    colors: Tensor,  # (N, D)
    opacities: Tensor,  # (N,)
    gaussian_ids: Tensor,  # (M,) front to back
    chunk: int,
) -> tuple[Tensor, Tensor]:
    """Front-to-back alpha compositing of one tile; returns (rgb (P, D), transmittance (P,)).

    ``sigma = 0.5 d^T conic d`` is expanded into a product of per-pixel monomials and
    per-Gaussian coefficients (one matmul), in coordinates centred on the tile so the
    terms stay small. A valid conic is positive definite, so gsplat's ``sigma < 0`` skip
    never fires in exact arithmetic; here rounding could make sigma slightly negative
    at a Gaussian's centre, so it is clamped at 0 instead of skipped.
    """
    origin = pixels.mean(dim=0)
    p = pixels - origin
    px, py = p[:, 0], p[:, 1]
    monomials = torch.stack([px * px, py * py, px * py, px, py, torch.ones_like(px)], dim=-1)  # (P, 6)
    rgb = pixels.new_zeros(pixels.shape[0], colors.shape[-1], dtype=colors.dtype)
    T = pixels.new_ones(pixels.shape[0], dtype=conics.dtype)
    alive = torch.ones(pixels.shape[0], dtype=torch.bool, device=pixels.device)
    for start in range(0, len(gaussian_ids), chunk):
        g = gaussian_ids[start : start + chunk]
        mx, my = (means2d[g] - origin).unbind(-1)
        A, B, C = conics[g].unbind(-1)
        constant = 0.5 * A * mx * mx + 0.5 * C * my * my + B * mx * my
        coeffs = torch.stack([0.5 * A, 0.5 * C, B, -(A * mx + B * my), -(C * my + B * mx), constant], dim=0)  # (6, K)
        sigma = (monomials @ coeffs).clamp_min(0.0)  # (P, K)
        alpha = (opacities[g] * torch.exp(-sigma)).clamp(max=ALPHA_MAX)
        alpha = torch.where(alpha >= ALPHA_THRESHOLD, alpha, torch.zeros_like(alpha))
        T_after = T.unsqueeze(1) * torch.cumprod(1.0 - alpha, dim=1)  # (P, K) after each Gaussian
        # a pixel is done before the Gaussian that would take T to <= 1e-4, and stays done;
        # T_after is non-increasing, so `included` is a prefix of each row
        included = (T_after.detach() > TRANSMITTANCE_MIN) & alive.unsqueeze(1)
        T_before = torch.cat([T.unsqueeze(1), T_after[:, :-1]], dim=1)
        rgb = rgb + (alpha * T_before * included) @ colors[g]
        n_included = included.sum(dim=1, keepdim=True)
        T_last = T_after.gather(1, (n_included - 1).clamp_min(0)).squeeze(1)
        T = torch.where(n_included.squeeze(1) > 0, T_last, T)
        alive = included[:, -1]
        if not bool(alive.any()):
            break
    return rgb, T


def rasterize_torch(
    means: Tensor,
    covars: Tensor,
    colors: Tensor,
    opacities: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    eps2d: float = 0.3,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    tile_size: int = 16,
    gaussian_chunk: int = 1024,
    use_checkpoint: bool = True,
) -> tuple[Tensor, Tensor]:
    """Rasterize 3D Gaussians into C images (differentiable, memory bounded).

    Args:
        means: (N, 3) or (C, N, 3) world positions (one posed set per camera allowed).
        covars: (N, 3, 3) or (C, N, 3, 3) world covariances (symmetric PSD).
        colors: (N, D) or (C, N, D) colour features (usually RGB in [0, 1]).
        opacities: (N,) or (C, N) in [0, 1].
        viewmats: (C, 4, 4) world -> camera, OpenCV axes (x right, y down, z forward).
        Ks: (3, 3) or (C, 3, 3) pinhole intrinsics in pixels.
        width, height: image size in pixels.
        tile_size, gaussian_chunk: performance only (results do not depend on them).
        use_checkpoint: recompute each tile in backward instead of storing it.

    Returns:
        rgb (C, H, W, D) without background (premultiplied) and alpha (C, H, W, 1); the
        image over a background ``bg`` is ``rgb + (1 - alpha) * bg``.
    """
    check_size(width, height)
    means, covars, colors, opacities, viewmats, Ks = broadcast_inputs(means, covars, colors, opacities, viewmats, Ks)
    proj = project_gaussians(means, covars, opacities, viewmats, Ks, width, height, eps2d, near_plane, far_plane)
    tiles_x, tiles_y = math.ceil(width / tile_size), math.ceil(height / tile_size)
    tile_pixels, pixel_order = _tile_pixel_layout(width, height, tile_size, means.dtype, means.device)
    checkpointing = use_checkpoint and torch.is_grad_enabled()
    rgbs, alphas = [], []
    for cam in range(viewmats.shape[0]):
        ids, offsets = _tile_intersections(
            proj.means2d[cam].detach(), proj.radii[cam], proj.depths[cam].detach(), tile_size, tiles_x, tiles_y
        )
        offsets = offsets.tolist()
        tile_rgb, tile_T = [], []
        for tile, pixels in enumerate(tile_pixels):
            gids = ids[offsets[tile] : offsets[tile + 1]]
            if len(gids) == 0:
                tile_rgb.append(colors.new_zeros(len(pixels), colors.shape[-1]))
                tile_T.append(pixels.new_ones(len(pixels)))
                continue
            args = (pixels, proj.means2d[cam], proj.conics[cam], colors[cam], opacities[cam], gids, gaussian_chunk)
            if checkpointing:
                rgb, T = checkpoint(_composite_tile, *args, use_reentrant=False)
            else:
                rgb, T = _composite_tile(*args)
            tile_rgb.append(rgb)
            tile_T.append(T)
        rgbs.append(torch.cat(tile_rgb)[pixel_order].reshape(height, width, -1))
        alphas.append((1.0 - torch.cat(tile_T))[pixel_order].reshape(height, width, 1))
    return torch.stack(rgbs), torch.stack(alphas)


def _tile_pixel_layout(
    width: int, height: int, tile_size: int, dtype: torch.dtype, device: torch.device
) -> tuple[list[Tensor], Tensor]:
    """Pixel centres per tile (row-major tiles) and the permutation back to raster order."""
    tiles, flat_ids = [], []
    for y0 in range(0, height, tile_size):
        for x0 in range(0, width, tile_size):
            ys = torch.arange(y0, min(y0 + tile_size, height), device=device)
            xs = torch.arange(x0, min(x0 + tile_size, width), device=device)
            gy, gx = torch.meshgrid(ys, xs, indexing="ij")
            tiles.append(torch.stack([gx.reshape(-1), gy.reshape(-1)], dim=-1).to(dtype) + 0.5)
            flat_ids.append((gy * width + gx).reshape(-1))
    pixel_order = torch.argsort(torch.cat(flat_ids))
    return tiles, pixel_order


def check_size(width: int, height: int) -> None:
    if int(width) != width or int(height) != height or width < 1 or height < 1:
        raise ConfigError(f"render: width and height must be positive integers, got {width}x{height}")
