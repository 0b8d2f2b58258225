"""The ground: a ray-cast checkerboard plane z = 0 rendered as a background layer.

Every pixel casts a ray from its camera (supersampled ``samples_per_side``^2 times);
a ray that hits z = 0 in front of the camera (within ``max_distance``) takes the colour
of its checker square, any other ray the sky colour. The video composites the
Gaussians over it: ``final = rgb_gauss + (1 - alpha_gauss) * background``.

Contact shadow (the paper's optional term): ground colour times
``s(P) = 1 - s_max exp(-beta d(P))`` with ``d(P)`` the height of the lowest posed
Gaussian mean above the hit point P, within about ``shadow_radius`` horizontally.
It is computed from a per-frame height map (min z of the means binned on a grid of
``shadow_radius / 2`` cells, then min-pooled over the radius) and is **detached**: the
shadow is a visual cue, gradients reach the motion through the Gaussians only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from akd_core.io.errors import ConfigError


@dataclass(frozen=True)
class GroundConfig:
    """Look of the checkerboard ground and its contact shadow (lengths in m, colours RGB in [0, 1])."""

    tile_size: float = 0.25
    color_a: tuple[float, float, float] = (0.82, 0.82, 0.80)
    color_b: tuple[float, float, float] = (0.50, 0.52, 0.55)
    sky_color: tuple[float, float, float] = (0.72, 0.82, 0.93)
    max_distance: float = 100.0
    samples_per_side: int = 2
    shadow: bool = True
    shadow_max: float = 0.6
    shadow_beta: float = 12.0  # 1/m
    shadow_radius: float = 0.06

    def __post_init__(self) -> None:
        if self.tile_size <= 0 or self.max_distance <= 0 or self.shadow_radius <= 0:
            raise ConfigError("ground: tile_size, max_distance and shadow_radius must be positive")
        if self.samples_per_side < 1:
            raise ConfigError(f"ground: samples_per_side must be >= 1, got {self.samples_per_side}")
        if not 0.0 <= self.shadow_max <= 1.0:
            raise ConfigError(f"ground: shadow_max must be in [0, 1], got {self.shadow_max}")


def mask_below_ground(means: Tensor, opacities: Tensor) -> Tensor:
    """Opacities with Gaussians whose mean is below z = 0 set to 0.

    means (F, N, 3) or (N, 3); opacities (N,) or matching (F, N); returns (F, N) or (N,).
    The mask is a hard step (no gradient through it); opacity gradients pass where visible.
    """
    return opacities * (means[..., 2] >= 0).to(opacities.dtype)


def ground_hits(
    viewmats: Tensor, Ks: Tensor, width: int, height: int, samples_per_side: int = 1, max_distance: float = 100.0
) -> tuple[Tensor, Tensor]:
    """Ray-cast every (sub)pixel against z = 0.

    viewmats (C, 4, 4), Ks (C, 3, 3). Returns hit points (C, H, W, S, 3) and a hit mask
    (C, H, W, S) bool, S = samples_per_side^2 on a regular grid inside each pixel.
    """
    dtype, device = viewmats.dtype, viewmats.device
    offsets = (torch.arange(samples_per_side, dtype=dtype, device=device) + 0.5) / samples_per_side
    oy, ox = torch.meshgrid(offsets, offsets, indexing="ij")
    ys = torch.arange(height, dtype=dtype, device=device)
    xs = torch.arange(width, dtype=dtype, device=device)
    u = xs[None, :, None] + ox.reshape(1, 1, -1)  # (1, W, S)
    v = ys[:, None, None] + oy.reshape(1, 1, -1)  # (H, 1, S)
    u, v = torch.broadcast_tensors(u, v)  # (H, W, S)
    pix = torch.stack([u, v, torch.ones_like(u)], dim=-1)  # (H, W, S, 3)
    dirs_cam = torch.einsum("cij,hwsj->chwsi", torch.linalg.inv(Ks), pix)
    rot = viewmats[:, :3, :3]
    dirs = torch.einsum("cji,chwsj->chwsi", rot, dirs_cam)  # camera -> world: R^T d
    origin = -(rot.transpose(-1, -2) @ viewmats[:, :3, 3:4]).squeeze(-1)  # (C, 3)
    dz = dirs[..., 2]
    oz = origin[:, 2].reshape(-1, 1, 1, 1)
    safe_dz = torch.where(dz.abs() > 1e-12, dz, torch.full_like(dz, -1e-12))
    s = -oz / safe_dz
    hit = (dz.abs() > 1e-12) & (s > 0) & (s * dirs.norm(dim=-1) < max_distance)
    points = origin.reshape(-1, 1, 1, 1, 3) + s.unsqueeze(-1) * dirs
    return points, hit


def checker_colors(points: Tensor, config: GroundConfig) -> Tensor:
    """Checkerboard colour (..., 3) of ground points (..., 3): colour_a on the square at the origin's +x +y side."""
    parity = (torch.floor(points[..., 0] / config.tile_size) + torch.floor(points[..., 1] / config.tile_size)) % 2
    a = torch.tensor(config.color_a, dtype=points.dtype, device=points.device)
    b = torch.tensor(config.color_b, dtype=points.dtype, device=points.device)
    return torch.where(parity.unsqueeze(-1) == 0, a, b)


def shadow_factor(points: Tensor, means: Tensor, config: GroundConfig) -> Tensor:
    """s(P) = 1 - s_max exp(-beta d(P)) at ground points (H, W, S, 3) under one frame's means (N, 3) -> (H, W, S)."""
    above = means[means[:, 2] >= 0].detach()
    ones = torch.ones(points.shape[:-1], dtype=points.dtype, device=points.device)
    if len(above) == 0:
        return ones
    cell = config.shadow_radius / 2.0
    lo = above[:, :2].min(dim=0).values - config.shadow_radius
    hi = above[:, :2].max(dim=0).values + config.shadow_radius
    dims = torch.ceil((hi - lo) / cell).long().clamp(1, 1024)
    cell_xy = (hi - lo) / dims
    gi = ((above[:, :2] - lo) / cell_xy).long()
    gi = torch.minimum(gi, dims - 1)
    flat = gi[:, 1] * dims[0] + gi[:, 0]
    inf = torch.tensor(float("inf"), dtype=points.dtype, device=points.device)
    heights = inf.repeat(int(dims[0] * dims[1])).scatter_reduce(0, flat, above[:, 2], reduce="amin")
    grid = heights.reshape(1, 1, int(dims[1]), int(dims[0]))
    reach = int(torch.ceil(config.shadow_radius / cell_xy.min()).item())
    grid = -F.max_pool2d(-grid, kernel_size=2 * reach + 1, stride=1, padding=reach)[0, 0]  # min-pool
    q = ((points[..., :2] - lo) / cell_xy).floor().long()
    inside = (q[..., 0] >= 0) & (q[..., 0] < dims[0]) & (q[..., 1] >= 0) & (q[..., 1] < dims[1])
    q0 = q[..., 0].clamp(0, int(dims[0]) - 1)
    q1 = q[..., 1].clamp(0, int(dims[1]) - 1)
    d = torch.where(inside, grid[q1, q0], inf)
    return ones - config.shadow_max * torch.exp(-config.shadow_beta * d)


def render_ground(
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    config: GroundConfig,
    means: Tensor | None = None,
) -> Tensor:
    """Background layer (C, H, W, 3): checkerboard on z = 0 (shadowed under ``means`` (C, N, 3) if given) and sky.

    Cameras are processed one at a time so the supersampled rays never exist for the whole clip at once.
    """
    if Ks.ndim == 2:
        Ks = Ks.unsqueeze(0).expand(viewmats.shape[0], 3, 3)
    sky = torch.tensor(config.sky_color, dtype=viewmats.dtype, device=viewmats.device)
    layers = []
    for c in range(viewmats.shape[0]):
        points, hit = ground_hits(viewmats[c : c + 1], Ks[c : c + 1], width, height, config.samples_per_side,
                                  config.max_distance)
        colors = checker_colors(points[0], config)  # (H, W, S, 3)
        if config.shadow and means is not None:
            colors = colors * shadow_factor(points[0], means[c], config).unsqueeze(-1)
        layers.append(torch.where(hit[0].unsqueeze(-1), colors, sky).mean(dim=2))
    return torch.stack(layers)
